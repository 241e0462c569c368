package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/opencontainers/cgroups/devices/config"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// testLock serialises the real-kernel sandbox tests across test
// processes and packages, so the leak test's census sees only its own
// sandboxes.
func testLock(t testing.TB) { testutil.LockSandboxTests(t) }

// testMounts skips unless root with the hierarchy v needs.
func testMounts(t testing.TB, v Version) *cgroup.Mounts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups and loads BPF programs")
	}
	root, err := liveRoot()
	if err != nil {
		t.Skip(err)
	}
	m, err := cgroup.ReadMounts(root)
	if err != nil {
		t.Skip(err)
	}
	if _, _, err := pickVersion(v, m); err != nil {
		t.Skipf("sandbox %s: %v", v, err)
	}
	testLock(t)
	return m
}

// testNodes mounts a tmpfs (not nodev) and makes the named nodes
// in it: "c 1:3" → <dir>/c_1_3.
func testNodes(t testing.TB, nodes ...string) (dir string, paths map[string]string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "dev")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID, "mode=755,size=64k"); err != nil {
		t.Skipf("mount tmpfs for test nodes: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	paths = map[string]string{}
	for _, n := range nodes {
		var typ byte
		var maj, min uint32
		if _, err := fmt.Sscanf(n, "%c %d:%d", &typ, &maj, &min); err != nil {
			t.Fatalf("node %q: %v", n, err)
		}
		mode := uint32(unix.S_IFCHR)
		if typ == 'b' {
			mode = unix.S_IFBLK
		}
		p := filepath.Join(dir, fmt.Sprintf("%c_%d_%d", typ, maj, min))
		if err := unix.Mknod(p, mode|0o666, int(unix.Mkdev(maj, min))); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o666)
		paths[n] = p
	}
	return dir, paths
}

// testFreeMajors checks that the majors the tests use as "no
// driver" are not registered, so an open reaches the driver lookup and
// fails with ENXIO instead of touching a real device.
func testFreeMajors(t testing.TB, char, block []uint32) {
	t.Helper()
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Skip(err)
	}
	sec := ""
	used := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "Character"):
			sec = "c"
		case strings.HasPrefix(l, "Block"):
			sec = "b"
		default:
			if f := strings.Fields(l); len(f) == 2 {
				used[sec+f[0]] = true
			}
		}
	}
	for _, m := range char {
		if used["c"+strconv.Itoa(int(m))] {
			t.Skipf("character major %d is registered here; the test needs it free", m)
		}
	}
	for _, m := range block {
		if used["b"+strconv.Itoa(int(m))] {
			t.Skipf("block major %d is registered here; the test needs it free", m)
		}
	}
}

// leftovers reports sandbox cgroups and programs still present.
func leftovers(t testing.TB, m *cgroup.Mounts, owners map[int]bool) []string {
	t.Helper()
	var left []string
	for _, d := range []string{m.DevicesV1, m.Unified} {
		if d == "" {
			continue
		}
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			pid, ok := ownerPid(e.Name())
			if !ok {
				continue
			}
			if owners == nil || owners[pid] {
				left = append(left, filepath.Join(d, e.Name()))
			}
		}
	}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			break
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		if info, err := p.Info(); err == nil && info.Name == ProgramName && info.Type == ebpf.CGroupDevice {
			left = append(left, fmt.Sprintf("BPF program %d %s", id, info.Name))
		}
		p.Close()
	}
	return left
}

func waitClean(t testing.TB, m *cgroup.Mounts, owners map[int]bool) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = leftovers(t, m, owners); len(left) == 0 {
			return
		}
	}
	t.Errorf("left behind: %q", left)
}

