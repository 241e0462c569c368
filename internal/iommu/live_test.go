package iommu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// TestLive reads this machine. Whatever it has, the answer must agree
// with the host's own independent evidence: groups exist exactly when
// On is Yes, the firmware verdict follows the table listing, and every
// group holding an accelerator is judged. On the VM the tests run on (no
// IOMMU, no DMAR, a kernel without IOMMU drivers) it says so with that
// evidence.
func TestLive(t *testing.T) {
	root := hostfs.MustNew("/")
	inv, err := pci.Scan(root)
	if err != nil {
		t.Skipf("no PCI bus: %v", err)
	}
	st := Read(root, inv)
	entries, derr := os.ReadDir(GroupsDir)
	switch {
	case derr == nil && len(entries) > 0:
		if st.On != Yes || len(st.Groups) != len(entries) {
			t.Errorf("%d groups on the host, On %v with %d groups", len(entries), st.On, len(st.Groups))
		}
	case derr == nil || errors.Is(derr, os.ErrNotExist):
		if st.On != No {
			t.Errorf("no groups on the host, On %v:\n%s", st.On, reasons(st))
		}
	}
	tables, _ := os.ReadDir(TablesDir)
	has := map[string]bool{}
	for _, e := range tables {
		has[e.Name()] = true
	}
	if (has["DMAR"] || has["IVRS"] || has["VIOT"]) != (st.Firmware.Describes() == Yes) && !has["IORT"] {
		t.Errorf("tables %v, Describes %v", has, st.Firmware.Describes())
	}
	cmd, _ := os.ReadFile("/proc/cmdline")
	if st.Cmdline.Raw != strings.TrimSpace(string(cmd)) {
		t.Errorf("cmdline %q", st.Cmdline.Raw)
	}
	gvs := Viabilities(root, st, inv, NewConfigReader(root))
	if st.On != Yes && len(gvs) > 0 {
		t.Errorf("%d group verdicts without groups", len(gvs))
	}
	t.Logf("On %v, vendor %q:\n%s", st.On, st.Vendor, reasons(st))
	if st.On == No && st.Firmware.Describes() == No && !strings.Contains(reasons(st), "no IOMMU") {
		t.Errorf("no IOMMU and no table, but the reasons do not say so:\n%s", reasons(st))
	}
}

// TestCorpus runs the readers over every real capture with PCI functions:
// no panic, no group without members, and where the capture has
// iommu_group links (ghw's laptop, procfs' AMD and Intel servers), the
// groups rebuilt from them, each member judged by its own driver link.
func TestCorpus(t *testing.T) {
	dir := testutil.CorpusDir(t)
	var archives []string
	for _, g := range []string{"ghw/*.tar.gz", "hwloc/linux/*.tar.bz2", "nfd/*.tar.gz", "procfs/*.tar.gz"} {
		m, _ := filepath.Glob(filepath.Join(dir, g))
		archives = append(archives, m...)
	}
	linked := 0
	for _, a := range archives {
		d := testutil.Unpack(t, a)
		if d == "" {
			continue
		}
		root := hostfs.MustNew(d)
		inv, err := pci.Scan(root)
		if err != nil {
			continue
		}
		st := Read(root, inv)
		gvs := Viabilities(root, st, inv, NewConfigReader(root))
		links := 0
		for _, dv := range inv.Devices {
			if dv.IOMMUGroup != nil {
				links++
			}
		}
		if links > 0 {
			linked++
			if st.On != Yes || !st.GroupsFromLinks {
				t.Errorf("%s: %d iommu_group links, On %v:\n%s", filepath.Base(a), links, st.On, reasons(st))
			}
		} else if st.GroupsErr != nil && st.On != Unknown {
			// Neither the groups directory nor a link: no verdict.
			t.Errorf("%s: no groups directory and no link, On %v", filepath.Base(a), st.On)
		}
		for _, gv := range gvs {
			if len(gv.Members) == 0 || len(gv.Accelerators) == 0 {
				t.Errorf("%s: group %d: %+v", filepath.Base(a), gv.Group, gv)
			}
			for _, m := range gv.Members {
				if m.Device != nil && m.Driver != m.Device.Driver {
					t.Errorf("%s: %s driver %q, inventory %q", filepath.Base(a), m.Name, m.Driver, m.Device.Driver)
				}
				if m.Role == RoleBlocks && (m.Driver == "" || IsVFIODriver(m.Driver)) {
					t.Errorf("%s: %s blocks with driver %q", filepath.Base(a), m.Name, m.Driver)
				}
			}
			// Captures without config files: the ACS picture is unknown,
			// never a verdict.
			for _, iso := range gv.Isolation {
				for _, h := range iso.Hops {
					if h.State == HopBreaks && h.ACS == nil && h.Err == nil && !strings.Contains(h.Reason, "no ACS capability") && !strings.Contains(h.Reason, "never") {
						t.Errorf("%s: %s: %s", filepath.Base(a), h.Address, h.Reason)
					}
				}
			}
		}
		t.Logf("%s: %d functions, %d links, %d groups, %d with accelerators, On %v", filepath.Base(a), len(inv.Devices), links, len(st.Groups), len(gvs), st.On)
	}
	if linked == 0 {
		t.Error("no capture with iommu_group links was read")
	}
}

// BenchmarkIOMMU is the in-process cost of this package's reads on the
// largest fixture (68 functions): Read (firmware, units, groups, command
// line, kernel configuration) and Viabilities (every group, config spaces
// and the ACS path of each accelerator). pci.Scan, which the caller runs
// anyway, is measured apart.
func BenchmarkIOMMU(b *testing.B) {
	root := hostfs.MustNew(filepath.Join(hostsDir, fixture.NameHGXVFIO))
	inv, err := pci.Scan(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Read+Viabilities", func(b *testing.B) {
		for b.Loop() {
			st := Read(root, inv)
			if gv := Viabilities(root, st, inv, NewConfigReader(root)); len(gv) != 8 {
				b.Fatalf("%d groups", len(gv))
			}
		}
	})
	b.Run("Scan+Read+Viabilities", func(b *testing.B) {
		for b.Loop() {
			inv, _ := pci.Scan(root)
			st := Read(root, inv)
			Viabilities(root, st, inv, NewConfigReader(root))
		}
	})
	b.Run("ReadConfig-all", func(b *testing.B) {
		for b.Loop() {
			for _, d := range inv.Devices {
				if _, err := pci.ReadConfig(root, d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
