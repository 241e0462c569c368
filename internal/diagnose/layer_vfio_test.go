package diagnose

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

const hgxGPU = "0000:06:00.0" // the HGX tree's first GPU, on vfio-pci by driver_override

func vfioRun(t *testing.T, h fixture.Host, opts Options) *report.Report {
	t.Helper()
	root, err := fixture.NewRoot(filepath.Join(t.TempDir(), "host"), h)
	if err != nil {
		t.Fatal(err)
	}
	return runFixture(t, root, h.Name, opts)
}

func vfioHostFixture(t *testing.T, name string) fixture.Host {
	t.Helper()
	h, ok := fixture.ByName(name)
	if !ok {
		t.Fatalf("no fixture %s", name)
	}
	return h.Clone()
}

// byCode collects a report's iommu.vfio findings as "CODE STATUS".
func vfioFindings(rep *report.Report) map[string]report.Finding {
	got := map[string]report.Finding{}
	for _, f := range rep.Findings {
		if f.Check == "iommu.vfio" {
			got[f.Code+" "+string(f.Status)] = f
		}
	}
	return got
}

// unloadVFIOPCI plants vfio-pci unloaded in a tree: its module entry and
// driver directory gone, and the functions it had bound left without a
// driver (their driver_override stays, as unloading leaves it).
func unloadVFIOPCI(h *fixture.Host) {
	for _, p := range h.Paths() {
		switch {
		case p == "/sys/module/vfio_pci" || strings.HasPrefix(p, "/sys/module/vfio_pci/"),
			strings.HasPrefix(p, "/sys/bus/pci/drivers/vfio-pci/"):
			h.Remove(p)
		case strings.HasSuffix(p, "/driver"):
			if t, ok := h.Link(p); ok && t == "/sys/bus/pci/drivers/vfio-pci" {
				h.Remove(p)
			}
		}
	}
}

// rootFails are the layer-7 FAILs of a report that follow from no other
// finding present: what there is to fix, the rest being consequences.
func rootFails(rep *report.Report) []report.Finding {
	causes := rep.Causes()
	var out []report.Finding
	for i, f := range rep.Findings {
		if f.Layer == report.LayerIOMMU && f.Status == report.Fail && causes[i] < 0 {
			out = append(out, f)
		}
	}
	return out
}

// The HGX KubeVirt node is ready: one VFIO_READY PASS and no other VFIO
// finding; each planted fault turns it into the one FAIL it is, every
// other FAIL being marked as following from it.
func TestVFIOHostFindings(t *testing.T) {
	good := vfioHostFixture(t, fixture.NameHGXVFIO)
	gpuDev := "/sys/devices/pci0000:00/0000:00:01.0/0000:04:00.0/0000:05:00.0/" + hgxGPU
	for _, c := range []struct {
		name  string
		plant func(h *fixture.Host)
		want  string
	}{
		{"healthy", func(*fixture.Host) {}, codeVFIOReady + " PASS"},
		{"vfio-pci not loaded", unloadVFIOPCI, codeVFIOModule + " FAIL"},
		// A capture without vfio_pci's /sys/module entry, while
		// vfio-pci's driver directory and bindings show it registered:
		// the module's question is answered, nothing to report.
		{"module entry not captured", func(h *fixture.Host) {
			for _, p := range h.Paths() {
				if strings.HasPrefix(p, "/sys/module/vfio_pci/") || p == "/sys/module/vfio_pci" {
					h.Remove(p)
				}
			}
		}, codeVFIOReady + " PASS"},
		{"bound to nvidia", func(h *fixture.Host) {
			h.SetLink(gpuDev+"/driver", "/sys/bus/pci/drivers/nvidia")
			h.SetString("/sys/bus/pci/drivers/nvidia/uevent", "")
		}, codeVFIONotBound + " FAIL"},
		{"no container node", func(h *fixture.Host) {
			if !h.Remove("/dev/vfio/vfio") {
				t.Fatal("no /dev/vfio/vfio in the tree")
			}
		}, codeVFIOContainer + " FAIL"},
		{"group node missing", func(h *fixture.Host) {
			if !h.Remove("/dev/vfio/8") {
				t.Fatal("no /dev/vfio/8 in the tree")
			}
		}, codeVFIOGroupNode + " FAIL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := good.Clone()
			c.plant(&h)
			rep := vfioRun(t, h, Options{})
			got := vfioFindings(rep)
			if _, ok := got[c.want]; !ok {
				t.Fatalf("no %s in %v", c.want, keys(got))
			}
			for k, f := range got {
				if c.want == codeVFIOReady+" PASS" && k != c.want {
					t.Errorf("healthy host: %s: %s", k, f.Summary)
				}
			}
			roots := rootFails(rep)
			if c.want != codeVFIOReady+" PASS" && (len(roots) != 1 || roots[0].Code+" FAIL" != c.want) {
				for _, f := range roots {
					t.Errorf("a FAIL that follows from nothing: %s %s: %s", f.Code, f.Subject, f.Summary)
				}
			}
		})
	}
}

