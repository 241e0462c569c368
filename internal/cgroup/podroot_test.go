package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// TestReadV2ThroughPodRoot: a DaemonSet reads the host at /host, where the
// host's cgroup2 is a real mount. The programs must be read through that
// root, and a plain directory (a snapshot) must say it cannot answer.
func TestReadV2ThroughPodRoot(t *testing.T) {
	requireRoot(t)
	m := testMounts(t)
	if m.Unified == "" {
		t.Skip("no cgroup2 hierarchy is mounted on this host")
	}
	cg := cgroupWithTestProgram(t, m.Unified, "adoc_test_pod")

	// /host/<cgroup2 mount> is a bind mount of the real hierarchy, made
	// and removed by this test.
	host := t.TempDir()
	mnt := filepath.Join(host, m.Unified)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(m.Unified, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })

	dir := filepath.Join(m.Unified, filepath.Base(cg))
	pol, err := ReadV2(hostfs.MustNew(host), dir)
	if err != nil {
		t.Fatalf("ReadV2 through %s: %v", host, err)
	}
	if len(pol.Programs) != 1 || pol.Programs[0].Name != "adoc_test_pod" || len(pol.Programs[0].Insns) == 0 {
		t.Fatalf("programs %+v", pol.Programs)
	}
	if d := pol.Evaluate(DeviceRef{'c', 1, 3}, AccessRead); !d.Known {
		t.Errorf("undecided through the pod root: %s", d.Reason)
	}

	// A directory that only looks like a cgroup (a snapshot) cannot answer.
	snap := t.TempDir()
	os.MkdirAll(filepath.Join(snap, dir), 0o755)
	if _, err := ReadV2(hostfs.MustNew(snap), dir); !errors.Is(err, ErrCapturedHost) {
		t.Errorf("snapshot: err %v, want ErrCapturedHost", err)
	}
}

// cgroupWithTestProgram makes a test cgroup under the cgroup2 mount with
// denySomeProgram attached as name; all of it goes when the test ends.
func cgroupWithTestProgram(t *testing.T, mount, name string) string {
	t.Helper()
	cg := makeCgroup(t, mount)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.CGroupDevice, License: "Apache-2.0", Instructions: denySomeProgram()})
	if err != nil {
		t.Fatalf("load program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupDevice, Program: prog})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return cg
}
