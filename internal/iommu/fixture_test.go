package iommu

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

const hostsDir = "../../testdata/hosts"

// host reads a committed tree.
func host(t *testing.T, name string) (*hostfs.Root, *State, *pci.Inventory, []GroupViability) {
	t.Helper()
	return readRoot(t, hostfs.MustNew(filepath.Join(hostsDir, name)))
}

// variant writes a changed copy of a fixture host and reads it.
func variant(t *testing.T, h fixture.Host) (*hostfs.Root, *State, *pci.Inventory, []GroupViability) {
	t.Helper()
	root, err := fixture.NewRoot(filepath.Join(t.TempDir(), "h"), h)
	if err != nil {
		t.Fatal(err)
	}
	return readRoot(t, root)
}

func readRoot(t *testing.T, root *hostfs.Root) (*hostfs.Root, *State, *pci.Inventory, []GroupViability) {
	t.Helper()
	inv, err := pci.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	st := Read(root, inv)
	return root, st, inv, Viabilities(root, st, inv, NewConfigReader(root))
}

func fixtureHost(t *testing.T, name string) fixture.Host {
	t.Helper()
	h, ok := fixture.ByName(name)
	if !ok {
		t.Fatalf("no fixture %s", name)
	}
	return h.Clone()
}

func reasons(st *State) string { return strings.Join(st.Reasons, "\n") }

func addrs(ss ...string) []pci.Address {
	var out []pci.Address
	for _, s := range ss {
		a, err := pci.ParseAddress(s)
		if err != nil {
			panic(err)
		}
		out = append(out, a)
	}
	return out
}

func memberDrivers(gv GroupViability) map[string]string {
	out := map[string]string{}
	for _, m := range gv.Members {
		out[m.Name] = m.Driver + " " + m.Role.String()
	}
	return out
}

// Four GPUs behind a switch whose downstream ports lack ACS: one group,
// viable (vfio-pci and bridges), shared, and each GPU's downstream port
// named as the port that does not isolate it.
func TestSwitchWithoutACS(t *testing.T) {
	_, st, _, gvs := host(t, fixture.NameGPU4SwitchNoACS)
	if st.On != Yes || st.Vendor != "Intel VT-d" {
		t.Fatalf("on %v vendor %q:\n%s", st.On, st.Vendor, reasons(st))
	}
	if len(gvs) != 1 {
		t.Fatalf("%d groups with accelerators, want 1", len(gvs))
	}
	gv := gvs[0]
	if gv.Group != 3 || gv.Verdict != Viable || !gv.Intended || !gv.Shared || gv.Type != TypeDMAFQ || gv.Fix != nil {
		t.Errorf("group %d verdict %v intended %v shared %v type %q fix %v", gv.Group, gv.Verdict, gv.Intended, gv.Shared, gv.Type, gv.Fix)
	}
	if diff := cmp.Diff(addrs("0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:06:00.0"), gv.Accelerators); diff != "" {
		t.Errorf("accelerators (-want +got):\n%s", diff)
	}
	if len(gv.Members) != 8 {
		t.Errorf("members: %v", memberDrivers(gv))
	}
	for i, iso := range gv.Isolation {
		b := iso.Breaker
		want := addrs("0000:02:0" + string(rune('0'+i)) + ".0")[0]
		if b == nil || b.Address != want || b.Role != "switch downstream port" || b.Reason != "no ACS capability" || iso.Unknown {
			t.Errorf("%s: breaker %+v unknown %v", iso.Device, b, iso.Unknown)
			continue
		}
		if !strings.Contains(iso.Summary(), "0000:02:0") || !strings.Contains(iso.Summary(), "does not isolate: no ACS capability") {
			t.Errorf("summary %q", iso.Summary())
		}
		// The upstream port needs none and the root port isolates.
		if len(iso.Hops) != 3 || iso.Hops[1].State != HopNotRequired || iso.Hops[2].State != HopIsolates {
			t.Errorf("%s: hops %+v", iso.Device, iso.Hops)
		}
	}
}

// The same host with ACS on the downstream ports: a group per GPU, each
// viable and not shared, every hop isolating or not needing ACS.
func TestSwitchWithACS(t *testing.T) {
	_, st, _, gvs := host(t, fixture.NameGPU4SwitchACS)
	if st.On != Yes {
		t.Fatal(reasons(st))
	}
	if len(gvs) != 4 {
		t.Fatalf("%d groups with accelerators, want 4", len(gvs))
	}
	for _, gv := range gvs {
		if gv.Verdict != Viable || gv.Shared || len(gv.Members) != 1 || len(gv.Accelerators) != 1 {
			t.Errorf("group %d: %v shared %v members %v", gv.Group, gv.Verdict, gv.Shared, memberDrivers(gv))
		}
		iso := gv.Isolation[0]
		if iso.Breaker != nil || iso.Unknown {
			t.Errorf("%s: %s", iso.Device, iso.Summary())
		}
		dsp := iso.Hops[0]
		if dsp.State != HopIsolates || dsp.ACS == nil || dsp.ACS.Ctrl != pci.ACSIsolation || !strings.Contains(dsp.Reason, "SV RR CR UF on") {
			t.Errorf("downstream port: %+v", dsp)
		}
	}
}

