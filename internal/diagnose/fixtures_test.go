package diagnose

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/golden")

const (
	hostsDir  = "../../testdata/hosts"
	goldenDir = "../../testdata/golden"
)

// runFixture runs every check over a tree and checks what every run must
// hold: each emitted code is declared by its check and explained.
func runFixture(t *testing.T, root *hostfs.Root, name string, opts Options) *report.Report {
	t.Helper()
	if opts.KubeletRPC == nil {
		opts.KubeletRPC = grpccall.Caller{}
	}
	return runFixtureEnv(t, NewEnv(root, opts), name)
}

// runFixtureEnv is runFixture over an Env the caller keeps, to ask it
// what the readers found after the run.
func runFixtureEnv(t *testing.T, e *Env, name string) *report.Report {
	t.Helper()
	checks := Registry()
	rep := Run(e, checks, Meta{Tool: "accel-doctor test", Command: "check", Source: "fixture " + name, Root: name})
	declared := map[string][]string{}
	for _, c := range checks {
		declared[c.ID] = c.Codes
	}
	for _, f := range rep.Findings {
		if f.Code == CodeCheckCrashed {
			t.Errorf("%s: check %s crashed: %s", name, f.Check, f.Reason)
			continue
		}
		if !slices.Contains(declared[f.Check], f.Code) {
			t.Errorf("%s: check %s emitted undeclared code %s", name, f.Check, f.Code)
		}
		if _, ok := LookupCode(f.Code); !ok {
			t.Errorf("%s: code %s has no explanation", name, f.Code)
		}
		if f.Status == report.NotRun && f.Reason == "" {
			t.Errorf("%s: NOT_RUN without a reason: %+v", name, f)
		}
		// A NOT_RUN's fix is about what kept it from looking, never
		// its code's catalog fix (the WARN or FAIL case's).
		if c, ok := LookupCode(f.Code); f.Status == report.NotRun &&
			(f.Remediation == "" || c.Remediation != "" && strings.Contains(f.Remediation, c.Remediation) && ok) {
			t.Errorf("%s: NOT_RUN %s %s: fix %q (catalog's %q)", name, f.Code, f.Subject, f.Remediation, c.Remediation)
		}
	}
	return rep
}

func goldenText(t *testing.T, file string, rep *report.Report) {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteText(&b, rep, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(goldenDir, file)
	if *update {
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test ./internal/diagnose -run Golden -update writes it)", err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("%s differs from the report (go test ./internal/diagnose -run Golden -update rewrites it); got:\n%s", p, b.String())
	}
}

// TestGoldenReports runs check over every committed host tree and compares
// the text report with its golden file.
func TestGoldenReports(t *testing.T) {
	type want struct {
		exit    int
		layer   report.Layer // verdict layer when exit is 1
		devices int
	}
	cases := map[string]want{
		fixture.NameNVIDIAx8:         {exit: 0, devices: 8},
		fixture.NameAMDMI210x2:       {exit: 0, devices: 2},
		fixture.NameIntelFlex170:     {exit: 0, devices: 1},
		fixture.NameKVMVirtio:        {exit: 0, devices: 0},
		fixture.NameDemoH100x8Faults: {exit: 1, layer: report.LayerDriver, devices: 8},
		fixture.NameK8sCgroupV1:      {exit: 0, devices: 8},
	}
	for _, h := range fixture.All() {
		w, ok := cases[h.Name]
		if !ok {
			t.Errorf("host %s has no expectation here", h.Name)
			continue
		}
		t.Run(h.Name, func(t *testing.T) {
			root := hostfs.MustNew(filepath.Join(hostsDir, h.Name))
			rep := runFixture(t, root, h.Name, Options{})
			if rep.ExitCode() != w.exit || (w.exit == 1 && rep.Verdict.Layer != w.layer) {
				t.Errorf("exit %d verdict %+v, want exit %d at layer %d", rep.ExitCode(), rep.Verdict, w.exit, w.layer)
			}
			if len(rep.Devices) != w.devices {
				t.Errorf("%d accelerators, want %d", len(rep.Devices), w.devices)
			}
			goldenText(t, h.Name+".txt", rep)
		})
	}
}

// problems lists the findings that are not PASS, as "CODE STATUS subject".
func problems(rep *report.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Status != report.Pass && f.Status != report.NotRun {
			out = append(out, fmt.Sprintf("%s %s %s", f.Code, f.Status, f.Subject))
		}
	}
	slices.Sort(out)
	return out
}

// TestFaultsGiveOneFinding changes one thing in the healthy 8-GPU host and
// expects exactly one new problem, with the right code.
func TestFaultsGiveOneFinding(t *testing.T) {
	healthy := runFixture(t, hostfs.MustNew(filepath.Join(hostsDir, fixture.NameNVIDIAx8)), "healthy", Options{})
	if p := problems(healthy); len(p) != 0 {
		t.Fatalf("the healthy host has problems: %v", p)
	}
	want := map[string]string{
		"node-missing":            "DEVNODE_MISSING FAIL /dev/nvidia3",
		"major-unregistered":      "DEVNODE_MAJOR_UNREGISTERED FAIL /dev/nvidia-uvm",
		"driver-library-mismatch": "DRIVER_LIBRARY_MISMATCH FAIL host",
		"degraded-link":           "PCI_LINK_DEGRADED WARN 0000:3a:00.0",
		"no-char-link":            "DEVNODE_NO_CHAR_LINK WARN /dev/nvidia0",
	}
	faults := fixture.NVIDIAx8Faults()
	if len(faults) < 5 {
		t.Fatalf("%d faults, want at least 5", len(faults))
	}
	for _, f := range faults {
		t.Run(f.Name, func(t *testing.T) {
			root, err := fixture.NewRoot(filepath.Join(t.TempDir(), "host"), f.Apply(fixture.NVIDIAx8()))
			if err != nil {
				t.Fatal(err)
			}
			got := problems(runFixture(t, root, f.Name, Options{}))
			if len(got) != 1 || got[0] != want[f.Name] {
				t.Errorf("problems = %q, want exactly [%q]", got, want[f.Name])
			}
		})
	}
}

// TestCgroupV1Container judges the container of the Kubernetes v1 host,
// healthy and after a daemon-reload lost its GPU rule.
func TestCgroupV1Container(t *testing.T) {
	opts := Options{PID: fixture.ContainerPID, Spec: fixture.ContainerSpec}
	h, _ := fixture.ByName(fixture.NameK8sCgroupV1)
	for _, c := range []struct {
		name     string
		host     fixture.Host
		problems []string
	}{
		{"healthy", h, nil},
		{"daemon-reload", fixture.FaultDaemonReload(h, "c 195:0 rw"), []string{
			"CGROUP_DEVICE_DENIED FAIL /dev/nvidia0",
			"CGROUP_DEVICE_DRIFT FAIL c 195:0",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, err := fixture.NewRoot(filepath.Join(t.TempDir(), "host"), c.host)
			if err != nil {
				t.Fatal(err)
			}
			rep := runFixture(t, root, fixture.NameK8sCgroupV1+" --pid 4242", opts)
			if got := problems(rep); !slices.Equal(got, c.problems) {
				t.Errorf("problems = %q, want %q", got, c.problems)
			}
			goldenText(t, fmt.Sprintf("%s-pid%d-%s.txt", fixture.NameK8sCgroupV1, fixture.ContainerPID, c.name), rep)
			for _, f := range rep.Findings {
				if f.Code == CodeCgroupAllowed && !strings.Contains(f.Subject, "nvidia") {
					t.Errorf("unexpected node judged: %s", f.Subject)
				}
			}
		})
	}
}
