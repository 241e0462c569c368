package pci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// fieldOf is the Fields an attribute is read for; 0 for those every scan
// reads (the ids) and for errors that are not one attribute's.
func fieldOf(attr string) Fields {
	switch {
	case attr == "subsystem_vendor" || attr == "subsystem_device" || attr == "modalias":
		return FieldSubsystem
	case attr == "revision":
		return FieldRevision
	case attr == "numa_node":
		return FieldLocality
	case attr == "local_cpulist" || attr == "local_cpus":
		return FieldLocalCPUs
	case attr == "driver":
		return FieldDriver
	case attr == "iommu_group":
		return FieldIOMMUGroup
	case attr == "physfn":
		return FieldPhysFn
	case strings.HasPrefix(attr, "sriov_") || strings.HasPrefix(attr, "virtfn"):
		return FieldSRIOV
	case strings.HasSuffix(attr, "_link_speed") || strings.HasSuffix(attr, "_link_width"):
		return FieldLink
	}
	return 0
}

// only is what a scan of f would have made of d, a device of a whole
// scan: the fields left out zero, their errors gone.
func only(d *Device, f Fields) *Device {
	c := *d
	if f&FieldSubsystem == 0 {
		c.SubsystemVendor, c.SubsystemDevice, c.SubsystemName = 0, 0, ""
		c.Present &^= HasSubsystem
	}
	if f&FieldRevision == 0 {
		c.Revision = 0
		c.Present &^= HasRevision
	}
	if f&FieldLocality == 0 {
		c.NUMANode = nil
	}
	if f&FieldLocalCPUs == 0 {
		c.LocalCPUs, c.LocalCPUMask = "", ""
	}
	if f&FieldDriver == 0 {
		c.Driver = ""
	}
	if f&FieldIOMMUGroup == 0 {
		c.IOMMUGroup = nil
	}
	if f&FieldPhysFn == 0 {
		c.PhysFn = nil
	}
	if f&FieldSRIOV == 0 {
		c.TotalVFs, c.NumVFs, c.VFs = nil, nil, nil
	}
	if f&FieldLink == 0 {
		c.Link = Link{}
	}
	if f&FieldNames == 0 {
		c.VendorName, c.DeviceName, c.SubsystemName, c.ClassName = "", "", "", ""
	}
	c.Errors = nil
	for _, err := range d.Errors {
		var ae *AttrError
		if errors.As(err, &ae) && fieldOf(ae.Attr) != 0 && fieldOf(ae.Attr)&f == 0 {
			continue
		}
		c.Errors = append(c.Errors, err)
	}
	return &c
}

// TestScanFieldsReadsWhatItIsAsked: on every fixture host, hostile trees
// and the corpus's captures, a scan of some fields gives each function
// exactly what the whole scan gives it for those fields, and nothing (no
// value, no error) for the others; Scan is ScanFields(AllFields).
func TestScanFieldsReadsWhatItIsAsked(t *testing.T) {
	t.Run("fixtures", func(t *testing.T) {
		syss, _ := filepath.Glob("../../testdata/hosts/*/sys")
		var dirs []string
		for _, s := range syss {
			dirs = append(dirs, filepath.Dir(s))
		}
		if len(dirs) < 3 {
			t.Fatal("no fixture hosts")
		}
		hostile := newTree(t)
		hostile.dev("pci0000:00/0000:00:02.0", map[string]string{"vendor": "0x10de", "device": "0x2330", "class": "0x030200",
			"subsystem_vendor": "zz", "revision": "0x1ff", "driver": "->/", "iommu_group": "->../../../../etc/passwd",
			"physfn": "->../nonsense", "virtfn0": "->../../..", "sriov_numvfs": "-1", "current_link_speed": "fast",
			"max_link_width": "-3", "numa_node": "abc"})
		checkFields(t, append(dirs, hostile.dir))
	})
	t.Run("corpus", func(t *testing.T) {
		cdir := corpusDir(t)
		archives, _ := filepath.Glob(filepath.Join(cdir, "hwloc/linux/*.tar.bz2"))
		more, _ := filepath.Glob(filepath.Join(cdir, "ghw/*.tar.gz"))
		var dirs []string
		for _, archive := range append(archives, more...) {
			if dir := unpack(t, archive); dir != "" {
				dirs = append(dirs, dir)
			}
		}
		if len(dirs) == 0 {
			t.Skip("no captures in the corpus")
		}
		checkFields(t, dirs)
	})
}

