package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

const hosts = "../../testdata/hosts/"

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"check", "--root", hosts + "nvidia-h100x8"}, 0},
		{[]string{"check", "--snapshot", "demo"}, 1},
		{[]string{"check", "--root", hosts + "kvm-virtio"}, 0},
		{[]string{"check", "--bogus"}, 2},
		{[]string{"check", "--root", "/nonexistent/dir"}, 2},
		{[]string{"check", "--snapshot", "/nonexistent.tar.gz"}, 2},
		{[]string{"check", "--layer", "nine"}, 2},
		{[]string{"check", "--layer", "kube", "--snapshot", "demo"}, 2},
		{[]string{"check", "-o", "yaml", "--root", hosts + "kvm-virtio"}, 2},
		{[]string{"explain", "NO_SUCH_CODE"}, 2},
		{[]string{"explain", "DEVNODE_MAJOR_UNREGISTERED"}, 0},
		{[]string{"cgroup", "eval"}, 2},
		{[]string{"snapshot"}, 2},
	} {
		_, stderr, code := run(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.code, stderr)
		}
	}
}

func TestDemoNamesTheDriverLayer(t *testing.T) {
	out, _, code := run(t, "check", "--snapshot", "demo", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict.Layer != report.LayerDriver || len(rep.Devices) != 8 || rep.Root != "snapshot:demo" {
		t.Errorf("verdict %+v, %d devices, root %q", rep.Verdict, len(rep.Devices), rep.Root)
	}
	codes := map[string]bool{}
	for _, f := range rep.Findings {
		codes[f.Code] = true
	}
	for _, c := range []string{"DRIVER_LIBRARY_MISMATCH", "DEVNODE_MISSING", "PCI_LINK_DEGRADED", "DEVNODE_NO_CHAR_LINK"} {
		if !codes[c] {
			t.Errorf("the demo does not show %s", c)
		}
	}
}

func TestExplainEveryCode(t *testing.T) {
	out, _, code := run(t, "explain")
	if code != 0 {
		t.Fatal(code)
	}
	for _, c := range diagnose.Codes() {
		if !strings.Contains(out, c.Code+"  (") {
			t.Errorf("explain does not print %s", c.Code)
		}
	}
}

// TestSnapshotReplaysLikeTheTree: a snapshot of a host replays to the
// same report as the host itself.
func TestSnapshotReplaysLikeTheTree(t *testing.T) {
	for _, h := range []string{"nvidia-h100x8", "amd-mi210x2", "demo-h100x8-faults"} {
		snap := filepath.Join(t.TempDir(), "snap.tar.gz")
		if _, stderr, code := run(t, "snapshot", "--root", hosts+h, snap); code != 0 {
			t.Fatalf("%s: snapshot exit %d: %s", h, code, stderr)
		}
		direct, _, c1 := run(t, "check", "--root", hosts+h, "-o", "json")
		replay, _, c2 := run(t, "check", "--snapshot", snap, "-o", "json")
		if c1 != c2 {
			t.Errorf("%s: exit %d direct, %d replayed", h, c1, c2)
		}
		if a, b := findingsOf(t, direct), findingsOf(t, replay); a != b {
			t.Errorf("%s: replay differs from the tree:\n%s\n---\n%s", h, a, b)
		}
	}
}

// findingsOf keeps what a replay must reproduce: codes, statuses,
// subjects, summaries, evidence values.
func findingsOf(t *testing.T, js string) string {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString(f.Code + " " + string(f.Status) + " " + f.Subject + " " + f.Summary + "\n")
		for _, e := range f.Evidence {
			b.WriteString("  " + e.Path + " " + strings.ReplaceAll(e.Value, "[device manifest]", "") + "\n")
		}
	}
	return b.String()
}

func TestLiveCheckFindsNoAccelerator(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no /sys/bus/pci on this machine")
	}
	out, stderr, code := run(t, "check", "-o", "json")
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s %s", err, out, stderr)
	}
	if len(rep.Devices) > 0 {
		t.Skipf("this machine has accelerators (%d): the no-accelerator case does not apply", len(rep.Devices))
	}
	if code != 0 {
		t.Errorf("exit %d on a machine without accelerators: %+v", code, rep.Verdict)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || f.Code == "PCI_NO_ACCELERATOR"
	}
	if !found {
		t.Error("no PCI_NO_ACCELERATOR finding")
	}
}

func TestNoColorWhenNotATerminal(t *testing.T) {
	out, _, _ := run(t, "check", "--snapshot", "demo")
	if strings.Contains(out, "\x1b[") {
		t.Error("colour written to a buffer")
	}
	t.Setenv("NO_COLOR", "1")
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	if colorWanted(f) {
		t.Error("colour wanted with NO_COLOR set")
	}
}

func TestPCICommand(t *testing.T) {
	out, _, code := run(t, "pci", "--root", hosts+"nvidia-h100x8", "--accelerators")
	if code != 0 || strings.Count(out, "GH100 [H100 SXM5 80GB]") != 8 {
		t.Errorf("exit %d:\n%s", code, out)
	}
	out, _, _ = run(t, "pci", "--root", hosts+"kvm-virtio", "-o", "json")
	var rows []pciRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("%v %q", err, out)
	}
	for _, r := range rows {
		if r.Accelerator != "" {
			t.Errorf("%s marked %s on a VM", r.Address, r.Accelerator)
		}
	}
}

