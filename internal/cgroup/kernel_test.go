package cgroup

// Real-kernel equivalence tests: the v1 evaluator's and the interpreter's
// decisions must equal what the kernel does to a real process in a cgroup
// we make (EPERM or not). They need root and the controllers; they skip
// with the reason otherwise. Each test makes uniquely named cgroups and
// removes them in t.Cleanup.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/opencontainers/cgroups"
	_ "github.com/opencontainers/cgroups/devices" // registers cgroups.DevicesSetV1/V2: runc's own writers
	"github.com/opencontainers/cgroups/devices/config"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const (
	helperEnv      = "ACCEL_DOCTOR_CGTEST_HELPER"
	helperProcsEnv = "ACCEL_DOCTOR_CGTEST_PROCS"
	helperReqEnv   = "ACCEL_DOCTOR_CGTEST_REQ"
	helperMarker   = "CGTEST-RESULT:"
)

// probeReq is one operation the helper performs inside the cgroup.
type probeReq struct {
	Path string    `json:"path"`
	Dev  DeviceRef `json:"dev"`
	Acc  Access    `json:"acc"` // r, w, rw (open flags) or m (mknod)
}

// TestHelperProcess is not a test: the real-kernel tests re-exec the test
// binary with helperEnv set to run it as the process inside the cgroup.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process of the real-kernel tests; runs only when re-executed by them")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	if procs := os.Getenv(helperProcsEnv); procs != "" {
		// cgroup v1: join the cgroup before doing anything.
		if err := os.WriteFile(procs, []byte(fmt.Sprint(os.Getpid())), 0); err != nil {
			fail(err)
		}
	}
	var reqs []probeReq
	if err := json.Unmarshal([]byte(os.Getenv(helperReqEnv)), &reqs); err != nil {
		fail(err)
	}
	errnos := make([]int, len(reqs))
	for i, r := range reqs {
		errnos[i] = int(doProbe(r, i))
	}
	b, _ := json.Marshal(errnos)
	fmt.Printf("%s%s\n", helperMarker, b)
	// Stay in the cgroup until the parent has read /proc/PID/cgroup.
	var buf [1]byte
	os.Stdin.Read(buf[:])
	os.Exit(0)
}

func doProbe(r probeReq, i int) unix.Errno {
	var err error
	switch r.Acc {
	case AccessMknod:
		mode := uint32(unix.S_IFCHR)
		if r.Dev.Type == 'b' {
			mode = unix.S_IFBLK
		}
		p := fmt.Sprintf("%s.mknod%d", r.Path, i)
		err = unix.Mknod(p, mode|0o600, int(unix.Mkdev(r.Dev.Major, r.Dev.Minor)))
		if err == nil {
			unix.Unlink(p)
		}
	default:
		flags := unix.O_RDONLY
		switch r.Acc {
		case AccessWrite:
			flags = unix.O_WRONLY
		case AccessRead | AccessWrite:
			flags = unix.O_RDWR
		}
		var fd int
		fd, err = unix.Open(r.Path, flags|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	if err != nil {
		return unix.EINVAL
	}
	return 0
}

type testNode struct {
	dev  DeviceRef
	accs []Access // which operations to try; writes only where harmless
}

// testNodes are made with mknod in a temp dir. Nothing is ever written
// through them: an open is closed at once. Majors without a driver here
// (195 nvidia, block 42) give ENXIO, which the cgroup allowed.
var testNodes = func() []testNode {
	all := []Access{AccessRead, AccessWrite, AccessRead | AccessWrite, AccessMknod}
	var out []testNode
	for _, d := range []DeviceRef{
		{'c', 1, 3}, {'c', 1, 5}, {'c', 1, 7}, {'c', 1, 8}, {'c', 1, 9},
		{'c', 5, 0}, {'c', 5, 2}, {'c', 10, 200}, {'c', 136, 200},
		{'c', 195, 0}, {'c', 195, 255}, {'b', 42, 0},
	} {
		out = append(out, testNode{dev: d, accs: all})
	}
	// loop0: read and mknod only; never open a block device for write.
	out = append(out, testNode{dev: DeviceRef{'b', 7, 0}, accs: []Access{AccessRead, AccessMknod}})
	return out
}()

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("real-kernel test needs root (cgroups, mknod, BPF)")
	}
	if os.Getenv(helperEnv) == "1" {
		t.Skip("inside the helper process")
	}
}

func testMounts(t *testing.T) *Mounts {
	t.Helper()
	m, err := ReadMounts(hostfs.MustNew("/"))
	if err != nil {
		t.Skipf("cannot read mountinfo: %v", err)
	}
	return m
}

