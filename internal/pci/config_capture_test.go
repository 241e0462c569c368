package pci

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// checkConfigAgainstSysfs reads the config of every function that has
// one and checks it against the sysfs attributes the kernel derives from
// the same registers: ids and class (pci-sysfs.c prints them from
// struct pci_dev, filled from config space in drivers/pci/probe.c),
// a bridge class with a type 1 header, BARs against `resource`, the
// Express link against the link attributes, SR-IOV against sriov_*, and
// the AER statistics. It returns how many configs it read, by extent.
func checkConfigAgainstSysfs(t *testing.T, name string, inv *Inventory, root *hostfs.Root) map[Extent]int {
	t.Helper()
	seen := map[Extent]int{}
	for _, d := range inv.Devices {
		c, err := ReadConfig(root, d)
		var ae *AttrError
		if errors.As(err, &ae) && ae.Problem == Absent {
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", name, d.Address, err)
			continue
		}
		seen[c.Extent]++
		// A VF's vendor and device registers read 0xffff by the SR-IOV
		// spec; sysfs shows the ids the kernel took from the PF.
		vf := d.IsVF() && c.Vendor == 0xffff && c.Device == 0xffff
		if !vf && (d.Has(HasVendor) && c.Vendor != d.Vendor || d.Has(HasDevice) && c.Device != d.Device) || d.Has(HasClass) && c.Class != d.Class {
			t.Errorf("%s %s: config %04x:%04x class %06x, sysfs %s class %06x", name, d.Address, c.Vendor, c.Device, c.Class, d.IDString(), d.Class)
		}
		if d.Has(HasClass) && (d.Class>>8 == 0x0604) != (c.HeaderType == HeaderBridge) {
			t.Errorf("%s %s: class %06x with header type %d", name, d.Address, d.Class, c.HeaderType)
		}
		if c.CapsErr != nil && c.Extent != ExtentUnprivileged {
			t.Errorf("%s %s: %v", name, d.Address, c.CapsErr)
		}
		if c.Extent == ExtentUnprivileged {
			// Everything past the header is not readable, never absent.
			for what, err := range map[string]error{"Express": second(c.Express()), "ACS": second(c.ACS()), "SR-IOV": second(c.SRIOV())} {
				if c.Status&statusCapList != 0 && (!errors.Is(err, ErrConfigUnprivileged) || errors.Is(err, ErrCapAbsent)) {
					t.Errorf("%s %s: %s of a 64-byte config: %v, want not readable without CAP_SYS_ADMIN", name, d.Address, what, err)
				}
			}
		}
		if res, err := ReadResources(root, d); err == nil {
			_, mm, berr := Regions(c, res, d.AttrPath(ResourceAttr))
			if berr != nil {
				t.Errorf("%s %s: %v", name, d.Address, berr)
			}
			for _, m := range mm {
				if !m.Soft {
					t.Errorf("%s %s: %s", name, d.Address, m)
				}
			}
		} else if !errors.As(err, &ae) || ae.Problem != Absent {
			t.Errorf("%s %s: %v", name, d.Address, err)
		}
		if e, err := c.Express(); err == nil {
			for _, m := range e.CheckLink(d) {
				if !m.Soft {
					t.Errorf("%s %s: %s", name, d.Address, m)
				}
			}
		}
		if s, err := c.SRIOV(); err == nil {
			for _, m := range s.Check(d) {
				t.Errorf("%s %s: %s", name, d.Address, m)
			}
		}
		stats, errs := ReadAERStats(root, d)
		for _, err := range errs {
			t.Errorf("%s %s: %v", name, d.Address, err)
		}
		if _, err := c.AER(); len(stats) > 0 && errors.Is(err, ErrCapAbsent) {
			// aer.c creates the statistics only for a function with the
			// capability (aer_stats_attrs_are_visible: pdev->aer_stats).
			t.Errorf("%s %s: AER statistics without an AER capability", name, d.Address)
		}
	}
	return seen
}

func second[T any](_ T, err error) error { return err }

// TestCorpusProcfsAttrs: prometheus/procfs' sysfs fixture holds the
// resource, link and aer_dev_* attributes of a real NVMe SSD, RAID
// controller and their root ports. Its config files are not usable: the
// archive is text and their bytes were replaced by U+FFFD (the corpus'
// SOURCES.md says so); ReadConfig must say they do not parse as config
// space rather than decode garbage as a valid one.
func TestCorpusProcfsAttrs(t *testing.T) {
	archive := filepath.Join(corpusDir(t), "procfs", "fixtures.ttar")
	dir := testutil.UnpackTTAR(t, archive)
	root := hostfs.MustNew(filepath.Join(dir, "fixtures"))
	inv, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, d := range inv.Devices {
		if c, err := ReadConfig(root, d); err == nil && c.Extent == ExtentFull && c.Vendor == d.Vendor {
			t.Errorf("%s: a mangled config decoded as a whole one", d.Address)
		}
		res, err := ReadResources(root, d)
		if err != nil {
			var ae *AttrError
			if !errors.As(err, &ae) || ae.Problem != Absent {
				t.Errorf("%s: %v", d.Address, err)
			}
			continue
		}
		read++
		if len(res) != 13 && len(res) != 17 {
			t.Errorf("%s: %d resource lines", d.Address, len(res))
		}
		stats, errs := ReadAERStats(root, d)
		if len(errs) > 0 {
			t.Errorf("%s: %v", d.Address, errs)
		}
		for _, st := range stats {
			var sum uint64
			for _, c := range st.Counts {
				sum += c.Count
			}
			if len(st.Counts) > 0 && sum != st.Total {
				t.Errorf("%s %s: counts sum to %d, total %d", d.Address, st.Attr, sum, st.Total)
			}
		}
	}
	// The NVMe SSD: one 64-bit BAR of 16 KiB, and the three AER files.
	d := inv.Lookup(addr("0000:01:00.0"))
	if d == nil {
		t.Fatal("0000:01:00.0 not found")
	}
	res, err := ReadResources(root, d)
	if err != nil || res[0].Size() != 16<<10 || res[0].Flags&ResourceMem64 == 0 || res[0].Start != 0xfd800000 {
		t.Errorf("NVMe resources: %+v %v", res, err)
	}
	stats, _ := ReadAERStats(root, d)
	if len(stats) != 3 || stats[0].Attr != "aer_dev_correctable" || len(stats[0].Counts) != 8 || len(stats[1].Counts) != 18 {
		t.Errorf("AER stats: %+v", stats)
	}
	if read < 2 {
		t.Errorf("%d resource files read", read)
	}
}

// TestCorpusUnprivilegedConfig: node-feature-discovery's and hwloc's
// captures keep only the 64 bytes an unprivileged read returns. The
// header must agree with sysfs, and nothing beyond it may pass for
// absent.
func TestCorpusUnprivilegedConfig(t *testing.T) {
	dir := corpusDir(t)
	archives, _ := filepath.Glob(filepath.Join(dir, "hwloc", "linux", "*.tar.bz2"))
	archives = append(archives, filepath.Join(dir, "nfd", "pci-rootfs-1.tar.gz"))
	total := 0
	for _, a := range archives {
		inv, root := scanArchive(t, a)
		if inv == nil {
			continue
		}
		seen := checkConfigAgainstSysfs(t, filepath.Base(a), inv, root)
		for x, n := range seen {
			if x != ExtentUnprivileged {
				t.Errorf("%s: %d configs of extent %v", filepath.Base(a), n, x)
			}
		}
		total += seen[ExtentUnprivileged]
	}
	if total < 200 {
		t.Errorf("%d 64-byte configs read, want the corpus' 222", total)
	}
}
