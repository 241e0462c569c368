package cli

import (
	"bytes"
	"errors"
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

// Once the process is exiting on a signal (its cleanups have run),
// nothing temporary is made any more, and a removal registered then runs
// at once: neither could be left behind by the exit.
func TestSignalExitMakesNothingMore(t *testing.T) {
	cleanups.mu.Lock()
	cleanups.closed = true
	cleanups.mu.Unlock()
	defer func() {
		cleanups.mu.Lock()
		cleanups.closed = false
		cleanups.mu.Unlock()
	}()
	made := false
	if _, err := makeTemp(func() (func(), error) { made = true; return func() {}, nil }); !errors.Is(err, errExiting) || made {
		t.Errorf("makeTemp while exiting: made %v, err %v", made, err)
	}
	ran := false
	atExit(func() { ran = true })
	if !ran {
		t.Error("a removal registered while exiting did not run at once")
	}
}

// A temporary file made with makeTemp is removed by the cleanups, once.
func TestSignalMakeTempRemoves(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tmp")
	n := 0
	code := protect(os.Stderr, func() int {
		if _, err := makeTemp(func() (func(), error) {
			return func() { n++; os.Remove(p) }, os.WriteFile(p, nil, 0o600)
		}); err != nil {
			t.Error(err)
		}
		return 0
	})
	if _, err := os.Stat(p); code != 0 || n != 1 || !os.IsNotExist(err) {
		t.Errorf("exit %d, removals %d, file: %v", code, n, err)
	}
}
