package hostfs

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLiveSysfs: the running host's /sys is a kernel's sysfs, and so is
// a sysfs mounted at a root's /sys (a pod's /host/sys); a tree that
// copies it is not, nor is a tmpfs at /sys (which Covers counts as live:
// /dev and /run are tmpfs on a host, /sys never is).
func TestLiveSysfs(t *testing.T) {
	if !MustNew("/").LiveSysfs() {
		t.Error("the live host's /sys is not a live sysfs")
	}
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "sys/bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	if MustNew(tree).LiveSysfs() {
		t.Error("a directory tree's /sys is a live sysfs")
	}
	if MustNew(t.TempDir()).LiveSysfs() {
		t.Error("a root without /sys has a live sysfs")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for the mounts: a private mount namespace")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread stays locked: it exits with the goroutine, and its
		// mount namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make / private: %v", err)
			return
		}
		sys := filepath.Join(tree, "sys")
		if err := unix.Mount("tmpfs", sys, "tmpfs", 0, ""); err != nil {
			t.Errorf("tmpfs at %s: %v", sys, err)
			return
		}
		if MustNew(tree).LiveSysfs() {
			t.Error("a tmpfs at /sys is a live sysfs")
		}
		if err := unix.Mount("/sys", sys, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind /sys at %s: %v", sys, err)
			return
		}
		if !MustNew(tree).LiveSysfs() {
			t.Error("the host's sysfs bound at a root's /sys is not a live sysfs")
		}
	}()
	<-done
}
