package pci

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func TestParseHex(t *testing.T) {
	tests := []struct {
		in   string
		bits int
		want uint64
		ok   bool
	}{
		{"0x10de\n", 16, 0x10de, true},
		{"0x030200", 24, 0x030200, true},
		{"0xa1", 8, 0xa1, true},
		{"10DE", 16, 0x10de, true},
		{"0X10de", 16, 0x10de, true},
		{"0x10000", 16, 0, false},
		{"0x1000000", 24, 0, false},
		{"0x", 16, 0, false},
		{"", 16, 0, false},
		{"garbage", 24, 0, false},
		{"0x-1", 16, 0, false},
		{"0x+1", 16, 0, false},
		{"0x10 de", 16, 0, false},
		{"\x00\x00\x00", 16, 0, false},
	}
	for _, tt := range tests {
		got, err := parseHex(tt.in, tt.bits)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseHex(%q, %d) = %#x, %v; want %#x ok=%v", tt.in, tt.bits, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseDec(t *testing.T) {
	tests := []struct {
		in     string
		lo, hi int
		want   int
		ok     bool
	}{
		{"-1\n", -1, 100, -1, true},
		{"16", 0, 255, 16, true},
		{"0", 0, 255, 0, true},
		{"-2", -1, 100, 0, false},
		{"256", 0, 255, 0, false},
		{"+3", 0, 255, 0, false},
		{"x16", 0, 255, 0, false},
		{"", 0, 255, 0, false},
		{"99999999999999999999", 0, 255, 0, false},
	}
	for _, tt := range tests {
		got, err := parseDec(tt.in, tt.lo, tt.hi)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseDec(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseLinkSpeed(t *testing.T) {
	tests := []struct {
		in  string
		mt  int
		str string
		ok  bool
	}{
		{"16.0 GT/s PCIe\n", 16000, "16.0 GT/s", true},
		{"2.5 GT/s PCIe", 2500, "2.5 GT/s", true},
		{"64.0 GT/s PCIe", 64000, "64.0 GT/s", true},
		{"8 GT/s", 8000, "8.0 GT/s", true}, // kernels before 5.x
		{"5 GT/s", 5000, "5.0 GT/s", true},
		{"2.5 GT/s", 2500, "2.5 GT/s", true},
		{"Unknown", 0, "Unknown", true},
		{"Unknown speed", 0, "Unknown speed", true},
		{"", 0, "", false},
		{"0 GT/s", 0, "", false},
		{"16.0 GT/s PCIe PCIe", 0, "", false},
		{"66 MHz PCI-X", 0, "", false},
		{"-8 GT/s", 0, "", false},
		{".5 GT/s", 0, "", false},
		{"8. GT/s", 0, "", false},
		{"1000 GT/s", 0, "", false},
		{"8.0GT/s", 0, "", false},
	}
	for _, tt := range tests {
		got, err := ParseLinkSpeed(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseLinkSpeed(%q) error %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if got.MTps != tt.mt || got.String() != tt.str || got.Raw != strings.TrimSpace(tt.in) || got.Known() != (tt.mt > 0) {
			t.Errorf("ParseLinkSpeed(%q) = %+v (%s), want %d MT/s %q", tt.in, got, got, tt.mt, tt.str)
		}
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}, true},
		{"0", []int{0}, true},
		{"", nil, true},
		{"3-1", nil, false},
		{"0-", nil, false},
		{"a", nil, false},
		{"0,,1", nil, false},
		{"0-4294967295", nil, false},
		{"-1", nil, false},
	}
	for _, tt := range tests {
		got, err := ParseList(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseList(%q) error %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseList(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseModalias(t *testing.T) {
	got, err := ParseModalias("pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02i00\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Modalias{Vendor: 0x10de, Device: 0x15f8, SubsystemVendor: 0x10de, SubsystemDevice: 0x118f, Class: 0x030200}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"", "pci:", "usb:v1D6Bp0002",
		"pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02",      // no prog-if
		"pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02i00xx", // trailing
		"pci:v0001_10DEd000015F8sv000010DEsd0000118Fbc03sc02i00",
		"pci:v000110DEd000015F8sv000010DEsd0000118Fbc03sc02i00", // vendor > 16 bits
		"pci:v0x0010DEd000015F8sv000010DEsd0000118Fbc03sc02i00",
	} {
		if m, err := ParseModalias(bad); err == nil {
			t.Errorf("ParseModalias(%q) = %+v, want error", bad, m)
		}
	}
}

func FuzzParseLinkSpeed(f *testing.F) {
	for _, s := range []string{"16.0 GT/s PCIe", "8 GT/s", "Unknown", "2.5 GT/s", "", "1.125 GT/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := ParseLinkSpeed(s)
		if err != nil {
			return
		}
		if ls.MTps < 0 || ls.MTps >= 1000*1000 {
			t.Fatalf("%q: out of range %d", s, ls.MTps)
		}
		if ls.Known() {
			// The kernel's spelling of a known speed parses back the same
			// at 100 MT/s precision.
			back, err := ParseLinkSpeed(ls.String() + " PCIe")
			if err != nil || back.MTps != ls.MTps/100*100 {
				t.Fatalf("%q: %q parsed back as %+v, %v", s, ls.String(), back, err)
			}
		}
	})
}

// FuzzSysfsAttrs runs the attribute parsers Scan applies to sysfs text.
func FuzzSysfsAttrs(f *testing.F) {
	for _, s := range []string{"0x10de\n", "0x030200\n", "0xa1", "-1\n", "16", "0-3,8", "pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02i00", "garbage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, bits := range []int{8, 16, 24} {
			if v, err := parseHex(s, bits); err == nil && v>>uint(bits) != 0 {
				t.Fatalf("parseHex(%q, %d) = %#x overflows", s, bits, v)
			}
		}
		if v, err := parseDec(s, -1, 255); err == nil && (v < -1 || v > 255) {
			t.Fatalf("parseDec(%q) = %d out of range", s, v)
		}
		if l, err := ParseList(s); err == nil && (len(l) > maxListItems || !slices.IsSorted(l) && !strings.Contains(s, ",")) {
			t.Fatalf("ParseList(%q) = %d items", s, len(l))
		}
		_, _ = ParseModalias(s)
	})
}

func TestParseMask(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"0000ffff", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, false},
		{"000000ff,ff000000,00000000,00000000", []int{88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103}, false},
		{"1,00000001\n", []int{0, 32}, false},
		{"", nil, false},
		{"xyz", nil, true},
		{"123456789", nil, true},
		{"ff,,ff", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseMask(tt.in)
		testutil.CheckParse(t, got, err, tt.want, tt.wantErr)
	}
}

func FuzzParseMask(f *testing.F) {
	f.Add("0000,00000000,000000ff,ff000000")
	f.Add("ffffffff")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseMask(s)
		if err != nil {
			return
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("not ascending: %v", got)
			}
		}
	})
}
