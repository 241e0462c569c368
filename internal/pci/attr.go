package pci

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseHex parses a sysfs id attribute. The kernel prints vendor, device
// and subsystem ids with "0x%04x", class with "0x%06x" and revision with
// "0x%02x" (drivers/pci/pci-sysfs.c); captures made by other tools
// sometimes drop the prefix, so it is optional. The value must fit in bits.
func parseHex(s string, bits int) (uint64, error) {
	t := strings.TrimSpace(s)
	if len(t) > 1 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') {
		t = t[2:]
	}
	v, ok := hexDigits(t)
	if !ok {
		return 0, fmt.Errorf("not a hex number: %q", s)
	}
	if bits < 64 && v>>uint(bits) != 0 {
		return 0, fmt.Errorf("%q does not fit in %d bits", s, bits)
	}
	return v, nil
}

// parseDec parses a decimal sysfs attribute (numa_node, link widths,
// sriov_*): an optional minus sign and digits, within [lo, hi].
func parseDec(s string, lo, hi int) (int, error) {
	t := strings.TrimSpace(s)
	v, err := strconv.Atoi(t)
	if err != nil || strings.HasPrefix(t, "+") {
		return 0, fmt.Errorf("not a decimal number: %q", s)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d out of range [%d, %d]", v, lo, hi)
	}
	return v, nil
}

// LinkSpeed is a PCIe link speed as sysfs prints it.
type LinkSpeed struct {
	MTps int    // mega-transfers per second: 2500, 5000, 8000, 16000, ...; 0 when the kernel says "Unknown"
	Raw  string // the attribute as read, trimmed, for evidence
}

// Known reports whether the speed is a number (not "Unknown").
func (s LinkSpeed) Known() bool { return s.MTps > 0 }

// String is the speed in the kernel's current spelling ("16.0 GT/s"), or
// the raw text when unknown.
func (s LinkSpeed) String() string {
	if !s.Known() {
		return s.Raw
	}
	return fmt.Sprintf("%d.%d GT/s", s.MTps/1000, s.MTps%1000/100)
}

var errLinkSpeed = errors.New("not a PCIe link speed")

