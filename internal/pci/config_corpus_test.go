package pci

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// compareLspci lists where our reading of a config space differs from
// lspci's text of the same bytes: the capability offsets, versions and
// ids in list order, the BARs (space, width, prefetchable, address),
// the ACS capability and control bits, and the Express port type and
// link fields.
func compareLspci(f *lspciFunction, c *Config, st *lspciStats) []string {
	var diffs []string
	bad := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	// A capture whose dump is 256 bytes (`lspci -xxx`) while its text
	// was decoded from the whole space: only the conventional part and
	// what it holds can be compared.
	theirs := f.Caps
	partial := c.Extent == ExtentLegacy
	if partial {
		theirs = nil
		for _, l := range f.Caps {
			if !l.Extended {
				theirs = append(theirs, l)
			}
		}
	}
	ours := append(append([]Cap{}, c.Caps...), c.ExtCaps...)
	if len(ours) != len(theirs) {
		bad("%d capabilities, lspci lists %d", len(ours), len(theirs))
	}
	for i := 0; i < min(len(ours), len(theirs)); i++ {
		o, l := ours[i], theirs[i]
		if o.Offset != l.Offset || o.Extended != l.Extended {
			bad("capability %d at 0x%x (extended %v), lspci: 0x%x (extended %v)", i, o.Offset, o.Extended, l.Offset, l.Extended)
			continue
		}
		// Older lspci printed "[100]" without the version.
		if o.Extended && l.Version >= 0 && int(o.Version) != l.Version {
			bad("capability at 0x%x version %d, lspci: v%d", o.Offset, o.Version, l.Version)
		}
		st.caps++
		if id, ok := l.id(); ok && id != o.ID {
			bad("capability at 0x%x id 0x%x (%s), lspci: %q", o.Offset, o.ID, o.Name(), l.Text)
		}
	}

	bars, err := c.BARs()
	if err != nil {
		bad("BARs: %v", err)
	}
	listed := map[int]bool{}
	for _, b := range bars {
		if b.Upper {
			// lspci 3.9 walks BAR slots one by one and prints a nonzero
			// upper half as a region of its own, "<unassigned>
			// (32-bit, non-prefetchable)": not a BAR.
			if r, ok := f.Regions[b.Index]; ok && r.Address == "<unassigned>" && !r.IO && !r.Mem64 && !r.Prefetchable {
				listed[b.Index] = true
			}
			continue
		}
		r, ok := f.Regions[b.Index]
		if !ok {
			if b.Raw != 0 && !(b.IO && b.Raw == 1) && b.Raw&^0xf != 0 {
				bad("BAR %d (%s at 0x%x): lspci shows no region", b.Index, b.Kind(), b.Address)
			}
			continue
		}
		listed[b.Index] = true
		st.bars++
		if r.IO != b.IO || !b.IO && (r.Mem64 != b.Mem64 || r.Prefetchable != b.Prefetchable) {
			bad("BAR %d is %s, lspci: io %v 64-bit %v prefetchable %v", b.Index, b.Kind(), r.IO, r.Mem64, r.Prefetchable)
		}
		if a, err := strconv.ParseUint(r.Address, 16, 64); err == nil && a != b.Address {
			bad("BAR %d at 0x%x, lspci: 0x%x", b.Index, b.Address, a)
		}
	}
	for i := range f.Regions {
		if !listed[i] {
			bad("lspci shows region %d, which we do not decode as a BAR", i)
		}
	}

	acs, err := c.ACS()
	switch {
	case partial:
		// the dump holds no extended space: nothing to compare
	case f.ACSCap == "" && err == nil:
		bad("ACS at 0x%x, lspci prints no ACSCap", acs.Offset)
	case f.ACSCap != "" && err != nil:
		bad("lspci prints ACSCap, we read: %v", err)
	case f.ACSCap != "":
		st.acs++
		if got := acs.Cap.Flags(); !strings.HasPrefix(f.ACSCap, got) {
			bad("ACSCap %q, lspci %q", got, f.ACSCap)
		}
		if got := acs.Ctrl.Flags(); !strings.HasPrefix(f.ACSCtl, got) {
			bad("ACSCtl %q, lspci %q", got, f.ACSCtl)
		}
	}

	e, err := c.Express()
	if f.Express != "" {
		switch want, ok := lspciPortTypes[f.Express]; {
		case err != nil:
			bad("lspci decodes Express %s, we read: %v", f.Express, err)
		case !ok:
			bad("lspci port type %q is not in the test's table", f.Express)
		case e.Type != want:
			bad("port type %v, lspci %q", e.Type, f.Express)
		default:
			st.express++
		}
		speed := func(mtps int) string {
			return strconv.FormatFloat(float64(mtps)/1000, 'f', -1, 64) + "GT/s"
		}
		if err == nil && f.LnkCap != "" {
			if got := fmt.Sprintf("%s x%d", speed(speedCode(e.LinkCap&0xf)), e.MaxWidth()); got != f.LnkCap {
				bad("LnkCap %s, lspci %s", got, f.LnkCap)
			}
		}
		if err == nil && f.LnkSta != "" {
			if got := fmt.Sprintf("%s x%d", speed(e.SpeedMTps()), e.Width()); got != f.LnkSta {
				bad("LnkSta %s, lspci %s", got, f.LnkSta)
			}
		}
	}
	return diffs
}