// errText compares errors by their text.
var errText = cmp.Comparer(func(a, b error) bool { return fmt.Sprint(a) == fmt.Sprint(b) })

func checkFields(t *testing.T, dirs []string) {
	sets := []Fields{0, FieldSubsystem | FieldRevision, FieldLocality | FieldDriver | FieldIOMMUGroup | FieldPhysFn | FieldLink,
		FieldSRIOV, FieldDriver, FieldNames, FieldSubsystem | FieldNames, FieldLocalCPUs, FieldLocality | FieldBridgeConfig,
		AllFields &^ FieldNames, AllFields, AllFields | FieldBridgeConfig}
	scanned := 0
	for _, dir := range dirs {
		root := hostfs.MustNew(dir)
		full, err := Scan(root)
		if err != nil {
			if _, err := os.Stat(filepath.Join(dir, "sys/bus/pci/devices")); err != nil {
				continue // a host without a PCI bus
			}
			t.Fatalf("%s: %v", dir, err)
		}
		scanned++
		if full.Fields != AllFields {
			t.Errorf("%s: Scan read %b, not every field", dir, full.Fields)
		}
		for _, f := range sets {
			part, err := ScanFields(root, f)
			if err != nil {
				t.Fatalf("%s %b: %v", dir, f, err)
			}
			if len(part.Devices) != len(full.Devices) {
				t.Fatalf("%s %b: %d functions, the whole scan %d", dir, f, len(part.Devices), len(full.Devices))
			}
			for i, d := range full.Devices {
				p := part.Devices[i]
				masked := *p
				masked.ConfigRead = nil // held to ReadConfig below
				if diff := cmp.Diff(only(d, f), &masked, errText); diff != "" {
					t.Errorf("%s %s, fields %b (-whole scan, masked +ScanFields):\n%s", filepath.Base(dir), d.Address, f, diff)
				}
				// A bridge's config space read by the scan is what
				// ReadConfig reads through the root; nothing else's is
				// read.
				read := f&FieldBridgeConfig != 0 && p.Has(HasClass) && IsBridgeClass(p.Class)
				if (p.ConfigRead != nil) != read {
					t.Errorf("%s %s, fields %b: config read by the scan: %v, want %v", filepath.Base(dir), d.Address, f, p.ConfigRead != nil, read)
				}
				if read {
					want, werr := ReadConfig(root, d)
					got, gerr := ReadConfig(root, p)
					if diff := cmp.Diff(want, got, errText); diff != "" || fmt.Sprint(werr) != fmt.Sprint(gerr) {
						t.Errorf("%s %s: ReadConfig after the scan: %v, through the root: %v\n%s", filepath.Base(dir), d.Address, gerr, werr, diff)
					}
				}
			}
		}
	}
	if scanned == 0 {
		t.Fatal("no tree had a PCI bus")
	}
}

// LoadNames after a scan without FieldNames names the functions as a
// scan with it does.
func TestLoadNamesAfterTheScan(t *testing.T) {
	for _, host := range []string{"nvidia-h100x8", "amd-mi210x2"} {
		root := hostfs.MustNew(filepath.Join("..", "..", "testdata", "hosts", host))
		full, err := Scan(root)
		if err != nil {
			t.Fatal(err)
		}
		later, err := ScanFields(root, AllFields&^FieldNames)
		if err != nil {
			t.Fatal(err)
		}
		if later.IDsPath != "" || later.Devices[0].VendorName != "" {
			t.Fatalf("%s: names without FieldNames: %q %q", host, later.IDsPath, later.Devices[0].VendorName)
		}
		later.LoadNames(root)
		if diff := cmp.Diff(full, later, errText); diff != "" {
			t.Errorf("%s: (-Scan +ScanFields then LoadNames)\n%s", host, diff)
		}
	}
}
