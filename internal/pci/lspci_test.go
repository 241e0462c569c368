package pci

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// lspci's text, parsed for the comparisons of the config-space tests:
// pciutils' `lspci -vvv` is the independent decoder we check ours
// against, and `-xxxx` (or `-xxx`, `-x`) is the hex dump it decoded.

// lspciFunction is what lspci printed of one function.
type lspciFunction struct {
	Slot    string
	Header  string // the first line
	Caps    []lspciCap
	Regions map[int]lspciRegion
	ACSCap  string // "SrcValid+ TransBlk+ ..."
	ACSCtl  string
	Express string // "Root Port", "Endpoint", "Downstream Port", ...
	LnkCap  string // "Speed 8GT/s, Width x4"
	LnkSta  string // "Speed 8GT/s, Width x4"
	Hex     []byte // the dump; nil when lspci printed none
}

type lspciCap struct {
	Offset   int
	Version  int // extended capabilities: "[100 v1]"; -1 for conventional ones
	Text     string
	Extended bool
}

type lspciRegion struct {
	IO           bool
	Address      string // hex digits, or "<unassigned>", "<ignored>"
	Mem64        bool
	Prefetchable bool
}

var (
	lspciSlotRe   = regexp.MustCompile(`^((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) `)
	lspciCapRe    = regexp.MustCompile(`^\tCapabilities: \[([0-9a-f]+)(?: v([0-9]+))?\] (.*)$`)
	lspciRegionRe = regexp.MustCompile(`^\tRegion ([0-5]): (Memory|I/O ports) at (\S+)(?: \((32|64)-bit, (non-)?prefetchable\))?`)
	lspciHexRe    = regexp.MustCompile(`^([0-9a-f]{2,3}): ((?:[0-9a-f]{2} ){15}[0-9a-f]{2})\s*$`)
	lspciExpRe    = regexp.MustCompile(`Express \(v[0-9]+\) ([A-Za-z -]+?)(?: \(Slot[+-]\))?, (?:MSI|IntMsgNum)`)
	lspciSpeedRe  = regexp.MustCompile(`Speed ([0-9.]+GT/s)[^,]*, Width (x[0-9]+)`)
)

// parseLspci splits lspci output into functions.
func parseLspci(text string) ([]*lspciFunction, error) {
	var out []*lspciFunction
	var cur *lspciFunction
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := lspciSlotRe.FindStringSubmatch(line); m != nil && !lspciHexRe.MatchString(line) {
			cur = &lspciFunction{Slot: m[1], Header: line, Regions: map[int]lspciRegion{}}
			out = append(out, cur)
			continue
		}
		if cur == nil {
			continue
		}
		if m := lspciHexRe.FindStringSubmatch(line); m != nil {
			off, _ := strconv.ParseUint(m[1], 16, 16)
			if int(off) != len(cur.Hex) {
				return nil, fmt.Errorf("%s: hex line at 0x%x after %d bytes", cur.Slot, off, len(cur.Hex))
			}
			for _, h := range strings.Fields(m[2]) {
				v, _ := strconv.ParseUint(h, 16, 8)
				cur.Hex = append(cur.Hex, byte(v))
			}
			continue
		}
		if m := lspciCapRe.FindStringSubmatch(line); m != nil {
			off, _ := strconv.ParseUint(m[1], 16, 16)
			c := lspciCap{Offset: int(off), Version: -1, Text: m[3], Extended: off >= ConfigSize}
			if m[2] != "" {
				c.Version, _ = strconv.Atoi(m[2])
			}
			cur.Caps = append(cur.Caps, c)
			if e := lspciExpRe.FindStringSubmatch(m[3]); e != nil {
				cur.Express = e[1]
			}
			continue
		}
		if m := lspciRegionRe.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			cur.Regions[i] = lspciRegion{IO: m[2] == "I/O ports", Address: m[3], Mem64: m[4] == "64", Prefetchable: m[4] != "" && m[5] == ""}
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "ACSCap:"):
			cur.ACSCap = strings.Join(strings.Fields(strings.TrimPrefix(t, "ACSCap:")), " ")
		case strings.HasPrefix(t, "ACSCtl:"):
			cur.ACSCtl = strings.Join(strings.Fields(strings.TrimPrefix(t, "ACSCtl:")), " ")
		case strings.HasPrefix(t, "LnkCap:"):
			if m := lspciSpeedRe.FindStringSubmatch(t); m != nil {
				cur.LnkCap = m[1] + " " + m[2]
			}
		case strings.HasPrefix(t, "LnkSta:"):
			if m := lspciSpeedRe.FindStringSubmatch(t); m != nil {
				cur.LnkSta = m[1] + " " + m[2]
			}
		}
	}
	return out, sc.Err()
}