// The GPU's HDMI audio function on snd_hda_intel makes the group not
// viable: the member is named, with the rebinding and the persistent
// parameter; the multifunction device without ACS explains the sharing.
func TestAudioFunctionBlocks(t *testing.T) {
	_, st, _, gvs := host(t, fixture.NameGPUAudio)
	if st.On != Yes || !strings.Contains(reasons(st), "identity default domains") || st.Cmdline.Passthrough != Yes {
		t.Fatalf("on %v:\n%s", st.On, reasons(st))
	}
	if len(gvs) != 1 {
		t.Fatalf("%d groups", len(gvs))
	}
	gv := gvs[0]
	if gv.Verdict != NotViable || !gv.Intended || len(gv.Blocking) != 1 {
		t.Fatalf("verdict %v intended %v blocking %v", gv.Verdict, gv.Intended, gv.Blocking)
	}
	b := gv.Blocking[0]
	if b.Name != "0000:01:00.1" || b.Driver != "snd_hda_intel" || !strings.Contains(b.Why, "EPERM") {
		t.Errorf("blocking member %+v", b)
	}
	want := &Fix{
		Commands: []string{
			"modprobe vfio-pci",
			"echo vfio-pci > /sys/bus/pci/devices/0000:01:00.1/driver_override",
			"echo 0000:01:00.1 > /sys/bus/pci/devices/0000:01:00.1/driver/unbind",
			"echo 0000:01:00.1 > /sys/bus/pci/drivers_probe",
		},
		Param:    "vfio-pci.ids=10de:22ba,10de:2684",
		Softdeps: []string{"softdep snd_hda_intel pre: vfio-pci"},
	}
	if diff := cmp.Diff(want, gv.Fix); diff != "" {
		t.Errorf("fix (-want +got):\n%s", diff)
	}
	iso := gv.Isolation[0]
	if iso.Breaker == nil || iso.Breaker.Address != addrs("0000:01:00.0")[0] || iso.Breaker.Role != "multifunction endpoint" ||
		!strings.Contains(iso.Breaker.Reason, "get_pci_function_alias_group") {
		t.Errorf("isolation: %s (%+v)", iso.Summary(), iso.Hops)
	}
	if gv.Shared {
		t.Error("the GPU's own audio function does not make the group shared")
	}

	// A built-in snd_hda_intel (no module link, no initstate) cannot be
	// beaten by vfio-pci.ids: the fix says so instead of a softdep.
	h := fixtureHost(t, fixture.NameGPUAudio)
	h.Remove("/sys/bus/pci/drivers/snd_hda_intel/module")
	h.Remove("/sys/module/snd_hda_intel/initstate")
	if _, _, _, gvs := variant(t, h); len(gvs) != 1 || gvs[0].Fix == nil || gvs[0].Fix.Softdeps != nil ||
		!cmp.Equal(gvs[0].Fix.BuiltIn, []string{"snd_hda_intel"}) {
		t.Errorf("built-in driver: %+v", gvs[0].Fix)
	}

	// The fault fixed: the audio function on vfio-pci makes it viable.
	h = fixtureHost(t, fixture.NameGPUAudio)
	dev, _ := h.Link("/sys/bus/pci/devices/0000:01:00.1")
	h.Remove("/sys/bus/pci/drivers/snd_hda_intel/0000:01:00.1")
	h.SetLink(dev+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	h.SetLink("/sys/bus/pci/drivers/vfio-pci/0000:01:00.1", dev)
	_, _, _, gvs = variant(t, h)
	if len(gvs) != 1 || gvs[0].Verdict != Viable || gvs[0].Fix != nil {
		t.Errorf("fixed: %+v", gvs)
	}
}

// The largest tree: every accelerator group viable, not shared, every
// hop judged; /dev/vfio and the identity domains are in the evidence.
func TestHGXAllViable(t *testing.T) {
	_, st, inv, gvs := host(t, fixture.NameHGXVFIO)
	if len(inv.Devices) < 64 {
		t.Errorf("%d functions: the benchmark tree must have at least 64", len(inv.Devices))
	}
	if st.On != Yes || len(st.Units) != 1 || st.Units[0].Kind != "intel-iommu" || st.Units[0].Devices != len(inv.Devices) {
		t.Errorf("on %v units %+v", st.On, st.Units)
	}
	if len(gvs) != 8 {
		t.Fatalf("%d accelerator groups, want the 8 GPUs'", len(gvs))
	}
	for _, gv := range gvs {
		if gv.Verdict != Viable || gv.Shared || !gv.Intended || gv.Type != TypeIdentity || len(gv.Notes) > 0 {
			t.Errorf("group %d: %v shared %v type %q notes %v", gv.Group, gv.Verdict, gv.Shared, gv.Type, gv.Notes)
		}
		if iso := gv.Isolation[0]; iso.Breaker != nil || iso.Unknown || len(iso.Hops) != 3 {
			t.Errorf("%s: %s", iso.Device, iso.Summary())
		}
	}
	// A VF of the ConnectX PFs has a group of its own on vfio-pci; the
	// NVSwitches are not accelerators (pci.IsAccelerator: bridge class).
	vf := inv.Lookup(addrs("0000:19:00.1")[0])
	if vf == nil || !vf.IsVF() || vf.IOMMUGroup == nil || st.Group(*vf.IOMMUGroup) == nil || len(st.Group(*vf.IOMMUGroup).Devices) != 1 {
		t.Errorf("VF: %+v", vf)
	}
}

// The IOMMU is off: a DMAR table, no groups, intel_iommu=sm_on only,
// and a kernel whose default leaves it off. The explanation says each.
func TestIOMMUOffSmOn(t *testing.T) {
	_, st, _, gvs := host(t, fixture.NameIOMMUOff)
	if st.On != No || st.Vendor != "Intel VT-d" || len(gvs) != 0 {
		t.Fatalf("on %v vendor %q groups %d", st.On, st.Vendor, len(gvs))
	}
	r := reasons(st)
	for _, want := range []string{
		"/sys/firmware/acpi/tables/DMAR: revision 1, OEM \"ACCELD\" \"FIXTURE\"; Intel VT-d, 1 remapping unit(s) (DRHD), 46-bit DMA addresses",
		"/sys/kernel/iommu_groups is empty: the kernel created no IOMMU group, DMA remapping is off",
		"intel_iommu=sm_on: selects scalable mode where the hardware supports it; it does not turn the IOMMU on",
		"/boot/config-6.1.0-18-amd64: CONFIG_INTEL_IOMMU_DEFAULT_ON is not set: off by default; add intel_iommu=on",
		"intel_iommu=sm_on alone only selects scalable mode",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("reasons lack %q:\n%s", want, r)
		}
	}

	// The same host with intel_iommu=off: the command line is the cause.
	h := fixtureHost(t, fixture.NameIOMMUOff)
	h.SetString("/proc/cmdline", "ro intel_iommu=off\n")
	if _, st, _, _ := variant(t, h); !strings.Contains(reasons(st), "intel_iommu=off on the command line turns it off") {
		t.Errorf("intel_iommu=off:\n%s", reasons(st))
	}

	// Without the DMAR table: no IOMMU at all.
	h = fixtureHost(t, fixture.NameIOMMUOff)
	h.Remove("/sys/firmware/acpi/tables/DMAR")
	_, st, _, _ = variant(t, h)
	if st.On != No || st.Vendor != "" || !strings.Contains(reasons(st), "the firmware describes no IOMMU") || !strings.Contains(reasons(st), "no IOMMU: a machine gets one") {
		t.Errorf("no DMAR:\n%s", reasons(st))
	}

	// Without the kernel configuration, the default cannot be told.
	h = fixtureHost(t, fixture.NameIOMMUOff)
	h.Remove("/boot/config-6.1.0-18-amd64")
	_, st, _, _ = variant(t, h)
	if !strings.Contains(reasons(st), "CONFIG_INTEL_IOMMU_DEFAULT_ON is unknown") {
		t.Errorf("no kernel config:\n%s", reasons(st))
	}
}

