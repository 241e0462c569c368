package diagnose

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/iommu"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// withoutGroups plants DMA remapping off in a tree: the groups directory
// empty (as the kernel leaves it, iommu_init creating it whatever it
// finds), no function's iommu_group link, no IOMMU unit.
func withoutGroups(h *fixture.Host) {
	for _, p := range h.Paths() {
		if strings.HasPrefix(p, iommu.GroupsDir+"/") || strings.HasPrefix(p, iommu.ClassDir+"/") || strings.HasSuffix(p, "/iommu_group") {
			h.Remove(p)
		}
	}
	h.SetNode(hostfs.Node{Path: iommu.GroupsDir, Type: hostfs.TypeDir, Mode: 0o755})
}

// firmwareOf copies the ACPI tables, kernel release, configuration and
// command line of the iommu-off-sm-on tree into h: a DMAR table (dmar)
// or none, and intel_iommu=sm_on alone on the command line.
func firmwareOf(t *testing.T, h *fixture.Host, dmar bool) {
	t.Helper()
	off := fixture.IOMMUOff()
	n := 0
	for _, p := range off.Paths() {
		if !strings.HasPrefix(p, iommu.TablesDir+"/") && !strings.HasPrefix(p, "/boot/") && p != "/proc/cmdline" && p != "/proc/sys/kernel/osrelease" {
			continue
		}
		if p == iommu.TablesDir+"/"+iommu.SigDMAR && !dmar {
			continue
		}
		b, ok := off.File(p)
		if !ok {
			t.Fatalf("%s is not a file of %s", p, off.Name)
		}
		h.SetFile(p, b)
		n++
	}
	if n < 5 {
		t.Fatalf("%d files copied from %s", n, off.Name)
	}
}

// The eight H100 host with its IOMMU off (a DMAR table, intel_iommu=sm_on
// alone, the kernel's default off). Asked for passthrough, IOMMU_OFF is the
// FAIL and every VFIO_DEVICE_NOT_BOUND follows from it: the verdict names
// it, and the text lists it first with the eight indented under it. Under
// plain check, with nothing on the host configured for VFIO, it is a WARN
// and no VFIO finding is made.
func TestIOMMUOffIsTheCause(t *testing.T) {
	h := fixture.NVIDIAx8()
	withoutGroups(&h)
	firmwareOf(t, &h, true)

	rep := vfioRun(t, h, Options{Passthrough: true})
	off := layer7(rep, codeIOMMUOff)
	if len(off) != 1 || off[0].Status != report.Fail {
		t.Fatalf("IOMMU_OFF %+v", off)
	}
	bound := layer7(rep, codeVFIONotBound)
	if len(bound) != len(fixture.H100GPUs) {
		t.Fatalf("%d VFIO_DEVICE_NOT_BOUND, want %d", len(bound), len(fixture.H100GPUs))
	}
	for _, f := range bound {
		if f.CausedBy == nil || *f.CausedBy != (report.Cause{Code: codeIOMMUOff, Subject: "host"}) {
			t.Errorf("%s: caused by %+v, want IOMMU_OFF host", f.Subject, f.CausedBy)
		}
	}
	if c := rep.Verdict.Cause; c == nil || c.Code != codeIOMMUOff || !strings.Contains(rep.Verdict.Summary, "the cause: IOMMU_OFF host (8 finding(s) follow from it)") {
		t.Errorf("verdict %q, cause %+v", rep.Verdict.Summary, c)
	}
	// vfio-pci is not loaded either: a cause of its own, not one of
	// IOMMU_OFF's; nothing else in the layer is a FAIL of its own.
	for _, f := range rootFails(rep) {
		if f.Code != codeIOMMUOff && f.Code != codeVFIOModule {
			t.Errorf("a FAIL that follows from nothing: %s %s: %s", f.Code, f.Subject, f.Summary)
		}
	}
	text := reportText(t, rep)
	iOff := strings.Index(text, "FAIL IOMMU_OFF")
	iBound := strings.Index(text, "FAIL VFIO_DEVICE_NOT_BOUND")
	if iOff < 0 || iBound < 0 || iOff > iBound || strings.Count(text, "\n    FAIL VFIO_DEVICE_NOT_BOUND") != len(fixture.H100GPUs) {
		t.Errorf("the cause is not listed first with its consequences under it:\n%s", head(text, 20))
	}
	if !strings.Contains(text, "follows from: IOMMU_OFF host") {
		t.Error("a consequence's details do not name its cause")
	}

	plain := vfioRun(t, h, Options{})
	if off := layer7(plain, codeIOMMUOff); len(off) != 1 || off[0].Status != report.Warn {
		t.Errorf("plain check: IOMMU_OFF %+v, want one WARN", off)
	}
	if got := vfioFindings(plain); len(got) != 0 {
		t.Errorf("plain check: VFIO findings on a host that means no device for VFIO: %v", keys(got))
	}

	// vfio-pci ids on the command line are the host's own VFIO
	// configuration, even when they name no function here: the FAIL.
	ids := h.Clone()
	cmd, _ := ids.File("/proc/cmdline")
	ids.SetString("/proc/cmdline", strings.TrimSpace(string(cmd))+" vfio-pci.ids=10de:1db6\n")
	rep = vfioRun(t, ids, Options{})
	if off := layer7(rep, codeIOMMUOff); len(off) != 1 || off[0].Status != report.Fail || !evidenceSays(off[0], "vfio-pci ids 10de:1db6") {
		t.Errorf("vfio-pci.ids on the command line: IOMMU_OFF %+v", off)
	}
}

