package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	// Live: a machine without an IOMMU (the VM the tests run on: no
	// group, no DMAR or IVRS table) is WARN IOMMU_ABSENT, "unknown", under
	// iommu and check alike, never PASS: nothing on the host asks for
	// passthrough (no VFIO configuration, no VMM given).
	// A machine with groups has IOMMU_ON instead.
	if groups, err := os.ReadDir("/sys/kernel/iommu_groups"); err == nil && len(groups) == 0 {
		out, _, code := run(t, "iommu")
		if code != 0 || !strings.Contains(out, "WARN IOMMU_ABSENT") {
			t.Errorf("live iommu without an IOMMU: exit %d\n%s", code, out)
		}
		out, _, code = run(t, "check", "--layer", "pci,iommu")
		if code != 0 || !strings.Contains(out, "WARN IOMMU_ABSENT") || !strings.Contains(out, "unknown whether this platform has an IOMMU") {
			t.Errorf("live check without an IOMMU: exit %d\n%s", code, out)
		}
	} else if len(groups) > 0 {
		out, _, _ := run(t, "iommu", "-o", "json")
		if !strings.Contains(out, `"IOMMU_ON"`) {
			t.Errorf("live iommu with %d groups:\n%s", len(groups), out)
		}
	}
	for _, bad := range [][]string{{"--pid", "999999999"}, {"--pid", "1", "--guest-memory", "lots"}} {
		if _, stderr, code := run(t, append([]string{"iommu"}, bad...)...); code != 2 || stderr == "" {
			t.Errorf("iommu %v: exit %d, stderr %q; want a usage error", bad, code, stderr)
		}
	}
}

// The cause first: on the iommu-off-sm-on tree the text lists IOMMU_OFF,
// then the device that cannot be bound to vfio-pci under it, and the
// verdict names the cause; the JSON says the same (caused_by, cause).
func TestIOMMUCommandCauseFirst(t *testing.T) {
	out, _, code := run(t, "iommu", "--root", hosts+"iommu-off-sm-on")
	iOff := strings.Index(out, "FAIL IOMMU_OFF")
	iBound := strings.Index(out, "FAIL VFIO_DEVICE_NOT_BOUND")
	if code != 1 || iOff < 0 || iBound < iOff || !strings.Contains(out, "\n    FAIL VFIO_DEVICE_NOT_BOUND") ||
		!strings.Contains(out, "the cause: IOMMU_OFF host (1 finding(s) follow from it)") {
		t.Errorf("exit %d; the cause is not first, or its consequence not under it:\n%s", code, out)
	}
	js, _, _ := run(t, "iommu", "--root", hosts+"iommu-off-sm-on", "-o", "json")
	var rep report.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict.Cause == nil || *rep.Verdict.Cause != (report.Cause{Code: "IOMMU_OFF", Subject: "host"}) {
		t.Errorf("verdict cause %+v", rep.Verdict.Cause)
	}
	for _, f := range rep.Findings {
		if f.Code == "VFIO_DEVICE_NOT_BOUND" && (f.CausedBy == nil || f.CausedBy.Code != "IOMMU_OFF") {
			t.Errorf("%s: caused_by %+v", f.Subject, f.CausedBy)
		}
	}
}

// --pid over a copy of the gpu4-switch-acs tree: QEMU with 64 KiB of
// RLIMIT_MEMLOCK and no CAP_IPC_LOCK cannot pin any guest, a FAIL without
// --guest-memory; the tree's own 8 MiB needs the guest's size (NOT_RUN,
// exit 0 as nothing FAILs); limits that do not parse are NOT_RUN.
func TestIOMMUCommandMemlockFloor(t *testing.T) {
	for _, c := range []struct {
		name, limits string
		code         int
		want         string
	}{
		{"64 KiB", "65536                65536               ", 1, "VFIO_MEMLOCK_LOW FAIL"},
		{"8 MiB", "", 0, "VFIO_MEMLOCK_LOW NOT_RUN"},
		{"garbage", "garbage", 0, "VFIO_MEMLOCK_LOW NOT_RUN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "host")
			if err := os.CopyFS(root, os.DirFS(hosts+"gpu4-switch-acs")); err != nil {
				t.Skipf("the tree cannot be copied here: %v", err)
			}
			lp := filepath.Join(root, "proc/5150/limits")
			b, err := os.ReadFile(lp)
			if err != nil {
				t.Fatal(err)
			}
			switch c.limits {
			case "":
			case "garbage":
				b = []byte("Max locked memory lots\n")
			default:
				b = []byte(strings.Replace(string(b), "8388608              8388608             ", c.limits, 1))
			}
			if err := os.WriteFile(lp, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, stderr, code := run(t, "iommu", "--root", root, "--pid", "5150", "-o", "json")
			var rep report.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v: %s", err, stderr)
			}
			var got []string
			for _, f := range rep.Findings {
				if f.Code == "VFIO_MEMLOCK_LOW" {
					got = append(got, f.Code+" "+string(f.Status))
					if f.Status == report.NotRun && f.Reason == "" {
						t.Errorf("NOT_RUN without a reason: %+v", f)
					}
				}
			}
			if len(got) != 1 || got[0] != c.want || code != c.code {
				t.Errorf("exit %d, %v; want %d, %s", code, got, c.code, c.want)
			}
		})
	}
}