// TestSandboxProbeDecisions runs the sandbox with no command over several
// rule sets, on v1 and on v2, and checks every (node, access) decision the
// kernel made against cgroup.DeviceRules for that enforcer. Nodes with
// free majors give ENXIO when the cgroup lets the open through, which
// counts as allowed. (TestSandboxMatchesRunc compares with runc itself.)
func TestSandboxProbeDecisions(t *testing.T) {
	testFreeMajors(t, []uint32{60, 61, 195}, []uint32{60})
	nodes := []string{"c 1:3", "c 1:5", "c 1:7", "c 1:8", "c 60:0", "c 60:1", "c 61:0", "c 195:0", "c 195:255", "b 60:0"}
	runcLike := []string{"c *:* m", "b *:* m", "c 1:3 rwm", "c 1:8 rwm", "c 1:7 rwm", "c 1:5 rwm", "c 1:9 rwm",
		"c 136:* rwm", "c 5:2 rwm", "c 10:200 rwm", "c 195:* rwm"}
	type ruleSet struct {
		name  string
		def   Default
		allow []string
		deny  []string
		hole  bool // refused: a deny inside an earlier, wider allow
	}
	sets := []ruleSet{
		{name: "default deny plus allows", def: DefaultDeny, allow: []string{"c 1:3 rw", "c 1:5 r", "c 60:* rwm", "b 60:0 r"}},
		{name: "default allow with denies", def: DefaultAllow, deny: []string{"c 1:5 rwm", "c 60:1 w", "b *:* m", "c 195:* rw"}},
		{name: "partial", def: DefaultDeny, allow: []string{"c 1:7 r"}},
		{name: "runc default plus nvidia", def: DefaultDeny, allow: runcLike},
		{name: "later deny inside an allow", def: DefaultDeny, allow: []string{"c 60:* rw", "c 195:* rwm"},
			deny: []string{"c 60:1 w", "c 195:255 m"}, hole: true},
	}
	for _, v := range []Version{V1, V2} {
		t.Run(string(v), func(t *testing.T) {
			testMounts(t, v)
			_, paths := testNodes(t, nodes...)
			var list []string
			byPath := map[string]string{}
			for _, n := range nodes {
				list = append(list, paths[n])
				byPath[paths[n]] = n
			}
			for _, rs := range sets {
				t.Run(rs.name, func(t *testing.T) {
					var rules []config.Rule
					for _, s := range rs.allow {
						rules = append(rules, sbRule(t, s, true))
					}
					for _, s := range rs.deny {
						rules = append(rules, sbRule(t, s, false))
					}
					res, err := Run(context.Background(), Spec{Version: v, Default: rs.def, Rules: rules, Nodes: list,
						Accesses: []probe.Access{probe.Read, probe.Write, probe.ReadWrite, probe.Mknod}})
					if rs.hole {
						if err == nil || !strings.Contains(err.Error(), "cannot take access back from part of the earlier, wider") {
							t.Fatalf("accepted a rule the kernel ignores and runc refuses: %v", err)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if _, err := os.Stat(res.Cgroup); !os.IsNotExist(err) {
						t.Errorf("cgroup %s still there: %v", res.Cgroup, err)
					}
					checkApplied(t, res, rs.def, rules)
					if want := len(nodes) * 4; len(res.Probes) != want {
						t.Fatalf("%d probes, want %d", len(res.Probes), want)
					}
					checkProbes(t, res, byPath, mustPolicy(t, rs.def, rules))
				})
			}
		})
	}
}

// checkApplied checks what the result says was applied. On v1 the kernel
// shows the allow lines in a default-deny cgroup, and only "a *:* rwm"
// (with a warning) in a default-allow one.
func checkApplied(t *testing.T, res *Result, def Default, rules []config.Rule) {
	t.Helper()
	if res.Version == V2 {
		if res.Program == nil || res.Program.ID == 0 || res.Program.Tag == "" {
			t.Errorf("program not reported: %+v", res.Program)
		}
		return
	}
	if def == DefaultDeny {
		for _, r := range rules {
			if !slices.Contains(res.V1List, r.CgroupString()) {
				t.Errorf("devices.list %q lacks %q", res.V1List, r.CgroupString())
			}
		}
		return
	}
	if !slices.Equal(res.V1List, []string{"a *:* rwm"}) {
		t.Errorf("devices.list %q, want a *:* rwm", res.V1List)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "does not show the deny rules") }) {
		t.Errorf("no warning about hidden deny rules: %q", res.Warnings)
	}
}

