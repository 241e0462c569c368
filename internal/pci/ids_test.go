package pci

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sampleIDs = `#
#	List of PCI ID's (sample written for this test)
#
10de  NVIDIA Corporation
	15f8  GP100GL [Tesla P100 PCIe 16GB]
		10de 118f  Tesla P100 PCIe 16GB
# a comment between devices
	2330  GH100[H100 SXM5 80GB]
1a03  ASPEED Technology, Inc.
	2000  ASPEED Graphics Family
1bcf  NEC Corporation
	001c  Vector Engine 1.0

C 03  Display controller
	00  VGA compatible controller
		00  VGA controller
	02  3D controller
C 0b  Processor
	40  Co-processor
C 12  Processing accelerators
`

func TestParseIDs(t *testing.T) {
	ids, err := ParseIDs(strings.NewReader(sampleIDs))
	if err != nil {
		t.Fatal(err)
	}
	type q struct {
		got  string
		ok   bool
		want string
	}
	lookups := func(ids *IDs) []q {
		var out []q
		add := func(want string) func(string, bool) {
			return func(s string, ok bool) { out = append(out, q{s, ok, want}) }
		}
		add("NVIDIA Corporation")(ids.VendorName(0x10de))
		add("GP100GL [Tesla P100 PCIe 16GB]")(ids.DeviceName(0x10de, 0x15f8))
		add("Tesla P100 PCIe 16GB")(ids.SubsystemName(0x10de, 0x15f8, 0x10de, 0x118f))
		add("GH100[H100 SXM5 80GB]")(ids.DeviceName(0x10de, 0x2330))
		add("Vector Engine 1.0")(ids.DeviceName(0x1bcf, 0x001c))
		add("VGA compatible controller")(ids.ClassName(0x030000))
		add("VGA controller")(ids.ProgIfName(0x030000))
		add("3D controller")(ids.ClassName(0x030200))
		add("Co-processor")(ids.ClassName(0x0b4000))
		add("Processing accelerators")(ids.ClassName(0x120000)) // no subclass listed: the class name
		add("")(ids.DeviceName(0x10de, 0x9999))
		add("")(ids.SubsystemName(0x10de, 0x2330, 0x10de, 0x118f))
		add("")(ids.VendorName(0x8086))
		add("")(ids.ClassName(0x990000))
		add("")(ids.ProgIfName(0x030200))
		return out
	}
	for _, l := range lookups(ids) {
		if l.got != l.want || l.ok != (l.want != "") {
			t.Errorf("got %q ok=%v, want %q", l.got, l.ok, l.want)
		}
	}
	var nilIDs *IDs
	if n, ok := nilIDs.DeviceName(0x10de, 0x15f8); ok || n != "" {
		t.Errorf("nil IDs answered %q", n)
	}
}

func TestParseIDsFor(t *testing.T) {
	ids, err := ParseIDsFor([]byte(sampleIDs), Filter{Vendor: func(v uint16) bool { return v == 0x1bcf }})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ids.VendorName(0x10de); ok {
		t.Error("vendor 10de kept though not asked for")
	}
	if n, _ := ids.DeviceName(0x1bcf, 0x001c); n != "Vector Engine 1.0" {
		t.Errorf("DeviceName = %q", n)
	}
	if n, _ := ids.ClassName(0x0b4000); n != "Co-processor" {
		t.Errorf("classes must always be kept, ClassName = %q", n)
	}
}

func TestParseIDsMalformed(t *testing.T) {
	in := "10de  NVIDIA Corporation\n" +
		"\tzzzz  bad device\n" + // line 2
		"\t15f8  GP100GL\n" +
		"\t\t\t0000  too deep\n" +
		"xyz\n" + // not hex: skipped with its children
		"\t1234  orphan of a bad vendor\n" +
		"1a03  ASPEED Technology, Inc.\r\n" + // CRLF tolerated
		"\t2000  ASPEED Graphics Family\n"
	ids, err := ParseIDs(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "3 malformed lines, the first at line 2") {
		t.Fatalf("err = %v", err)
	}
	// Partial results survive.
	if n, _ := ids.DeviceName(0x10de, 0x15f8); n != "GP100GL" {
		t.Errorf("DeviceName = %q", n)
	}
	if n, _ := ids.VendorName(0x1a03); n != "ASPEED Technology, Inc." {
		t.Errorf("VendorName = %q", n)
	}
	if _, err := ParseIDs(strings.NewReader("\t15f8  device before any vendor\n")); err == nil {
		t.Error("orphan device accepted")
	}
}

