package diagnose

import (
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func TestRegistryIDsUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range ContainerRegistry() {
		if c.ID == "" || c.Title == "" || c.Run == nil || c.Layer == 0 {
			t.Errorf("check %+v is incomplete", c.ID)
		}
		if seen[c.ID] {
			t.Errorf("check ID %s registered twice", c.ID)
		}
		seen[c.ID] = true
		if len(c.Codes) == 0 {
			t.Errorf("check %s declares no codes", c.ID)
		}
	}
}

// TestEveryCodeExplained fails when a code has no explanation: `explain
// CODE` must answer for every code a check can emit.
func TestEveryCodeExplained(t *testing.T) {
	catalog := map[string]Code{}
	for _, c := range Codes() {
		if _, dup := catalog[c.Code]; dup {
			t.Errorf("code %s is in the catalog twice", c.Code)
		}
		catalog[c.Code] = c
		if c.Code != strings.ToUpper(c.Code) || strings.ContainsAny(c.Code, " -.") {
			t.Errorf("code %q is not UPPER_SNAKE", c.Code)
		}
		if len(strings.Fields(c.Explain)) < 15 {
			t.Errorf("code %s: explanation too thin (%q)", c.Code, c.Explain)
		}
		if c.Title == "" {
			t.Errorf("code %s has no title", c.Code)
		}
	}
	declared := map[string]bool{CodeCheckCrashed: true}
	for _, c := range probeCodes() {
		declared[c.Code] = true // the probe command's, outside the registry
	}
	for _, ch := range ContainerRegistry() {
		for _, code := range ch.Codes {
			declared[code] = true
			c, ok := catalog[code]
			if !ok {
				t.Errorf("check %s declares %s, which has no explanation", ch.ID, code)
				continue
			}
			if c.Layer != ch.Layer {
				t.Errorf("code %s is catalogued at layer %d but check %s is layer %d", code, c.Layer, ch.ID, ch.Layer)
			}
		}
	}
	for code := range catalog {
		if !declared[code] {
			t.Errorf("code %s is catalogued but no check declares it", code)
		}
	}
}

func TestRunRecoversFromAPanickingCheck(t *testing.T) {
	root := hostfs.MustNew(t.TempDir())
	checks := []Check{
		{ID: "t.boom", Layer: report.LayerPCI, Title: "boom", Codes: []string{"X"}, Run: func(*Env, *Out) { panic("boom") }},
		{ID: "t.ok", Layer: report.LayerDriver, Title: "ok", Codes: []string{"Y"}, Run: func(_ *Env, o *Out) {
			o.Add("Y", report.Fail, "host", "a real failure")
		}},
	}
	rep := Run(NewEnv(root, Options{}), checks, Meta{Command: "test"})
	if len(rep.Findings) != 2 {
		t.Fatalf("findings = %+v", rep.Findings)
	}
	if f := rep.Findings[0]; f.Code != CodeCheckCrashed || f.Status != report.NotRun || !strings.Contains(f.Reason, "boom") {
		t.Errorf("panic finding = %+v", f)
	}
	if rep.Verdict.Status != report.Fail || rep.Verdict.Layer != report.LayerDriver {
		t.Errorf("verdict = %+v, want FAIL at layer 2", rep.Verdict)
	}
	if rep.ExitCode() != 1 {
		t.Errorf("exit code %d", rep.ExitCode())
	}
}

func TestLayerFilterAndFailedBelow(t *testing.T) {
	root := hostfs.MustNew(t.TempDir())
	var sawFail bool
	checks := []Check{
		{ID: "t.l3", Layer: report.LayerDevNode, Title: "l3", Codes: []string{"C"}, Run: func(e *Env, o *Out) {
			_, sawFail = e.FailedBelow("0000:01:00.0", report.LayerDevNode)
			o.Add("C", report.Pass, "0000:01:00.0", "fine")
		}},
		{ID: "t.l1", Layer: report.LayerPCI, Title: "l1", Codes: []string{"A"}, Run: func(_ *Env, o *Out) {
			o.Add("A", report.Fail, "0000:01:00.0", "broken")
		}},
	}
	rep := Run(NewEnv(root, Options{}), checks, Meta{})
	if !sawFail {
		t.Error("layer 3 did not see the layer 1 FAIL: checks must run in layer order")
	}
	if rep.Verdict.Layer != report.LayerPCI {
		t.Errorf("verdict layer %d", rep.Verdict.Layer)
	}
	rep = Run(NewEnv(root, Options{Layers: []report.Layer{report.LayerDevNode}}), checks, Meta{})
	if len(rep.Findings) != 1 || rep.Findings[0].Check != "t.l3" || rep.ExitCode() != 0 {
		t.Errorf("layer filter: %+v", rep.Findings)
	}
}
