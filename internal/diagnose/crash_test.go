package diagnose

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// A check that crashes leaves its layer NOT_RUN at best, and the run is
// never PASS (nor WARN): what it would have judged is not known. Planted
// in every layer of the node check, over a host whose check has no FAIL
// and over one whose check FAILs (the FAIL stands, and says so).
func TestCrashNeverPasses(t *testing.T) {
	healthy, err := hostfs.New("../../testdata/hosts/nvidia-h100x8")
	if err != nil {
		t.Fatal(err)
	}
	base := Run(NewEnv(healthy, Options{}), Registry(), Meta{Command: "check"})
	if base.Verdict.Status == report.Fail || base.Verdict.Status == report.NotRun {
		t.Fatalf("the healthy fixture is %s: %s", base.Verdict.Status, base.Verdict.Summary)
	}
	var layers []report.Layer
	for _, c := range Registry() {
		if !slices.Contains(layers, c.Layer) {
			layers = append(layers, c.Layer)
		}
	}
	for _, l := range layers {
		t.Run(fmt.Sprintf("layer %d", int(l)), func(t *testing.T) {
			boom := Check{ID: "t.boom", Layer: l, Title: "boom", Codes: []string{"X"}, Run: func(*Env, *Out) {
				var m map[string]int
				m["x"] = 1 // a nil map: a real runtime panic
			}}
			rep := Run(NewEnv(healthy, Options{}), append(Registry(), boom), Meta{Command: "check"})
			if rep.Verdict.Status != report.NotRun || rep.ExitCode() != report.ExitUnknown {
				t.Errorf("verdict %s (exit %d): %s", rep.Verdict.Status, rep.ExitCode(), rep.Verdict.Summary)
			}
			if !strings.Contains(rep.Verdict.Summary, "check t.boom stopped with an internal error") {
				t.Errorf("the verdict does not name the crash: %s", rep.Verdict.Summary)
			}
			for _, o := range rep.Verdict.Outcomes {
				if o.Layer == l && (o.Status != report.NotRun || !strings.Contains(o.Reason, "t.boom")) {
					t.Errorf("layer %d is %s (%q) with a crashed check", int(l), o.Status, o.Reason)
				}
			}
		})
	}

	// A FAIL is conclusive whatever crashed beside it.
	failing, err := hostfs.New("../../testdata/hosts/demo-h100x8-faults")
	if err != nil {
		t.Fatal(err)
	}
	boom := Check{ID: "t.boom", Layer: report.LayerIOMMU, Title: "boom", Codes: []string{"X"}, Run: func(*Env, *Out) { panic("boom") }}
	rep := Run(NewEnv(failing, Options{}), append(Registry(), boom), Meta{Command: "check"})
	if rep.Verdict.Status != report.Fail || !strings.Contains(rep.Verdict.Summary, "check t.boom stopped with an internal error") {
		t.Errorf("a FAIL beside a crash: %s: %s", rep.Verdict.Status, rep.Verdict.Summary)
	}
}

// /sys/bus/pci/devices is a file on a host whose IOMMU is on (a check
// crashed here once, on the inventory it was not given). The groups are
// NOT_RUN (the PCI functions could not be read), no check crashes, and
// the verdict says the layer's checks that did not run.
func TestIOMMUGroupsWithoutPCI(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", "../../testdata/hosts/gpu4-switch-acs/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	devs := filepath.Join(dir, "sys/bus/pci/devices")
	if err := os.RemoveAll(devs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(devs, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := hostfs.MustNew(dir)
	for _, opts := range []Options{{Layers: []report.Layer{report.LayerIOMMU}}, {Passthrough: true}} {
		rep := Run(NewEnv(root, opts), Registry(), Meta{Command: "iommu"})
		groups := false
		for _, f := range rep.Findings {
			if f.Code == CodeCheckCrashed {
				t.Errorf("check %s crashed: %s", f.Check, f.Reason)
			}
			if f.Code == codeGroupNotViable && f.Status == report.NotRun && strings.Contains(f.Reason, "the PCI functions could not be read") {
				groups = true
			}
		}
		if !groups {
			t.Errorf("%+v: no NOT_RUN for the groups: %+v", opts, rep.Findings)
		}
		if !strings.Contains(rep.Verdict.Summary, "check(s) of layer 7 NOT_RUN") {
			t.Errorf("%+v: the verdict does not say the groups were not judged: %s", opts, rep.Verdict.Summary)
		}
	}
}