func TestCgroupEvalOnFixture(t *testing.T) {
	out, stderr, code := run(t, "cgroup", "eval", "--root", hosts+"nvidia-h100x8-k8s-cgroupv1", "--pid", "4242", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Rows []evalRow `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range doc.Rows {
		got[r.Subject] = r.ReadWrite
	}
	if got["/dev/nvidia0"] != "allow" || got["/dev/nvidia1"] != "DENY" || got["/dev/nvidiactl"] != "allow" {
		t.Errorf("decisions %v", got)
	}
	out, _, _ = run(t, "cgroup", "eval", "--root", hosts+"nvidia-h100x8-k8s-cgroupv1", "--pid", "4242", "--rule", "c 195:* rw")
	if !strings.Contains(out, "DENY 254/256") {
		t.Errorf("wildcard rule:\n%s", out)
	}
}

// TestSnapshotOfAContainer: a snapshot taken with --pid and --oci-spec replays
// the container's cgroup findings.
func TestSnapshotOfAContainer(t *testing.T) {
	host := hosts + "demo-h100x8-faults"
	spec := "/run/containerd/io.containerd.runtime.v2.task/k8s.io/5e1c0ffee0ddba11/config.json"
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if _, stderr, code := run(t, "snapshot", "--root", host, "--pid", "4242", "--oci-spec", spec, snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	direct, _, c1 := run(t, "check", "--root", host, "--pid", "4242", "--oci-spec", spec, "--layer", "cgroup", "-o", "json")
	replay, _, c2 := run(t, "check", "--snapshot", snap, "--pid", "4242", "--oci-spec", spec, "--layer", "cgroup", "-o", "json")
	if c1 != 1 || c2 != 1 {
		t.Errorf("exit %d direct, %d replayed; want 1 (the demo container lost its rule)", c1, c2)
	}
	if a, b := findingsOf(t, direct), findingsOf(t, replay); a != b {
		t.Errorf("replay differs:\n%s\n---\n%s", a, b)
	}
}

// TestSnapshotRedactsSpecEnv: a snapshot never holds the values of a
// container's environment, and still replays its drift check.
func TestSnapshotRedactsSpecEnv(t *testing.T) {
	host := t.TempDir()
	src := hosts + "nvidia-h100x8-k8s-cgroupv1"
	if err := os.CopyFS(host, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	spec := "/run/containerd/io.containerd.runtime.v2.task/k8s.io/5e1c0ffee0ddba11/config.json"
	b, err := os.ReadFile(filepath.Join(host, spec))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"cwd": "/"`), []byte(`"cwd": "/", "env": ["PATH=/usr/bin", "HF_TOKEN=hf_s3cr3t_value"],
		"args": ["/bin/serve", "--api-key=arg_s3cr3t_value"]`), 1)
	b = bytes.Replace(b, []byte(`"linux"`), []byte(`"hooks": {"prestart": [{"path": "/usr/bin/hook",
		"args": ["hook", "--password=hook_s3cr3t_value"], "env": ["T=hookenv_s3cr3t_value"]}]}, "linux"`), 1)
	if err := os.WriteFile(filepath.Join(host, spec), b, 0o644); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if _, stderr, code := run(t, "snapshot", "--root", host, "--pid", "4242", "--oci-spec", spec, snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	raw, err := exec.Command("sh", "-c", "tar -xzOf "+snap).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hf_s3cr3t_value", "arg_s3cr3t_value", "hook_s3cr3t_value", "hookenv_s3cr3t_value"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the snapshot holds %s", secret)
		}
	}
	if !bytes.Contains(b, []byte("arg_s3cr3t_value")) || !bytes.Contains(b, []byte("hook_s3cr3t_value")) {
		t.Fatal("the test spec lacks its planted values")
	}
	if !bytes.Contains(raw, []byte("HF_TOKEN=<redacted by accel-doctor>")) {
		t.Error("the snapshot lost the spec (or the variable's name)")
	}
	direct, _, c1 := run(t, "check", "--root", host, "--pid", "4242", "--oci-spec", spec, "--layer", "cgroup", "-o", "json")
	replay, _, c2 := run(t, "check", "--snapshot", snap, "--pid", "4242", "--oci-spec", spec, "--layer", "cgroup", "-o", "json")
	if c1 != c2 || findingsOf(t, direct) != findingsOf(t, replay) {
		t.Errorf("replay differs: exit %d/%d", c1, c2)
	}
}

// TestSnapshotOfThisMachine: a snapshot of the live host replays layers
// 1-3 as the host answers them (names from its 1.4 MB pci.ids included).
func TestSnapshotOfThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no /sys/bus/pci on this machine")
	}
	snap := filepath.Join(t.TempDir(), "live.tar.gz")
	if _, stderr, code := run(t, "snapshot", snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	live, _, _ := run(t, "pci", "-o", "json")
	replay, _, _ := run(t, "pci", "--snapshot", snap, "-o", "json")
	if live != replay {
		t.Errorf("pci differs:\n%s\n---\n%s", live, replay)
	}
	direct, _, c1 := run(t, "check", "--layer", "1,2,3", "-o", "json")
	again, _, c2 := run(t, "check", "--snapshot", snap, "--layer", "1,2,3", "-o", "json")
	if c1 != c2 || findingsOf(t, direct) != findingsOf(t, again) {
		t.Errorf("check replay differs (exit %d/%d):\n%s\n---\n%s", c1, c2, findingsOf(t, direct), findingsOf(t, again))
	}
}
