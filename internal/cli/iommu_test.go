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
		args []string
		code int
		want []string // "CODE STATUS"
	}{
		{"gpu-audio-snd-hda-intel", nil, 1, []string{"IOMMU_ON PASS", "IOMMU_GROUP_NOT_VIABLE FAIL"}},
		{"gpu4-switch-noacs", nil, 0, []string{"IOMMU_GROUP_SHARED WARN", "IOMMU_ACS_PATH_UNISOLATED WARN"}},
		{"gpu4-switch-acs", nil, 0, []string{"IOMMU_GROUP_VIABLE PASS", "VFIO_READY PASS"}},
		// QEMU (pid 5150) with systemd's 8 MiB RLIMIT_MEMLOCK and a 16 GiB guest.
		{"gpu4-switch-acs", []string{"--pid", "5150", "--guest-memory", "16G"}, 1, []string{"VFIO_READY PASS", "VFIO_MEMLOCK_LOW FAIL"}},
		{"hgx-h100x8-vfio", nil, 0, []string{"IOMMU_GROUP_VIABLE PASS", "VFIO_READY PASS"}},
		// 01:00.0 has driver_override vfio-pci: the host means it for VFIO, and the IOMMU is off.
		{"iommu-off-sm-on", nil, 1, []string{"IOMMU_OFF FAIL", "IOMMU_CMDLINE_NO_EFFECT WARN", "VFIO_DEVICE_NOT_BOUND FAIL"}},
	} {
		out, stderr, code := run(t, append([]string{"iommu", "--root", hosts + c.host, "-o", "json"}, c.args...)...)
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
	for _, bad := range [][]string{{"--pid", "999999999"}, {"--pid", "1", "--guest-memory", "lots"}} {
		if _, stderr, code := run(t, append([]string{"iommu"}, bad...)...); code != 2 || stderr == "" {
			t.Errorf("iommu %v: exit %d, stderr %q; want a usage error", bad, code, stderr)
		}
	}
}
