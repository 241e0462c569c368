package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSnapshotArgumentIsCheckedBeforeItIsOpened: --snapshot naming a FIFO
// is a usage error at once (it used to block in open until SIGKILL), and
// so is a directory.
func TestSnapshotArgumentIsCheckedBeforeItIsOpened(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "snap.tgz")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir} {
		done := make(chan struct{})
		var stderr string
		var code int
		go func() {
			defer close(done)
			_, stderr, code = run(t, "check", "--snapshot", p)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second): // a hang guard, not a speed goal
			t.Fatalf("check --snapshot %s blocked", p)
		}
		if code != 2 || !strings.Contains(stderr, "not a regular file") {
			t.Errorf("check --snapshot %s: exit %d, stderr %q; want a usage error saying it is not a regular file", p, code, stderr)
		}
	}
}

// TestArchiveWithoutDescriptionIsNotASnapshot: a .tar.gz that is not an
// accel-doctor snapshot is a usage error, not a host replayed as PASS.
func TestArchiveWithoutDescriptionIsNotASnapshot(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "etc/hostname", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644})
	tw.Write([]byte("x\n"))
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "random.tgz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "check", "--snapshot", p)
	if code != 2 || !strings.Contains(stderr, "not an accel-doctor snapshot") {
		t.Errorf("exit %d, stderr %q; want a usage error naming what is missing", code, stderr)
	}
}

// TestDemoHeaderNamesNoRepositoryPath: the built-in demo says so, and
// prints no path of this repository.
func TestDemoHeaderNamesNoRepositoryPath(t *testing.T) {
	out, _, _ := run(t, "check", "--snapshot", "demo")
	first := strings.SplitN(out, "\n", 2)[0]
	if !strings.Contains(out, "built-in demo") || strings.Contains(out, "testdata") {
		t.Errorf("the demo's report header: %q", first)
	}
}
