package pci

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

func ptr[T any](v T) *T { return &v }

func addr(s string) Address {
	a, err := ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

// buildH100Tree is a small server: a root port, a PCIe switch, an H100 on a
// degraded link, a BlueField-3 with two VFs, an ASPEED BMC VGA, a function
// without a vendor file and one with a garbage class.
func buildH100Tree(t *testing.T) *tree {
	tr := newTree(t)
	const rp = "pci0000:00/0000:00:01.0"
	const usp = rp + "/0000:01:00.0"
	const dsp = usp + "/0000:02:08.0"
	const gpu = dsp + "/0000:03:00.0"
	tr.dev("pci0000:00/0000:00:00.0", map[string]string{"vendor": "0x8086", "device": "0x2020", "class": "0x060000", "revision": "0x04", "numa_node": "0"})
	tr.dev(rp, map[string]string{
		"vendor": "0x8086", "device": "0x347a", "class": "0x060400", "revision": "0x04", "numa_node": "1",
		"driver":             "->" + up(rp) + "bus/pci/drivers/pcieport",
		"current_link_speed": "32.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe",
		"current_link_width": "16", "max_link_width": "16",
	})
	tr.dev(usp, map[string]string{"vendor": "0x10b5", "device": "0xc010", "class": "0x060400", "revision": "0xb0", "numa_node": "1"})
	tr.dev(dsp, map[string]string{"vendor": "0x10b5", "device": "0xc010", "class": "0x060400", "revision": "0xb0", "numa_node": "1"})
	tr.dev(gpu, map[string]string{
		"vendor": "0x10de", "device": "0x2330", "subsystem_vendor": "0x10de", "subsystem_device": "0x16c1",
		"class": "0x030200", "revision": "0xa1", "numa_node": "1", "local_cpulist": "32-63",
		"driver":             "->" + up(gpu) + "bus/pci/drivers/nvidia",
		"iommu_group":        "->" + up(gpu) + "kernel/iommu_groups/42",
		"current_link_speed": "16.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe",
		"current_link_width": "8", "max_link_width": "16",
		"config": strings.Repeat("\x00", 64),
	})
	const pf = "pci0000:00/0000:00:02.0/0000:04:00.0"
	tr.dev("pci0000:00/0000:00:02.0", map[string]string{"vendor": "0x8086", "device": "0x347a", "class": "0x060400"})
	tr.dev(pf, map[string]string{
		"vendor": "0x15b3", "device": "0xa2dc", "class": "0x020000", "revision": "0x01",
		"subsystem_vendor": "0x15b3", "subsystem_device": "0x0051", "numa_node": "-1",
		"driver":         "->" + up(pf) + "bus/pci/drivers/mlx5_core",
		"sriov_totalvfs": "8", "sriov_numvfs": "2",
		"virtfn0": "->../0000:04:00.2", "virtfn1": "->../0000:04:00.3",
	})
	for _, vf := range []string{"0000:04:00.2", "0000:04:00.3"} {
		p := "pci0000:00/0000:00:02.0/" + vf
		tr.dev(p, map[string]string{"vendor": "0x15b3", "device": "0x101e", "class": "0x020000", "physfn": "->../0000:04:00.0", "numa_node": "-1"})
	}
	tr.dev("pci0000:00/0000:00:1f.0", map[string]string{"vendor": "0x1a03", "device": "0x2000", "class": "0x030000", "revision": "0x52"})
	// No vendor file at all.
	tr.dev("pci0000:00/0000:00:1e.0", map[string]string{"device": "0x1000", "class": "0x120000"})
	// Garbage class.
	tr.dev("pci0000:00/0000:00:1d.0", map[string]string{"vendor": "0x1da3", "device": "0x1020", "class": "not-a-class"})
	tr.file("/usr/share/misc/pci.ids", sampleIDs+"1a03  ASPEED Technology, Inc.\n\t2000  ASPEED Graphics Family\n")
	return tr
}

func TestScanTree(t *testing.T) {
	tr := buildH100Tree(t)
	inv, err := Scan(hostfs.MustNew(tr.dir))
	if err != nil {
		t.Fatal(err)
	}
	if inv.IDsPath != "/usr/share/misc/pci.ids" {
		t.Errorf("IDsPath = %q", inv.IDsPath)
	}
	var got []string
	for _, d := range inv.Devices {
		got = append(got, d.Address.String())
	}
	want := []string{"0000:00:00.0", "0000:00:01.0", "0000:00:02.0", "0000:00:1d.0", "0000:00:1e.0", "0000:00:1f.0",
		"0000:01:00.0", "0000:02:08.0", "0000:03:00.0", "0000:04:00.0", "0000:04:00.2", "0000:04:00.3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("devices (-want +got):\n%s", diff)
	}

	gpuPath := "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"
	wantGPU := &Device{
		Address: addr("0000:03:00.0"), BusPath: "/sys/bus/pci/devices/0000:03:00.0", Path: gpuPath,
		Present: HasVendor | HasDevice | HasClass | HasRevision | HasSubsystem,
		Vendor:  0x10de, Device: 0x2330, SubsystemVendor: 0x10de, SubsystemDevice: 0x16c1,
		Class: 0x030200, Revision: 0xa1,
		VendorName: "NVIDIA Corporation", DeviceName: "GH100[H100 SXM5 80GB]", ClassName: "3D controller",
		Driver: "nvidia", NUMANode: ptr(1), IOMMUGroup: ptr(42), LocalCPUs: "32-63",
		Bridges: []Address{addr("0000:00:01.0"), addr("0000:01:00.0"), addr("0000:02:08.0")},
		Link: Link{
			CurrentSpeed: &LinkSpeed{16000, "16.0 GT/s PCIe"}, MaxSpeed: &LinkSpeed{32000, "32.0 GT/s PCIe"},
			CurrentWidth: ptr(8), MaxWidth: ptr(16), CurrentWidthRaw: "8", MaxWidthRaw: "16",
		},
	}
	if diff := cmp.Diff(wantGPU, inv.Lookup(addr("0000:03:00.0"))); diff != "" {
		t.Errorf("GPU (-want +got):\n%s", diff)
	}
	if p := wantGPU.AttrPath("current_link_width"); p != gpuPath+"/current_link_width" {
		t.Errorf("AttrPath = %q", p)
	}

	pf := inv.Lookup(addr("0000:04:00.0"))
	wantPF := &Device{
		Address: addr("0000:04:00.0"), BusPath: "/sys/bus/pci/devices/0000:04:00.0", Path: "/sys/devices/pci0000:00/0000:00:02.0/0000:04:00.0",
		Present: HasVendor | HasDevice | HasClass | HasRevision | HasSubsystem,
		Vendor:  0x15b3, Device: 0xa2dc, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0051, Class: 0x020000, Revision: 1,
		Driver: "mlx5_core", NUMANode: ptr(-1), TotalVFs: ptr(8), NumVFs: ptr(2),
		VFs:     []Address{addr("0000:04:00.2"), addr("0000:04:00.3")},
		Bridges: []Address{addr("0000:00:02.0")},
	}
	if diff := cmp.Diff(wantPF, pf); diff != "" {
		t.Errorf("PF (-want +got):\n%s", diff)
	}
	vf := inv.Lookup(addr("0000:04:00.3"))
	if vf.PhysFn == nil || *vf.PhysFn != addr("0000:04:00.0") || !vf.IsVF() || pf.IsVF() {
		t.Errorf("VF physfn = %v", vf.PhysFn)
	}

	noVendor := inv.Lookup(addr("0000:00:1e.0"))
	if noVendor.Has(HasVendor) || !noVendor.Has(HasClass) || len(noVendor.Errors) != 1 || !errors.Is(noVendor.Errors[0], fs.ErrNotExist) ||
		!strings.Contains(noVendor.Errors[0].Error(), "/sys/devices/pci0000:00/0000:00:1e.0/vendor") {
		t.Errorf("missing vendor: present=%b errors=%v", noVendor.Present, noVendor.Errors)
	}
	if noVendor.IDString() != "????:1000" {
		t.Errorf("IDString = %q", noVendor.IDString())
	}
	garbage := inv.Lookup(addr("0000:00:1d.0"))
	if garbage.Has(HasClass) || !garbage.Has(HasVendor) || len(garbage.Errors) != 1 || !strings.Contains(garbage.Errors[0].Error(), "parse /sys/devices/pci0000:00/0000:00:1d.0/class") {
		t.Errorf("garbage class: present=%b errors=%v", garbage.Present, garbage.Errors)
	}
	for _, d := range inv.Devices {
		if d != noVendor && d != garbage && len(d.Errors) > 0 {
			t.Errorf("%s: unexpected errors %v", d.Address, d.Errors)
		}
	}
	if len(inv.Errors) != 0 {
		t.Errorf("inventory errors: %v", inv.Errors)
	}
}

func TestScanNoIDs(t *testing.T) {
	tr := newTree(t)
	tr.dev("pci0000:00/0000:00:02.0", map[string]string{"vendor": "0x10de", "device": "0x15f8", "class": "0x030200",
		"modalias": "pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02i00"})
	inv, err := Scan(hostfs.MustNew(tr.dir))
	if err != nil {
		t.Fatal(err)
	}
	d := inv.Devices[0]
	if inv.IDsPath != "" || d.VendorName != "" || d.DeviceName != "" || d.ClassName != "" {
		t.Errorf("names without pci.ids: %q %+v", inv.IDsPath, d)
	}
	// Subsystem ids come from the modalias when the attributes are absent.
	if !d.Has(HasSubsystem) || d.SubsystemVendor != 0x10de || d.SubsystemDevice != 0x118f {
		t.Errorf("subsystem from modalias: %+v", d)
	}
	if d.Has(HasRevision) || d.NUMANode != nil || d.IOMMUGroup != nil || d.Link != (Link{}) || len(d.Errors) != 0 {
		t.Errorf("absent attributes must be absent, not errors: %+v", d)
	}
}

func TestScanNoBus(t *testing.T) {
	_, err := Scan(hostfs.MustNew(t.TempDir()))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Scan of an empty root: %v, want ErrNotExist", err)
	}
}

