package report

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestSchemaDocumented fails when the JSON report has a field that
// docs/report-schema.md does not describe.
func TestSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/report-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	r := sample()
	// A consequence, so that caused_by and the verdict's cause are written.
	r.Findings = append(r.Findings, Finding{Check: "devnode.present", Code: "DEVNODE_MISSING", Layer: LayerDevNode, Status: Fail,
		Subject: "/dev/nvidia1", Summary: "node missing"}.Because(r.Findings[2]))
	r.Decide()
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	collectKeys(v, keys, false)
	for k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") && !strings.Contains(string(doc), `"`+k+`"`) {
			t.Errorf("JSON field %q is not documented in docs/report-schema.md", k)
		}
	}
}

func collectKeys(v any, keys map[string]bool, inCounts bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if !inCounts {
				keys[k] = true
			}
			collectKeys(c, keys, k == "counts")
		}
	case []any:
		for _, c := range x {
			collectKeys(c, keys, false)
		}
	}
}

// TestTopologySchemaDocumented: every field of topo's JSON documents is
// in docs/report-schema.md.
func TestTopologySchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/report-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	n, g := 0, 3
	tp := &Topology{Source: "s", Checked: true, NUMANodes: []TopoNUMA{{ID: 0, CPUs: "0-3"}}, IOMMUGroups: []TopoGroup{{ID: 3, Members: []string{"x"}}},
		Notes: []string{"n"}, RootComplexes: []TopoNode{{ID: "pci0000:00", Kind: TopoHostBridge, NUMANode: &n,
			Children: []TopoNode{{ID: "0000:00:01.0", Kind: TopoSwitchDownstream, KindFrom: "chain", KindNote: "n", Switch: "s", IDs: "1:2",
				Class: "060400", Name: "n", Driver: "d", NUMANode: &n, IOMMUGroup: &g, Link: "l", Accelerator: "gpu", NIC: true,
				Interfaces: []string{"i"}, VF: true, Failing: true, Warning: true}}}},
		Unplaced: []TopoNode{{ID: "x", Kind: TopoEndpoint}}}
	m := &AffinityMatrix{Source: "s", Checked: true, Devices: []MatrixDevice{{Label: "GPU0", Address: "a", Kind: "gpu", Name: "n", Interfaces: []string{"i"},
		CPUAffinity: "0", NUMAAffinity: &n, Failing: true, Warning: true}}, Classes: [][]string{{"X"}}, Legend: []string{"l"}, Notes: []string{"n"}}
	for _, v := range []any{tp, m} {
		var b bytes.Buffer
		if err := WriteJSONValue(&b, v); err != nil {
			t.Fatal(err)
		}
		var x any
		if err := json.Unmarshal(b.Bytes(), &x); err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		collectKeys(x, keys, false)
		for k := range keys {
			if !strings.Contains(string(doc), "`"+k+"`") {
				t.Errorf("topo JSON field %q is not documented in docs/report-schema.md", k)
			}
		}
	}
}
