package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sample() *Report {
	zero := 0
	r := &Report{
		SchemaVersion: SchemaVersion, Tool: "accel-doctor test", Command: "check", Source: "fixture", Root: "/",
		Generated: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Devices: []Device{{ID: "0000:17:00.0", Kind: "gpu", Vendor: "NVIDIA Corporation", Name: "GH100", Driver: "nvidia",
			NUMANode: &zero, Nodes: []string{"/dev/nvidia0"}, Description: "NVIDIA GH100 [10de:2330]"}},
		Findings: []Finding{
			{Check: "pci.inventory", Code: "PCI_ACCEL_PRESENT", Layer: LayerPCI, Status: Pass, Subject: "0000:17:00.0", Summary: "accelerator on the PCI bus"},
			{Check: "pci.link", Code: "PCI_LINK_DEGRADED", Layer: LayerPCI, Status: Warn, Subject: "0000:17:00.0", Summary: "link x8 of x16",
				Evidence: []Evidence{{Path: "/sys/bus/pci/devices/0000:17:00.0/current_link_width", Value: "8"}}, Remediation: "reseat | check risers"},
			{Check: "devnode.present", Code: "DEVNODE_MISSING", Layer: LayerDevNode, Status: Fail, Subject: "/dev/nvidia0", Summary: "node missing",
				Evidence: []Evidence{{Value: "lstat /dev/nvidia0: no such file"}}, Remediation: "run nvidia-modprobe"},
			{Check: "devnode.present", Code: "DEVNODE_OK", Layer: LayerDevNode, Status: Pass, Subject: "/dev/nvidiactl", Summary: "char 195:255"},
			{Check: "cgroup.policy", Code: "CGROUP_POLICY_UNREADABLE", Layer: LayerCgroup, Status: NotRun, Subject: "host", Summary: "policy hidden", Reason: "default-allow cgroup"},
		},
	}
	r.Decide()
	return r
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from golden; got:\n%s", name, got)
	}
}

func TestVerdictNamesFirstFailingLayer(t *testing.T) {
	r := sample()
	if r.Verdict.Status != Fail || r.Verdict.Layer != LayerDevNode {
		t.Fatalf("verdict %+v", r.Verdict)
	}
	if r.ExitCode() != 1 {
		t.Errorf("exit %d", r.ExitCode())
	}
	r.Findings = r.Findings[:2]
	r.Decide()
	if r.Verdict.Status != Warn || r.ExitCode() != 0 {
		t.Errorf("warn-only verdict %+v exit %d", r.Verdict, r.ExitCode())
	}
}

func TestTextGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sample(), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Error("colour without Color")
	}
	if strings.Contains(b.String(), "PCI_ACCEL_PRESENT") || !strings.Contains(b.String(), "PCI_LINK_DEGRADED") {
		t.Errorf("the default lists problems only:\n%s", b.String())
	}
	golden(t, "sample.txt.golden", b.Bytes())
	b.Reset()
	WriteText(&b, sample(), TextOptions{Verbose: true})
	if !strings.Contains(b.String(), "PCI_ACCEL_PRESENT") || !strings.Contains(b.String(), "PCI_LINK_DEGRADED") {
		t.Errorf("--verbose output:\n%s", b.String())
	}
	golden(t, "sample-verbose.txt.golden", b.Bytes())
	b.Reset()
	WriteText(&b, sample(), TextOptions{Color: true})
	if !strings.Contains(b.String(), ansiRed) {
		t.Error("no colour with Color")
	}
}

func TestMarkdownGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sample()); err != nil {
		t.Fatal(err)
	}
	golden(t, "sample.md.golden", b.Bytes())
}

func TestJSONHasSchemaVersion(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sample()); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["schema_version"] != float64(SchemaVersion) {
		t.Errorf("schema_version = %v", m["schema_version"])
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Findings) != 5 || back.Findings[1].Evidence[0].Value != "8" {
		t.Errorf("round trip: %v %+v", err, back.Findings)
	}
	golden(t, "sample.json.golden", b.Bytes())
}