// TestScanHostile: loops, huge sparse files, a FIFO, garbage, links out of
// the root. Scan must come back with per-device errors.
func TestScanHostile(t *testing.T) {
	tr := newTree(t)
	// A two-link loop and a self loop.
	tr.link(DevicesDir+"/0000:00:01.0", "0000:00:01.1")
	tr.link(DevicesDir+"/0000:00:01.1", "0000:00:01.0")
	tr.link(DevicesDir+"/0000:00:01.2", "0000:00:01.2")
	// A device whose vendor and config are 1 GiB sparse files.
	tr.dev("pci0000:00/0000:00:02.0", map[string]string{"device": "0x1234", "class": "\xff\xfe garbage",
		"driver": "->/", "iommu_group": "->../../../../etc/passwd", "physfn": "->../nonsense",
		"virtfn0": "->../../../../../../../../../../..", "current_link_speed": "fast", "max_link_width": "-3", "numa_node": "abc"})
	for _, name := range []string{"vendor", "config"} {
		f, err := os.OpenFile(filepath.Join(tr.dir, "sys/devices/pci0000:00/0000:00:02.0", name), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 30); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// A FIFO for a vendor file: must not block.
	tr.dev("pci0000:00/0000:00:03.0", map[string]string{"class": "0x030000"})
	if err := unix.Mkfifo(filepath.Join(tr.dir, "sys/devices/pci0000:00/0000:00:03.0/vendor"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link that escapes the root points inside it instead.
	tr.link(DevicesDir+"/0000:00:04.0", "../../../../../../../../..")
	tr.file(DevicesDir+"/not-an-address", "")
	tr.file("/usr/share/misc/pci.ids", "zzzz  broken vendor line\n")

	done := make(chan struct{})
	var inv *Inventory
	var err error
	go func() {
		defer close(done)
		inv, err = Scan(hostfs.MustNew(tr.dir))
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // generous: only a hang fails this
		t.Fatal("Scan hung on a hostile tree")
	}
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]*Device{}
	for _, d := range inv.Devices {
		byAddr[d.Address.String()] = d
	}
	for _, a := range []string{"0000:00:01.0", "0000:00:01.1", "0000:00:01.2"} {
		d := byAddr[a]
		if d == nil || len(d.Errors) != 1 || !errors.Is(d.Errors[0], unix.ELOOP) {
			t.Errorf("%s: want one ELOOP error, got %+v", a, d)
		}
	}
	huge := byAddr["0000:00:02.0"]
	if huge == nil || huge.Has(HasVendor) || huge.Has(HasClass) || !huge.Has(HasDevice) {
		t.Fatalf("huge: %+v", huge)
	}
	var tooLarge, parse int
	for _, e := range huge.Errors {
		if errors.Is(e, hostfs.ErrTooLarge) {
			tooLarge++
		}
		if strings.HasPrefix(e.Error(), "parse ") || strings.Contains(e.Error(), "names nothing") {
			parse++
		}
	}
	// vendor too large; class, numa_node, current_link_speed,
	// max_link_width, iommu_group, physfn, virtfn0 and driver bad.
	if tooLarge != 1 || parse < 7 || huge.Driver != "" || huge.IOMMUGroup != nil || huge.PhysFn != nil || len(huge.VFs) != 0 {
		t.Errorf("huge: %d too large, %d parse errors: %v", tooLarge, parse, huge.Errors)
	}
	fifo := byAddr["0000:00:03.0"]
	if fifo == nil || fifo.Has(HasVendor) || !fifo.Has(HasClass) || len(fifo.Errors) != 2 || !errors.Is(fifo.Errors[0], hostfs.ErrNotRegular) {
		t.Errorf("fifo: %+v", fifo)
	}
	if byAddr["0000:00:04.0"] == nil {
		t.Error("escaping link dropped")
	}
	if len(inv.Errors) != 2 {
		t.Errorf("inventory errors: %v", inv.Errors)
	}
	if ids := inv.Errors[len(inv.Errors)-1]; !strings.Contains(ids.Error(), "pci.ids") {
		t.Errorf("pci.ids error: %v", ids)
	}
}
