package iommu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// liveVFIO reads this machine.
func liveVFIO(t *testing.T) (*hostfs.Root, *pci.Inventory, *VFIO) {
	t.Helper()
	root := hostfs.MustNew("/")
	inv, err := pci.Scan(root)
	if err != nil {
		t.Skipf("no PCI bus: %v", err)
	}
	return root, inv, ReadVFIO(root, Read(root, inv), inv)
}

// TestVFIOLive reads this machine's VFIO state and checks each fact with
// the host's own independent evidence (a stat of its own). On the VM the
// tests run on (no IOMMU, no VFIO modules) every node is absent, and
// says so.
func TestVFIOLive(t *testing.T) {
	_, inv, v := liveVFIO(t)
	for _, n := range []Node{v.Container, v.IOMMUFD} {
		_, err := os.Lstat(n.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if n.Present != No || n.String() != n.Path+": absent" {
				t.Errorf("%s is absent, read %s", n.Path, n)
			}
		case err == nil:
			if n.Present != Yes {
				t.Errorf("%s is there, read %s", n.Path, n)
			}
		}
	}
	for _, m := range v.Modules {
		_, err := os.Stat(filepath.Join(ModuleDir, m.Name))
		_, ierr := os.Stat(filepath.Join(ModuleDir, m.Name, "initstate"))
		want := ModuleBuiltIn
		switch {
		case errors.Is(err, fs.ErrNotExist):
			want = ModuleAbsent
			if m.State == ModuleBuiltIn && strings.Contains(m.Evidence, "modules.builtin") {
				want = ModuleBuiltIn
			}
		case ierr == nil:
			want = ModuleLoaded
		}
		if m.State != want && !(want == ModuleLoaded && m.State == ModuleTransient) {
			t.Errorf("%s: %v (%s), want %v", m.Name, m.State, m.Evidence, want)
		}
	}
	_, err := os.Stat(VFIOPCIDriverDir)
	if (err == nil) != (v.Driver == Yes) {
		t.Errorf("driver %v, stat %v", v.Driver, err)
	}
	onVFIO := 0
	for _, d := range inv.Devices {
		if IsVFIODriver(d.Driver) {
			onVFIO++
		}
	}
	n := 0
	for _, b := range v.Bindings {
		if b.VFIO {
			n++
		}
	}
	if n != onVFIO {
		t.Errorf("%d bindings on VFIO drivers, the inventory has %d", n, onVFIO)
	}
	classes, _ := os.ReadDir(VFIOClassDir)
	registered := 0
	for _, g := range v.Groups {
		if g.Registered == Yes {
			registered++
		}
	}
	if registered != len(classes) {
		t.Errorf("%d groups registered, %s lists %d", registered, VFIOClassDir, len(classes))
	}
	t.Logf("container %s; iommufd %s; %d groups, %d bindings", v.Container, v.IOMMUFD, len(v.Groups), len(v.Bindings))
}

// TestFindHoldersLive finds a file this test holds open, and one a child
// process inherited, by their fd links.
func TestFindHoldersLive(t *testing.T) {
	root := hostfs.MustNew("/")
	dir := t.TempDir()
	p := filepath.Join(dir, "held")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other := filepath.Join(dir, "held-by-child")
	g, err := os.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{g} // fd 3 in the child
	if err := child.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	g.Close() // only the child holds it now

	s := FindHolders(root, []string{p, other, "/nonexistent/never"})
	if s.Err != nil || s.NotCaptured || s.Processes < 2 {
		t.Fatalf("%+v", s)
	}
	mine := s.HeldBy(p)
	if len(mine) != 1 || mine[0].PID != os.Getpid() || mine[0].FD != int(f.Fd()) || mine[0].Target != p {
		t.Errorf("held by %+v, want PID %d fd %d", mine, os.Getpid(), f.Fd())
	}
	theirs := s.HeldBy(other)
	if len(theirs) != 1 || theirs[0].PID != child.Process.Pid || theirs[0].FD != 3 || theirs[0].Comm != "sleep" {
		t.Errorf("held by %+v, want the child %d on fd 3", theirs, child.Process.Pid)
	}
	if len(s.HeldBy("/nonexistent/never")) != 0 {
		t.Error("a file nobody has open is held")
	}
	if os.Geteuid() == 0 && s.Denied != 0 {
		t.Errorf("root was denied %d fd tables (%v, %v)", s.Denied, s.DeniedPIDs, s.DeniedErr)
	}
	t.Logf("%d processes scanned, %d denied, %d gone", s.Processes, s.Denied, s.Gone)
}

