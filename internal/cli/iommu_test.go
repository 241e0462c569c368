package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// iommu over the IOMMU fixture trees: each planted fault is the finding
// it should be, and the healthy trees have none; live, this machine has
// no IOMMU, says so and exits 0.
func TestIOMMUCommand(t *testing.T) {
	for _, c := range []struct {
		host string
		code int
		want []string // "CODE STATUS"
	}{
		{"gpu-audio-snd-hda-intel", 1, []string{"IOMMU_ON PASS", "IOMMU_GROUP_NOT_VIABLE FAIL"}},
		{"gpu4-switch-noacs", 0, []string{"IOMMU_GROUP_SHARED WARN", "IOMMU_ACS_PATH_UNISOLATED WARN"}},
		{"gpu4-switch-acs", 0, []string{"IOMMU_GROUP_VIABLE PASS"}},
		{"hgx-h100x8-vfio", 0, []string{"IOMMU_GROUP_VIABLE PASS"}},
		{"iommu-off-sm-on", 0, []string{"IOMMU_OFF WARN", "IOMMU_CMDLINE_NO_EFFECT WARN"}},
	} {
		out, stderr, code := run(t, "iommu", "--root", hosts+c.host, "-o", "json")
		var rep report.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v: %s", c.host, err, stderr)
		}
		got := map[string]bool{}
		for _, f := range rep.Findings {
			got[f.Code+" "+string(f.Status)] = true
			if c.code == 0 && f.Status == report.Fail {
				t.Errorf("%s: unexpected FAIL %s: %s", c.host, f.Code, f.Summary)
			}
		}
		for _, w := range c.want {
			if !got[w] {
				t.Errorf("%s: no %s in %v", c.host, w, got)
			}
		}
		if code != c.code {
			t.Errorf("%s: exit %d, want %d", c.host, code, c.code)
		}
	}
	out, _, code := run(t, "iommu")
	if code != 0 || !strings.Contains(out, "Verdict: PASS") {
		t.Errorf("live: exit %d\n%s", code, out)
	}
}