// makeCgroup: see testutil.TestCgroup.
func makeCgroup(t *testing.T, mount string) string { return testutil.TestCgroup(t, mount) }

func makeNodes(t *testing.T) map[DeviceRef]string {
	t.Helper()
	dir := t.TempDir()
	paths := map[DeviceRef]string{}
	for _, n := range testNodes {
		mode := uint32(unix.S_IFCHR)
		if n.dev.Type == 'b' {
			mode = unix.S_IFBLK
		}
		p := filepath.Join(dir, fmt.Sprintf("%c%d_%d", n.dev.Type, n.dev.Major, n.dev.Minor))
		if err := unix.Mknod(p, mode|0o666, int(unix.Mkdev(n.dev.Major, n.dev.Minor))); err != nil {
			t.Skipf("mknod %s: %v (the test needs CAP_MKNOD and a temp dir without nodev)", p, err)
		}
		paths[n.dev] = p
	}
	return paths
}

// kernelRun starts the helper in a cgroup (v1: it joins procs itself; v2:
// clone3 CLONE_INTO_CGROUP with cgFD), lets it try every request, then
// calls inside(pid) while it is still in the cgroup.
func kernelRun(t *testing.T, v1Procs string, cgFD int, reqs []probeReq, inside func(pid int)) []unix.Errno {
	t.Helper()
	b, _ := json.Marshal(reqs)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperReqEnv+"="+string(b), helperProcsEnv+"="+v1Procs)
	cmd.Stderr = os.Stderr
	if cgFD >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgFD}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, helperMarker) {
			continue
		}
		var errnos []int
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, helperMarker)), &errnos); err != nil {
			t.Fatalf("helper output %q: %v", line, err)
		}
		if inside != nil {
			inside(cmd.Process.Pid)
		}
		out := make([]unix.Errno, len(errnos))
		for i, e := range errnos {
			out[i] = unix.Errno(e)
		}
		return out
	}
	t.Fatalf("helper gave no result (scan error %v)", sc.Err())
	return nil
}

func requests(paths map[DeviceRef]string) []probeReq {
	var reqs []probeReq
	for _, n := range testNodes {
		for _, a := range n.accs {
			reqs = append(reqs, probeReq{Path: paths[n.dev], Dev: n.dev, Acc: a})
		}
	}
	return reqs
}

// compareKernel checks that eval's decision equals the kernel's errno for
// every request. wantKnown false: eval must say undecided for every one.
func compareKernel(t *testing.T, reqs []probeReq, errnos []unix.Errno, eval func(DeviceRef, Access) Decision, wantKnown bool) {
	t.Helper()
	if len(errnos) != len(reqs) {
		t.Fatalf("helper answered %d of %d requests", len(errnos), len(reqs))
	}
	denied := 0
	for i, r := range reqs {
		kernelAllowed := errnos[i] != unix.EPERM
		if !kernelAllowed {
			denied++
		}
		d := eval(r.Dev, r.Acc)
		switch {
		case !wantKnown && d.Known:
			t.Errorf("%s %s: evaluator decided (allowed=%v by %q); want undecided", r.Dev, r.Acc, d.Allowed, d.DecidedBy)
		case !wantKnown:
		case !d.Known:
			t.Errorf("%s %s: evaluator undecided (%s); kernel errno %v", r.Dev, r.Acc, d.Reason, errnos[i])
		case d.Allowed != kernelAllowed:
			t.Errorf("%s %s: evaluator allowed=%v (%s), kernel errno %d (%v)", r.Dev, r.Acc, d.Allowed, d.DecidedBy, errnos[i], errnos[i])
		}
		if testing.Verbose() {
			t.Logf("%-12s %-3s kernel=%-24v eval known=%v allowed=%v by %s", r.Dev, r.Acc, errnoName(errnos[i]), d.Known, d.Allowed, d.DecidedBy)
		}
	}
	if denied == 0 || denied == len(reqs) {
		t.Errorf("kernel denied %d of %d requests: the rule set does not separate allowed from denied", denied, len(reqs))
	}
}

func errnoName(e unix.Errno) string {
	if e == 0 {
		return "ok"
	}
	return unix.ErrnoName(e)
}

func rule(typ byte, major, minor int64, perms string) *config.Rule {
	return &config.Rule{Type: config.Type(typ), Major: major, Minor: minor, Permissions: config.Permissions(perms), Allow: true}
}

const wc = config.Wildcard

type ruleSet struct {
	name string
	// rules is the allow-list applied from deny-all (v1 by writing the
	// files, v2 through runc's program generator).
	rules []*config.Rule
	// runcV1 applies the v1 rules with runc's own writer.
	runcV1 bool
}

