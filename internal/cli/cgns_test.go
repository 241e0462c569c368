package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const (
	cliReaderEnv     = "ACCEL_DOCTOR_CLI_READER"
	cliReaderArgsEnv = "ACCEL_DOCTOR_CLI_READER_ARGS"
	cliReaderRootEnv = "ACCEL_DOCTOR_CLI_READER_ROOT" // rbind "/" here first
	cliReaderMarker  = "CLI-READER-RESULT:"
)

type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// TestCliReaderHelper is not a test: TestRuncContainerCgroupNamespace
// re-executes the test binary in a cgroup namespace of its own to run
// accel-doctor there.
func TestCliReaderHelper(t *testing.T) {
	if os.Getenv(cliReaderEnv) != "1" {
		t.Skip("reader process of the cgroup-namespace test; runs only when re-executed by it")
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(cliReaderArgsEnv)), &args); err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv(cliReaderRootEnv); d != "" {
		// The host at /host of a pod; this process has a private mount
		// namespace (unshare -m), so the mount goes with it.
		if err := unix.Mount("/", d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Fatalf("rbind / at %s: %v", d, err)
		}
	}
	var o, e bytes.Buffer
	code := Main(context.Background(), args, &o, &e)
	b, _ := json.Marshal(cliResult{o.String(), e.String(), code})
	fmt.Printf("%s%s\n", cliReaderMarker, b)
}

func testCgroup(t *testing.T, parent string) string { return testutil.TestCgroup(t, parent) }