// checkProbes compares each probe's verdict with what model decides for
// the result's mechanism; byPath gives a probed path's "c 1:3".
func checkProbes(t *testing.T, res *Result, byPath map[string]string, model *cgroup.DeviceRules) {
	t.Helper()
	enforcer := cgroup.EnforcerV2
	if res.Version == V1 {
		enforcer = cgroup.EnforcerV1
	}
	for _, p := range res.Probes {
		n := byPath[p.Node]
		if p.Baseline.Errno == unix.EPERM || p.Baseline.Errno == unix.EACCES {
			t.Fatalf("%s %s: baseline outside the sandbox failed: %+v", n, p.Access, p.Baseline)
		}
		var dev cgroup.DeviceRef
		fmt.Sscanf(n, "%c %d:%d", &dev.Type, &dev.Major, &dev.Minor)
		acc, err := cgroup.ParseAccess(string(p.Access))
		if err != nil {
			t.Fatal(err)
		}
		want := model.Decide(dev, acc, enforcer).Allowed
		if p.Verdict.Decision != probe.Allowed && p.Verdict.Decision != probe.Denied {
			t.Errorf("%s %s: undetermined: %+v", n, p.Access, p)
		} else if got := p.Verdict.Decision == probe.Allowed; got != want {
			t.Errorf("%s %s: kernel says allowed=%v (%s), rules say %v", n, p.Access, got, p.InCgroup.ErrnoName, want)
		}
	}
}

func TestSandboxCommand(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(string(v), func(t *testing.T) {
			testMounts(t, v)
			_, paths := testNodes(t, "c 1:3", "c 1:5")
			rules := []config.Rule{sbRule(t, "c 1:3 rw", true)}
			run := func(script string) (*Result, string) {
				t.Helper()
				var out bytes.Buffer
				res, err := Run(context.Background(), Spec{Version: v, Rules: rules,
					Command: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out})
				if err != nil {
					t.Fatalf("%s: %v", script, err)
				}
				if !res.Ran {
					t.Fatalf("%s: not run", script)
				}
				if _, err := os.Stat(res.Cgroup); !os.IsNotExist(err) {
					t.Errorf("cgroup %s still there: %v", res.Cgroup, err)
				}
				return res, out.String()
			}
			res, out := run("cat /proc/self/cgroup; exit 7")
			if res.ExitCode != 7 || res.Signal != "" {
				t.Errorf("exit %d signal %q, want 7", res.ExitCode, res.Signal)
			}
			if !strings.Contains(out, "/"+filepath.Base(res.Cgroup)+"\n") {
				t.Errorf("command not in %s:\n%s", res.Cgroup, out)
			}
			if strings.Contains(out, "ACCEL_DOCTOR_SANDBOX_") {
				t.Errorf("trampoline variables leaked")
			}
			if res, out := run("exec 3<" + paths["c 1:3"] + " 4>" + paths["c 1:3"]); res.ExitCode != 0 {
				t.Errorf("allowed node: exit %d: %s", res.ExitCode, out)
			}
			if res, out := run("exec 3<" + paths["c 1:5"]); res.ExitCode == 0 || !strings.Contains(out, "not permitted") {
				t.Errorf("denied node: exit %d: %s", res.ExitCode, out)
			}
			if res, _ := run("kill -9 $$"); res.ExitCode != -1 || res.Signal != "SIGKILL" {
				t.Errorf("killed command: exit %d signal %q", res.ExitCode, res.Signal)
			}
			if res, _ := run("env | grep -c ACCEL_DOCTOR_SANDBOX_; true"); res.ExitCode != 0 {
				t.Errorf("exit %d", res.ExitCode)
			}
			if _, err := Run(context.Background(), Spec{Version: v, Command: []string{"/nonexistent/cmd"}}); err == nil {
				t.Error("missing command: no error")
			}
		})
	}
}