var ruleSets = []ruleSet{
	{name: "deny-default-allow-few", rules: []*config.Rule{
		rule('c', 1, 3, "rwm"), rule('c', 1, 5, "rw"), rule('c', 195, wc, "rwm"),
		rule('b', 7, 0, "r"), rule('b', wc, wc, "m"), rule('c', 1, wc, "r"), rule('c', 1, 9, "w"),
	}},
	{name: "partial-c-1-7-r", rules: []*config.Rule{rule('c', 1, 7, "r")}},
	{name: "runc-default-plus-nvidia", runcV1: true, rules: []*config.Rule{
		rule('c', wc, wc, "m"), rule('b', wc, wc, "m"),
		rule('c', 1, 3, "rwm"), rule('c', 1, 8, "rwm"), rule('c', 1, 7, "rwm"), rule('c', 5, 0, "rwm"),
		rule('c', 1, 5, "rwm"), rule('c', 1, 9, "rwm"), rule('c', 136, wc, "rwm"), rule('c', 5, 2, "rwm"),
		rule('c', 10, 200, "rwm"), rule('c', 195, wc, "rwm"),
	}},
}

func writeCgroupFile(t *testing.T, dir, file, line string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(line), 0); err != nil {
		t.Fatalf("write %q to %s/%s: %v", line, dir, file, err)
	}
}

func TestKernelV1Equivalence(t *testing.T) {
	requireRoot(t)
	m := testMounts(t)
	if m.DevicesV1 == "" {
		t.Skip("the v1 devices controller is not mounted on this host")
	}
	root := hostfs.MustNew("/")
	if m.Unified != "" {
		// The helper stays in our cgroup2 cgroup: device programs there
		// would also act on it.
		own, err := ReadProcCgroup(root, os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		up, _ := UnifiedPath(own)
		if dir, err := m.UnifiedDir(up); err == nil {
			if p, err := ReadV2(root, dir); err == nil && len(p.Programs) > 0 {
				t.Skipf("this process's cgroup2 cgroup %s has device programs; they would mix with the v1 result", dir)
			}
		}
	}
	paths := makeNodes(t)
	reqs := requests(paths)

	for _, rs := range ruleSets {
		t.Run(rs.name, func(t *testing.T) {
			dir := makeCgroup(t, m.DevicesV1)
			if rs.runcV1 {
				if err := cgroups.DevicesSetV1(dir, &cgroups.Resources{Devices: rs.rules}); err != nil {
					t.Fatalf("runc's DevicesSetV1: %v", err)
				}
			} else {
				writeCgroupFile(t, dir, "devices.deny", "a")
				for _, r := range rs.rules {
					writeCgroupFile(t, dir, "devices.allow", r.CgroupString())
				}
			}
			var pol *Policy
			errnos := kernelRun(t, filepath.Join(dir, "cgroup.procs"), -1, reqs, func(pid int) {
				var err error
				pol, err = ReadPolicy(root, Target{PID: pid})
				if err != nil {
					t.Fatalf("ReadPolicy(pid %d): %v", pid, err)
				}
			})
			if pol.V1 == nil {
				t.Fatalf("no v1 policy: %v", pol.V1Err)
			}
			if got := pol.V1.Levels[0].Dir; got != dir {
				t.Errorf("policy of the helper's pid reads %s, want %s", got, dir)
			}
			compareKernel(t, reqs, errnos, pol.V1.Evaluate, true)
		})
	}

	t.Run("default-allow-with-denies", func(t *testing.T) {
		dir := makeCgroup(t, m.DevicesV1)
		// A new cgroup under the (default-allow) root is default-allow.
		for _, l := range []string{"c 1:9 rwm", "c 195:0 w", "b 42:* m"} {
			writeCgroupFile(t, dir, "devices.deny", l)
		}
		p, err := ReadV1(root, m.DevicesV1, dir)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Levels[0].DefaultAllow {
			t.Skipf("%s is not default-allow (its parent denies by default)", dir)
		}
		errnos := kernelRun(t, filepath.Join(dir, "cgroup.procs"), -1, reqs, nil)
		compareKernel(t, reqs, errnos, p.Evaluate, false)
		// The denies really act, so "undecided" hid something real.
		for i, r := range reqs {
			if r.Dev == (DeviceRef{'c', 1, 9}) && errnos[i] != unix.EPERM {
				t.Errorf("kernel allowed %s %s despite the deny rule (errno %v)", r.Dev, r.Acc, errnos[i])
			}
		}
	})
}

// denySomeProgram is our own hand-assembled default-allow program that
// denies c 1:9 (all), c 195:0 w and b 42:* m. It uses what xlated code may
// hold beyond runc's shape: a copy of the context pointer, narrow context
// loads, a stack spill, JMP32, JSET, a register compare, ld_imm64, ALU32
// AND and XOR, shifts.
func denySomeProgram() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, 0, asm.Byte), // type: low byte of access_type
		asm.LoadMem(asm.R3, asm.R6, 2, asm.Half), // access: high half
		asm.LoadMem(asm.R4, asm.R6, 4, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R4, asm.Word),
		asm.LoadMem(asm.R5, asm.R6, 8, asm.Word),
		asm.Mov.Imm(asm.R4, 0),
		asm.LoadMem(asm.R4, asm.RFP, -8, asm.Word),
		// c 1:9 -> deny
		asm.JNE.Imm32(asm.R2, 2, "rule2"),
		asm.Mov.Reg(asm.R7, asm.R4),
		asm.LSh.Imm(asm.R7, 32),
		asm.ArSh.Imm(asm.R7, 32),
		asm.JNE.Imm(asm.R7, 1, "rule2"),
		asm.Mov.Reg(asm.R0, asm.R5),
		asm.Xor.Imm32(asm.R0, 9),
		asm.JEq.Imm(asm.R0, 0, "deny"),
		// c 195:0 w -> deny
		asm.JNE.Imm(asm.R2, 2, "rule3").WithSymbol("rule2"),
		asm.JNE.Imm(asm.R4, 195, "rule3"),
		asm.JNE.Imm(asm.R5, 0, "rule3"),
		asm.JSet.Imm(asm.R3, 4, "deny"),
		// b 42:* m -> deny
		asm.Mov.Imm(asm.R8, 1).WithSymbol("rule3"),
		asm.JNE.Reg(asm.R2, asm.R8, "allow"),
		asm.LoadImm(asm.R9, 42, asm.DWord),
		asm.JNE.Reg(asm.R4, asm.R9, "allow"),
		asm.And.Imm32(asm.R3, 1),
		asm.JEq.Imm32(asm.R3, 0, "allow"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("deny"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("allow"),
		asm.Return(),
	}
}