// readerInNamespace runs accel-doctor (this test binary) with args in a
// new cgroup namespace rooted at a cgroup of its own under procs' dirs;
// with hostRoot, also in a private mount namespace with "/" rbound at
// hostRoot.
func readerInNamespace(t *testing.T, procs, hostRoot string, args ...string) cliResult {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := []string{"unshare", "-C"}
	if hostRoot != "" {
		ns = []string{"unshare", "-m", "--propagation", "private", "-C"}
	}
	aj, _ := json.Marshal(args)
	// The shell moves itself (never another process), then execs.
	const script = `for f in $ADOC_PROCS; do echo $$ > "$f" || exit 1; done; exec "$@"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, append(ns, self, "-test.run=^TestCliReaderHelper$", "-test.v")...)...)
	cmd.Env = append(os.Environ(), "ADOC_PROCS="+procs, cliReaderEnv+"=1", cliReaderArgsEnv+"="+string(aj), cliReaderRootEnv+"="+hostRoot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reader %v: %v\n%s", args, err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if js, ok := strings.CutPrefix(sc.Text(), cliReaderMarker); ok {
			var r cliResult
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("reader %v printed no result:\n%s", args, out)
	return cliResult{}
}

type evalDoc struct {
	V1   string    `json:"v1_cgroup"`
	V2   string    `json:"v2_cgroup"`
	Rows []evalRow `json:"rows"`
}

func parseEval(t *testing.T, who, out string) evalDoc {
	t.Helper()
	var d evalDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%s: cgroup eval: %v: %s", who, err, out)
	}
	return d
}

func parseReport(t *testing.T, who, out string) *report.Report {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%s: check: %v: %s", who, err, out)
	}
	return &rep
}

// modeEvidence is the CGROUP_MODE finding's evidence, one line per item.
func modeEvidence(rep *report.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		if f.Code == "CGROUP_MODE" {
			for _, e := range f.Evidence {
				fmt.Fprintf(&b, "%s: %s\n", e.Path, e.Value)
			}
		}
	}
	return b.String()
}

// TestRuncContainerCgroupNamespace: a real runc container with a cgroup
// namespace of its own (it sees itself at "/") is judged, by `cgroup eval
// --pid` and `check --pid`, in its own cgroup with its own device rules:
// from the initial cgroup namespace, from a cgroup namespace of our own
// rooted at a sibling cgroup (where the kernel shows the container as
// "/../../ID"), with the host mounted elsewhere as in a pod (--root), and
// from a snapshot taken in our own namespace.
func TestRuncContainerCgroupNamespace(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare(1) is not installed")
	}
	devices := []specs.LinuxDevice{
		{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))},
		{Path: "/dev/nvidia1", Type: "c", Major: 195, Minor: 1, FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))},
	}
	rules := []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: ptr(int64(195)), Minor: ptr(int64(0)), Access: "rw"}}
	id, pid, _ := runcContainer(t, devices, rules, func(s *specs.Spec) {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	})
	spid := strconv.Itoa(pid)

	// The container has its own cgroup namespace and sees itself at "/".
	own, _ := os.Readlink("/proc/self/ns/cgroup")
	if ns, err := os.Readlink("/proc/" + spid + "/ns/cgroup"); err != nil || ns == own {
		t.Fatalf("container cgroup namespace %q (%v), ours %q: the spec's cgroup namespace was not applied", ns, err, own)
	}
	inside, err := exec.Command("runc", "exec", id, "cat", "/proc/self/cgroup").CombinedOutput()
	if err != nil || !strings.Contains("\n"+string(inside), "\n0::/\n") {
		t.Fatalf("the container's own /proc/self/cgroup: %v\n%s", err, inside)
	}
	// What the kernel does inside: 195:0 allowed (ENXIO: no driver), 195:1 EPERM.
	if got := inContainer(t, id, "/dev/nvidia0"); !strings.Contains(got, "No such device or address") {
		t.Fatalf("open of the allowed node in the container: %q, want ENXIO", got)
	}
	if got := inContainer(t, id, "/dev/nvidia1"); !strings.Contains(got, "Operation not permitted") {
		t.Fatalf("open of the denied node in the container: %q, want EPERM", got)
	}

	evalArgs := []string{"cgroup", "eval", "--pid", spid, "--rule", "c 195:0 rw", "--rule", "c 195:1 rw", "-o", "json"}
	checkArgs := []string{"check", "--layer", "cgroup", "--pid", spid, "-o", "json"}

	// From the initial namespace.
	out, stderr, code := run(t, evalArgs...)
	if code != 0 {
		t.Fatalf("cgroup eval: exit %d: %s", code, stderr)
	}
	initial := parseEval(t, "initial", out)
	want := "/" + id
	if (initial.V1 != "" && initial.V1 != want) || (initial.V2 != "" && initial.V2 != want) {
		t.Errorf("initial namespace: v1 %q v2 %q, want %q", initial.V1, initial.V2, want)
	}
	if len(initial.Rows) != 2 || initial.Rows[0].ReadWrite != "allow" || initial.Rows[1].ReadWrite != "DENY" {
		t.Fatalf("initial namespace: rows %+v, want 195:0 allowed and 195:1 denied, as inside", initial.Rows)
	}
	out, _, _ = run(t, checkArgs...)
	initRep := parseReport(t, "initial", out)
	if ev := modeEvidence(initRep); !strings.Contains(ev, "target at "+want) || strings.Contains(ev, "resolved") {
		t.Errorf("initial namespace evidence:\n%s", ev)
	}

	// A reader's own cgroups, siblings of nothing it judges.
	var procs []string
	for _, mnt := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/devices", "/sys/fs/cgroup"} {
		if st, err := os.Stat(filepath.Join(mnt, "cgroup.procs")); err != nil || !st.Mode().IsRegular() {
			continue
		}
		z := testCgroup(t, testCgroup(t, mnt))
		procs = append(procs, filepath.Join(z, "cgroup.procs"))
	}
	if len(procs) == 0 {
		t.Skip("no cgroup hierarchy to make the reader's cgroups in")
	}
	shown := "/../../" + id // the reader's root is <test>/z, two levels down

	for _, c := range []struct {
		name, root, source string
	}{
		{"own namespace", "", "/proc/self/mountinfo"},
		{"own namespace, host at --root", "host", "/proc/1/mountinfo"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var extra []string
			hostRoot := ""
			if c.root != "" {
				hostRoot = filepath.Join(t.TempDir(), c.root)
				if err := os.Mkdir(hostRoot, 0o755); err != nil {
					t.Fatal(err)
				}
				extra = []string{"--root", hostRoot}
			}
			r := readerInNamespace(t, strings.Join(procs, " "), hostRoot, append(evalArgs, extra...)...)
			if r.Code != 0 {
				t.Fatalf("cgroup eval: exit %d: %s", r.Code, r.Stderr)
			}
			if d := cmp.Diff(initial, parseEval(t, c.name, r.Stdout)); d != "" {
				t.Errorf("cgroup eval differs from the initial namespace's (-initial +own)\n%s", d)
			}
			r = readerInNamespace(t, strings.Join(procs, " "), hostRoot, append(checkArgs, extra...)...)
			rep := parseReport(t, c.name, r.Stdout)
			if a, b := outcomes(initRep), outcomes(rep); a != b {
				t.Errorf("check differs from the initial namespace's:\n%s---\n%s", a, b)
			}
			ev := modeEvidence(rep)
			for _, w := range []string{c.source + ": mode", "target at " + want + " (resolved from " + shown + " through "} {
				if !strings.Contains(ev, w) {
					t.Errorf("evidence does not say %q:\n%s", w, ev)
				}
			}
		})
	}

	t.Run("snapshot taken in our own namespace", func(t *testing.T) {
		snap := filepath.Join(t.TempDir(), "node.tar.gz")
		if r := readerInNamespace(t, strings.Join(procs, " "), "", "snapshot", "--pid", spid, snap); r.Code != 0 {
			t.Fatalf("snapshot: exit %d: %s", r.Code, r.Stderr)
		}
		out, stderr, code := run(t, "cgroup", "eval", "--snapshot", snap, "--pid", spid, "--rule", "c 195:0 rw", "--rule", "c 195:1 rw", "-o", "json")
		if code != 0 {
			t.Fatalf("replayed cgroup eval: exit %d: %s", code, stderr)
		}
		got := parseEval(t, "replay", out)
		// v2 programs live in the kernel: a replay evaluates the captured
		// ones, so the rows must agree on every decision.
		if got.V1 != initial.V1 || got.V2 != initial.V2 || len(got.Rows) != 2 || got.Rows[0].ReadWrite != "allow" || got.Rows[1].ReadWrite != "DENY" {
			t.Errorf("replay: %+v, want the live answer %+v", got, initial)
		}
		out, _, _ = run(t, "check", "--snapshot", snap, "--layer", "cgroup", "--pid", spid, "-o", "json")
		rep := parseReport(t, "replay", out)
		if a, b := outcomes(initRep), outcomes(rep); a != b {
			t.Errorf("replayed check differs from the live one:\n%s---\n%s", a, b)
		}
		if ev := modeEvidence(rep); !strings.Contains(ev, "(resolved from "+shown+" through ") || !strings.Contains(ev, "as captured") {
			t.Errorf("replay evidence:\n%s", ev)
		}
	})
}