// TestParseIDsHost checks the parser against the host's real pci.ids.
func TestParseIDsHost(t *testing.T) {
	b, err := os.ReadFile("/usr/share/misc/pci.ids")
	if err != nil {
		t.Skipf("no pci.ids on this machine: %v", err)
	}
	ids, err := ParseIDs(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the distribution's pci.ids does not parse cleanly: %v", err)
	}
	if len(ids.vendors) < 2000 || len(ids.classes) < 20 {
		t.Errorf("parsed %d vendors, %d classes", len(ids.vendors), len(ids.classes))
	}
	if n, _ := ids.DeviceName(0x10de, 0x15f8); n != "GP100GL [Tesla P100 PCIe 16GB]" {
		t.Errorf("10de:15f8 = %q", n)
	}
	filtered, err := ParseIDsFor(b, Filter{Vendor: func(v uint16) bool { return v == 0x10de }})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := ids.DeviceName(0x10de, 0x1db8)
	got, _ := filtered.DeviceName(0x10de, 0x1db8)
	if got != full || len(filtered.vendors) != 1 {
		t.Errorf("filtered parse: %q vs %q, %d vendors", got, full, len(filtered.vendors))
	}
}

func BenchmarkParseIDs(b *testing.B) {
	data, err := os.ReadFile("/usr/share/misc/pci.ids")
	if err != nil {
		b.Skipf("no pci.ids: %v", err)
	}
	b.Run("full", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := ParseIDsFor(data, Filter{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("eight-vendors", func(b *testing.B) {
		keep := map[uint16]bool{0x10de: true, 0x8086: true, 0x15b3: true, 0x1a03: true, 0x1022: true, 0x144d: true, 0x10b5: true, 0x1000: true}
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := ParseIDsFor(data, Filter{Vendor: func(v uint16) bool { return keep[v] }}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What Scan asks for on an 8-GPU server: about thirty vendor:device pairs.
	b.Run("host-devices", func(b *testing.B) {
		pairs := map[uint32]bool{}
		for _, p := range [][2]uint16{{0x10de, 0x2330}, {0x10de, 0x22a3}, {0x8086, 0x09a2}, {0x8086, 0x09a4}, {0x8086, 0x0998}, {0x8086, 0x1bb1}, {0x8086, 0x2020}, {0x8086, 0x347a}, {0x8086, 0x3456}, {0x15b3, 0x101b}, {0x15b3, 0x1021}, {0x1a03, 0x2000}, {0x1a03, 0x1150}, {0x1000, 0x00e6}, {0x10b5, 0xc010}, {0x144d, 0xa80a}, {0x1022, 0x1480}} {
			pairs[uint32(p[0])<<16|uint32(p[1])] = true
		}
		f := Filter{
			Vendor: func(v uint16) bool {
				for k := range pairs {
					if uint16(k>>16) == v {
						return true
					}
				}
				return false
			},
			Device: func(v, d uint16) bool { return pairs[uint32(v)<<16|uint32(d)] },
		}
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := ParseIDsFor(data, f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func FuzzParseIDs(f *testing.F) {
	f.Add([]byte(sampleIDs))
	f.Add([]byte("10de  x\n\t15f8  y\n\t\t10de 118f  z\nC 03  d\n\t00  v\n\t\t00  p\n"))
	f.Add([]byte("\t\t\t\n#\nC \nC zz\n0000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := ParseIDs(bytes.NewReader(b))
		if ids == nil && err == nil {
			t.Fatal("nil IDs without error")
		}
		// Filtering never invents entries.
		part, _ := ParseIDsFor(b, Filter{Vendor: func(v uint16) bool { return v%2 == 0 }, Device: func(_, d uint16) bool { return d%3 == 0 }})
		for v := range part.vendors {
			if v%2 != 0 {
				t.Fatalf("vendor %04x kept", v)
			}
			want, _ := ids.VendorName(v)
			if got, _ := part.VendorName(v); got != want {
				t.Fatalf("vendor %04x: %q vs %q", v, got, want)
			}
			for d := range part.vendors[v].devices {
				if d%3 != 0 {
					t.Fatalf("device %04x:%04x kept", v, d)
				}
			}
		}
		if diff := cmp.Diff(len(ids.classes), len(part.classes)); diff != "" {
			t.Fatalf("classes differ: %s", diff)
		}
	})
}