// lspciStats counts what compareLspci compared, so that a test can tell
// a comparison from a parser that found nothing to compare.
type lspciStats struct{ caps, bars, acs, express int }

func pciutilsCorpus(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(corpusDir(t), "pciutils", "*.lspci.txt"))
	if len(files) == 0 {
		t.Skip("no pciutils captures in the corpus")
	}
	return files
}

// TestCorpusConfigMatchesLspciText parses every config-space hex dump of
// the pciutils captures and compares it with the `lspci -vvv` text the
// same capture holds for that function (real machines: a laptop with an
// ACS root port and a GeForce, a PLX switch with DPC, a Radeon with a
// resizable BAR, a Haswell-E root port with AER).
func TestCorpusConfigMatchesLspciText(t *testing.T) {
	total, compared := 0, 0
	var st lspciStats
	for _, file := range pciutilsCorpus(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fns, err := parseLspci(string(b))
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(file), err)
		}
		for _, f := range fns {
			if f.Hex == nil {
				continue
			}
			total++
			c, err := ParseConfig(f.Hex)
			if err != nil {
				t.Errorf("%s %s: %v", filepath.Base(file), f.Slot, err)
				continue
			}
			if c.CapsErr != nil || c.ExtCapsErr != nil {
				t.Errorf("%s %s: %v / %v", filepath.Base(file), f.Slot, c.CapsErr, c.ExtCapsErr)
			}
			if len(f.Caps) == 0 && len(f.Regions) == 0 {
				continue // a dump without -vvv text (tree-asus-p6t6): TestCorpusConfigMatchesLspciDecode compares it
			}
			compared++
			for _, d := range compareLspci(f, c, &st) {
				t.Errorf("%s %s: %s", filepath.Base(file), f.Slot, d)
			}
		}
	}
	t.Logf("%d dumps parsed, %d compared with the capture's lspci -vvv text: %+v", total, compared, st)
	if compared < 9 || st.acs < 3 || st.bars < 10 || st.express < 8 {
		t.Errorf("only %d functions compared (%+v): the lspci text parser is missing them", compared, st)
	}
}