// ParseLinkSpeed parses current_link_speed / max_link_speed. Kernels since
// 5.x print pci_speed_string() (drivers/pci/probe.c): "2.5 GT/s PCIe",
// "5.0 GT/s PCIe", ..., "64.0 GT/s PCIe" or "Unknown"; older kernels
// printed "2.5 GT/s", "5 GT/s", "8 GT/s" and "Unknown speed". "Unknown" is
// not an error: the kernel answered, the link speed field was reserved.
func ParseLinkSpeed(s string) (LinkSpeed, error) {
	raw := strings.TrimSpace(s)
	ls := LinkSpeed{Raw: raw}
	if raw == "Unknown" || raw == "Unknown speed" {
		return ls, nil
	}
	t := strings.TrimSuffix(raw, " PCIe")
	num, ok := strings.CutSuffix(t, " GT/s")
	if !ok {
		return ls, fmt.Errorf("%w: %q", errLinkSpeed, s)
	}
	intPart, frac, hasFrac := strings.Cut(num, ".")
	if intPart == "" || len(intPart) > 3 || !allDigits(intPart) || hasFrac && (frac == "" || len(frac) > 3 || !allDigits(frac)) {
		return ls, fmt.Errorf("%w: %q", errLinkSpeed, s)
	}
	ip, _ := strconv.Atoi(intPart)
	mt := ip * 1000
	for i, scale := 0, 100; i < len(frac); i, scale = i+1, scale/10 {
		mt += int(frac[i]-'0') * scale
	}
	if mt == 0 {
		return ls, fmt.Errorf("%w: %q", errLinkSpeed, s)
	}
	ls.MTps = mt
	return ls, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxListItems bounds ParseList: a hostile "0-4294967295" must not
// allocate gigabytes. The kernel's NR_CPUS tops out at 8192 and
// MAX_NUMNODES at 1024.
const maxListItems = 1 << 16

// ParseList parses the kernel's list format ("0-3,8,10-11"), as in
// local_cpulist and /sys/devices/system/node/online
// (lib/vsprintf.c bitmap_list_string). An empty string is an empty list.
func ParseList(s string) ([]int, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(t, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseDec(lo, 0, 1<<30)
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseDec(hi, 0, 1<<30); err != nil {
				return nil, fmt.Errorf("list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("list %q: range %d-%d goes backwards", s, a, b)
			}
		}
		if len(out)+(b-a+1) > maxListItems {
			return nil, fmt.Errorf("list %q: more than %d items", s, maxListItems)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// ParseMask parses the kernel's hex bitmap format, as in local_cpus:
// comma-separated 32-bit words, most significant first
// ("0000,00000000,0000ffff"; lib/bitmap-str.c, bitmap_print_to_buf with
// list false). It returns the set bits in ascending order, at most
// maxListItems of them.
func ParseMask(s string) ([]int, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return nil, nil
	}
	words := strings.Split(t, ",")
	if len(words) > maxListItems/32 {
		return nil, fmt.Errorf("mask of %d words: more than %d bits", len(words), maxListItems)
	}
	var out []int
	for i := len(words) - 1; i >= 0; i-- {
		w := words[i]
		v, ok := hexDigits(w)
		if !ok || len(w) > 8 {
			return nil, fmt.Errorf("mask %s: word %q is not 1 to 8 hex digits", quoteShort(s), w)
		}
		base := (len(words) - 1 - i) * 32
		for b := 0; b < 32; b++ {
			if v&(1<<b) != 0 {
				out = append(out, base+b)
			}
		}
	}
	return out, nil
}

// quoteShort quotes s for an error, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:64]), len(s))
}

// Modalias holds the ids of a PCI modalias string.
type Modalias struct {
	Vendor, Device                   uint16
	SubsystemVendor, SubsystemDevice uint16
	Class                            uint32 // base class, subclass, prog-if
}

// ParseModalias parses "pci:vVVVVVVVVdDDDDDDDDsvSSSSSSSSsdSSSSSSSSbcBBscSSiII",
// the format of drivers/pci/pci-driver.c (pci_uevent / modalias_show).
// Scan uses it only for the subsystem ids when subsystem_vendor and
// subsystem_device are absent (some captures omit them).
func ParseModalias(s string) (Modalias, error) {
	t := strings.TrimSpace(s)
	var m Modalias
	fields := []struct {
		tag   string
		width int
		bits  int
	}{{"pci:v", 8, 16}, {"d", 8, 16}, {"sv", 8, 16}, {"sd", 8, 16}, {"bc", 2, 8}, {"sc", 2, 8}, {"i", 2, 8}}
	var vals [7]uint64
	for i, f := range fields {
		if !strings.HasPrefix(t, f.tag) || len(t) < len(f.tag)+f.width {
			return Modalias{}, fmt.Errorf("modalias %q: expected %q", s, f.tag)
		}
		v, err := parseHex(t[len(f.tag):len(f.tag)+f.width], f.bits)
		if err != nil || strings.ContainsAny(t[len(f.tag):len(f.tag)+f.width], "xX") {
			return Modalias{}, fmt.Errorf("modalias %q: bad %q field", s, f.tag)
		}
		vals[i] = v
		t = t[len(f.tag)+f.width:]
	}
	if t != "" {
		return Modalias{}, fmt.Errorf("modalias %q: trailing %q", s, t)
	}
	m.Vendor, m.Device = uint16(vals[0]), uint16(vals[1])
	m.SubsystemVendor, m.SubsystemDevice = uint16(vals[2]), uint16(vals[3])
	m.Class = uint32(vals[4])<<16 | uint32(vals[5])<<8 | uint32(vals[6])
	return m, nil
}
