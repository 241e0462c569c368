package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func probeJSON(t *testing.T, args ...string) (*report.Report, int) {
	t.Helper()
	out, stderr, code := run(t, append([]string{"probe", "-o", "json"}, args...)...)
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("probe %v: exit %d: %v: %s", args, code, err, stderr)
	}
	return &rep, code
}

func findingFor(rep *report.Report, check, subject string) *report.Finding {
	for i, f := range rep.Findings {
		if f.Check == check && f.Subject == subject {
			return &rep.Findings[i]
		}
	}
	return nil
}

// TestProbeNothingToExamine: no accelerator node and no driver library
// is exit 2, every step NOT_RUN with its reason, the library reasons
// naming the places searched.
func TestProbeNothingToExamine(t *testing.T) {
	if s := probe.FindLibrary(probe.LibCUDA, os.Getenv); s.Found != "" {
		t.Skipf("this machine has %s", s.Found)
	}
	rep, code := probeJSON(t, "--dev", t.TempDir(), "--termination-log", "")
	if code != 2 || rep.Verdict.Status != report.NotRun {
		t.Fatalf("exit %d, verdict %+v", code, rep.Verdict)
	}
	codes := map[string]string{}
	for _, f := range rep.Findings {
		if f.Status != report.NotRun || f.Reason == "" || f.Layer != report.LayerFunctional {
			t.Errorf("%+v", f)
		}
		codes[f.Code] = f.Reason
	}
	if !strings.HasPrefix(codes[probe.CodeCUDANotRun], "libcuda.so.1 not found in ") ||
		!strings.Contains(codes[probe.CodeCUDANotRun], probe.LdCachePath) ||
		!strings.HasPrefix(codes[probe.CodeNVMLNotRun], "libnvidia-ml.so.1 not found in ") {
		t.Errorf("library reasons: %q", codes)
	}
	if _, ok := codes[probe.CodeNoNodes]; !ok {
		t.Errorf("no %s: %v", probe.CodeNoNodes, codes)
	}
}

func TestProbeRefusesRoot(t *testing.T) {
	if _, stderr, code := run(t, "probe", "--root", "/host"); code != 2 || !strings.Contains(stderr, "--root does not apply") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// probeDev is a tmpfs /dev for the probe (made by the probe package's
// tests the same way).
func probeDev(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod and mount")
	}
	dev := filepath.Join(t.TempDir(), "dev")
	os.Mkdir(dev, 0o755)
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID, "mode=755,size=64k"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dev, unix.MNT_DETACH) })
	os.Mkdir(filepath.Join(dev, "dri"), 0o755)
	return dev
}

func mkchar(t *testing.T, p string, major, minor uint32) {
	t.Helper()
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o666)
}

// TestProbeHealthyNode: a node backed by a real driver (1:5, /dev/zero's)
// under an NVIDIA name opens; the verdict is PASS and the libraries'
// NOT_RUN is partial, not the verdict.
func TestProbeHealthyNode(t *testing.T) {
	dev := probeDev(t)
	mkchar(t, filepath.Join(dev, "nvidia0"), 1, 5)
	rep, code := probeJSON(t, "--dev", dev, "--termination-log", "")
	f := findingFor(rep, "probe.open", filepath.Join(dev, "nvidia0"))
	if code != 0 || rep.Verdict.Status != report.Pass || f == nil || f.Code != probe.CodeNodeOpened || f.Status != report.Pass {
		t.Fatalf("exit %d, verdict %+v, finding %+v", code, rep.Verdict, f)
	}
}