// A capture made without CAP_SYS_ADMIN keeps 64 bytes of each config:
// the ports' ACS is "not readable without CAP_SYS_ADMIN", never "no ACS
// capability", and the group's verdict (drivers only) still stands.
func TestUnprivilegedCaptureACSNotReadable(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPU4SwitchNoACS)
	for _, p := range h.Paths() {
		if strings.HasSuffix(p, "/config") {
			b, _ := h.File(p)
			h.SetFile(p, b[:pci.ConfigHeaderSize])
		}
	}
	_, _, _, gvs := variant(t, h)
	if len(gvs) != 1 || gvs[0].Verdict != Viable {
		t.Fatalf("%+v", gvs)
	}
	for _, iso := range gvs[0].Isolation {
		if !iso.Unknown || iso.Breaker != nil || !strings.Contains(iso.Summary(), "not readable without CAP_SYS_ADMIN") ||
			strings.Contains(iso.Summary(), "no ACS capability") {
			t.Errorf("%s: %s", iso.Device, iso.Summary())
		}
	}
}

// A group member whose driver link is unusable leaves the verdict
// unknown, never viable.
func TestMemberDriverUnknown(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPU4SwitchACS)
	dev, _ := h.Link("/sys/bus/pci/devices/0000:03:00.0")
	h.SetLink(dev+"/driver", dev+"/vendor") // a link to a file: no driver name
	_, _, _, gvs := variant(t, h)
	for _, gv := range gvs {
		if gv.Accelerators[0] == addrs("0000:03:00.0")[0] {
			if gv.Verdict != ViabilityUnknown || len(gv.Unknown) != 1 {
				t.Errorf("verdict %v unknown %v", gv.Verdict, gv.Unknown)
			}
			return
		}
	}
	t.Error("group of 0000:03:00.0 not judged")
}