// Unreadable: /sys/module not captured, and nothing else showing
// vfio-pci registered, says NOT_RUN for the module, not FAIL; a host that
// means no device for VFIO gets no VFIO finding at all.
func TestVFIOCannotLook(t *testing.T) {
	h := vfioHostFixture(t, fixture.NameHGXVFIO)
	unloadVFIOPCI(&h)
	for _, p := range h.Paths() {
		if strings.HasPrefix(p, "/sys/module/") {
			h.Remove(p)
		}
	}
	root, err := fixture.NewRoot(filepath.Join(t.TempDir(), "host"), h)
	if err != nil {
		t.Fatal(err)
	}
	// A capture that did not take /sys/module: the path is outside what
	// it covers, so absence proves nothing.
	if root.Covers("/sys/module/vfio_pci") {
		t.Skip("fixture trees cover /sys/module even when empty; the uncovered case is held by iommu.TestReadModule")
	}
	got := vfioFindings(runFixture(t, root, h.Name, Options{}))
	if _, ok := got[codeVFIOModule+" NOT_RUN"]; !ok {
		t.Errorf("no NOT_RUN module finding: %v", keys(got))
	}
}

func TestVFIONothingMeant(t *testing.T) {
	for _, h := range fixture.All() {
		got := vfioFindings(vfioRun(t, h.Clone(), Options{}))
		if len(got) != 0 {
			t.Errorf("%s: VFIO findings on a host that means no device for VFIO: %v", h.Name, keys(got))
		}
	}
}

// The IOMMU-off host meant 01:00.0 for vfio-pci (driver_override) and
// vfio-pci's probe refused it: not bound, with the IOMMU named as why.
func TestVFIOMeantButIOMMUOff(t *testing.T) {
	got := vfioFindings(vfioRun(t, vfioHostFixture(t, fixture.NameIOMMUOff), Options{}))
	f, ok := got[codeVFIONotBound+" FAIL"]
	if !ok || len(got) != 1 {
		t.Fatalf("findings %v, want VFIO_DEVICE_NOT_BOUND FAIL alone", keys(got))
	}
	if ev := f.Evidence; len(ev) == 0 || !strings.Contains(ev[0].Value, "the IOMMU is off") {
		t.Errorf("evidence does not name the IOMMU: %+v", ev)
	}
}