// TestProbeFailuresAndTerminationLog: a render node of the wrong driver
// (ENOTTY) and a card node with no driver (ENXIO) are FAILs, exit 1, and
// the summary goes to the termination log that exists — and nowhere when
// it does not.
func TestProbeFailuresAndTerminationLog(t *testing.T) {
	dev := probeDev(t)
	free := uint32(0)
	for _, m := range []uint32{60, 61, 62, 63} {
		if !majorRegistered(t, m) {
			free = m
			break
		}
	}
	if free == 0 {
		t.Skip("no free experimental major")
	}
	mkchar(t, filepath.Join(dev, "dri/renderD128"), 1, 3)
	mkchar(t, filepath.Join(dev, "dri/card0"), free, 0)
	logPath := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(logPath, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, code := probeJSON(t, "--dev", dev, "--termination-log", logPath)
	if code != 1 || rep.Verdict.Status != report.Fail || rep.Verdict.Layer != report.LayerFunctional {
		t.Fatalf("exit %d, verdict %+v", code, rep.Verdict)
	}
	render := findingFor(rep, "probe.ioctl", filepath.Join(dev, "dri/renderD128"))
	card := findingFor(rep, "probe.open", filepath.Join(dev, "dri/card0"))
	cardIoctl := findingFor(rep, "probe.ioctl", filepath.Join(dev, "dri/card0"))
	if render == nil || render.Code != probe.CodeNotThatDriver || render.Status != report.Fail {
		t.Errorf("render node: %+v", render)
	}
	if card == nil || card.Code != probe.CodeNodeNoDriver || !strings.Contains(card.Summary, "ENXIO") {
		t.Errorf("card node: %+v", card)
	}
	if cardIoctl == nil || cardIoctl.Status != report.NotRun || !strings.Contains(cardIoctl.Reason, "ENXIO") {
		t.Errorf("card ioctl: %+v", cardIoctl)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	msg := string(b)
	if !strings.HasPrefix(msg, "accel-doctor probe: FAIL") || !strings.Contains(msg, probe.CodeNodeNoDriver) || strings.Contains(msg, "stale") || len(b) > 4096 {
		t.Errorf("termination log %q", msg)
	}
	absent := filepath.Join(t.TempDir(), "no-log")
	run(t, "probe", "--dev", dev, "--termination-log", absent)
	if _, err := os.Stat(absent); !os.IsNotExist(err) {
		t.Errorf("the probe created %s: %v", absent, err)
	}
}

func majorRegistered(t *testing.T, major uint32) bool {
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Skip(err)
	}
	chars, _, _ := strings.Cut(string(b), "Block devices")
	return regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d `, major)).MatchString(chars)
}

func TestProbeFacts(t *testing.T) {
	out, _, _ := run(t, "probe", "--facts", "--dev", t.TempDir(), "--termination-log", "", "--no-libraries")
	var r probe.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(r.CUDA.NotRun, "not asked") || len(r.Patterns) == 0 {
		t.Errorf("%+v", r)
	}
}

func TestTerminationSummaryBounded(t *testing.T) {
	rep := &report.Report{}
	for i := 0; i < 500; i++ {
		rep.Findings = append(rep.Findings, report.Finding{Code: probe.CodeNodeCgroupDenied, Status: report.Fail, Layer: report.LayerFunctional,
			Subject: fmt.Sprintf("/dev/nvidia%d", i), Summary: "open O_RDWR: EPERM: the device cgroup refused it"})
	}
	rep.Decide()
	if s := TerminationSummary(rep); len(s) > terminationLogMax || !strings.Contains(s, "/dev/nvidia0:") {
		t.Errorf("%d bytes", len(s))
	}
}

// TestProbeCodes: the functional layer's entries are complete and in the
// catalog that explain prints (TestRemediationCommandsExist runs every
// command they name).
func TestProbeCodes(t *testing.T) {
	for _, c := range probe.Codes {
		d, ok := diagnose.LookupCode(c.Code)
		if !ok || d.Layer != report.LayerFunctional || c.Title == "" || c.Explain == "" || !strings.HasPrefix(c.Code, "PROBE_") {
			t.Errorf("%s: not in the catalog at layer 8, or incomplete", c.Code)
		}
	}
}

// TestProbeFindingsFromFacts judges crafted observations the kernel here
// cannot produce (answers of real drivers, library failures), one per
// code.
func TestProbeFindingsFromFacts(t *testing.T) {
	code := func(n int) *int { return &n }
	r := &probe.Report{Dev: "/dev", Process: probe.Process{UID: 0, CapEff: "00000000a80425fb"},
		Nodes: []probe.NodeProbe{
			{Path: "/dev/dri/renderD128", Kind: probe.KindDRM, IsChar: true, Open: probe.Result{Access: probe.ReadWrite, Node: "c 226:128", Class: probe.OK},
				Ioctl: probe.Ioctl{Name: "DRM_IOCTL_VERSION", Class: probe.Answered, DRM: &probe.DRMVersion{Name: "i915", Major: 1, Minor: 6}}},
			{Path: "/dev/vfio/vfio", Kind: probe.KindVFIOContainer, IsChar: true, Open: probe.Result{Access: probe.ReadWrite, Node: "c 10:196", Class: probe.OK},
				Ioctl: probe.Ioctl{Name: "VFIO_GET_API_VERSION", Class: probe.Answered, VFIO: &probe.VFIOContainer{Extensions: []string{"VFIO_NOIOMMU_IOMMU"}}}},
			{Path: "/dev/vfio/12", Kind: probe.KindVFIOGroup, IsChar: true, Open: probe.Result{Access: probe.ReadWrite, Node: "c 511:0", Class: probe.OK},
				Ioctl: probe.Ioctl{Name: "VFIO_GROUP_GET_STATUS", Class: probe.Answered, VFIOGroup: &probe.VFIOGroupStatus{Viable: false}}},
			{Path: "/dev/vfio/13", Kind: probe.KindVFIOGroup, Open: probe.Result{Access: probe.ReadWrite, Node: "c 511:1", Class: probe.Busy, ErrnoName: "EBUSY"},
				Ioctl: probe.Ioctl{Name: "VFIO_GROUP_GET_STATUS", NotRun: "the open failed (EBUSY)"}},
			{Path: "/dev/kfd", Kind: probe.KindKFD, IsChar: true, Open: probe.Result{Access: probe.ReadWrite, Node: "c 238:0", Class: probe.OK},
				Ioctl: probe.Ioctl{Name: "AMDKFD_IOC_GET_VERSION", Class: probe.Answered, KFD: &probe.KFDVersion{Major: 2}}},
			{Path: "/dev/video0", Kind: probe.KindVideo, IsChar: true, Open: probe.Result{Access: probe.ReadWrite, Node: "c 81:0", Class: probe.OK},
				Ioctl: probe.Ioctl{Name: "VIDIOC_QUERYCAP", Class: probe.DeviceGone, ErrnoName: "ENODEV"}},
			{Path: "/dev/nvidia0", Kind: probe.KindNVIDIA, Open: probe.Result{Access: probe.ReadWrite, Node: "c 195:0", Class: probe.CgroupDenied, ErrnoName: "EPERM"}},
			{Path: "/dev/nvidia1", Kind: probe.KindNVIDIA, Open: probe.Result{Access: probe.ReadWrite, Node: "c 195:1", Class: probe.PermissionDenied, ErrnoName: "EACCES"}},
		},
		NVML: probe.LibProbe{Lib: probe.HelperNVML, Library: probe.LibNVML, Done: true,
			Steps: []probe.Step{{Name: "dlopen", OK: true}, {Name: "nvmlInit_v2", Code: code(17)}}},
		CUDA: probe.LibProbe{Lib: probe.HelperCUDA, Library: probe.LibCUDA, Unfinished: "cuInit", TimedOut: true, Error: "killed after 1m0s",
			Steps: []probe.Step{{Name: "dlopen", OK: true}}},
	}
	got := map[string]report.Status{}
	for _, f := range ProbeFindings(r) {
		got[f.Subject+" "+f.Code] = f.Status
		if f.Code == probe.CodeNVMLFailed && !strings.Contains(f.Summary, "NVML_ERROR_OPERATING_SYSTEM") {
			t.Errorf("nvml summary %q", f.Summary)
		}
		if f.Code == probe.CodeLibIncomplete && !strings.Contains(f.Summary, "cuInit never returned") {
			t.Errorf("cuda summary %q", f.Summary)
		}
	}
	want := map[string]report.Status{
		"/dev/dri/renderD128 " + probe.CodeNodeOpened:     report.Pass,
		"/dev/dri/renderD128 " + probe.CodeDriverAnswered: report.Pass,
		"/dev/vfio/vfio " + probe.CodeNodeOpened:          report.Pass,
		"/dev/vfio/vfio " + probe.CodeVFIONoIOMMU:         report.Fail,
		"/dev/vfio/12 " + probe.CodeNodeOpened:            report.Pass,
		"/dev/vfio/12 " + probe.CodeVFIONotViable:         report.Fail,
		"/dev/vfio/13 " + probe.CodeNodeBusy:              report.Warn,
		"/dev/vfio/13 " + probe.CodeIoctlNotRun:           report.NotRun,
		"/dev/kfd " + probe.CodeNodeOpened:                report.Pass,
		"/dev/kfd " + probe.CodeKFDVersion:                report.Fail,
		"/dev/video0 " + probe.CodeNodeOpened:             report.Pass,
		"/dev/video0 " + probe.CodeIoctlFailed:            report.Fail,
		"/dev/nvidia0 " + probe.CodeNodeCgroupDenied:      report.Fail,
		"/dev/nvidia1 " + probe.CodeNodePermission:        report.Fail,
		"libnvidia-ml.so.1 " + probe.CodeNVMLFailed:       report.Fail,
		"libcuda.so.1 " + probe.CodeLibIncomplete:         report.Fail,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d findings, want %d: %v", len(got), len(want), got)
	}
}
