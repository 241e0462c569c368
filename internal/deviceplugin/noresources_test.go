package deviceplugin

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// logBuffer is a slog destination a test can read while the plugin runs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits (20 s at most) until the log holds s.
func (l *logBuffer) waitLog(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(l.String(), s); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log in 20s:\n%s", s, l.String())
		}
	}
}

// A config with no resources (resources: [], or no resources key)
// parses; the plugin then starts, makes no socket, registers nothing with
// a live kubelet, says why in its log, stays up until stopped and stops
// with no error.
func TestRunWithNoResources(t *testing.T) {
	for _, in := range []string{"resources: []\n", "rescanInterval: 10s\n"} {
		cfg, err := ParseConfig(strings.NewReader(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if len(cfg.Resources) != 0 || cfg.CDISpecDir != DefaultCDISpecDir {
			t.Errorf("%q: %+v", in, cfg)
		}
	}
	cfg, _ := ParseConfig(strings.NewReader("resources: []\n"))
	dir := shortDir(t)
	k := startKubelet(t, dir)
	var logs logBuffer
	evs := newEvents()
	p, err := New(dir, cfg, Options{Root: fixtureRoot(t, shortDir(t)), Logger: slog.New(slog.NewTextHandler(&logs, nil)), Notify: evs.notify})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	logs.waitLog(t, NoResourcesLog)
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the reason is not a warning:\n%s", logs.String())
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v before it was stopped: a DaemonSet's pod would restart in a loop", err)
	case <-time.After(200 * time.Millisecond):
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != KubeletSocket {
			t.Errorf("%s made in the kubelet's directory", e.Name())
		}
	}
	if n := len(k.registrations()); n != 0 {
		t.Errorf("%d registrations with the kubelet, want none", n)
	}
	evs.mu.Lock()
	if len(evs.ev) != 0 {
		t.Errorf("events %v, want none", evs.ev)
	}
	evs.mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// A resource whose selector matches nothing on the node is served and
// registered with an empty device list (the kubelet then advertises 0 of
// it), and the log says it selects no device.
func TestRunWithResourceSelectingNothing(t *testing.T) {
	cfg := &Config{Resources: []ResourceConfig{{Name: "example.com/tpu", Selector: Selector{PCI: &PCISelector{Vendor: "1ae0"}}}}}
	dir := shortDir(t)
	k := startKubelet(t, dir)
	var logs logBuffer
	p, err := New(dir, cfg, Options{Root: fixtureRoot(t, copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/nvidia-h100x8"))),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	logs.waitLog(t, NoDeviceLog)
	if !strings.Contains(logs.String(), "resource=example.com/tpu") {
		t.Errorf("the warning does not name the resource:\n%s", logs.String())
	}
	waitAccepted(t, k, 1)
	s, err := client(t, p.Socket("example.com/tpu")).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	recvUntil(t, s, "no device", func(d []*pluginapi.Device) bool { return len(d) == 0 })
}
