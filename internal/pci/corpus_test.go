package pci

import (
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func corpusDir(t *testing.T) string { return testutil.CorpusDir(t) }

func unpack(t *testing.T, archive string) string { return testutil.Unpack(t, archive) }

func scanArchive(t *testing.T, archive string) (*Inventory, *hostfs.Root) {
	t.Helper()
	dir := unpack(t, archive)
	if dir == "" {
		return nil, nil
	}
	root := hostfs.MustNew(dir)
	inv, err := Scan(root)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(archive), err)
	}
	return inv, root
}

// TestCorpusScan runs Scan over every capture: it must not panic or fail,
// and every listed function must have at least one of its ids or an error.
func TestCorpusScan(t *testing.T) {
	dir := corpusDir(t)
	var archives []string
	for _, g := range []string{"ghw/*.tar.gz", "hwloc/linux/*.tar.bz2", "nfd/pci-rootfs-1.tar.gz", "procfs/sys-pci-drm-subset.tar.gz"} {
		m, _ := filepath.Glob(filepath.Join(dir, g))
		archives = append(archives, m...)
	}
	if len(archives) == 0 {
		t.Skip("no archives in the corpus")
	}
	for _, a := range archives {
		t.Run(filepath.Base(a), func(t *testing.T) {
			inv, _ := scanArchive(t, a)
			if inv == nil {
				t.Skip("capture has no sys/bus/pci")
			}
			for _, d := range inv.Devices {
				if !d.Has(HasClass) && len(d.Errors) == 0 {
					t.Errorf("%s: no class and no error", d.Address)
				}
			}
			var acc []string
			for _, d := range inv.Devices {
				if k, ok := IsAccelerator(d); ok {
					acc = append(acc, d.Address.String()+"="+k)
				}
			}
			t.Logf("%d functions, accelerators: %v", len(inv.Devices), acc)
		})
	}
}

func TestCorpusGhwTeslaP100(t *testing.T) {
	inv, _ := scanArchive(t, filepath.Join(corpusDir(t), "ghw", "linux-amd64-accel-nvidia.tar.gz"))
	d := inv.Lookup(addr("0000:06:00.0"))
	if d == nil {
		t.Fatal("0000:06:00.0 missing")
	}
	if d.Vendor != 0x10de || d.Device != 0x15f8 || d.Class != 0x030200 || d.Revision != 0xa1 || d.Driver != "nvidia" {
		t.Errorf("P100: %s class %06x rev %02x driver %q", d.IDString(), d.Class, d.Revision, d.Driver)
	}
	// The guest kernel says "no node" (-1) for the passthrough GPU.
	if d.NUMANode == nil || *d.NUMANode != -1 || d.LocalCPUs != "0-7" {
		t.Errorf("P100 numa %v cpus %q", d.NUMANode, d.LocalCPUs)
	}
	// No subsystem_* files in this capture: the modalias supplies them.
	if !d.Has(HasSubsystem) || d.SubsystemVendor != 0x10de || d.SubsystemDevice != 0x118f {
		t.Errorf("P100 subsystem %04x:%04x", d.SubsystemVendor, d.SubsystemDevice)
	}
	if want := []Address{addr("0000:00:01.5")}; len(d.Bridges) != 1 || d.Bridges[0] != want[0] {
		t.Errorf("bridges %v", d.Bridges)
	}
	if k, ok := IsAccelerator(d); !ok || k != KindGPU {
		t.Errorf("IsAccelerator = %q %v", k, ok)
	}
}

func TestCorpusHwlocVectorEngines(t *testing.T) {
	inv, root := scanArchive(t, filepath.Join(corpusDir(t), "hwloc", "linux", "32intel64-2p8co2t+8ve.tar.bz2"))
	var ves []*Device
	for _, d := range inv.Devices {
		if k, ok := IsAccelerator(d); ok {
			if k != KindAccelerator {
				t.Errorf("%s: kind %q", d.Address, k)
			}
			ves = append(ves, d)
		}
	}
	if len(ves) != 8 {
		t.Fatalf("%d accelerators, want the 8 VectorEngines", len(ves))
	}
	for _, d := range ves {
		if d.Vendor != 0x1bcf || d.Device != 0x001c || d.Class != 0x0b4000 || d.Driver != "ve_drv" {
			t.Errorf("%s: %s class %06x driver %q", d.Address, d.IDString(), d.Class, d.Driver)
		}
		// Every VE in this capture sits on node 0 (the second socket has none).
		if d.NUMANode == nil || *d.NUMANode != 0 {
			t.Errorf("%s: numa %v", d.Address, d.NUMANode)
		}
		// Root port, PLX PEX9797 upstream port, PLX downstream port.
		if len(d.Bridges) != 3 {
			t.Errorf("%s: bridges %v", d.Address, d.Bridges)
			continue
		}
		for _, b := range d.Bridges[1:] {
			if br := inv.Lookup(b); br == nil || br.Vendor != 0x10b5 || br.Device != 0x9797 {
				t.Errorf("%s: bridge %s is not a PLX 9797", d.Address, b)
			}
		}
		if d.Link.CurrentWidth == nil || *d.Link.CurrentWidth != 16 || d.Link.CurrentSpeed == nil || d.Link.CurrentSpeed.MTps != 8000 {
			t.Errorf("%s: link %+v", d.Address, d.Link)
		}
	}
	// The two ConnectX-4 InfiniBand HCAs are not DPUs.
	if d := inv.Lookup(addr("0000:1a:00.0")); d == nil || d.Vendor != 0x15b3 {
		t.Error("0000:1a:00.0 Mellanox missing")
	} else if _, ok := IsAccelerator(d); ok {
		t.Error("ConnectX-4 classified as an accelerator")
	}
	// Two sockets, two NUMA nodes.
	nodes, ok, err := NUMANodes(root)
	if err != nil || !ok || len(nodes) != 2 || nodes[1] != 1 {
		t.Errorf("NUMANodes = %v %v %v", nodes, ok, err)
	}
}

func TestCorpusHwlocV100s(t *testing.T) {
	inv, _ := scanArchive(t, filepath.Join(corpusDir(t), "hwloc", "linux", "nvidiagpunumanodes.tar.bz2"))
	// The capture keeps only class and local_cpus: the GPUs are found by
	// class, and the missing vendor/device are errors, not zeros.
	var gpus int
	for _, d := range inv.Devices {
		k, ok := IsAccelerator(d)
		if !ok || k != KindGPU {
			t.Errorf("%s: %q %v", d.Address, k, ok)
			continue
		}
		gpus++
		if d.Has(HasVendor) || d.Has(HasDevice) || len(d.Errors) != 2 {
			t.Errorf("%s: present %b errors %v", d.Address, d.Present, d.Errors)
		}
	}
	if gpus != 6 {
		t.Errorf("%d GPUs, want 6", gpus)
	}
	for _, a := range []string{"0004:05:00.0", "0004:06:00.0", "0006:00:00.0", "0007:00:00.0", "0035:04:00.0", "0035:05:00.0"} {
		if inv.Lookup(addr(a)) == nil {
			t.Errorf("%s missing", a)
		}
	}
}
