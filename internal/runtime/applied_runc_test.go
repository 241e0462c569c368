package runtime

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Real runc containers (Debian's runc, a busybox-static rootfs), each
// removed when its test ends, whatever happens. The bundle is made
// traversable by others (0755): a user-namespaced container's root is an
// unprivileged host uid that must reach its rootfs and bind sources.

type appliedCtr struct {
	id, bundle string
	pid        int
	spec       *specs.Spec
}

// startAppliedContainer runs a container whose spec edit changes; edit
// gets the bundle directory to place bind sources in.
func startAppliedContainer(t testing.TB, edit func(s *specs.Spec, bundle string)) appliedCtr {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runc containers need root")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc is not installed (apt-get install runc)")
	}
	const busybox = "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		t.Skip("busybox-static is not installed (apt-get install busybox-static)")
	}
	bundle := t.TempDir()
	for _, d := range []string{filepath.Dir(bundle), bundle} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"sh", "sleep", "echo", "cat", "stat", "stty", "id"} {
		os.Symlink("busybox", filepath.Join(rootfs, "bin", app))
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	specPath := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s.Process.Terminal = false
	s.Process.Args = []string{"/bin/sleep", "300"}
	s.Root.Readonly = true
	id := fmt.Sprintf("accel-doctor-applied-%d-%x", os.Getpid(), rand.Uint32())
	s.Linux.CgroupsPath = "/" + id
	if edit != nil {
		edit(&s, bundle)
	}
	raw, _ = json.MarshalIndent(&s, "", "  ")
	if err := os.WriteFile(specPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command(runc, "kill", id, "KILL").Run()
		for i := 0; i < 50; i++ {
			if exec.Command(runc, "delete", "--force", id).Run() == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// runc's errors go to a file: the detached container keeps its stdio,
	// and a pipe would hold Run until it exits. stdin is not /dev/null,
	// which runc reopens inside the container.
	errFile, err := os.Create(filepath.Join(bundle, "runc.err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	pidFile := filepath.Join(bundle, "pid")
	run := exec.Command(runc, "run", "--detach", "--bundle", bundle, "--pid-file", pidFile, id)
	run.Stdin, run.Stdout, run.Stderr = errFile, errFile, errFile
	if err := run.Run(); err != nil {
		msg, _ := os.ReadFile(errFile.Name())
		t.Fatalf("runc run: %v: %s", err, msg)
	}
	pb, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pb)))
	if err != nil {
		t.Fatal(err)
	}
	return appliedCtr{id: id, bundle: bundle, pid: pid, spec: &s}
}

// exec runs a shell script in the container as its process does (runc
// exec: its namespaces, cgroup, credentials and seccomp filter) and
// returns the output and whether it succeeded.
func (c appliedCtr) exec(t *testing.T, script string) (string, bool) {
	t.Helper()
	out, err := exec.Command("runc", "exec", c.id, "sh", "-c", script).CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

func hostNode(t testing.TB, p string, major, minor uint32, mode uint32) {
	t.Helper()
	if err := unix.Mknod(p, unix.S_IFCHR, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, os.FileMode(mode)); err != nil { // past the umask
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func addCaps(s *specs.Spec, caps ...string) {
	c := s.Process.Capabilities
	c.Effective = append(c.Effective, caps...)
	c.Bounding = append(c.Bounding, caps...)
	c.Permitted = append(c.Permitted, caps...)
}

func checkOf(t *testing.T, checks []AppliedCheck, kind, subject string) AppliedCheck {
	t.Helper()
	for _, c := range checks {
		if c.Kind == kind && c.Subject == subject {
			return c
		}
	}
	t.Fatalf("no %s check of %s", kind, subject)
	return AppliedCheck{}
}

const envSecret = "s3cret-VALUE-never-shown"

// TestAppliedRuncContainer: a container given a node by linux.devices, a
// library file by a bind mount, a second file bind-mounted where the first
// was expected, a node bind-mounted nodev, env vars (one holding a
// secret), extra capabilities and an RLIMIT_MEMLOCK. What ReadApplied
// reads from the host agrees with what the kernel does inside (runc exec),
// and a snapshot replays it without the secret.
func TestAppliedRuncContainer(t *testing.T) {
	var lib, other string
	c := startAppliedContainer(t, func(s *specs.Spec, bundle string) {
		lib, other = filepath.Join(bundle, "host/libfake.so.1"), filepath.Join(bundle, "host/libother.so.1")
		writeFile(t, lib, "fake library\n")
		writeFile(t, other, "another library\n")
		hostNode(t, filepath.Join(bundle, "accel-nd0"), 1, 5, 0o666)
		mode := os.FileMode(0o666)
		zero := uint32(0)
		s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{Path: "/dev/accel-test0", Type: "c", Major: 1, Minor: 5, FileMode: &mode, UID: &zero, GID: &zero})
		s.Mounts = append(s.Mounts,
			specs.Mount{Destination: "/usr/lib/libfake.so.1", Source: lib, Type: "bind", Options: []string{"bind", "ro"}},
			specs.Mount{Destination: "/usr/lib/libwrong.so.1", Source: other, Type: "bind", Options: []string{"bind", "ro"}},
			specs.Mount{Destination: "/dev/accel-nd0", Source: filepath.Join(bundle, "accel-nd0"), Type: "bind", Options: []string{"bind", "nodev"}})
		s.Process.Env = append(s.Process.Env, "ACCEL_VISIBLE_DEVICES="+envSecret)
		addCaps(s, "CAP_IPC_LOCK", "CAP_SYS_ADMIN")
		s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Soft: 65536, Hard: 131072})
	})
	root := hostfs.MustNew("/")
	want := Expected{
		Nodes: []ExpectedNode{
			{Path: "/dev/accel-test0", Type: hostfs.TypeChar, Major: 1, Minor: 5, Mode: ptrTo(os.FileMode(0o666)), UID: ptrTo(uint32(0)), GID: ptrTo(uint32(0))},
			{Path: "/dev/accel-nd0", Type: hostfs.TypeChar, Major: 1, Minor: 5},
			{Path: "/dev/accel-absent0", Type: hostfs.TypeChar, Major: 195, Minor: 0},
		},
		Mounts: []ExpectedMount{
			{HostPath: lib, ContainerPath: "/usr/lib/libfake.so.1"},
			{HostPath: lib, ContainerPath: "/usr/lib/libwrong.so.1"},
			{HostPath: lib, ContainerPath: "/usr/lib/libmissing.so.1"},
		},
		Env: []string{"ACCEL_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"},
	}
	rec := root.Record()
	a := ReadApplied(root, c.pid, want)
	for _, r := range []ProcRead{a.Process, a.StatusRead, a.LimitsRead, a.MountsRead, a.Dev.Read, a.Env.Read, a.UserNS.UIDRead, a.HostMountsRead} {
		if !r.OK() {
			t.Errorf("read: %s", r)
		}
	}
	checks := a.Compare(want)
	logChecks(t, checks)

	// The node given by linux.devices: there as asked, and it opens.
	node := checkOf(t, checks, "node", "/dev/accel-test0")
	if node.Outcome != CheckPresent || node.Entry.Owner.Inside != 0 || !node.Entry.Owner.Mapped {
		t.Errorf("linux.devices node: %+v", node)
	}
	if nodev, known := node.Entry.OnNodev(); !known || nodev || node.Mount.Mountpoint != "/dev" {
		t.Errorf("its mount: %v %v %v", nodev, known, node.Mount)
	}
	if d := a.ModeCheck(*node.Entry, MayRW); !d.Known || !d.Allowed {
		t.Errorf("mode check: %s", d)
	}
	if out, ok := c.exec(t, "echo > /dev/accel-test0"); !ok {
		t.Errorf("open inside: %s", out)
	}
	// The node on the nodev mount: mode allows, the mount refuses, and the
	// open inside gives EACCES.
	nd := checkOf(t, checks, "node", "/dev/accel-nd0")
	if nodev, known := nd.Entry.OnNodev(); nd.Outcome != CheckPresent || !known || !nodev || nd.Mount.Mountpoint != "/dev/accel-nd0" {
		t.Errorf("nodev node: %+v", nd)
	}
	if d := a.ModeCheck(*nd.Entry, MayRW); !d.Allowed {
		t.Errorf("nodev node's mode check: %s", d)
	}
	if !strings.Contains(strings.Join(nd.Evidence, "\n"), "nodev") {
		t.Errorf("nodev evidence: %v", nd.Evidence)
	}
	if out, _ := c.exec(t, "echo > /dev/accel-nd0"); !strings.Contains(out, "Permission denied") {
		t.Errorf("open on nodev inside: %q, want EACCES", out)
	}
	// The node nobody gave: missing, and missing inside.
	if m := checkOf(t, checks, "node", "/dev/accel-absent0"); m.Outcome != CheckMissing {
		t.Errorf("absent node: %+v", m)
	}
	if out, _ := c.exec(t, "cat /dev/accel-absent0"); !strings.Contains(out, "No such file or directory") {
		t.Errorf("absent node inside: %q", out)
	}

	// The /dev walk: the nodes, the links unfollowed.
	if e, ok := a.Dev.Lookup("/dev/accel-test0"); !ok || e.Node.Type != hostfs.TypeChar || e.Node.Dev() != "1:5" {
		t.Errorf("walk: %v", e)
	}
	if e, ok := a.Dev.Lookup("/dev/ptmx"); !ok || e.Node.Type != hostfs.TypeSymlink || e.Node.Target != "pts/ptmx" {
		t.Errorf("walk: /dev/ptmx %v", e)
	}
	if e, ok := a.Dev.Lookup("/dev/pts/ptmx"); !ok || e.Node.Dev() != "5:2" || e.Mount == nil || e.Mount.FSType != "devpts" {
		t.Errorf("walk: /dev/pts/ptmx %v", e)
	}
	if len(a.Dev.Nodes()) < 7 {
		t.Errorf("walk found %d nodes", len(a.Dev.Nodes()))
	}

	// Mounts: the library where expected, another file where the library
	// was expected, none where the third was.
	if m := checkOf(t, checks, "mount", "/usr/lib/libfake.so.1"); m.Outcome != CheckPresent || !m.SourceVerified {
		t.Errorf("bind mount: %+v", m)
	}
	wrong := checkOf(t, checks, "mount", "/usr/lib/libwrong.so.1")
	if wrong.Outcome != CheckDifferent || len(wrong.Diffs) != 1 || !strings.Contains(wrong.Diffs[0], "libother.so.1") {
		t.Errorf("another file mounted: %+v", wrong)
	}
	missing := checkOf(t, checks, "mount", "/usr/lib/libmissing.so.1")
	if missing.Outcome != CheckMissing || !strings.Contains(strings.Join(missing.Evidence, "\n"), "/usr/lib/libmissing.so.1") {
		t.Errorf("missing mount: %+v", missing)
	}
	if out, _ := c.exec(t, "cat /usr/lib/libfake.so.1; cat /usr/lib/libmissing.so.1"); !strings.Contains(out, "fake library") || !strings.Contains(out, "No such file") {
		t.Errorf("mounts inside: %q", out)
	}

	// Env: names only.
	if e := checkOf(t, checks, "env", "ACCEL_VISIBLE_DEVICES"); e.Outcome != CheckPresent {
		t.Errorf("env: %+v", e)
	}
	if e := checkOf(t, checks, "env", "NVIDIA_DRIVER_CAPABILITIES"); e.Outcome != CheckMissing {
		t.Errorf("env: %+v", e)
	}
	if dump := fmt.Sprintf("%+v %+v", a, checks); strings.Contains(dump, envSecret) {
		t.Error("an environment value leaked into the facts")
	}

	// Status: the spec's capability sets, no_new_privs, no seccomp, the
	// PID inside.
	st := a.Status
	wantEff, unknown := CapSetOf(c.spec.Process.Capabilities.Effective)
	wantBnd, _ := CapSetOf(c.spec.Process.Capabilities.Bounding)
	if len(unknown) != 0 || st.CapEff != wantEff || st.CapBnd != wantBnd || !st.CapEff.Has(14) || !st.CapEff.Has(21) {
		t.Errorf("caps: eff %s bnd %s, want %s %s", st.CapEff, st.CapBnd, wantEff, wantBnd)
	}
	if st.NoNewPrivs == nil || *st.NoNewPrivs != c.spec.Process.NoNewPrivileges || st.Seccomp == nil || *st.Seccomp != 0 {
		t.Errorf("nnp %v seccomp %v", st.NoNewPrivs, st.Seccomp)
	}
	if len(st.NSpid) != 2 || st.NSpid[0] != c.pid || st.NSpid[1] != 1 {
		t.Errorf("NSpid %v", st.NSpid)
	}
	if m, ok := a.Limits.MemLock(); !ok || m.Soft != 65536 || m.Hard != 131072 || m.Units != "bytes" {
		t.Errorf("memlock %v", m)
	}
	if shared, known := a.UserNS.Shared(); !known || !shared {
		t.Errorf("user namespace: %+v", a.UserNS)
	}
	if s := a.LSM.Current.State; s != ReadOK && s != ReadAbsent {
		t.Errorf("LSM: %s", a.LSM.Current)
	}

	// A snapshot replays the same facts and holds no value.
	var buf bytes.Buffer
	if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	if bytes.Contains(raw, []byte(envSecret)) {
		t.Error("the snapshot holds an environment value")
	}
	if !bytes.Contains(raw, []byte("ACCEL_VISIBLE_DEVICES")) {
		t.Error("the snapshot lacks the environment's names")
	}
	snap, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	replay := ReadApplied(snap, c.pid, want)
	if a, b := outcomesOf(checks), outcomesOf(replay.Compare(want)); a != b {
		t.Errorf("replay differs:\n%s---\n%s", a, b)
	}
	if a, b := devListing(a.Dev), devListing(replay.Dev); a != b {
		t.Errorf("replayed /dev differs:\n%s---\n%s", a, b)
	}
	if replay.Status.CapEff != st.CapEff || replay.LSM.Current.State != a.LSM.Current.State {
		t.Errorf("replayed status or LSM: %s %s", replay.Status.CapEff, replay.LSM.Current)
	}
	// The host mounted at a directory, as in a pod with the host's / at
	// /host: the same facts through the root's live procfs.
	inHostRoot(t, func(hr *hostfs.Root) {
		if !hr.LiveProc() {
			t.Error("the rbound host's /proc is not live")
			return
		}
		via := ReadApplied(hr, c.pid, want)
		if a, b := outcomesOf(checks), outcomesOf(via.Compare(want)); a != b {
			t.Errorf("--root differs:\n%s---\n%s", a, b)
		}
		if a, b := devListing(a.Dev), devListing(via.Dev); a != b {
			t.Errorf("--root /dev differs:\n%s---\n%s", a, b)
		}
	})

	// A path the capture did not stat is "not captured", never "missing".
	more := Expected{Nodes: []ExpectedNode{{Path: "/dev/other0", Type: hostfs.TypeChar}}, Env: []string{"PATH"}}
	if ch := ReadApplied(snap, c.pid, more).Compare(more); ch[0].Outcome != CheckUnknown || ch[0].State != ReadNotCaptured || ch[1].Outcome != CheckPresent {
		t.Errorf("a path outside the capture: %+v", ch)
	}
}

func outcomesOf(cs []AppliedCheck) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s %s %v\n", c.Kind, c.Subject, c.Outcome, c.Diffs)
	}
	return b.String()
}

