package pci

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// TestScanAttrProblems: absent, unreadable and malformed are three
// different answers, and a driver link that does not lead to a driver is
// no driver name.
func TestScanAttrProblems(t *testing.T) {
	tr := newTree(t)
	const base = "pci0000:00/"
	gpu := map[string]string{"vendor": "0x10de", "device": "0x2330", "class": "0x030200"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range gpu {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tr.dev(base+"0000:00:01.0", gpu)                                                                                        // numa_node absent
	tr.dev(base+"0000:00:02.0", with(map[string]string{"numa_node": "zero"}))                                               // malformed
	tr.dev(base+"0000:00:03.0", with(map[string]string{"driver": "->driver"}))                                              // self loop
	tr.dev(base+"0000:00:04.0", with(map[string]string{"driver": "->vendor"}))                                              // a file
	tr.dev(base+"0000:00:05.0", with(map[string]string{"driver": "->../../../bus/pci/drivers/nvidia"}))                     // dangling into the drivers dir: keeps its name
	tr.dev(base+"0000:00:08.0", with(map[string]string{"driver": "->../../../sys/devices/pci0000:00/0000:00:08.0/driver"})) // dangling elsewhere
	tr.dev(base+"0000:00:09.0", with(map[string]string{"driver": "->../0000:00:01.0"}))                                     // a device, not a driver
	tr.dev(base+"0000:00:06.0", with(map[string]string{"class": "0xzz"}))
	tr.dev(base+"0000:00:07.0", gpu)
	if err := unix.Mkfifo(filepath.Join(tr.dir, "sys/devices", base+"0000:00:07.0", "numa_node"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A capture that copied the iommu_group link's target (NFD's trees).
	tr.dev(base+"0000:00:0a.0", gpu)
	tr.file("/sys/devices/"+base+"0000:00:0a.0/iommu_group/type", "DMA\n")
	inv, err := Scan(hostfs.MustNew(tr.dir))
	if err != nil {
		t.Fatal(err)
	}
	dev := func(a string) *Device { return inv.Lookup(addr(a)) }
	if ae := dev("0000:00:0a.0").AttrErr("iommu_group"); ae == nil || !errors.Is(ae, ErrLinkCopied) || dev("0000:00:0a.0").IOMMUGroup != nil {
		t.Errorf("iommu_group copied as a directory: %v", ae)
	}

	if d := dev("0000:00:01.0"); d.NUMANode != nil || d.AttrErr("numa_node") != nil || d.AttrState("numa_node") != "absent" {
		t.Errorf("absent numa_node: %v %v", d.NUMANode, d.Errors)
	}
	if ae := dev("0000:00:02.0").AttrErr("numa_node"); ae == nil || ae.Problem != Malformed || !strings.HasPrefix(dev("0000:00:02.0").AttrState("numa_node"), "malformed: parse ") {
		t.Errorf("malformed numa_node: %v", ae)
	}
	if ae := dev("0000:00:07.0").AttrErr("numa_node"); ae == nil || ae.Problem != Unreadable || !errors.Is(ae, hostfs.ErrNotRegular) {
		t.Errorf("FIFO numa_node: %v", ae)
	}
	loop := dev("0000:00:03.0")
	if ae := loop.AttrErr("driver"); loop.Driver != "" || ae == nil || ae.Problem != Unreadable || !errors.Is(ae, unix.ELOOP) ||
		!strings.Contains(ae.Error(), "/sys/devices/pci0000:00/0000:00:03.0/driver") {
		t.Errorf("looping driver link: driver %q, %v", loop.Driver, ae)
	}
	if d := dev("0000:00:04.0"); d.Driver != "" || d.AttrErr("driver") == nil || d.AttrErr("driver").Problem != Malformed {
		t.Errorf("driver link to a file: %q %v", d.Driver, d.Errors)
	}
	if d := dev("0000:00:05.0"); d.Driver != "nvidia" || len(d.Errors) != 0 {
		t.Errorf("dangling driver link: %q %v", d.Driver, d.Errors)
	}
	for _, a := range []string{"0000:00:08.0", "0000:00:09.0"} {
		if d := dev(a); d.Driver != "" || d.AttrErr("driver") == nil || d.AttrErr("driver").Problem != Malformed {
			t.Errorf("%s: driver link that leads to no driver: %q %v", a, d.Driver, d.Errors)
		}
	}
	// A garbage class keeps the GPU an accelerator only with other
	// evidence; here there is none (no driver, NVIDIA also makes bridges).
	if d := dev("0000:00:06.0"); d.Has(HasClass) || d.AttrErr("class") == nil || d.AttrErr("class").Problem != Malformed {
		t.Errorf("garbage class: %v", d.Errors)
	}
	if !inv.DriverLinks() {
		t.Error("DriverLinks is false although functions have driver links")
	}
}

// TestDriverLinksNone: a capture in which no function has a driver link.
func TestDriverLinksNone(t *testing.T) {
	tr := newTree(t)
	tr.dev("pci0000:00/0000:00:01.0", map[string]string{"vendor": "0x10de", "device": "0x2330", "class": "0x030200"})
	inv, err := Scan(hostfs.MustNew(tr.dir))
	if err != nil {
		t.Fatal(err)
	}
	if inv.DriverLinks() {
		t.Error("DriverLinks is true in a tree without driver links")
	}
}
