package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A consequence is shown under its cause, and the verdict names the
// cause, even when the consequences were reported first.
func TestConsequencesFollowTheirCause(t *testing.T) {
	off := Finding{Check: "iommu.enabled", Code: "IOMMU_OFF", Layer: LayerIOMMU, Status: Fail, Subject: "host", Summary: "the IOMMU is off"}
	bind := func(addr string) Finding {
		return Finding{Check: "vfio.bound", Code: "VFIO_DEVICE_NOT_BOUND", Layer: LayerIOMMU, Status: Fail, Subject: addr, Summary: "not bound to vfio-pci"}.Because(off)
	}
	r := &Report{Command: "iommu", Layers: []Layer{LayerIOMMU}, Findings: []Finding{
		bind("0000:17:00.0"), bind("0000:18:00.0"), off,
		{Check: "iommu.memlock", Code: "VFIO_MEMLOCK", Layer: LayerIOMMU, Status: Warn, Subject: "host", Summary: "low"},
	}}
	r.Decide()
	if r.Verdict.Cause == nil || *r.Verdict.Cause != (Cause{Code: "IOMMU_OFF", Subject: "host"}) {
		t.Fatalf("verdict cause %+v", r.Verdict.Cause)
	}
	if !strings.Contains(r.Verdict.Summary, "the cause: IOMMU_OFF host (2 finding(s) follow from it)") {
		t.Errorf("summary %q", r.Verdict.Summary)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	iOff := strings.Index(out, "FAIL IOMMU_OFF")
	iBind := strings.Index(out, "FAIL VFIO_DEVICE_NOT_BOUND")
	if iOff < 0 || iBind < 0 || iOff > iBind {
		t.Fatalf("the cause is not listed before its consequences:\n%s", out)
	}
	if !strings.Contains(out, "\n    FAIL VFIO_DEVICE_NOT_BOUND") {
		t.Errorf("consequences are not indented under the cause:\n%s", out)
	}
	if !strings.Contains(out, "follows from: IOMMU_OFF host") {
		t.Errorf("a consequence's details do not name its cause:\n%s", out)
	}
	b.Reset()
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Findings []struct {
			Code     string `json:"code"`
			CausedBy *Cause `json:"caused_by"`
		} `json:"findings"`
		Verdict struct {
			Cause *Cause `json:"cause"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Findings[0].CausedBy == nil || doc.Findings[0].CausedBy.Code != "IOMMU_OFF" || doc.Findings[2].CausedBy != nil || doc.Verdict.Cause == nil {
		t.Errorf("JSON: %s", b.String())
	}
}

// A cause that is not in the report, or that passed, explains nothing;
// a cycle of causes neither hangs nor drops a finding.
func TestCausesThatExplainNothing(t *testing.T) {
	a := Finding{Check: "a", Code: "A", Layer: 2, Status: Fail, Subject: "host", Summary: "a"}
	b := Finding{Check: "b", Code: "B", Layer: 3, Status: Fail, Subject: "host", Summary: "b"}
	pass := Finding{Check: "p", Code: "P", Layer: 1, Status: Pass, Subject: "host", Summary: "p"}
	cases := map[string][]Finding{
		"absent": {a.Because(Finding{Code: "GONE", Subject: "host"})},
		"pass":   {pass, a.Because(pass)},
		"cycle":  {a.Because(b), b.Because(a)},
	}
	for name, fs := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Report{Layers: []Layer{1, 2, 3}, Findings: fs}
			r.Decide()
			if r.Verdict.Status != Fail || r.Verdict.Layer != 2 {
				t.Errorf("verdict %+v", r.Verdict)
			}
			if name != "cycle" && r.Verdict.Cause != nil {
				t.Errorf("a cause that explains nothing is named: %+v", r.Verdict.Cause)
			}
			var out bytes.Buffer
			if err := WriteText(&out, r, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if f.Status == Fail && !strings.Contains(out.String(), "FAIL "+f.Code) {
					t.Errorf("%s missing from the problem list:\n%s", f.Code, out.String())
				}
			}
		})
	}
}

// A PASS that is context (a mode detected) does not make its layer PASS:
// alone it leaves the layer with nothing judged.
func TestContextIsNotAVerdict(t *testing.T) {
	mode := Finding{Check: "cgroup.mode", Code: "CGROUP_MODE", Layer: LayerCgroup, Status: Pass, Subject: "host", Summary: "cgroup v2", Context: true}
	pci := Finding{Check: "pci", Code: "PCI_OK", Layer: LayerPCI, Status: Pass, Subject: "host", Summary: "looked"}
	r := &Report{Layers: []Layer{LayerPCI, LayerCgroup}, Findings: []Finding{pci, mode}}
	r.Decide()
	if r.Verdict.Status != Pass || r.Verdict.Summary != "PASS for layer 1; nothing to judge in layer 4" {
		t.Errorf("verdict %s %q", r.Verdict.Status, r.Verdict.Summary)
	}
	if o := r.Verdict.Outcomes[1]; o.Status != "" || o.Judged != 0 {
		t.Errorf("layer 4 outcome %+v, want nothing judged", o)
	}
	r = &Report{Layers: []Layer{LayerCgroup}, Findings: []Finding{mode}}
	r.Decide()
	if r.Verdict.Status != NotRun {
		t.Errorf("a run of context only: %s %q, want NOT_RUN", r.Verdict.Status, r.Verdict.Summary)
	}
	judged := mode
	judged.Context = false
	r = &Report{Layers: []Layer{LayerCgroup}, Findings: []Finding{judged}}
	r.Decide()
	if r.Verdict.Status != Pass {
		t.Errorf("a judged PASS: %s", r.Verdict.Status)
	}
}