func devListing(v DevView) string {
	var b strings.Builder
	for _, e := range v.Entries {
		fmt.Fprintln(&b, e)
	}
	return b.String()
}

// TestAppliedRuncUserNamespace: a container with its own user namespace
// (container root = host uid 100000) given a root-owned 0600 node: the
// node's owner is unmapped, shows as the overflow uid inside, and the
// container's root gets EACCES although it holds CAP_DAC_OVERRIDE. A
// 0666 node (runc bind-mounts /dev/null from the host) is unmapped too,
// and opens by its other bits.
func TestAppliedRuncUserNamespace(t *testing.T) {
	c := startAppliedContainer(t, func(s *specs.Spec, bundle string) {
		hostNode(t, filepath.Join(bundle, "accel-ns0"), 1, 5, 0o600)
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
		s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/accel-ns0", Source: filepath.Join(bundle, "accel-ns0"), Type: "bind", Options: []string{"bind"}})
		addCaps(s, "CAP_DAC_OVERRIDE")
	})
	want := Expected{Nodes: []ExpectedNode{
		{Path: "/dev/accel-ns0", Type: hostfs.TypeChar, Major: 1, Minor: 5, UID: ptrTo(uint32(0))},
		{Path: "/dev/null", Type: hostfs.TypeChar, Major: 1, Minor: 3},
	}}
	a := ReadApplied(hostfs.MustNew("/"), c.pid, want)
	u := a.UserNS
	if shared, known := u.Shared(); !known || shared || len(u.UIDMap) != 1 || u.UIDMap[0] != (IDExtent{0, 100000, 65536}) || !u.OverflowRead.OK() {
		t.Fatalf("user namespace: %+v", u)
	}
	if a.Status.UID[3] != 100000 || !a.Status.CapEff.Has(capDACOverride) {
		t.Errorf("credentials as the host sees them: %v %s", a.Status.UID, a.Status.CapEff)
	}
	checks := a.Compare(want)
	logChecks(t, checks)
	ns0 := checkOf(t, checks, "node", "/dev/accel-ns0")
	e := ns0.Entry
	if ns0.Outcome != CheckDifferent || e.Node.UID != 0 || e.Owner.Mapped || e.Owner.Inside != u.OverflowUID || u.OverflowUID != DefaultOverflowID {
		t.Errorf("unmapped owner: %+v %+v", ns0, e.Owner)
	}
	if len(ns0.Diffs) != 1 || !strings.Contains(ns0.Diffs[0], "owner 65534 inside the container, want 0") {
		t.Errorf("diffs: %v", ns0.Diffs)
	}
	d := a.ModeCheck(*e, MayRW)
	if !d.Known || d.Allowed || !strings.Contains(d.By, "CAP_DAC_OVERRIDE does not apply") {
		t.Errorf("mode check: %s", d)
	}
	// What the container sees and gets.
	if out, _ := c.exec(t, "stat -c %u:%g /dev/accel-ns0"); out != "65534:65534" {
		t.Errorf("owner inside: %q", out)
	}
	if out, _ := c.exec(t, "echo > /dev/accel-ns0"); !strings.Contains(out, "Permission denied") {
		t.Errorf("open inside: %q, want EACCES", out)
	}
	null := checkOf(t, checks, "node", "/dev/null")
	if null.Outcome != CheckPresent || null.Entry.Owner.Mapped {
		t.Errorf("/dev/null: %+v", null)
	}
	if d := a.ModeCheck(*null.Entry, MayRW); !d.Allowed || !strings.Contains(d.By, "other bits") {
		t.Errorf("/dev/null mode check: %s", d)
	}
	if out, ok := c.exec(t, "echo > /dev/null"); !ok {
		t.Errorf("/dev/null inside: %q", out)
	}
}