// The iommu-off-sm-on tree means 01:00.0 for vfio-pci (driver_override):
// under plain check that is passthrough asked, so IOMMU_OFF is the FAIL
// and the device's NOT_BOUND its consequence, listed after it.
func TestIOMMUOffMeantByTheHost(t *testing.T) {
	rep := runFixture(t, hostfs.MustNew(filepath.Join(hostsDir, fixture.NameIOMMUOff)), fixture.NameIOMMUOff, Options{})
	off := layer7(rep, codeIOMMUOff)
	bound := layer7(rep, codeVFIONotBound)
	if len(off) != 1 || off[0].Status != report.Fail || !evidenceSays(off[0], "meant for passthrough: 0000:01:00.0 (driver_override vfio-pci") {
		t.Fatalf("IOMMU_OFF %+v", off)
	}
	if len(bound) != 1 || bound[0].CausedBy == nil || bound[0].CausedBy.Code != codeIOMMUOff {
		t.Fatalf("VFIO_DEVICE_NOT_BOUND %+v", bound)
	}
	text := reportText(t, rep)
	if i, j := strings.Index(text, "FAIL IOMMU_OFF"), strings.Index(text, "FAIL VFIO_DEVICE_NOT_BOUND"); i < 0 || j < i {
		t.Errorf("the cause's line is not before its consequence's:\n%s", head(text, 12))
	}
}

// A host where nothing describes an IOMMU (no DMAR, IVRS, IORT or VIOT
// table, no unit, no group): whether the platform has one is unknown (a
// firmware with VT-d disabled hands the kernel no table), a WARN under
// plain check that leaves the layer WARN, never PASS; asked for
// passthrough it is the FAIL the VFIO findings follow from.
func TestIOMMUAbsent(t *testing.T) {
	h := fixture.NVIDIAx8()
	withoutGroups(&h)
	firmwareOf(t, &h, false)

	plain := vfioRun(t, h, Options{})
	abs := layer7(plain, codeIOMMUAbsent)
	if len(abs) != 1 || abs[0].Status != report.Warn || !strings.Contains(abs[0].Summary, "unknown whether this platform has an IOMMU") {
		t.Fatalf("plain check: IOMMU_ABSENT %+v", abs)
	}
	for _, o := range plain.Verdict.Outcomes {
		if o.Layer == report.LayerIOMMU && o.Status != report.Warn {
			t.Errorf("layer 7 is %s, want WARN", o.Status)
		}
	}

	// The iommu command alone: still unknown, a WARN.
	cmd := vfioRun(t, h, Options{Passthrough: true})
	if abs = layer7(cmd, codeIOMMUAbsent); len(abs) != 1 || abs[0].Status != report.Warn {
		t.Fatalf("iommu alone: IOMMU_ABSENT %+v", abs)
	}
	rep := vfioRun(t, h, Options{Passthrough: true, PID: 1})
	abs = layer7(rep, codeIOMMUAbsent)
	if len(abs) != 1 || abs[0].Status != report.Fail {
		t.Fatalf("passthrough: IOMMU_ABSENT %+v", abs)
	}
	bound := layer7(rep, codeVFIONotBound)
	for _, f := range bound {
		if f.CausedBy == nil || f.CausedBy.Code != codeIOMMUAbsent {
			t.Errorf("%s: caused by %+v, want IOMMU_ABSENT", f.Subject, f.CausedBy)
		}
	}
	if len(bound) != len(fixture.H100GPUs) || rep.Verdict.Cause == nil || rep.Verdict.Cause.Code != codeIOMMUAbsent {
		t.Errorf("%d NOT_BOUND, verdict cause %+v", len(bound), rep.Verdict.Cause)
	}

	// An IOMMU unit the kernel registered is an IOMMU described, by the
	// kernel if not by a table: off, not absent.
	unit := h.Clone()
	unit.SetLink(iommu.ClassDir+"/dmar0", "/sys/devices/virtual/iommu/dmar0")
	unit.SetString("/sys/devices/virtual/iommu/dmar0/intel-iommu/version", "1:0\n")
	rep = vfioRun(t, unit, Options{})
	if off := layer7(rep, codeIOMMUOff); len(off) != 1 || off[0].Status != report.Warn || !strings.Contains(off[0].Summary, "IOMMU unit(s) dmar0") ||
		!evidenceSays(off[0], "yet no group exists") || len(layer7(rep, codeIOMMUAbsent)) != 0 {
		t.Errorf("a unit without groups: %+v", layer7(rep, codeIOMMUOff))
	}
}

