package hostfs

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func listenUnix(t *testing.T, p string) *net.UnixListener {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestDialUnix(t *testing.T) {
	// A deep directory: its socket paths pass the 108 bytes of sun_path,
	// which DialUnix does not depend on.
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	sockDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := MustNew(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// A listener bound by its short name (cwd) to get past sun_path.
	wd, _ := os.Getwd()
	if err := os.Chdir(sockDir); err != nil {
		t.Fatal(err)
	}
	l := listenUnix(t, "live.sock")
	dead := listenUnix(t, "dead.sock")
	dead.SetUnlinkOnClose(false)
	dead.Close()
	os.Chdir(wd)

	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := r.DialUnix(ctx, "/run/live.sock")
	if err != nil {
		t.Fatalf("dial a listening socket: %v", err)
	}
	b := make([]byte, 2)
	if _, err := c.Read(b); err != nil || string(b) != "hi" {
		t.Errorf("read %q, %v", b, err)
	}
	c.Close()

	// A link out of the root resolves inside it (RESOLVE_IN_ROOT).
	if err := os.Symlink("/run/live.sock", filepath.Join(sockDir, "abs.sock")); err != nil {
		t.Fatal(err)
	}
	if c, err := r.DialUnix(ctx, "/run/abs.sock"); err != nil {
		t.Errorf("an absolute link inside the root: %v", err)
	} else {
		c.Close()
	}

	if _, err := r.DialUnix(ctx, "/run/dead.sock"); !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("a socket nobody listens on: %v, want ECONNREFUSED", err)
	}
	if err := os.WriteFile(filepath.Join(sockDir, "file.sock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DialUnix(ctx, "/run/file.sock"); !errors.Is(err, ErrNotSocket) {
		t.Errorf("a regular file: %v, want ErrNotSocket", err)
	}
	if _, err := r.DialUnix(ctx, "/run/none.sock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing path: %v, want ErrNotExist", err)
	}

	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(sockDir, "dead.sock"), old, old); err != nil {
		t.Fatal(err)
	}
	if m, err := r.ModTime("/run/dead.sock"); err != nil || !m.Equal(old) {
		t.Errorf("ModTime = %v, %v; want %v", m, err, old)
	}
	// ModTime does not follow a final link.
	if m, err := r.ModTime("/run/abs.sock"); err != nil || m.Equal(old) {
		t.Errorf("ModTime of a link = %v, %v", m, err)
	}
}
