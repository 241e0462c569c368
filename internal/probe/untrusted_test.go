package probe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A CUDA helper that another user could change is not run: the libraries'
// steps are NOT_RUN, helper-untrusted, naming the file and why; the same
// file owned by root is taken (and, being no program, found unusable).
func TestUntrustedHelperIsNotRun(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("planting a file owned by another user needs root")
	}
	// The libraries are found when they are shared objects of this
	// machine's class: the C library stands in for them.
	libc := FindLibrary("libc.so.6", os.Getenv).Found
	if libc == "" {
		t.Skip("no libc.so.6 to stand in for the libraries")
	}
	elf, err := os.ReadFile(libc)
	if err != nil {
		t.Fatal(err)
	}
	libs := t.TempDir()
	for _, l := range []string{LibCUDA, LibNVML} {
		if err := os.WriteFile(filepath.Join(libs, l), elf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mark := filepath.Join(t.TempDir(), "ran")
	helper := filepath.Join(t.TempDir(), HelperName)
	if err := os.WriteFile(helper, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(helper, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	env := []string{"LD_LIBRARY_PATH=" + libs}
	r := Run(context.Background(), Options{Dev: t.TempDir(), HelperPath: helper, Env: env})
	for _, l := range []*LibProbe{&r.NVML, &r.CUDA} {
		if l.Skip != SkipHelperUntrusted || l.Helper != helper || !strings.Contains(l.NotRun, "is owned by uid 65534") {
			t.Errorf("%s: skip %q, helper %q, %q", l.Library, l.Skip, l.Helper, l.NotRun)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the helper owned by nobody ran")
	}

	// Given back to root, it is taken, and judged as the helper it is
	// not (a script, not the release's executable).
	if err := os.Chown(helper, 0, 0); err != nil {
		t.Fatal(err)
	}
	r = Run(context.Background(), Options{Dev: t.TempDir(), HelperPath: helper, Env: env})
	if r.CUDA.Skip != SkipHelperUnusable || !strings.Contains(r.CUDA.NotRun, "is not a readable executable") {
		t.Errorf("root's helper: skip %q, %q", r.CUDA.Skip, r.CUDA.NotRun)
	}
}
