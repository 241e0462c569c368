package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// runcContainer starts a real runc container from a busybox-static bundle
// with extra devices and device rules (and any other change edits make to
// the spec), and returns its id, init PID and the path of its config.json.
// The container and its cgroups are removed when the test ends, whatever
// happens.
func runcContainer(t testing.TB, devices []specs.LinuxDevice, rules []specs.LinuxDeviceCgroup, edits ...func(*specs.Spec)) (id string, pid int, spec string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runc containers need root")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc is not installed (apt-get install runc)")
	}
	busybox := "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		t.Skip("busybox-static is not installed (apt-get install busybox-static)")
	}
	bundle := t.TempDir()
	// Traversable by others: a user-namespaced container's root is an
	// unprivileged host uid that must reach its rootfs.
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
	for _, app := range []string{"sh", "sleep", "echo", "cat"} {
		os.Symlink("busybox", filepath.Join(rootfs, "bin", app))
	}
	gen := exec.Command(runc, "spec", "--bundle", bundle)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	spec = filepath.Join(bundle, "config.json")
	var s specs.Spec
	raw, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s.Process.Terminal = false
	s.Process.Args = []string{"/bin/sleep", "300"}
	s.Root.Readonly = true
	s.Linux.Devices = append(s.Linux.Devices, devices...)
	s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, rules...)
	id = fmt.Sprintf("accel-doctor-test-%d-%x", os.Getpid(), rand.Uint32())
	s.Linux.CgroupsPath = "/" + id
	for _, edit := range edits {
		edit(&s)
	}
	raw, _ = json.MarshalIndent(&s, "", "  ")
	if err := os.WriteFile(spec, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(bundle, "pid")
	t.Cleanup(func() {
		exec.Command(runc, "kill", id, "KILL").Run()
		for i := 0; i < 50; i++ {
			if exec.Command(runc, "delete", "--force", id).Run() == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// The detached container keeps its stdio: a pipe here would hold Run
	// until the container exits, so runc's errors go to a file.
	errFile, err := os.Create(filepath.Join(bundle, "runc.err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	run := exec.Command(runc, "run", "--detach", "--bundle", bundle, "--pid-file", pidFile, id)
	run.Stdout, run.Stderr = errFile, errFile
	if err := run.Run(); err != nil {
		msg, _ := os.ReadFile(errFile.Name())
		t.Fatalf("runc run: %v: %s", err, msg)
	}
	pb, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(pb)))
	if err != nil {
		t.Fatal(err)
	}
	// runc run --detach can return before its init has exec'd the
	// workload: wait until it has (its environment is set only then).
	for i := 0; i < 250; i++ {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(b), "/bin/sleep") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return id, pid, spec
}

// inContainer opens path for writing inside the container (runc exec) and
// returns the shell's error text, "" when the open worked.
func inContainer(t *testing.T, id, path string) string {
	t.Helper()
	out, err := exec.Command("runc", "exec", id, "sh", "-c", "echo > "+path).CombinedOutput()
	if err == nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func ptr[T any](v T) *T { return &v }

// TestRuncContainerPolicy runs a real container given two GPU-like nodes
// (195:0 allowed, 195:1 created but not allowed), judges it with `cgroup
// eval --pid` and `check --pid --oci-spec`, and compares with what opens inside
// the container really get. Then it takes 195:0's rule away behind runc's
// back, as a systemd daemon-reload does, and expects drift.
func TestRuncContainerPolicy(t *testing.T) {
	devices := []specs.LinuxDevice{
		{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))},
		{Path: "/dev/nvidia1", Type: "c", Major: 195, Minor: 1, FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))},
	}
	rules := []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: ptr(int64(195)), Minor: ptr(int64(0)), Access: "rw"}}
	id, pid, spec := runcContainer(t, devices, rules)

	// What the kernel does: no driver holds 195 here, so an allowed open
	// gets ENXIO and a denied one EPERM.
	if got := inContainer(t, id, "/dev/nvidia0"); !strings.Contains(got, "No such device or address") {
		t.Fatalf("open of the allowed node in the container: %q, want ENXIO", got)
	}
	if got := inContainer(t, id, "/dev/nvidia1"); !strings.Contains(got, "Operation not permitted") {
		t.Fatalf("open of the denied node in the container: %q, want EPERM", got)
	}

	// cgroup eval agrees, node by node.
	out, stderr, code := run(t, "cgroup", "eval", "--pid", strconv.Itoa(pid), "--rule", "c 195:0 rw", "--rule", "c 195:1 rw", "-o", "json")
	if code != 0 {
		t.Fatalf("cgroup eval: exit %d: %s", code, stderr)
	}
	var doc struct {
		Rows []evalRow `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rows) != 2 || doc.Rows[0].ReadWrite != "allow" || doc.Rows[1].ReadWrite != "DENY" {
		t.Errorf("cgroup eval rows: %+v", doc.Rows)
	}

	// check --pid --oci-spec: the kernel matches the spec.
	rep := checkJSON(t, "check", "--layer", "cgroup", "--pid", strconv.Itoa(pid), "--oci-spec", spec)
	if codes := codesOf(rep); !codes["CGROUP_DEVICE_NO_DRIFT"] || codes["CGROUP_DEVICE_DRIFT"] {
		for _, f := range rep.Findings {
			t.Logf("%s %s %s %s %+v", f.Code, f.Status, f.Subject, f.Summary, f.Evidence)
		}
		t.Errorf("fresh container: codes %v, want no drift", codes)
	}

	// Take the rule away in the container's own devices cgroup (runc made
	// it for this test), as a daemon-reload re-applying a unit does.
	deny := filepath.Join("/sys/fs/cgroup/devices", id, "devices.deny")
	if _, err := os.Stat(deny); err != nil {
		t.Skipf("the container has no v1 devices cgroup at %s (a cgroup2-only host): drift step skipped", deny)
	}
	if err := os.WriteFile(deny, []byte("c 195:0 rw"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := inContainer(t, id, "/dev/nvidia0"); !strings.Contains(got, "Operation not permitted") {
		t.Fatalf("after the deny, open in the container: %q, want EPERM", got)
	}
	rep = checkJSON(t, "check", "--layer", "cgroup", "--pid", strconv.Itoa(pid), "--oci-spec", spec)
	var drift []string
	for _, f := range rep.Findings {
		if f.Code == "CGROUP_DEVICE_DRIFT" {
			drift = append(drift, f.Subject)
		}
	}
	if len(drift) != 1 || drift[0] != "c 195:0" {
		t.Errorf("drift findings on %v, want exactly c 195:0", drift)
	}
	if rep.ExitCode() != 1 {
		t.Errorf("exit %d with drift", rep.ExitCode())
	}

	// A snapshot of the node taken with --pid and --oci-spec replays the same
	// cgroup findings, on any machine.
	snap := filepath.Join(t.TempDir(), "node.tar.gz")
	if _, stderr, code := run(t, "snapshot", "--pid", strconv.Itoa(pid), "--oci-spec", spec, snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	replay := checkJSON(t, "check", "--snapshot", snap, "--layer", "cgroup", "--pid", strconv.Itoa(pid), "--oci-spec", spec)
	if a, b := outcomes(rep), outcomes(replay); a != b {
		t.Errorf("replay differs from the live node:\n%s\n---\n%s", a, b)
	}
}

// outcomes lists code, status and subject of every finding.
func outcomes(rep *report.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "%s %s %s\n", f.Code, f.Status, f.Subject)
	}
	return b.String()
}

func checkJSON(t *testing.T, args ...string) *report.Report {
	t.Helper()
	out, stderr, _ := run(t, append(args, "-o", "json")...)
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %v: %s", args, err, stderr)
	}
	return &rep
}

func codesOf(rep *report.Report) map[string]bool {
	m := map[string]bool{}
	for _, f := range rep.Findings {
		m[f.Code] = true
	}
	return m
}
