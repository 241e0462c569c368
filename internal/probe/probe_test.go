package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// onSpareThread runs f on an OS thread locked to it that is not the
// process's main thread, and lets that thread die afterwards: the tests
// change a thread's cgroup or credentials. The main thread cannot exit
// (the Go runtime parks it, runtime/proc.go mexit), so while one goroutine
// holds it locked, f runs in another.
func onSpareThread(f func()) {
	done := make(chan struct{})
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			inner := make(chan struct{})
			go func() { defer close(inner); run() }()
			<-inner
			runtime.UnlockOSThread()
			return
		}
		defer close(done) // the thread stays locked and ends with this goroutine
		f()
	}
	go run()
	<-done
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod, mount and cgroup writes")
	}
}

// nodeDir mounts a fresh tmpfs under the test's temp dir so that the nodes
// made there do not depend on the options of the file system holding /tmp.
func nodeDir(t *testing.T, nodev bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "dev")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var flags uintptr = unix.MS_NOSUID
	if nodev {
		flags |= unix.MS_NODEV
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, "mode=755,size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs for test nodes: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func mknod(t *testing.T, path string, typ uint32, major, minor uint32, perm uint32) {
	t.Helper()
	if err := unix.Mknod(path, typ|perm, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatalf("mknod %s: %v", path, err)
	}
	// mknod applies the umask; set the mode the test asked for.
	if err := os.Chmod(path, os.FileMode(perm)); err != nil {
		t.Fatal(err)
	}
}

// freeCharMajor returns a character major that /proc/devices does not
// list. 60-63 are reserved for local and experimental use
// (Documentation/admin-guide/devices.txt), so no module claims them.
func freeCharMajor(t testing.TB) uint32 {
	t.Helper()
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Skipf("read /proc/devices: %v", err)
	}
	used := map[uint32]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Block devices") {
			break
		}
		f := strings.Fields(line)
		if len(f) == 2 {
			if n, err := strconv.ParseUint(f[0], 10, 32); err == nil {
				used[uint32(n)] = true
			}
		}
	}
	for _, m := range []uint32{60, 61, 62, 63} {
		if !used[m] {
			return m
		}
	}
	t.Skip("no free experimental character major")
	return 0
}