// lspciPortTypes maps lspci's names of the Express device/port types
// (ls-caps.c, cap_express) to ours.
var lspciPortTypes = map[string]PortType{
	"Endpoint": PortEndpoint, "Legacy Endpoint": PortLegacyEndpoint, "Root Port": PortRoot,
	"Upstream Port": PortUpstream, "Downstream Port": PortDownstream, "PCI-Express to PCI/PCI-X Bridge": PortPCIeToPCI,
	"PCI/PCI-X to PCI-Express Bridge": PortPCIToPCIe, "Root Complex Integrated Endpoint": PortRCEndpoint,
	"Root Complex Event Collector": PortRCEventColl,
}

// lspciCapIDs maps the start of lspci's capability names to ids, for the
// capabilities whose name lspci prints (unknown ones print "#xx").
var lspciCapIDs = []struct {
	prefix string
	id     uint16
	ext    bool
}{
	{"Power Management", CapIDPM, false}, {"MSI:", CapIDMSI, false}, {"MSI-X", CapIDMSIX, false},
	{"Express", CapIDExpress, false}, {"Vital Product Data", 0x03, false}, {"Subsystem", 0x0d, false},
	{"PCI-X", 0x07, false}, {"HyperTransport", 0x08, false}, {"Vendor Specific Information", 0x09, false},
	{"Advanced Error Reporting", ExtCapIDAER, true}, {"Virtual Channel", 0x0002, true},
	{"Device Serial Number", ExtCapIDDSN, true}, {"Power Budgeting", 0x0004, true},
	{"Root Complex Link", 0x0005, true}, {"Access Control Services", ExtCapIDACS, true},
	{"Alternative Routing-ID Interpretation", ExtCapIDARI, true}, {"Address Translation Service", ExtCapIDATS, true},
	{"Single Root I/O Virtualization", ExtCapIDSRIOV, true}, {"Multicast", 0x0012, true},
	{"Page Request Interface", 0x0013, true}, {"Physical Resizable BAR", ExtCapIDReBAR, true},
	{"Latency Tolerance Reporting", 0x0018, true}, {"Secondary PCI Express", 0x0019, true},
	{"Process Address Space ID", ExtCapIDPASID, true}, {"Downstream Port Containment", 0x001d, true},
	{"L1 PM Substates", 0x001e, true}, {"Precision Time Measurement", 0x001f, true},
	{"Vendor Specific Information", 0x000b, true}, {"Designated Vendor-Specific", 0x0023, true},
	{"Data Link Feature", 0x0025, true}, {"Physical Layer 16.0 GT/s", 0x0026, true},
	{"Lane Margining at the Receiver", 0x0027, true}, {"Null", 0x0000, true},
}

// id returns the capability id lspci's text names: "#xx" for the ones it
// has no name for, else the table above; ok is false for a name not in it.
func (c lspciCap) id() (uint16, bool) {
	if strings.HasPrefix(c.Text, "#") {
		v, err := strconv.ParseUint(strings.Fields(c.Text[1:])[0], 16, 16)
		return uint16(v), err == nil
	}
	for _, n := range lspciCapIDs {
		if n.ext == c.Extended && strings.HasPrefix(c.Text, n.prefix) {
			return n.id, true
		}
	}
	return 0, false
}

// hexDump formats b the way `lspci -xxxx` does, so that `lspci -F` can
// read it back.
func hexDump(slot, header string, b []byte) string {
	var sb strings.Builder
	sb.WriteString(slot + " " + header + "\n")
	for off := 0; off < len(b); off += 16 {
		fmt.Fprintf(&sb, "%02x:", off)
		for _, x := range b[off:min(off+16, len(b))] {
			fmt.Fprintf(&sb, " %02x", x)
		}
		sb.WriteString("\n")
	}
	sb.WriteString("\n")
	return sb.String()
}