// TestCorpusConfigMatchesLspciDecode gives every capture's hex dumps to
// this host's lspci (`lspci -F FILE -vvv`, pciutils' own decoder of a
// dump) and compares its decoding with ours, function by function: the
// whole-machine X58 dump has no -vvv text of its own.
func TestCorpusConfigMatchesLspciDecode(t *testing.T) {
	if _, err := exec.LookPath("lspci"); err != nil {
		t.Skip("lspci is not installed")
	}
	compared := 0
	var st lspciStats
	for _, file := range pciutilsCorpus(t) {
		raw, _ := os.ReadFile(file)
		dumps, err := parseLspci(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		hex := map[string][]byte{}
		for _, f := range dumps {
			if f.Hex != nil {
				hex[f.Slot] = f.Hex
			}
		}
		out, err := exec.Command("lspci", "-F", file, "-vvv").Output()
		if err != nil {
			t.Fatalf("lspci -F %s: %v", filepath.Base(file), err)
		}
		fns, err := parseLspci(string(out))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fns {
			b, ok := hex[f.Slot]
			if !ok {
				t.Errorf("%s: lspci decodes %s, which has no dump", filepath.Base(file), f.Slot)
				continue
			}
			c, err := ParseConfig(b)
			if err != nil {
				t.Errorf("%s %s: %v", filepath.Base(file), f.Slot, err)
				continue
			}
			compared++
			for _, d := range compareLspci(f, c, &st) {
				t.Errorf("%s %s (lspci -F): %s", filepath.Base(file), f.Slot, d)
			}
		}
	}
	t.Logf("%d functions compared with lspci -F: %+v", compared, st)
	if compared < 60 || st.acs < 7 || st.bars < 40 || st.express < 30 {
		t.Errorf("only %d functions compared (%+v)", compared, st)
	}
}

// TestEncodeMatchesLspci writes what the encoder makes as an lspci hex
// dump and lets lspci decode it: our fixtures' bytes mean to pciutils
// what they mean to us.
func TestEncodeMatchesLspci(t *testing.T) {
	if _, err := exec.LookPath("lspci"); err != nil {
		t.Skip("lspci is not installed")
	}
	specs := map[string]ConfigSpec{
		"01:00.0": gpuSpec(),
		"00:01.0": {Vendor: 0x8086, Device: 0x352a, Class: 0x060400, Header: HeaderBridge, PrimaryBus: 0, SecondaryBus: 1, SubordinateBus: 1,
			Express:         &ExpressSpec{Type: PortRoot, Slot: true, MaxSpeedMTps: 32000, MaxWidth: 16, SpeedMTps: 32000, Width: 16, ARIForwarding: true},
			PowerManagement: true, MSI: true, AER: true, ACS: &ACSSpec{Cap: acsAll &^ ACSEgressControl, Ctrl: ACSIsolation}},
		"02:00.0": {Vendor: 0x1000, Device: 0xc030, Class: 0x060400, Header: HeaderBridge, PrimaryBus: 2, SecondaryBus: 3, SubordinateBus: 3,
			Express: &ExpressSpec{Type: PortDownstream, MaxSpeedMTps: 16000, MaxWidth: 16, SpeedMTps: 8000, Width: 8},
			ACS:     &ACSSpec{Cap: ACSSourceValidation | ACSTranslationBlocking | ACSRequestRedirect | ACSCompletionRedirect | ACSUpstreamForwarding}},
		"03:00.1": {Vendor: 0x10de, Device: 0x22ba, Class: 0x040300, MultiFunction: true, BARs: []BARSpec{{Index: 0, Address: 0xa1000000, Size: 16 << 10}},
			Express: &ExpressSpec{Type: PortEndpoint, MaxSpeedMTps: 8000, MaxWidth: 16, SpeedMTps: 8000, Width: 16}, PowerManagement: true, MSI: true},
	}
	var dump bytes.Buffer
	for slot, s := range specs {
		dump.WriteString(hexDump(slot, "Device", s.Encode()))
	}
	file := filepath.Join(t.TempDir(), "dump")
	if err := os.WriteFile(file, dump.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("lspci", "-F", file, "-vvv").Output()
	if err != nil {
		t.Fatalf("lspci -F: %v", err)
	}
	fns, err := parseLspci(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != len(specs) {
		t.Fatalf("lspci decoded %d functions, want %d:\n%s", len(fns), len(specs), out)
	}
	for _, f := range fns {
		c := mustParse(t, specs[f.Slot].Encode())
		if len(f.Caps) == 0 {
			t.Errorf("%s: lspci shows no capability", f.Slot)
		}
		var st lspciStats
		for _, d := range compareLspci(f, c, &st) {
			t.Errorf("%s: %s", f.Slot, d)
		}
	}
	// The fields the spec set are what lspci prints.
	for _, f := range fns {
		if f.Slot == "00:01.0" && (f.ACSCtl != "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-" || f.Express != "Root Port") {
			t.Errorf("root port: ACSCtl %q, express %q", f.ACSCtl, f.Express)
		}
		if f.Slot == "01:00.0" && f.LnkSta != "16GT/s x16" {
			t.Errorf("GPU LnkSta %q", f.LnkSta)
		}
	}
}