// TestAppliedRuncSeccomp: a profile that refuses ioctl (and decides mmap by
// its arguments): the kernel shows a filter attached, the evaluation says
// ioctl fails with EPERM and openat is allowed, and an ioctl inside fails
// with EPERM.
func TestAppliedRuncSeccomp(t *testing.T) {
	eperm := uint(unix.EPERM)
	c := startAppliedContainer(t, func(s *specs.Spec, _ string) {
		s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
			{Names: []string{"ioctl"}, Action: specs.ActErrno, ErrnoRet: &eperm},
			// A condition no call meets: mmap decided by its address.
			{Names: []string{"mmap"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 0x1234000, Op: specs.OpEqualTo}}},
			{Names: []string{"openat"}, Action: specs.ActAllow},
		}}
	})
	a := ReadApplied(hostfs.MustNew("/"), c.pid, Expected{})
	if st := a.Status; st.Seccomp == nil || *st.Seccomp != 2 || st.SeccompFilters == nil || *st.SeccompFilters < 1 {
		t.Errorf("status: seccomp %v filters %v", a.Status.Seccomp, a.Status.SeccompFilters)
	}
	arch, _ := HostArch(hostfs.MustNew("/"))
	e := EvaluateSeccomp(c.spec, arch)
	for name, want := range map[string]SyscallDecision{"ioctl": SyscallErrno, "openat": SyscallAllowed, "mmap": SyscallDependsOnArgs} {
		v, ok := e.Verdict(name)
		if !ok || v.Decision != want {
			t.Errorf("%s: %+v, want %s", name, v, want)
		}
	}
	if v, _ := e.Verdict("ioctl"); v.Errno != uint(unix.EPERM) || v.Rule != 0 {
		t.Errorf("ioctl: %+v", v)
	}
	// busybox stty does TCGETS on its -F file: ENOTTY without the filter,
	// EPERM with it.
	if out, _ := c.exec(t, "stty -F /dev/null"); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("ioctl inside: %q, want EPERM", out)
	}
}

