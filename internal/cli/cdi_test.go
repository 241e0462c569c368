package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const cliSpec = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: "1"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
containerEdits:
  deviceNodes:
  - path: /dev/nvidiactl
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options: [ro, nosuid, nodev, bind]
`

// cdiHost writes a host tree with the spec; withGPU1 says whether the
// host has /dev/nvidia1 (the planted fault is its absence).
func cdiHost(t *testing.T, withGPU1 bool) string {
	dir := t.TempDir()
	man := "/dev/nvidia0 c 195:0 0666 0:0\n/dev/nvidiactl c 195:255 0666 0:0\n"
	if withGPU1 {
		man += "/dev/nvidia1 c 195:1 0666 0:0\n"
	}
	testutil.WriteTree(t, dir, map[string]string{
		"/etc/cdi/nvidia.yaml":                           cliSpec,
		"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15": "ELF",
		"/usr/bin/nvidia-cdi-hook":                       "#!/bin/sh\n",
	}, nil, man)
	for _, d := range []string{"dev", "var/run"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	if err := os.Chmod(filepath.Join(dir, "usr/bin/nvidia-cdi-hook"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func cdiJSON(t *testing.T, out string) *report.Report {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return &rep
}

func cdiCodes(rep *report.Report, st report.Status) map[string]int {
	m := map[string]int{}
	for _, f := range rep.Findings {
		if st == "" || f.Status == st {
			m[f.Code]++
		}
	}
	return m
}

func TestCDIValidate(t *testing.T) {
	out, stderr, code := run(t, "cdi", "validate", "--root", cdiHost(t, true), "-o", "json")
	if code != 0 {
		t.Fatalf("healthy host: exit %d\n%s%s", code, out, stderr)
	}
	rep := cdiJSON(t, out)
	pass := cdiCodes(rep, report.Pass)
	if pass["CDI_SPEC_VALID"] != 1 || pass["CDI_NODE_PRESENT"] != 3 || pass["CDI_HOOK_PRESENT"] != 1 || pass["CDI_MOUNT_PRESENT"] != 1 {
		t.Errorf("passes %v", pass)
	}
	if rep.Verdict.Layer != 0 || rep.Layers[0] != report.LayerRuntime {
		t.Errorf("verdict %+v layers %v", rep.Verdict, rep.Layers)
	}

	// The planted fault: the spec names /dev/nvidia1, the host has none.
	out, _, code = run(t, "cdi", "validate", "--root", cdiHost(t, false))
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"FAIL CDI_NODE_MISSING", "nvidia.com/gpu=1: /dev/nvidia1", "Verdict: FAIL: first broken layer is 5 (runtime / CDI)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Markdown renders too.
	if out, _, code := run(t, "cdi", "validate", "--root", cdiHost(t, false), "-o", "markdown"); code != 1 || !strings.Contains(out, "CDI_NODE_MISSING") {
		t.Errorf("markdown: exit %d\n%s", code, out)
	}

	// Nothing to validate: NOT_RUN only, exit 2.
	empty := t.TempDir()
	os.MkdirAll(filepath.Join(empty, "etc"), 0o755)
	out, _, code = run(t, "cdi", "validate", "--root", empty)
	if code != 2 || !strings.Contains(out, "CDI_NO_SPECS") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestCDICheck(t *testing.T) {
	host := cdiHost(t, true)
	out, _, code := run(t, "cdi", "check", "nvidia.com/gpu=0", "--root", host)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// What it would inject is listed (check is verbose).
	for _, want := range []string{"CDI_DEVICE_RESOLVED", "nvidia.com/gpu=0 would inject (/etc/cdi/nvidia.yaml):", "/dev/nvidia0", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "hook createContainer", "/usr/bin/nvidia-cdi-hook update-ldcache", "PASS CDI_HOOK_PRESENT"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = run(t, "cdi", "check", "nvidia.com/gpu=7", "--root", host, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	rep := cdiJSON(t, out)
	if cdiCodes(rep, report.Fail)["CDI_DEVICE_UNRESOLVABLE"] != 1 || !strings.Contains(out, "unresolvable CDI devices nvidia.com/gpu=7") {
		t.Errorf("%s", out)
	}
	// A spec directory given on the command line.
	out, _, code = run(t, "cdi", "check", "nvidia.com/gpu=0", "--root", host, "--cdi-spec-dir", "/var/run/cdi")
	if code != 1 || !strings.Contains(out, "no valid spec declares kind nvidia.com/gpu") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// TestCDICheckContainerSpec: --oci-spec reads a container's config.json
// through the root; the corpus' real CRI-O config is plain linux.devices.
func TestCDICheckContainerSpec(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "intel-device-plugins")
	out, stderr, code := run(t, "cdi", "check", "--oci-spec", "/oci-config-crio-fpga.json", "--root", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	rep := cdiJSON(t, out)
	if len(rep.Findings) != 1 || rep.Findings[0].Code != "INJECTION_MECHANISM" || rep.Findings[0].Subject != "linux.devices" ||
		!strings.Contains(rep.Findings[0].Evidence[0].Value, "c 243:0 /dev/intel-fpga-port.0") {
		t.Errorf("%s", out)
	}
}

func TestCDIUsage(t *testing.T) {
	for _, args := range [][]string{
		{"cdi", "check"},
		{"cdi", "check", "a.com/b=c", "--oci-spec", "/x.json"},
		{"cdi", "check", "a.com/b=c", "--runtime", "lxc"},
		{"cdi", "validate", "--cdi-spec-dir", "etc/cdi"},
		{"cdi", "validate", "-o", "yaml"},
		{"cdi", "check", "--oci-spec", "/no/such/config.json", "--root", t.TempDir()},
		{"cdi", "validate", "--root", "/", "--snapshot", "demo"},
	} {
		if _, stderr, code := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d (%s)", args, code, stderr)
		}
	}
}

// TestCDIRemediationCommandsExist: every `accel-doctor ...` command the
// proposed CDI catalog names parses (as TestRemediationCommandsExist does
// for the diagnose catalog).
func TestCDIRemediationCommandsExist(t *testing.T) {
	span := regexp.MustCompile("`accel-doctor ([^`]*)`")
	n := 0
	for _, c := range cdi.Codes {
		for _, m := range span.FindAllStringSubmatch(c.Explain+"\n"+c.Remediation, -1) {
			if _, stderr, code := run(t, append(testutil.SplitArgs(m[1]), "--help")...); code != 0 {
				t.Errorf("%s names `accel-doctor %s`, which does not parse: %s", c.Code, m[1], stderr)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no accel-doctor command in the CDI catalog")
	}
}