// The grouping pci_device_group makes of the switch without ACS: one
// group per downstream port and its GPU (the path above each port
// isolates). Not shared, yet each GPU's path names the port that does
// not isolate it: weaker isolation than the group suggests. The GPU
// whose audio function shares its group is no such case.
func TestUnisolatedPathOwnGroup(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPU4SwitchNoACS)
	for i := 1; i < 4; i++ {
		grp := "/sys/kernel/iommu_groups/" + strconv.Itoa(20+i)
		for _, bdf := range []string{"0000:02:0" + strconv.Itoa(i) + ".0", "0000:0" + strconv.Itoa(3+i) + ":00.0"} {
			dev, _ := h.Link("/sys/bus/pci/devices/" + bdf)
			h.Remove("/sys/kernel/iommu_groups/3/devices/" + bdf)
			h.SetLink(dev+"/iommu_group", grp)
			h.SetLink(grp+"/devices/"+bdf, dev)
		}
		h.SetString(grp+"/type", "DMA-FQ\n")
	}
	_, _, _, gvs := variant(t, h)
	n := 0
	for _, gv := range gvs {
		if len(gv.Accelerators) != 1 || len(gv.Members) != 2 {
			t.Errorf("group %d: %v", gv.Group, memberDrivers(gv))
			continue
		}
		n++
		if u := gv.Unisolated(); gv.Shared || len(u) != 1 || u[0].Breaker.Role != "switch downstream port" {
			t.Errorf("group %d: shared %v, unisolated %+v", gv.Group, gv.Shared, u)
		}
	}
	if n != 4 {
		t.Errorf("%d single-GPU groups", n)
	}
	if _, _, _, gvs := host(t, fixture.NameGPUAudio); len(gvs[0].Unisolated()) != 0 {
		t.Errorf("the audio function's group: %+v", gvs[0].Unisolated())
	}
}

// The committed IOMMU trees' config spaces agree with the sysfs
// attributes beside them: the encoder writes what the readers expect.
func TestIOMMUTreesConfigConsistent(t *testing.T) {
	for _, h := range fixture.IOMMUHosts() {
		root := hostfs.MustNew(filepath.Join(hostsDir, h.Name))
		inv, err := pci.Scan(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range inv.Devices {
			c, err := pci.ReadConfig(root, d)
			if err != nil {
				t.Errorf("%s %s: %v", h.Name, d.Address, err)
				continue
			}
			if !d.IsVF() && (c.Vendor != d.Vendor || c.Device != d.Device) || c.Class != d.Class {
				t.Errorf("%s %s: config ids differ from sysfs", h.Name, d.Address)
			}
			if e, err := c.Express(); err == nil {
				for _, m := range e.CheckLink(d) {
					t.Errorf("%s %s: %s", h.Name, d.Address, m)
				}
			}
			res, err := pci.ReadResources(root, d)
			if err != nil {
				t.Errorf("%s %s: %v", h.Name, d.Address, err)
				continue
			}
			if _, mm, err := pci.Regions(c, res, ""); err != nil || len(mm) > 0 {
				t.Errorf("%s %s: %v %v", h.Name, d.Address, mm, err)
			}
			if s, err := c.SRIOV(); err == nil {
				for _, m := range s.Check(d) {
					t.Errorf("%s %s: %s", h.Name, d.Address, m)
				}
			}
			if _, errs := pci.ReadAERStats(root, d); len(errs) > 0 {
				t.Errorf("%s %s: %v", h.Name, d.Address, errs)
			}
		}
	}
}