// Healthy: the HGX KubeVirt node judged for passthrough has no FAIL in
// layer 7 and the IOMMU on; the real captures whose functions carry
// iommu_group links (DMA remapping on) have no IOMMU_OFF or IOMMU_ABSENT
// at all; this machine, live, says what it has: with no group and no
// table (the VM the tests run on) it is the WARN, never a PASS or a FAIL.
func TestIOMMUStateHealthy(t *testing.T) {
	rep := runFixture(t, hostfs.MustNew(filepath.Join(hostsDir, fixture.NameHGXVFIO)), fixture.NameHGXVFIO, Options{Passthrough: true})
	if on := layer7(rep, codeIOMMUOn); len(on) != 1 || on[0].Status != report.Pass {
		t.Errorf("HGX: IOMMU_ON %+v", on)
	}
	for _, f := range rep.Findings {
		if f.Layer == report.LayerIOMMU && f.Status == report.Fail {
			t.Errorf("HGX: %s %s: %s", f.Code, f.Subject, f.Summary)
		}
	}

	live := NewEnv(hostfs.MustNew("/"), Options{})
	if s := live.IOMMU(); s.On == iommu.No && s.Vendor == "" && len(s.Units) == 0 {
		rep := runFixtureEnv(t, live, "live")
		if abs := layer7(rep, codeIOMMUAbsent); len(abs) != 1 || abs[0].Status != report.Warn {
			t.Errorf("live, no IOMMU: IOMMU_ABSENT %+v, want one WARN", abs)
		}
	} else {
		t.Logf("live: IOMMU %v (%q): the no-IOMMU case does not apply here", s.On, s.Vendor)
	}

	dir := testutil.CorpusDir(t)
	linked := 0
	for _, pat := range []string{"ghw/*.tar.gz", "procfs/*.tar.gz"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, a := range m {
			tree := testutil.Unpack(t, a)
			if tree == "" {
				continue
			}
			e := NewEnv(hostfs.MustNew(tree), Options{})
			if s := e.IOMMU(); s.On != iommu.Yes || !s.GroupsFromLinks {
				continue
			}
			linked++
			rep := runFixtureEnv(t, e, filepath.Base(a))
			if f := append(layer7(rep, codeIOMMUOff), layer7(rep, codeIOMMUAbsent)...); len(f) > 0 {
				t.Errorf("%s: DMA remapping on, yet %+v", filepath.Base(a), f)
			}
			for _, f := range rep.Findings {
				if f.Layer == report.LayerIOMMU && f.Status == report.Fail {
					t.Errorf("%s: %s %s: %s", filepath.Base(a), f.Code, f.Subject, f.Summary)
				}
			}
		}
	}
	if linked == 0 {
		t.Error("no capture of the corpus has iommu_group links")
	}
}

// Cannot look: a tree with neither the groups directory nor any
// iommu_group link says NOT_RUN with the reason, and the VFIO findings
// asked for name no cause (nothing says the IOMMU is off).
func TestIOMMUStateCannotLook(t *testing.T) {
	h := fixture.NVIDIAx8()
	withoutGroups(&h)
	h.Remove(iommu.GroupsDir)
	rep := vfioRun(t, h, Options{Passthrough: true})
	unk := layer7(rep, codeGroupsUnknown)
	if len(unk) != 1 || unk[0].Status != report.NotRun || unk[0].Reason == "" {
		t.Fatalf("IOMMU_STATE_UNKNOWN %+v", unk)
	}
	if f := append(layer7(rep, codeIOMMUOff), layer7(rep, codeIOMMUAbsent)...); len(f) > 0 {
		t.Errorf("a verdict on the IOMMU that could not be read: %+v", f)
	}
	for _, f := range layer7(rep, codeVFIONotBound) {
		if f.CausedBy != nil {
			t.Errorf("%s follows from %+v, which was not judged", f.Subject, f.CausedBy)
		}
	}
}

// layer7 are the report's layer-7 findings with that code.
func layer7(rep *report.Report, code string) []report.Finding {
	var out []report.Finding
	for _, f := range rep.Findings {
		if f.Layer == report.LayerIOMMU && f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

func evidenceSays(f report.Finding, s string) bool {
	for _, e := range f.Evidence {
		if strings.Contains(e.Value, s) {
			return true
		}
	}
	return false
}

func reportText(t *testing.T, rep *report.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteText(&b, rep, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
