package deviceplugin

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// shortDir is a temp dir with a path short enough for unix sockets
// (108 bytes, sun_path in include/uapi/linux/un.h); t.TempDir's can
// exceed it with long test names.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// events collects a plugin's Events and lets a test wait for one.
type events struct {
	mu sync.Mutex
	ev []Event
	c  chan struct{}
}

func newEvents() *events { return &events{c: make(chan struct{}, 64)} }

func (e *events) notify(ev Event) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	e.mu.Unlock()
	select {
	case e.c <- struct{}{}:
	default:
	}
}

// wait returns once n events of kind k came.
func (e *events) wait(t testing.TB, k EventKind, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		e.mu.Lock()
		got := 0
		for _, x := range e.ev {
			if x.Kind == k {
				got++
			}
		}
		e.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-e.c:
		case <-deadline:
			t.Fatalf("no %d %s events in 20s (have %v)", n, k, e.ev)
		}
	}
}

// runMock starts a mock and waits until it serves.
func runMock(t testing.TB, dir string, mc MockConfig) (*Mock, *events) {
	t.Helper()
	evs := newEvents()
	m, err := NewMock(dir, mc, Options{Logger: testLogger(t), Notify: evs.notify})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return m, evs
}

func client(t testing.TB, sock string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := dialUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// conn is a raw client connection, for tests that close it themselves.
func rawConn(t testing.TB, sock string) *grpc.ClientConn {
	t.Helper()
	c, err := dialUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mknod of device nodes)")
	}
}

// mknodChar makes a char device node (the numbers of /dev/null: opening
// it is harmless, and nothing here opens it).
func mknodChar(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies a fixture host tree (symlinks as they are) into a temp
// dir that tests may change.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := shortDir(t)
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
	if err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

func fixtureRoot(t testing.TB, dir string, opts ...hostfs.Option) *hostfs.Root {
	t.Helper()
	r, err := hostfs.New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recvUntil reads ListAndWatch responses until ok accepts one.
func recvUntil(t testing.TB, s pluginapi.DevicePlugin_ListAndWatchClient, what string, ok func([]*pluginapi.Device) bool) []*pluginapi.Device {
	t.Helper()
	type r struct {
		d   []*pluginapi.Device
		err error
	}
	for {
		c := make(chan r, 1)
		go func() {
			resp, err := s.Recv()
			if err != nil {
				c <- r{nil, err}
				return
			}
			c <- r{resp.Devices, nil}
		}()
		select {
		case got := <-c:
			if got.err != nil {
				t.Fatalf("waiting for %s: %v", what, got.err)
			}
			if ok(got.d) {
				return got.d
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no ListAndWatch response with %s in 20s", what)
		}
	}
}

func healthOf(devs []*pluginapi.Device, id string) string {
	for _, d := range devs {
		if d.ID == id {
			return d.Health
		}
	}
	return ""
}

func repoRoot(t testing.TB) string {
	t.Helper()
	wd, _ := os.Getwd()
	for d := wd; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	t.Fatal("no go.mod above " + wd)
	return ""
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