func TestOpenNodeClasses(t *testing.T) {
	requireRoot(t)
	dir := nodeDir(t, false)
	nodevDir := nodeDir(t, true)
	free := freeCharMajor(t)
	mknod(t, filepath.Join(dir, "null"), unix.S_IFCHR, 1, 3, 0o666)
	mknod(t, filepath.Join(dir, "nodrv"), unix.S_IFCHR, free, 0, 0o666)
	mknod(t, filepath.Join(nodevDir, "null"), unix.S_IFCHR, 1, 3, 0o666)
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		path string
		acc  Access
		want Result
	}{
		{"null read", "null", Read, Result{Access: Read, Node: "c 1:3", Class: OK}},
		{"null rw", "null", ReadWrite, Result{Access: ReadWrite, Node: "c 1:3", Class: OK}},
		{"no driver", "nodrv", Read, Result{Access: Read, Node: fmt.Sprintf("c %d:0", free),
			Errno: unix.ENXIO, ErrnoName: "ENXIO", Class: NoDriver, Message: unix.ENXIO.Error()}},
		{"missing", "absent", Read, Result{Access: Read, Errno: unix.ENOENT, ErrnoName: "ENOENT",
			Class: NotPresent, Message: unix.ENOENT.Error()}},
		// fs/fifo.c: a write-only non-blocking open with no reader is ENXIO;
		// that is not a driver question.
		{"fifo no reader", "fifo", Write, Result{Access: Write, Node: "p", Errno: unix.ENXIO,
			ErrnoName: "ENXIO", Class: Other, Message: unix.ENXIO.Error()}},
		{"bad access", "null", Mknod, Result{Access: Mknod, Errno: unix.EINVAL, ErrnoName: "EINVAL",
			Class: Other, Message: `access "m" cannot be probed with open`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.path)
			tc.want.Path = p
			if diff := cmp.Diff(tc.want, OpenNode(p, tc.acc)); diff != "" {
				t.Errorf("OpenNode(%s, %s) (-want +got):\n%s", tc.path, tc.acc, diff)
			}
		})
	}

	t.Run("nodev mount", func(t *testing.T) {
		p := filepath.Join(nodevDir, "null")
		want := Result{Path: p, Access: Read, Node: "c 1:3", Errno: unix.EACCES, ErrnoName: "EACCES",
			Class: PermissionDenied, Message: unix.EACCES.Error()}
		if diff := cmp.Diff(want, OpenNode(p, Read)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestOpenNodeModeDenied opens a mode-000 node as a non-root user. The
// test binary lives in a 0700 build directory that another uid cannot
// exec, so instead of a re-exec'd child one OS thread drops its file-system
// uid: fsuid 0 → non-zero clears that thread's file capabilities
// (security/commoncap.c cap_task_fix_setuid, LSM_SETID_FS), which is what
// a non-root process opening the node has. The thread is never returned to
// the Go scheduler (onSpareThread).
func TestOpenNodeModeDenied(t *testing.T) {
	requireRoot(t)
	dir := nodeDir(t, false)
	// The directories above the mount were made 0700 by the testing
	// package; let the unprivileged thread reach the nodes.
	for d := filepath.Dir(dir); d != filepath.Dir(filepath.Dir(filepath.Dir(dir))); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mknod(t, filepath.Join(dir, "open"), unix.S_IFCHR, 1, 3, 0o666)
	mknod(t, filepath.Join(dir, "closed"), unix.S_IFCHR, 1, 3, 0o000)

	type out struct{ open, closed Result }
	ch := make(chan out, 1)
	errc := make(chan error, 1)
	go onSpareThread(func() {
		unix.Setfsgid(65534)
		unix.Setfsuid(65534)
		if got, _ := unix.SetfsuidRetUid(-1); got != 65534 {
			errc <- fmt.Errorf("setfsuid did not take: fsuid %d", got)
			return
		}
		ch <- out{OpenNode(filepath.Join(dir, "open"), Read), OpenNode(filepath.Join(dir, "closed"), Read)}
	})
	var o out
	select {
	case err := <-errc:
		t.Skip(err)
	case o = <-ch:
	}
	if o.open.Class != OK {
		t.Fatalf("control node 0666 as uid 65534: %+v (want OK; the path is not reachable)", o.open)
	}
	if o.closed.Class != PermissionDenied || o.closed.Errno != unix.EACCES {
		t.Errorf("mode 000 node as uid 65534: %+v, want EACCES/PERMISSION_DENIED", o.closed)
	}
	// Root itself opens the 000 node (CAP_DAC_OVERRIDE): the baseline.
	if r := OpenNode(filepath.Join(dir, "closed"), Read); r.Class != OK {
		t.Errorf("mode 000 node as root: %+v, want OK", r)
	}
}

// v1DevicesMount finds the cgroup v1 devices hierarchy or skips.
func v1DevicesMount(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || g[0] != "cgroup" {
			continue
		}
		for _, o := range strings.Split(g[2], ",") {
			if o == "devices" {
				return f[4]
			}
		}
	}
	t.Skip("no cgroup v1 devices hierarchy mounted")
	return ""
}

// TestOpenNodeCgroupDenied moves one OS thread into a v1 devices cgroup
// that denies c 1:3 and checks that the kernel's EPERM is classified as a
// cgroup denial, and that Compare blames the cgroup. cgroup v1 moves single
// threads through the "tasks" file (Documentation/admin-guide/cgroup-v1/cgroups.rst).
func TestOpenNodeCgroupDenied(t *testing.T) {
	requireRoot(t)
	mnt := v1DevicesMount(t)
	dir := nodeDir(t, false)
	free := freeCharMajor(t)
	null := filepath.Join(dir, "null")
	zero := filepath.Join(dir, "zero")
	nodrv := filepath.Join(dir, "nodrv")
	mknod(t, null, unix.S_IFCHR, 1, 3, 0o666)
	mknod(t, zero, unix.S_IFCHR, 1, 5, 0o666)
	mknod(t, nodrv, unix.S_IFCHR, free, 0, 0o666)

	cg := filepath.Join(mnt, fmt.Sprintf("accel-doctor-probetest-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot create a v1 devices cgroup: %v", err)
	}
	t.Cleanup(func() {
		// The thread that joined the cgroup exits asynchronously.
		for i := 0; i < 200; i++ {
			if err := os.Remove(cg); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("cgroup %s not removed", cg)
	})
	if err := os.WriteFile(filepath.Join(cg, "devices.deny"), []byte("c 1:3 rwm"), 0); err != nil {
		t.Fatal(err)
	}

	type out struct{ null, zero, nodrv, mk Result }
	ch := make(chan out, 1)
	errc := make(chan error, 1)
	go onSpareThread(func() {
		tid := strconv.Itoa(unix.Gettid())
		if err := os.WriteFile(filepath.Join(cg, "tasks"), []byte(tid), 0); err != nil {
			errc <- err
			return
		}
		ch <- out{OpenNode(null, Read), OpenNode(zero, Read), OpenNode(nodrv, Read), MknodNode(dir, 'c', 1, 3)}
	})
	var in out
	select {
	case err := <-errc:
		t.Fatalf("join cgroup: %v", err)
	case in = <-ch:
	}
	base := out{OpenNode(null, Read), OpenNode(zero, Read), OpenNode(nodrv, Read), MknodNode(dir, 'c', 1, 3)}

	if in.null.Class != CgroupDenied || in.null.Errno != unix.EPERM {
		t.Errorf("denied node inside: %+v, want EPERM/CGROUP_DENIED", in.null)
	}
	if in.mk.Class != CgroupDenied {
		t.Errorf("mknod c 1:3 inside: %+v, want CGROUP_DENIED", in.mk)
	}
	if base.mk.Class != OK {
		t.Errorf("mknod c 1:3 outside: %+v, want OK", base.mk)
	}
	if in.zero.Class != OK {
		t.Errorf("allowed node inside: %+v, want OK", in.zero)
	}
	checks := []struct {
		name     string
		base, in Result
		want     Verdict
	}{
		{"denied", base.null, in.null, Verdict{Decision: Denied,
			Reason: "denied by the device cgroup (EPERM inside, OK outside)"}},
		{"allowed", base.zero, in.zero, Verdict{Decision: Allowed, Reason: "allowed inside the cgroup"}},
		{"no driver", base.nodrv, in.nodrv, Verdict{Decision: Allowed, HostWide: true,
			Reason: "allowed by the cgroup, no driver (ENXIO)"}},
		{"mknod denied", base.mk, in.mk, Verdict{Decision: Denied,
			Reason: "denied by the device cgroup (EPERM inside, OK outside)"}},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, Compare(c.base, c.in)); diff != "" {
			t.Errorf("%s: Compare (-want +got):\n%s", c.name, diff)
		}
	}
}

func TestMknodNode(t *testing.T) {
	requireRoot(t)
	r := MknodNode(t.TempDir(), 'c', 1, 3)
	if r.Class != OK || r.Node != "c 1:3" {
		t.Errorf("MknodNode(c 1:3) = %+v, want OK", r)
	}
	if _, err := os.Stat(filepath.Dir(r.Path)); !os.IsNotExist(err) {
		t.Errorf("temp dir %s left behind: %v", filepath.Dir(r.Path), err)
	}
	if r := MknodNode("", 'x', 1, 3); r.Class != Other || r.Errno != unix.EINVAL {
		t.Errorf("MknodNode(x) = %+v, want EINVAL", r)
	}
}

// TestCompare covers the verdicts that need no kernel.
func TestCompare(t *testing.T) {
	ok := Result{Class: OK}
	eperm := Result{Errno: unix.EPERM, ErrnoName: "EPERM", Class: CgroupDenied}
	eacces := Result{Errno: unix.EACCES, ErrnoName: "EACCES", Class: PermissionDenied}
	enoent := Result{Errno: unix.ENOENT, ErrnoName: "ENOENT", Class: NotPresent}
	enxio := Result{Errno: unix.ENXIO, ErrnoName: "ENXIO", Class: NoDriver}
	eio := Result{Errno: unix.EIO, ErrnoName: "EIO", Class: Other, Message: "input/output error"}
	tests := []struct {
		name     string
		base, in Result
		want     Verdict
	}{
		{"both ok", ok, ok, Verdict{Decision: Allowed, Reason: "allowed inside the cgroup"}},
		{"inside ok, baseline denied", eperm, ok, Verdict{Decision: Allowed,
			Reason: "allowed inside the cgroup although the baseline outside failed with EPERM"}},
		{"cgroup denial", ok, eperm, Verdict{Decision: Denied,
			Reason: "denied by the device cgroup (EPERM inside, OK outside)"}},
		{"host-wide EPERM", eperm, eperm, Verdict{Decision: Undetermined, HostWide: true,
			Reason: "EPERM outside the cgroup too: host-wide policy (an LSM, missing CAP_MKNOD or the caller's own cgroup), not this cgroup"}},
		{"EPERM inside, EACCES outside", eacces, eperm, Verdict{Decision: Denied,
			Reason: "denied by the device cgroup (EPERM inside, EACCES outside)"}},
		{"mode", eacces, eacces, Verdict{Decision: Undetermined, HostWide: true,
			Reason: "EACCES (file mode, nodev mount or LSM) comes before the device cgroup is asked"}},
		{"missing inside only", ok, enoent, Verdict{Decision: Undetermined, Reason: "the node is not present"}},
		{"no driver", ok, enxio, Verdict{Decision: Allowed, Reason: "allowed by the cgroup, no driver (ENXIO)"}},
		{"other", eio, eio, Verdict{Decision: Undetermined, HostWide: true, Reason: "failed with EIO (input/output error)"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, Compare(tc.base, tc.in)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestParseAccess(t *testing.T) {
	for in, want := range map[string]Access{"r": Read, "w": Write, "rw": ReadWrite, "wr": ReadWrite, "m": Mknod} {
		got, err := ParseAccess(in)
		if err != nil || got != want {
			t.Errorf("ParseAccess(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "rwm", "R"} {
		if _, err := ParseAccess(bad); err == nil {
			t.Errorf("ParseAccess(%q): no error", bad)
		}
	}
}
