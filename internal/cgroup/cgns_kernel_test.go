package cgroup

// Real-kernel tests of cgroup-namespace resolution. A target is started
// with `unshare -C` in a test cgroup y; a reader (this test binary,
// re-executed) runs under `unshare -C` in a sibling cgroup z, so that the
// kernel shows it the target as "/../y". Every cgroup is made by the test
// and removed at its end; only processes the test starts are moved.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

const (
	cgnsHelperEnv = "ACCEL_DOCTOR_CGNS_HELPER"
	cgnsPIDEnv    = "ACCEL_DOCTOR_CGNS_PID"
	cgnsSnapEnv   = "ACCEL_DOCTOR_CGNS_SNAPSHOT"
	cgnsRootEnv   = "ACCEL_DOCTOR_CGNS_ROOT" // a directory to rbind "/" at and read through
	cgnsMarker    = "CGNS-RESULT:"
)

// cgnsView is what one reader concluded about a target.
type cgnsView struct {
	Err                     string
	Source                  string
	V1Path, V1Shown, V1Dir  string
	V2Path, V2Shown, V2Dir  string
	V1Err, V2Err            string
	Resolved                string
	Programs                []string          // names of the v2 programs read
	Decisions               map[string]string // "c 1:9 rw" -> "v1 allow, v2 deny"
	SelfV2Path, SelfV2Shown string            // the reader judging itself
}

var cgnsDevices = []DeviceRef{{'c', 1, 3}, {'c', 1, 5}, {'c', 1, 9}, {'c', 195, 0}}

func viewOf(p *Policy, err error) cgnsView {
	if err != nil {
		return cgnsView{Err: err.Error()}
	}
	v := cgnsView{Source: p.Mounts.Source, V1Path: p.V1Path, V1Shown: p.V1Shown, V1Dir: p.V1Dir,
		V2Path: p.V2Path, V2Shown: p.V2Shown, V2Dir: p.V2Dir, Resolved: p.Resolved, Decisions: map[string]string{}}
	if p.V1Err != nil {
		v.V1Err = p.V1Err.Error()
	}
	if p.V2Err != nil {
		v.V2Err = p.V2Err.Error()
	}
	if p.V2 != nil {
		for _, pr := range p.V2.Programs {
			v.Programs = append(v.Programs, strings.TrimSuffix(pr.Name, " (captured)"))
		}
	}
	word := func(d *Decision) string {
		switch {
		case d == nil:
			return "n/a"
		case !d.Known:
			return "?"
		case d.Allowed:
			return "allow"
		}
		return "deny"
	}
	for _, dev := range cgnsDevices {
		for _, acc := range []Access{AccessRead, AccessWrite, AccessRead | AccessWrite} {
			w := p.Evaluate(dev, acc).Whole
			v.Decisions[fmt.Sprintf("%c %d:%d %s", dev.Type, dev.Major, dev.Minor, acc)] = "v1 " + word(w.V1) + ", v2 " + word(w.V2)
		}
	}
	return v
}