func TestKernelV2Equivalence(t *testing.T) {
	requireRoot(t)
	m := testMounts(t)
	if m.Unified == "" {
		t.Skip("no cgroup2 hierarchy is mounted on this host")
	}
	root := hostfs.MustNew("/")
	paths := makeNodes(t)
	reqs := requests(paths)

	type setup struct {
		name   string
		attach func(t *testing.T, dir string)
		// pre, when set, are the instructions before loading: the
		// interpreter must agree on them too.
		pre asm.Instructions
	}
	var sets []setup
	for _, rs := range ruleSets {
		sets = append(sets, setup{name: rs.name, attach: func(t *testing.T, dir string) {
			// runc's own program generator and loader.
			if err := cgroups.DevicesSetV2(dir, &cgroups.Resources{Devices: rs.rules}); err != nil {
				t.Fatalf("runc's DevicesSetV2: %v", err)
			}
		}})
	}
	sets = append(sets, setup{name: "default-allow-with-denies", pre: denySomeProgram(), attach: func(t *testing.T, dir string) {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "adoc_test_deny", Type: ebpf.CGroupDevice, License: "Apache-2.0", Instructions: denySomeProgram()})
		if err != nil {
			t.Fatalf("load program: %v", err)
		}
		t.Cleanup(func() { prog.Close() })
		l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: ebpf.AttachCGroupDevice, Program: prog})
		if err != nil {
			t.Fatalf("attach program: %v", err)
		}
		t.Cleanup(func() { l.Close() })
	}})

	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			dir := makeCgroup(t, m.Unified)
			s.attach(t, dir)
			fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			var pol *Policy
			errnos := kernelRun(t, "", fd, reqs, func(pid int) {
				var err error
				pol, err = ReadPolicy(root, Target{PID: pid})
				if err != nil {
					t.Fatalf("ReadPolicy(pid %d): %v", pid, err)
				}
			})
			if pol.V2 == nil {
				t.Fatalf("no v2 policy: %v", pol.V2Err)
			}
			if pol.V2.Dir != dir {
				t.Errorf("policy of the helper's pid reads %s, want %s", pol.V2.Dir, dir)
			}
			if len(pol.V2.Programs) == 0 {
				t.Fatalf("no effective program read back from %s", dir)
			}
			for _, p := range pol.V2.Programs {
				t.Logf("effective: prog id %d name %q tag %s, %d insns", p.ID, p.Name, p.Tag, len(p.Insns))
			}
			compareKernel(t, reqs, errnos, pol.V2.Evaluate, true)
			if s.pre != nil {
				pre := &V2Policy{Dir: dir, Programs: []*V2Program{NewV2Program(0, "pre-load", s.pre)}}
				compareKernel(t, reqs, errnos, pre.Evaluate, true)
			}
		})
	}
}