// TestSandboxCancel cancels the context while the command and a child of
// it run: Run returns, the command was passed SIGTERM (a cancel that
// names no signal), both processes are dead, nothing is left.
func TestSandboxCancel(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(string(v), func(t *testing.T) {
			m := testMounts(t, v)
			ctx, cancel := context.WithCancel(context.Background())
			var out bytes.Buffer
			pidFile := filepath.Join(t.TempDir(), "pids")
			go func() {
				// Wait for both sleeps to exist, then cancel.
				for i := 0; i < 500; i++ {
					if b, _ := os.ReadFile(pidFile); strings.Count(string(b), "\n") >= 1 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				cancel()
			}()
			start := time.Now()
			res, err := Run(ctx, Spec{Version: v, Default: DefaultAllow,
				Command: []string{"sh", "-c", "sleep 60 & echo $! > " + pidFile + "; sleep 60"}, Stdout: &out, Stderr: &out})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			// The background sleep holds the output pipe; the command's
			// exit ends the sandbox all the same, not the grace period.
			if d := time.Since(start); d >= DefaultStopGrace {
				t.Errorf("took %v: the child holding the output held the sandbox", d)
			}
			if res == nil || !res.Ran || res.Signal != "SIGTERM" {
				t.Errorf("result %+v: want the command ended by the SIGTERM passed on", res)
			}
			b, _ := os.ReadFile(pidFile)
			bg, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if bg <= 0 {
				t.Fatalf("no background pid: %q", b)
			}
			for i := 0; ; i++ {
				st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", bg))
				// Gone, or a zombie waiting for init to reap it.
				if err != nil || strings.Contains(string(st), ") Z ") {
					break
				}
				if i > 200 {
					t.Fatalf("background child %d still alive: %s", bg, st)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := os.Stat(res.Cgroup); !os.IsNotExist(err) {
				t.Errorf("cgroup %s still there: %v", res.Cgroup, err)
			}
			waitClean(t, m, map[int]bool{os.Getpid(): true})
		})
	}
}

// sigCause is a cancel cause that names a signal, as internal/cli's
// Interrupted does.
type sigCause syscall.Signal

func (s sigCause) Error() string          { return "interrupted by " + unix.SignalName(syscall.Signal(s)) }
func (s sigCause) Signal() syscall.Signal { return syscall.Signal(s) }

// TestSandboxStopGrace: the signal named by the context's cause is passed
// on to the command; one that handles it (a trap that writes a marker and
// exits 0) ends in its own time, within the grace period; one that ignores
// it is killed when the grace period ends. Either way the cgroup is gone.
func TestSandboxStopGrace(t *testing.T) {
	const grace = 400 * time.Millisecond
	for _, v := range []Version{V1, V2} {
		for _, c := range []struct {
			name, script string
			sig          syscall.Signal
			want         string // Result.Signal; "" for an exit
			code         int
			marker       bool
		}{
			{"handled", "trap 'echo caught > MARK; exit 0' INT; echo ready; while :; do sleep 0.05; done", syscall.SIGINT, "", 0, true},
			{"ignored", "trap '' TERM; echo ready; exec sleep 60", syscall.SIGTERM, "SIGKILL", -1, false},
		} {
			t.Run(string(v)+"/"+c.name, func(t *testing.T) {
				m := testMounts(t, v)
				mark := filepath.Join(t.TempDir(), "mark")
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				sent := make(chan time.Time, 1)
				go func() {
					// The command is running (and has set its trap): stop it.
					bufio.NewReader(r).ReadString('\n')
					sent <- time.Now()
					cancel(sigCause(c.sig))
				}()
				res, err := Run(ctx, Spec{Version: v, Default: DefaultAllow, StopGrace: grace,
					Command: []string{"sh", "-c", strings.ReplaceAll(c.script, "MARK", mark)}, Stdout: w})
				w.Close()
				took := time.Since(<-sent)
				if !errors.Is(err, context.Canceled) && !errors.As(err, new(sigCause)) {
					t.Errorf("err = %v, want the interruption", err)
				}
				if res == nil || !res.Ran || res.Signal != c.want || res.ExitCode != c.code {
					t.Fatalf("result %+v: want signal %q, exit %d", res, c.want, c.code)
				}
				_, merr := os.Stat(mark)
				if (merr == nil) != c.marker {
					t.Errorf("marker written: %v, want %v", merr == nil, c.marker)
				}
				if c.want == "SIGKILL" && took < grace {
					t.Errorf("killed %v after the signal, before the %v grace period", took, grace)
				}
				if c.want == "" && took >= grace {
					t.Errorf("a command that handled the signal took %v, the whole grace period", took)
				}
				if _, err := os.Stat(res.Cgroup); !os.IsNotExist(err) {
					t.Errorf("cgroup %s still there: %v", res.Cgroup, err)
				}
				waitClean(t, m, map[int]bool{os.Getpid(): true})
			})
		}
	}
}

func TestSandboxSweep(t *testing.T) {
	m := testMounts(t, Auto)
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	dead := c.Process.Pid
	var made []string
	mk := func(parent, name string) string {
		p := filepath.Join(parent, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
		return p
	}
	t.Cleanup(func() {
		for _, p := range made {
			os.Remove(p)
		}
	})
	var stale, kept []string
	for _, d := range []string{m.DevicesV1, m.Unified} {
		if d == "" {
			continue
		}
		stale = append(stale, mk(d, fmt.Sprintf("accel-doctor-sandbox-%d-0123456789abcdef", dead)))
		kept = append(kept, mk(d, "accel-doctor-sandbox-1-0123456789abcdef"))                       // owner alive
		kept = append(kept, mk(d, fmt.Sprintf("accel-doctor-sandbox-%d-xyz", dead)))                // not our pattern
		kept = append(kept, mk(d, fmt.Sprintf("accel-doctor-probetest-%d-0123456789abcdef", dead))) // other prefix
	}
	if errs := Sweep(m); len(errs) != 0 {
		t.Errorf("sweep errors: %v", errs)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stale %s not removed: %v", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

// testHelperEnv makes the test binary a process that runs one
// sandbox and is killed by TestSandboxLeak.
const testHelperEnv = "ACCEL_DOCTOR_SANDBOX_TEST_HELPER"

// testHelper runs one sandbox the way cmd/accel-doctor does: with a
// signal context. The argument is "v1:sleep 0.3", "v2:probe:/path", ...
func testHelper() int {
	v, what, _ := strings.Cut(os.Getenv(testHelperEnv), ":")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec := Spec{Version: Version(v), Default: DefaultDeny,
		Rules: []config.Rule{{Type: 'c', Major: 1, Minor: 3, Permissions: "rw", Allow: true}}}
	if p, ok := strings.CutPrefix(what, "probe:"); ok {
		spec.Nodes = []string{p}
	} else {
		spec.Command = strings.Fields(what)
	}
	_, err := Run(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSandboxLeak runs the sandbox 30 times in a child process and kills
// the child process, the command inside the sandbox, or neither, at random
// moments with SIGKILL, SIGTERM or SIGINT. Afterwards no sandbox cgroup of
// those children may remain in either hierarchy, and no program named
// ProgramName may exist.
func TestSandboxLeak(t *testing.T) {
	m := testMounts(t, Auto)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var versions []Version
	for _, v := range []Version{V1, V2} {
		if _, _, err := pickVersion(v, m); err == nil {
			versions = append(versions, v)
		}
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	owners := map[int]bool{}
	n := 30
	if testing.Short() {
		n = 8
	}
	for i := 0; i < n; i++ {
		v := versions[rng.IntN(len(versions))]
		what := "sleep 0.3"
		if rng.IntN(4) == 0 {
			what = "probe:/dev/null"
		}
		c := exec.Command(self)
		c.Env = append(os.Environ(), testHelperEnv+"="+string(v)+":"+what)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		pid := c.Process.Pid
		owners[pid] = true
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		action := rng.IntN(5)
		switch action {
		case 0:
			c.Process.Signal(syscall.SIGKILL)
		case 1:
			c.Process.Signal(syscall.SIGTERM)
		case 2:
			c.Process.Signal(syscall.SIGINT)
		case 3:
			// Kill the command inside the sandbox, if it is there yet.
			for _, d := range []string{m.DevicesV1, m.Unified} {
				matches, _ := filepath.Glob(filepath.Join(d, fmt.Sprintf("%s%d-*", NamePrefix, pid)))
				for _, cg := range matches {
					for _, p := range cgroupPids(cg) {
						unix.Kill(p, unix.SIGKILL)
					}
				}
			}
		case 4:
			// Let it finish.
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			c.Process.Kill()
			<-done
			t.Errorf("run %d (%s %s, action %d): helper hung", i, v, what, action)
		}
	}
	waitClean(t, m, owners)
}

// TestSandboxReaperAfterSIGKILL is the worst case on its own: the owner
// dies by SIGKILL while the command runs; its reaper must kill the command
// and remove the cgroup.
func TestSandboxReaperAfterSIGKILL(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(string(v), func(t *testing.T) {
			m := testMounts(t, v)
			self, _ := os.Executable()
			c := exec.Command(self)
			c.Env = append(os.Environ(), testHelperEnv+"="+string(v)+":sleep 60")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pid := c.Process.Pid
			var cmdPids []int
			for i := 0; i < 500 && len(cmdPids) == 0; i++ {
				time.Sleep(10 * time.Millisecond)
				for _, d := range []string{m.DevicesV1, m.Unified} {
					matches, _ := filepath.Glob(filepath.Join(d, fmt.Sprintf("%s%d-*", NamePrefix, pid)))
					for _, cg := range matches {
						cmdPids = append(cmdPids, cgroupPids(cg)...)
					}
				}
			}
			if len(cmdPids) == 0 {
				c.Process.Kill()
				c.Wait()
				t.Fatal("command never showed up in a sandbox cgroup")
			}
			c.Process.Kill()
			c.Wait()
			waitClean(t, m, map[int]bool{pid: true})
			for _, p := range cmdPids {
				st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
				if err == nil && !strings.Contains(string(st), ") Z ") {
					t.Errorf("command %d survived its sandbox: %s", p, st)
				}
			}
		})
	}
}

func TestSandboxSpecErrors(t *testing.T) {
	for name, spec := range map[string]Spec{
		"bad default": {Default: "maybe"},
		"bad rule":    {Rules: []config.Rule{{Type: 'x', Permissions: "r"}}},
		"bad perms":   {Rules: []config.Rule{{Type: 'c', Major: 1, Minor: 3, Permissions: "q"}}},
		"bad access":  {Accesses: []probe.Access{"x"}},
		"bad version": {Version: "v3"},
	} {
		if _, err := Run(context.Background(), spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// BenchmarkSandboxNoCmd is the sandbox with no command, probing one node
// for read inside and outside; compare with BenchmarkSandboxTrue, a plain
// fork and exec of true. The goal is ≤ 20 ms more.
func BenchmarkSandboxNoCmd(b *testing.B) {
	for _, v := range []Version{V1, V2} {
		b.Run(string(v), func(b *testing.B) {
			testMounts(b, v)
			spec := Spec{Version: v, Rules: []config.Rule{{Type: 'c', Major: 1, Minor: 3, Permissions: "rw", Allow: true}},
				Nodes: []string{"/dev/null"}, Accesses: []probe.Access{probe.Read}}
			for b.Loop() {
				if _, err := Run(context.Background(), spec); err != nil {
					b.Fatal(err)
				}
				// Let the finished run's reaper (a process that reads "done"
				// and exits) get out of the way, as it does after a single
				// accel-doctor run: on a 2-CPU machine back-to-back runs
				// would otherwise measure the reapers' start-up too.
				b.StopTimer()
				time.Sleep(20 * time.Millisecond)
				b.StartTimer()
			}
		})
	}
}

func BenchmarkSandboxTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSandboxResultJSON keeps the result's JSON form readable: the CLI prints it.
func TestSandboxResultJSON(t *testing.T) {
	r := Result{Version: V2, Program: &Program{ID: 7, Tag: "ab", Name: ProgramName},
		Rules: []config.Rule{{Type: 'c', Major: 1, Minor: 3, Permissions: "r", Allow: true}}, RuleLines: []string{"allow c 1:3 r"}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"rules":["allow c 1:3 r"]`) {
		t.Errorf("rules not written as text: %s", b)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.Program.ID != 7 {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestSandboxOwner(t *testing.T) {
	for name, want := range map[string]int{
		"accel-doctor-sandbox-1234-0123456789abcdef": 1234,
		"accel-doctor-sandbox-1-ffffffffffffffff":    1,
	} {
		if pid, ok := ownerPid(name); !ok || pid != want {
			t.Errorf("%s: %d %v, want %d", name, pid, ok, want)
		}
	}
	for _, name := range []string{
		"accel-doctor-sandbox-1234-0123456789abcde",   // 15 hex digits
		"accel-doctor-sandbox-1234-0123456789abcdeF",  // upper case
		"accel-doctor-sandbox--0123456789abcdef",      // no pid
		"accel-doctor-sandbox-12a4-0123456789abcdef",  // not a number
		"accel-doctor-test-1234-0123456789abcdef",     // another prefix
		"xaccel-doctor-sandbox-1234-0123456789abcdef", // not at the start
		"accel-doctor-sandbox-1234-0123456789abcdef-x",
		"system.slice",
	} {
		if _, ok := ownerPid(name); ok {
			t.Errorf("%q taken for a sandbox", name)
		}
	}
}
