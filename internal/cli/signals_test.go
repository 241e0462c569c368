package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A panic anywhere in a command still removes what it registered to
// remove (an unpacked snapshot, a half-written archive) and exits 2.
func TestPanicRemovesTemporaryFiles(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "accel-doctor-snapshot-x")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := protect(&stderr, func() int {
		atExit(func() { os.RemoveAll(tmp) })
		panic("boom")
	})
	if code != 2 || !strings.Contains(stderr.String(), "internal error: boom") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("%s survived the panic: %v", tmp, err)
	}
}

// Normal exit runs each cleanup once, and one run early by its caller is
// not run again.
func TestCleanupsRunOnce(t *testing.T) {
	n := 0
	code := protect(os.Stderr, func() int {
		now := atExit(func() { n++ })
		now()
		atExit(func() { n += 10 })
		return 0
	})
	if code != 0 || n != 11 {
		t.Errorf("exit %d, cleanups counted %d, want 11", code, n)
	}
}