// startQEMULike starts a process whose argv[0] is qemu-system-x86_64 and
// whose arguments carry -m 16G (a shell reading its stdin under that
// name), with the locked-memory limit prlimit(1) sets before the exec,
// through the wrappers given before it (setpriv to drop a capability).
// The process lives until its stdin closes.
func startQEMULike(t *testing.T, soft, hard string, wrap ...string) (*exec.Cmd, io.Closer) {
	t.Helper()
	for _, tool := range append([]string{"prlimit", "sh"}, wrap[:min(1, len(wrap))]...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	sh, _ := exec.LookPath("sh")
	qemu := filepath.Join(t.TempDir(), "qemu-system-x86_64")
	if err := os.Symlink(sh, qemu); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--memlock=" + soft + ":" + hard}, wrap...)
	args = append(args, qemu, "-c", "read x", "-m", "16G", "-smp", "2")
	cmd := exec.Command("prlimit", args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	// prlimit (and setpriv) exec in place: wait for the last exec.
	want := qemu + "\x00-c\x00read x\x00-m\x0016G"
	for i := 0; ; i++ {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		if strings.HasPrefix(string(b), want) {
			break
		}
		if i > 500 {
			t.Fatalf("the child never became %s (cmdline %q, stderr %s)", qemu, b, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, stdin
}

// TestMemlockLive reads a real process's locked-memory limit, set by
// prlimit before its exec, and the -m of its command line; as root, with
// and without CAP_IPC_LOCK (dropped from the bounding set by setpriv, so
// the exec does not grant it).
func TestMemlockLive(t *testing.T) {
	root := hostfs.MustNew("/")
	cmd, _ := startQEMULike(t, "1048576", "2097152")
	m := ReadMemlock(root, nil, nil, MemlockRequest{PID: cmd.Process.Pid})
	if m.Limit == nil || m.Limit.Soft != 1<<20 || m.Limit.Hard != 2<<20 {
		t.Fatalf("limit %+v (%s)", m.Limit, m.Limits)
	}
	if !m.Guest.Known || m.Guest.Bytes != 16<<30 || m.Guest.QEMU == nil || !strings.Contains(m.Guest.From, "-m 16G on /proc/") || !m.Guest.Cmdline.OK() {
		t.Errorf("guest %+v", m.Guest)
	}
	if m.BelowCharged != Yes || m.DevicesErr == nil || m.NeedKnown {
		t.Errorf("below %v devices %v need known %v", m.BelowCharged, m.DevicesErr, m.NeedKnown)
	}
	// Independent evidence of the capability and the namespace: our own.
	self, _ := os.ReadFile("/proc/self/status")
	st, _ := runtime.ParseProcStatus(self)
	uidMap, _ := os.ReadFile("/proc/self/uid_map")
	idm, _ := runtime.ParseIDMap(uidMap)
	if st.CapBnd.Has(unix.CAP_IPC_LOCK) && os.Geteuid() == 0 && idm.IsIdentity() {
		if m.CapIPCLock != Yes || m.InitialUserNS != Yes || m.Exempt != Yes || strings.Contains(explain(m), "ENOMEM") {
			t.Errorf("root child: cap %v ns %v exempt %v\n%s", m.CapIPCLock, m.InitialUserNS, m.Exempt, explain(m))
		}
	}
	t.Logf("%s", explain(m))

	// A snapshot of it replays the limit; the command line stays live
	// only.
	rec := root.Record()
	ReadMemlock(root, nil, nil, MemlockRequest{PID: cmd.Process.Pid})
	var buf bytes.Buffer
	if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	r := ReadMemlock(snap, nil, nil, MemlockRequest{PID: cmd.Process.Pid})
	if r.Limit == nil || *r.Limit != *m.Limit || r.CapIPCLock != m.CapIPCLock || r.Guest.Known || r.Guest.Cmdline.State != runtime.ReadNotCaptured {
		t.Errorf("replay: limit %+v cap %v guest %+v", r.Limit, r.CapIPCLock, r.Guest)
	}
	if _, err := snap.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline"); err == nil {
		t.Error("the snapshot holds a command line")
	}

	if os.Geteuid() != 0 {
		t.Skip("dropping CAP_IPC_LOCK from a root child needs root")
	}
	cmd, _ = startQEMULike(t, "65536", "65536", "setpriv", "--bounding-set=-ipc_lock", "--")
	m = ReadMemlock(root, nil, nil, MemlockRequest{PID: cmd.Process.Pid, Guest: u64(4 << 30)})
	if m.CapIPCLock != No || m.Exempt != No || m.Limit == nil || m.Limit.Soft != 65536 || m.BelowCharged != Yes ||
		!strings.Contains(explain(m), "ENOMEM") || m.Guest.From != "given" {
		t.Errorf("without CAP_IPC_LOCK: cap %v exempt %v limit %+v\n%s", m.CapIPCLock, m.Exempt, m.Limit, explain(m))
	}
}

// A process that is not QEMU gets no guest size from its command line.
func TestMemlockLiveNotQEMU(t *testing.T) {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	for i := 0; i < 500; i++ {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(child.Process.Pid) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x00") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := ReadMemlock(hostfs.MustNew("/"), nil, nil, MemlockRequest{PID: child.Process.Pid})
	if m.Guest.Known || !strings.Contains(m.Guest.Why, "is not QEMU") || m.Limit == nil {
		t.Errorf("%+v", m.Guest)
	}
}

// BenchmarkVFIO is the in-process cost of the VFIO readers: ReadVFIO on
// the largest fixture (68 functions, 28 on vfio-pci, 28 group nodes),
// FindHolders over this machine's /proc, and ReadMemlock of the fixture's
// QEMU (its fds, two devices' resource files).
func BenchmarkVFIO(b *testing.B) {
	root := hostfs.MustNew(filepath.Join(hostsDir, "hgx-h100x8-vfio"))
	inv, err := pci.Scan(root)
	if err != nil {
		b.Fatal(err)
	}
	st := Read(root, inv)
	b.Run("ReadVFIO", func(b *testing.B) {
		for b.Loop() {
			if v := ReadVFIO(root, st, inv); len(v.Bindings) != 28 {
				b.Fatalf("%d bindings", len(v.Bindings))
			}
		}
	})
	b.Run("FindHolders-live", func(b *testing.B) {
		live := hostfs.MustNew("/")
		for b.Loop() {
			if s := FindHolders(live, []string{VFIOContainerPath, "/dev/vfio/1"}); s.Err != nil {
				b.Fatal(s.Err)
			}
		}
	})
	b.Run("ReadMemlock", func(b *testing.B) {
		acs := hostfs.MustNew(filepath.Join(hostsDir, "gpu4-switch-acs"))
		inv, _ := pci.Scan(acs)
		v := ReadVFIO(acs, Read(acs, inv), inv)
		g := uint64(32 << 30)
		for b.Loop() {
			if m := ReadMemlock(acs, inv, v, MemlockRequest{PID: 5150, Guest: &g}); len(m.Devices) != 2 {
				b.Fatalf("%d devices", len(m.Devices))
			}
		}
	})
}

// TestFindHoldersUnprivileged runs the scan as nobody (the test binary
// again, through setpriv): root's fd tables are refused by the kernel,
// and the scan counts them as denied instead of reporting that nobody
// holds the file this test (root) has open.
func TestFindHoldersUnprivileged(t *testing.T) {
	if target := os.Getenv("ACCEL_DOCTOR_HOLDERS_TARGET"); target != "" {
		s := FindHolders(hostfs.MustNew("/"), []string{target})
		fmt.Printf("holders=%d denied=%d complete=%v processes=%d err=%v\n", len(s.HeldBy(target)), s.Denied, s.Complete(), s.Processes, s.DeniedErr)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the scan as nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("no setpriv: %v", err)
	}
	f, err := os.CreateTemp("", "accel-doctor-held-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
		os.Args[0], "-test.run=^TestFindHoldersUnprivileged$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ACCEL_DOCTOR_HOLDERS_TARGET="+f.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("the test binary does not run as nobody here (%v): %s", err, out)
	}
	var holders, denied, processes int
	var complete bool
	line := ""
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "holders=") {
			line = l
		}
	}
	if _, err := fmt.Sscanf(line, "holders=%d denied=%d complete=%t processes=%d", &holders, &denied, &complete, &processes); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if holders != 0 || denied == 0 || complete || !strings.Contains(line, "permission denied") {
		t.Errorf("as nobody: %s", line)
	}
	t.Logf("as nobody: %s", line)
}