// BenchmarkReadAppliedContainer reads a running runc container's applied
// state, with a node, a mount and an env var expected: checkpoint 3's
// cost per container.
func BenchmarkReadAppliedContainer(b *testing.B) {
	c := startAppliedContainer(b, nil)
	root := hostfs.MustNew("/")
	want := Expected{Nodes: []ExpectedNode{{Path: "/dev/null", Type: hostfs.TypeChar, Major: 1, Minor: 3}},
		Mounts: []ExpectedMount{{HostPath: "/etc/hostname", ContainerPath: "/etc/hostname"}}, Env: []string{"PATH"}}
	for b.Loop() {
		if a := ReadApplied(root, c.pid, want); !a.Dev.Read.OK() {
			b.Fatal(a.Dev.Read)
		}
	}
}

// inHostRoot runs fn with a root at a directory where the host's / is
// bound (recursively, so its /proc is the host's live procfs), in a mount
// namespace private to one OS thread: the bind never shows outside it, and
// the thread dies with the goroutine.
func inHostRoot(t *testing.T, fn func(*hostfs.Root)) {
	t.Helper()
	dir := t.TempDir()
	done := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- "unshare: " + err.Error()
			return
		}
		// Private first: nothing mounted here may propagate to the host.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- "make / private: " + err.Error()
			return
		}
		if err := unix.Mount("/", dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			done <- "rbind / at " + dir + ": " + err.Error()
			return
		}
		fn(hostfs.MustNew(dir))
		done <- ""
	}()
	if msg := <-done; msg != "" {
		t.Skipf("a private mount namespace: %s", msg)
	}
}