// A process's side: QEMU's 8 MiB RLIMIT_MEMLOCK against 16 GiB of guest
// is the ENOMEM; unlimited is not; limits that cannot be read are
// NOT_RUN; a process that does not hold the groups another does is told
// they are busy. Where the facts suffice the guest's size is not needed:
// 64 KiB without CAP_IPC_LOCK is below what any x86 guest of QEMU pins
// (FAIL), and CAP_IPC_LOCK or an unlimited limit covers any guest (PASS);
// where they do not (8 MiB and no size; a capability that cannot be
// read while the limit is short) it is NOT_RUN with the reason.
func TestVFIOProcess(t *testing.T) {
	good := vfioHostFixture(t, fixture.NameGPU4SwitchACS)
	p := "/proc/5150"
	lim, _ := good.File(p + "/limits")
	status, _ := good.File(p + "/status")
	const eightMiB = "8388608              8388608"
	limit := func(h *fixture.Host, soft, hard string) {
		h.SetString(p+"/limits", strings.Replace(string(lim), eightMiB, fmt.Sprintf("%-20s %s", soft, hard), 1))
	}
	ipcLock := func(h *fixture.Host) {
		// CAP_IPC_LOCK is capability 14 (include/uapi/linux/capability.h).
		h.SetString(p+"/status", strings.Replace(string(status), "CapEff:\t0000000000000000", "CapEff:\t0000000000004000", 1))
	}
	sixteen := uint64(16 << 30)
	for _, c := range []struct {
		name  string
		plant func(h *fixture.Host)
		pid   int
		guest *uint64
		want  string // "" for no memlock finding at all
		not   string
		says  string // in the memlock finding's summary or evidence
	}{
		{"8 MiB", func(*fixture.Host) {}, fixture.QEMUPID, &sixteen, codeVFIOMemlock + " FAIL", "", "below the guest memory"},
		{"8 MiB, no guest size", func(*fixture.Host) {}, fixture.QEMUPID, nil, codeVFIOMemlock + " NOT_RUN", codeVFIOMemlock + " FAIL", "--guest-memory"},
		{"64 KiB, no guest size", func(h *fixture.Host) { limit(h, "65536", "65536") }, fixture.QEMUPID, nil,
			codeVFIOMemlock + " FAIL", "", "whatever the guest's size"},
		{"64 KiB with CAP_IPC_LOCK", func(h *fixture.Host) { limit(h, "65536", "65536"); ipcLock(h) }, fixture.QEMUPID, nil,
			codeVFIOMemlock + " PASS", codeVFIOMemlock + " FAIL", "CAP_IPC_LOCK"},
		{"64 KiB, status garbage", func(h *fixture.Host) { limit(h, "65536", "65536"); h.SetString(p+"/status", "CapEff:\tzz\n") }, fixture.QEMUPID, nil,
			codeVFIOMemlock + " NOT_RUN", codeVFIOMemlock + " FAIL", "CAP_IPC_LOCK"},
		{"unlimited", func(h *fixture.Host) { limit(h, "unlimited", "unlimited") }, fixture.QEMUPID, &sixteen, codeVFIOMemlock + " PASS", codeVFIOMemlock + " FAIL", "unlimited"},
		{"unlimited, no guest size", func(h *fixture.Host) { limit(h, "unlimited", "unlimited") }, fixture.QEMUPID, nil, codeVFIOMemlock + " PASS", codeVFIOMemlock + " NOT_RUN", "unlimited"},
		{"limits unreadable", func(h *fixture.Host) {
			h.SetString(p+"/limits", "Limit x\nMax locked memory lots\n")
		}, fixture.QEMUPID, &sixteen, codeVFIOMemlock + " NOT_RUN", codeVFIOMemlock + " FAIL", "/proc/5150/limits"},
		{"limits garbage, no guest size", func(h *fixture.Host) {
			h.SetString(p+"/limits", "\x00\xff garbage\n")
		}, fixture.QEMUPID, nil, codeVFIOMemlock + " NOT_RUN", codeVFIOMemlock + " FAIL", "/proc/5150/limits"},
		{"another process holds the groups", func(h *fixture.Host) {
			for _, f := range []string{"comm", "status", "uid_map"} {
				b, _ := h.File(p + "/" + f)
				h.SetFile("/proc/6000/"+f, b)
			}
			h.SetString("/proc/6000/limits", strings.Replace(string(lim), eightMiB, "unlimited            unlimited", 1))
		}, 6000, &sixteen, codeVFIOBusy + " FAIL", codeVFIOMemlock + " FAIL", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := good.Clone()
			c.plant(&h)
			o := Options{Passthrough: true, PID: c.pid, GuestMemory: c.guest}
			got := vfioFindings(vfioRun(t, h, o))
			if c.want != "" {
				f, ok := got[c.want]
				if !ok {
					t.Fatalf("no %s in %v", c.want, keys(got))
				}
				text := f.Summary + " " + f.Reason + " " + f.Remediation
				for _, e := range f.Evidence {
					text += " " + e.Value
				}
				if c.says != "" && !strings.Contains(text, c.says) {
					t.Errorf("%s does not say %q: %s", c.want, c.says, text)
				}
			}
			for k := range got {
				if c.not != "" && strings.HasPrefix(k, c.not) {
					t.Errorf("unexpected %s: %s", k, got[k].Summary)
				}
				if c.want != codeVFIOBusy+" FAIL" && strings.HasPrefix(k, codeVFIOBusy) {
					t.Errorf("the process's own groups called busy: %s", got[k].Summary)
				}
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