// TestCgnsReaderHelper is not a test: the namespace tests re-execute the
// test binary inside `unshare -C` to run it as the reader.
func TestCgnsReaderHelper(t *testing.T) {
	if os.Getenv(cgnsHelperEnv) != "1" {
		t.Skip("reader process of the cgroup-namespace tests; runs only when re-executed by them")
	}
	pid, err := strconv.Atoi(os.Getenv(cgnsPIDEnv))
	if err != nil {
		t.Fatal(err)
	}
	dir := "/"
	if d := os.Getenv(cgnsRootEnv); d != "" {
		// The host mounted elsewhere, as /host in a pod; this process has
		// a mount namespace of its own (unshare -m), so nothing leaks.
		if err := unix.Mount("/", d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Fatalf("rbind / at %s: %v", d, err)
		}
		dir = d
	}
	root := hostfs.MustNew(dir)
	rec := root.Record()
	v := viewOf(ReadPolicy(root, Target{PID: pid}))
	if self, err := ReadPolicy(root, Target{Self: true}); err == nil {
		v.SelfV2Path, v.SelfV2Shown = self.V2Path, self.V2Shown
	}
	f, err := os.Create(os.Getenv(cgnsSnapEnv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.WriteSnapshot(rec, f, "cgns test"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, _ := json.Marshal(v)
	fmt.Printf("%s%s\n", cgnsMarker, b)
}

// cgnsHost is a test cgroup with children y (the target's; a device
// program and, on v1, device rules) and z (the reader's), in cgroup2 and,
// when mounted, the v1 devices hierarchy.
type cgnsHost struct {
	m          *Mounts
	yU, zU     string // cgroup2 directories
	yD, zD     string // v1 devices directories ("" without v1)
	progName   string
	relU, relD string // y's path in each hierarchy
}

func newCgnsHost(t *testing.T) *cgnsHost {
	t.Helper()
	requireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare(1) is not installed")
	}
	if _, err := os.Stat("/proc/self/ns/cgroup"); err != nil {
		t.Skip("the kernel has no cgroup namespaces")
	}
	m := testMounts(t)
	if m.Unified == "" {
		t.Skip("no cgroup2 hierarchy is mounted on this host")
	}
	if m.UnifiedRoot != "/" || (m.DevicesV1 != "" && m.DevicesV1Root != "/") {
		t.Skip("the test runs in a cgroup namespace or a container: it needs the whole hierarchies")
	}
	h := &cgnsHost{m: m, progName: "adoc_cgns_y"}
	parent := makeCgroup(t, m.Unified)
	h.yU = cgroupWithTestProgram(t, parent, h.progName)
	h.zU = makeCgroup(t, parent)
	h.relU = strings.TrimPrefix(h.yU, m.Unified)
	if m.DevicesV1 != "" {
		parent := makeCgroup(t, m.DevicesV1)
		h.yD, h.zD = makeCgroup(t, parent), makeCgroup(t, parent)
		h.relD = strings.TrimPrefix(h.yD, m.DevicesV1)
		for _, w := range []struct{ file, rule string }{
			{"devices.deny", "a"}, {"devices.allow", "c 1:3 rw"}, {"devices.allow", "c 195:0 rw"}, {"devices.allow", "c 1:9 rw"},
		} {
			if err := os.WriteFile(filepath.Join(h.yD, w.file), []byte(w.rule), 0); err != nil {
				t.Fatalf("%s %s: %v", w.file, w.rule, err)
			}
		}
	}
	return h
}

// procs are the cgroup.procs files a process started in y or z joins.
func (h *cgnsHost) procs(y bool) string {
	u, d := h.zU, h.zD
	if y {
		u, d = h.yU, h.yD
	}
	s := filepath.Join(u, "cgroup.procs")
	if d != "" {
		s += " " + filepath.Join(d, "cgroup.procs")
	}
	return s
}

// inCgroups is a command that puts its own shell (never another process)
// into the cgroups, then execs args.
func inCgroups(procs string, args ...string) *exec.Cmd {
	const script = `for f in $ADOC_PROCS; do echo $$ > "$f" || exit 1; done; exec "$@"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Env = append(os.Environ(), "ADOC_PROCS="+procs)
	return cmd
}

// startTarget starts `unshare -C sleep` in y and waits until it has its own
// cgroup namespace. It is killed when the test ends.
func (h *cgnsHost) startTarget(t *testing.T) int {
	t.Helper()
	cmd := inCgroups(h.procs(true), "unshare", "-C", "sleep", "300")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	own, _ := os.Readlink("/proc/self/ns/cgroup")
	for i := 0; ; i++ {
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/cgroup", pid))
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if ns != "" && ns != own && strings.TrimSpace(string(comm)) == "sleep" {
			return pid
		}
		if i == 250 {
			t.Fatalf("target did not reach its own cgroup namespace: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// read runs the reader in z under `unshare -C` plus wrap (e.g. setpriv),
// and returns its view and the snapshot it took.
func (h *cgnsHost) read(t *testing.T, pid int, hostRoot string, wrap ...string) (cgnsView, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	ns := []string{"unshare", "-C"}
	if hostRoot != "" {
		ns = []string{"unshare", "-m", "--propagation", "private", "-C"}
	}
	args := append(append(ns, wrap...), self, "-test.run=^TestCgnsReaderHelper$", "-test.v")
	cmd := inCgroups(h.procs(false), args...)
	cmd.Env = append(cmd.Env, cgnsHelperEnv+"=1", cgnsPIDEnv+"="+strconv.Itoa(pid), cgnsSnapEnv+"="+snap, cgnsRootEnv+"="+hostRoot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reader: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if js, ok := strings.CutPrefix(sc.Text(), cgnsMarker); ok {
			var v cgnsView
			if err := json.Unmarshal([]byte(js), &v); err != nil {
				t.Fatal(err)
			}
			return v, snap
		}
	}
	t.Fatalf("reader printed no result:\n%s", out)
	return cgnsView{}, ""
}

// wantDecisions is what the program on y and the v1 rules on y decide.
func (h *cgnsHost) wantDecisions() map[string]string {
	want := map[string]string{}
	v1 := func(dev DeviceRef) string {
		switch {
		case h.yD == "":
			return "n/a"
		case dev == DeviceRef{'c', 1, 5}:
			return "deny"
		}
		return "allow"
	}
	for _, dev := range cgnsDevices {
		for _, acc := range []Access{AccessRead, AccessWrite, AccessRead | AccessWrite} {
			v2 := "allow" // denySomeProgram: c 1:9 any, c 195:0 w
			if dev == (DeviceRef{'c', 1, 9}) || (dev == DeviceRef{'c', 195, 0} && acc&AccessWrite != 0) {
				v2 = "deny"
			}
			want[fmt.Sprintf("%c %d:%d %s", dev.Type, dev.Major, dev.Minor, acc)] = "v1 " + v1(dev) + ", v2 " + v2
		}
	}
	return want
}

// checkRight asserts the view judged y itself: its directories, its
// program, its rules.
func (h *cgnsHost) checkRight(t *testing.T, who string, v cgnsView) {
	t.Helper()
	if v.Err != "" {
		t.Fatalf("%s: %s", who, v.Err)
	}
	if v.V2Path != h.relU || v.V2Dir != h.yU || v.V2Err != "" {
		t.Errorf("%s: cgroup2 at %q dir %q (err %q); want %q, %q", who, v.V2Path, v.V2Dir, v.V2Err, h.relU, h.yU)
	}
	if len(v.Programs) != 1 || v.Programs[0] != h.progName {
		t.Errorf("%s: programs %q, want the one attached to y (%s)", who, v.Programs, h.progName)
	}
	if h.yD != "" && (v.V1Path != h.relD || v.V1Dir != h.yD || v.V1Err != "") {
		t.Errorf("%s: v1 devices at %q dir %q (err %q); want %q, %q", who, v.V1Path, v.V1Dir, v.V1Err, h.relD, h.yD)
	}
	if d := cmp.Diff(h.wantDecisions(), v.Decisions); d != "" {
		t.Errorf("%s: decisions (-want +got)\n%s", who, d)
	}
}

// TestLocateUnshareTargetFromInitialNamespace: a target in a cgroup
// namespace of its own, read from the initial namespace, shows absolute
// paths and is judged in its own directory with no resolution.
func TestLocateUnshareTargetFromInitialNamespace(t *testing.T) {
	h := newCgnsHost(t)
	pid := h.startTarget(t)
	// In its own namespace the target is at "/": it is that namespace's
	// root. (nsenter's cat stays in our cgroup; it reads the target's file.)
	if b, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-C", "cat", fmt.Sprintf("/proc/%d/cgroup", pid)).Output(); err == nil {
		if !strings.Contains("\n"+string(b), "\n0::/\n") {
			t.Errorf("in the target's namespace /proc/%d/cgroup is\n%s", pid, b)
		}
	}
	v := viewOf(ReadPolicy(hostfs.MustNew("/"), Target{PID: pid}))
	h.checkRight(t, "initial namespace", v)
	if v.Resolved != "" || v.V2Shown != h.relU {
		t.Errorf("resolved %q shown %q: the initial namespace needs no resolution", v.Resolved, v.V2Shown)
	}
}

// TestLocateFromOwnCgroupNamespace: a reader in a cgroup namespace rooted
// at a sibling cgroup is shown the target as "/../y" and the mounts as
// "/../..", and reaches the same directories and decisions as a reader in
// the initial namespace; so does its snapshot, replayed here. With the
// host mounted elsewhere (--root, a pod's /host) it reads the host init's
// mountinfo. Without CAP_SYS_ADMIN it says why it cannot resolve.
func TestLocateFromOwnCgroupNamespace(t *testing.T) {
	h := newCgnsHost(t)
	pid := h.startTarget(t)
	initial := viewOf(ReadPolicy(hostfs.MustNew("/"), Target{PID: pid}))
	h.checkRight(t, "initial namespace", initial)

	replay := func(t *testing.T, snap string) cgnsView {
		f, err := os.Open(snap)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		root, cleanup, err := hostfs.OpenSnapshot(f)
		if err != nil {
			t.Fatal(err)
		}
		defer cleanup()
		return viewOf(ReadPolicy(root, Target{PID: pid}))
	}

	for _, c := range []struct {
		name     string
		hostRoot string
		source   string
	}{
		{"live root", "", selfMountinfo},
		{"host at --root", "host", initMountinfo},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostRoot := c.hostRoot
			if hostRoot != "" {
				hostRoot = filepath.Join(t.TempDir(), hostRoot)
				if err := os.Mkdir(hostRoot, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			v, snap := h.read(t, pid, hostRoot)
			h.checkRight(t, "own namespace", v)
			if want := "/../" + filepath.Base(h.yU); v.V2Shown != want {
				t.Errorf("the reader was shown %q, want %q: the test did not exercise a namespace", v.V2Shown, want)
			}
			if !strings.Contains(v.Resolved, "cgroup namespace") {
				t.Errorf("resolved %q: the evidence must say how", v.Resolved)
			}
			if v.Source != c.source {
				t.Errorf("mountinfo read: %q, want %q", v.Source, c.source)
			}
			if v.SelfV2Path != strings.TrimPrefix(h.zU, h.m.Unified) || v.SelfV2Shown != "/" {
				t.Errorf("the reader judging itself: at %q shown %q, want %q shown /", v.SelfV2Path, v.SelfV2Shown, strings.TrimPrefix(h.zU, h.m.Unified))
			}
			r := replay(t, snap)
			h.checkRight(t, "replay", r)
			if r.V2Shown != v.V2Shown || !strings.HasSuffix(r.Resolved, ", as captured") || r.Source != c.source {
				t.Errorf("replay: shown %q resolved %q source %q", r.V2Shown, r.Resolved, r.Source)
			}
		})
	}

	t.Run("without CAP_SYS_ADMIN", func(t *testing.T) {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("setpriv(1) is not installed")
		}
		v, snap := h.read(t, pid, "", "setpriv", "--bounding-set", "-sys_admin")
		if v.Err == "" || v.V2Dir != "" || v.V1Dir != "" {
			t.Fatalf("no error without the privilege to resolve: %+v", v)
		}
		for _, want := range []string{"not located", "/../" + filepath.Base(h.yU), "operation not permitted"} {
			if !strings.Contains(v.Err, want) {
				t.Errorf("error %q does not say %q", v.Err, want)
			}
		}
		r := replay(t, snap)
		if r.Err == "" || !strings.Contains(r.Err, "when the capture was taken") || !strings.Contains(r.Err, "operation not permitted") {
			t.Errorf("replay: %+v, want the capture's own reason", r)
		}
	})
}

// BenchmarkLocateAsShown is Locate when nothing needs resolving (the live
// host read from the initial namespace): the floor for the one below.
func BenchmarkLocateAsShown(b *testing.B) {
	root := hostfs.MustNew("/")
	for b.Loop() {
		if _, err := Locate(root, Target{Self: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocateThroughInitialNamespace is the re-read a reader in a
// cgroup namespace of its own pays: a locked thread that joins the
// initial namespace (and dies), the mountinfo and the cgroup file read
// again there.
func BenchmarkLocateThroughInitialNamespace(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("joining a cgroup namespace needs CAP_SYS_ADMIN")
	}
	root := hostfs.MustNew("/")
	for b.Loop() {
		if _, err := locateInitial(root, selfMountinfo, Target{Self: true}); err != nil {
			b.Fatal(err)
		}
	}
}
