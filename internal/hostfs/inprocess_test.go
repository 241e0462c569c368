package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestListInProcessSeesTheProcessRoot: a process chrooted into a directory
// with its own /dev (a node, a link that would lead out of the chroot if
// followed on the host, a subdirectory) is listed as it sees it: the link
// is reported, not followed, the node has its own numbers, the listing is
// the chroot's, not the host's.
func TestListInProcessSeesTheProcessRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot and mknod need root")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox to run in a chroot")
	}
	dir := t.TempDir()
	tree(t, dir, map[string]string{"dev/ptmx": "->pts/ptmx", "dev/up": "->../../../../etc", "dev/dri/.keep": ""})
	if err := unix.Mknod(filepath.Join(dir, "dev/dri/renderD128"), unix.S_IFCHR|0o660, int(unix.Mkdev(226, 128))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "dev/dri/renderD128"), 0o660); err != nil { // past the umask
		t.Fatal(err)
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/busybox", "sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir}
	cmd.Path = "/busybox"
	if err := cmd.Start(); err != nil {
		t.Skipf("starting a chrooted process: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	bothResolvers(t, func(t *testing.T) {
		r := MustNew("/")
		names, err := r.ReadDirInProcess(pid, "/dev")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"dri", "ptmx", "up"}, names); d != "" {
			t.Errorf("listing (-want +got):\n%s", d)
		}
		n, err := r.LstatInProcess(pid, "/dev/up")
		if err != nil || n.Type != TypeSymlink || n.Target != "../../../../etc" {
			t.Errorf("link: %+v, %v", n, err)
		}
		n, err = r.LstatInProcess(pid, "/dev/dri/renderD128")
		if err != nil || n.Type != TypeChar || n.Major != 226 || n.Minor != 128 || n.ModeString() != "0660" {
			t.Errorf("node: %+v, %v", n, err)
		}
		if _, err := r.LstatInProcess(pid, "/dev/absent"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("absent: %v", err)
		}
		if _, err := r.ReadDirInProcess(pid, "/dev/ptmx"); err == nil {
			t.Error("a link to a missing directory was listed")
		}
	})
	// A tree without a procfs: the tree's /proc/PID/root answers.
	cap := t.TempDir()
	tree(t, cap, map[string]string{"proc/42/root/dev/x": "captured", "proc/42/root/dev/l": "->x"})
	r := MustNew(cap)
	if names, err := r.ReadDirInProcess(42, "/dev"); err != nil || len(names) != 2 {
		t.Errorf("captured listing: %v, %v", names, err)
	}
	if n, err := r.LstatInProcess(42, "/dev/l"); err != nil || n.Type != TypeSymlink || n.Target != "x" {
		t.Errorf("captured link: %+v, %v", n, err)
	}
}
