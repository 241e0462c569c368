package diagnose

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// This machine, a VM with no accelerator (skipped where it has one): the cgroup mode is detected and no device is
// evaluated, so layer 4 is not PASS (the mode is context); the layers
// that looked at something still are.
func TestNoAcceleratorLayer4NotPass(t *testing.T) {
	root, err := hostfs.New("/")
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, "this machine", Options{Layers: []report.Layer{report.LayerPCI, report.LayerCgroup}})
	if len(rep.Devices) > 0 {
		t.Skipf("this machine has %d accelerator(s): layer 4 judges their nodes here", len(rep.Devices))
	}
	mode := false
	for _, f := range rep.Findings {
		if f.Code == CodeCgroupMode {
			mode = true
			if !f.Context {
				t.Errorf("CGROUP_MODE is not marked context: %+v", f)
			}
		}
	}
	if !mode {
		t.Fatalf("no CGROUP_MODE finding: the fixture does not exercise the case")
	}
	for _, o := range rep.Verdict.Outcomes {
		if o.Layer == report.LayerCgroup && o.Status == report.Pass {
			t.Errorf("layer 4 PASS with nothing judged: %+v; verdict %q", o, rep.Verdict.Summary)
		}
	}
	if rep.Verdict.Status == report.Fail {
		t.Errorf("a healthy VM FAILs: %s", rep.Verdict.Summary)
	}
}
