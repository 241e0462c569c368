package pci

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gpuSpec is an H100-like endpoint: 64-bit prefetchable BARs, PCIe Gen5
// x16, AER, ACS advertised but off, ARI, SR-IOV and a resizable BAR.
func gpuSpec() ConfigSpec {
	return ConfigSpec{
		Vendor: 0x10de, Device: 0x2330, Class: 0x030200, Revision: 0xa1, MultiFunction: true,
		Command: 0x0406, SubsystemVendor: 0x10de, SubsystemDevice: 0x16c1, InterruptPin: 1,
		BARs: []BARSpec{
			{Index: 0, Address: 0xa0000000, Size: 16 << 20},
			{Index: 1, Mem64: true, Prefetchable: true, Address: 0x2000_0000_0000, Size: 128 << 30},
			{Index: 3, Mem64: true, Prefetchable: true, Address: 0x2020_0000_0000, Size: 32 << 20},
			{Index: 5, IO: true, Address: 0x3000, Size: 128},
		},
		Express:         &ExpressSpec{Type: PortEndpoint, MaxSpeedMTps: 32000, MaxWidth: 16, SpeedMTps: 16000, Width: 16},
		PowerManagement: true, MSI: true, MSIXVectors: 9,
		AER: true,
		ACS: &ACSSpec{Cap: ACSSourceValidation | ACSRequestRedirect},
		ARI: &ARISpec{NextFunction: 1},
		SRIOV: &SRIOVSpec{InitialVFs: 16, TotalVFs: 16, NumVFs: 4, FirstVFOffset: 4, VFStride: 1, VFDevice: 0x2331,
			VFBARs: []BARSpec{{Index: 0, Address: 0xb0000000, Size: 1 << 20}}},
		ReBAR: []ReBARSpec{{BAR: 1, Sizes: []uint64{64 << 30, 128 << 30}, Current: 128 << 30}},
	}
}

func mustParse(t *testing.T, b []byte) *Config {
	t.Helper()
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func capIDs(cs []Cap) []uint16 {
	var out []uint16
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// The encoder and the parser agree on every field the spec describes.
func TestEncodeParseRoundTrip(t *testing.T) {
	s := gpuSpec()
	c := mustParse(t, s.Encode())
	if c.Extent != ExtentFull || c.CapsErr != nil || c.ExtCapsErr != nil {
		t.Fatalf("extent %v, caps err %v, ext err %v", c.Extent, c.CapsErr, c.ExtCapsErr)
	}
	if c.Vendor != 0x10de || c.Device != 0x2330 || c.Class != 0x030200 || c.Revision != 0xa1 || !c.MultiFunction ||
		c.HeaderType != HeaderNormal || c.SubsystemDevice != 0x16c1 {
		t.Errorf("header: %+v", c)
	}
	if d := cmp.Diff([]uint16{CapIDExpress, CapIDPM, CapIDMSI, CapIDMSIX}, capIDs(c.Caps)); d != "" {
		t.Errorf("caps (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]uint16{ExtCapIDAER, ExtCapIDACS, ExtCapIDARI, ExtCapIDSRIOV, ExtCapIDReBAR}, capIDs(c.ExtCaps)); d != "" {
		t.Errorf("ext caps (-want +got):\n%s", d)
	}
	e, err := c.Express()
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != PortEndpoint || e.Version != 2 || e.MaxSpeedMTps() != 32000 || e.MaxWidth() != 16 || e.SpeedMTps() != 16000 || e.Width() != 16 {
		t.Errorf("express: %+v max %d x%d cur %d x%d", e, e.MaxSpeedMTps(), e.MaxWidth(), e.SpeedMTps(), e.Width())
	}
	acs, err := c.ACS()
	if err != nil {
		t.Fatal(err)
	}
	if acs.Cap != ACSSourceValidation|ACSRequestRedirect || acs.Ctrl != 0 {
		t.Errorf("acs: %+v", acs)
	}
	// SV and RR are advertised and off; CR and UF are not advertised:
	// the kernel treats them as hard-wired on.
	if got := acs.Missing(ACSIsolation); got != ACSSourceValidation|ACSRequestRedirect {
		t.Errorf("missing = %v", got)
	}
	sr, err := c.SRIOV()
	if err != nil {
		t.Fatal(err)
	}
	if sr.TotalVFs != 16 || sr.NumVFs != 4 || !sr.VFEnable || sr.VFDevice != 0x2331 || sr.VFBARs[0] != 0xb0000000 {
		t.Errorf("sriov: %+v", sr)
	}
	ari, err := c.ARI()
	if err != nil || ari.NextFunction != 1 {
		t.Errorf("ari: %+v %v", ari, err)
	}
	if _, err := c.AER(); err != nil {
		t.Errorf("aer: %v", err)
	}
	rb, err := c.ResizableBARs()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]ResizableBAR{{BAR: 1, Sizes: []uint64{64 << 30, 128 << 30}, Current: 128 << 30}}, rb); d != "" {
		t.Errorf("rebar (-want +got):\n%s", d)
	}
	bars, err := c.BARs()
	if err != nil {
		t.Fatal(err)
	}
	want := []BAR{
		{Index: 0, Raw: 0xa0000000, Address: 0xa0000000},
		{Index: 1, Raw: 0x0000000c, Mem64: true, Prefetchable: true, Address: 0x2000_0000_0000},
		{Index: 2, Raw: 0x2000, Upper: true},
		{Index: 3, Raw: 0x0000000c, Mem64: true, Prefetchable: true, Address: 0x2020_0000_0000},
		{Index: 4, Raw: 0x2020, Upper: true},
		{Index: 5, Raw: 0x3001, IO: true, Address: 0x3000},
	}
	if d := cmp.Diff(want, bars); d != "" {
		t.Errorf("bars (-want +got):\n%s", d)
	}
	res, err := ParseResources(s.ResourceFile())
	if err != nil {
		t.Fatal(err)
	}
	regions, mm, err := Regions(c, res, "resource")
	if err != nil || len(mm) != 0 {
		t.Errorf("mismatches: %v", mm)
	}
	sizes := map[int]uint64{}
	for _, r := range regions {
		sizes[r.Index] = r.Size
	}
	if d := cmp.Diff(map[int]uint64{0: 16 << 20, 1: 128 << 30, 3: 32 << 20, 5: 128}, sizes); d != "" {
		t.Errorf("sizes (-want +got):\n%s", d)
	}
	if res[7].Size() != 16<<20 {
		t.Errorf("VF BAR 0 resource: %+v (16 VFs x 1 MiB)", res[7])
	}
}

// Regions names each disagreement between the BAR bits and `resource`,
// hard where both come from the same bits and soft where the kernel has
// a reason to differ.
func TestRegionsMismatch(t *testing.T) {
	s := gpuSpec()
	c := mustParse(t, s.Encode())
	res, _ := ParseResources(s.ResourceFile())
	res[0].Flags |= ResourcePrefetch           // a resource prefetchable, its BAR not: hard
	res[3].Flags &^= ResourceMem64             // a 64-bit BAR whose resource is not: soft (old kernels)
	res[5].Flags = ResourceMem                 // space differs: hard
	res[1].Start += 0x1000                     // address differs: soft
	res[2].Flags = ResourceMem | ResourceMem64 // the upper half listed as its own resource: hard
	_, mm, err := Regions(c, res, "resource")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	soft := map[string]bool{"BAR 1 address": true, "BAR 3 width": true}
	for _, m := range mm {
		got = append(got, m.What)
		if soft[m.What] != m.Soft {
			t.Errorf("%s: soft = %v", m.What, m.Soft)
		}
	}
	want := []string{"BAR 0 prefetchable", "BAR 1 address", "BAR 2", "BAR 3 width", "BAR 5 space"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("mismatches (-want +got):\n%s", d)
	}
}

// A legacy-mode IDE controller's BARs 0-3 are the kernel's fixed ports,
// not what the BARs hold.
func TestRegionsLegacyIDE(t *testing.T) {
	s := ConfigSpec{Vendor: 0x8086, Device: 0x7010, Class: 0x01018a, BARs: []BARSpec{{Index: 4, IO: true, Address: 0xc000, Size: 16}}}
	c := mustParse(t, s.Encode())
	res, _ := ParseResources("0x1f0 0x1f7 0x110\n0x3f6 0x3f6 0x110\n0x170 0x177 0x110\n0x376 0x376 0x110\n0xc000 0xc00f 0x40101\n")
	if _, mm, err := Regions(c, res, "resource"); err != nil || len(mm) != 0 {
		t.Errorf("legacy IDE: %v %v", mm, err)
	}
	c.Class = 0x01018f // native mode: the same lines now disagree
	if _, mm, _ := Regions(c, res, "resource"); len(mm) != 4 {
		t.Errorf("native IDE: %v", mm)
	}
}

// errProblem is the Problem of a *ConfigError in err's chain, 0 if none.
func errProblem(err error) Problem {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Problem
	}
	return 0
}

// Absent, not readable without privilege, truncated and malformed are
// four different answers, for both lists.
func TestConfigExtents(t *testing.T) {
	full := gpuSpec().Encode()
	noCaps := ConfigSpec{Vendor: 0x1af4, Device: 0x1000, Class: 0x020000}
	noExt := ConfigSpec{Vendor: 0x1af4, Device: 0x1000, Class: 0x020000, Express: &ExpressSpec{Type: PortEndpoint, MaxSpeedMTps: 2500, MaxWidth: 1, SpeedMTps: 2500, Width: 1}, Size: ConfigExpSize}
	for _, tt := range []struct {
		name        string
		b           []byte
		extent      Extent
		capProblem  Problem // of Cap(Express)
		capAbsent   bool
		acsProblem  Problem // of ACS()
		acsAbsent   bool
		acsContains string
	}{
		{"full", full, ExtentFull, 0, false, 0, false, ""},
		{"unprivileged", full[:64], ExtentUnprivileged, Unreadable, false, Unreadable, false, "CAP_SYS_ADMIN"},
		{"legacy", full[:256], ExtentLegacy, 0, false, 0, true, "256 bytes"},
		{"truncated in the header caps", full[:0x50], ExtentTruncated, Truncated, false, Truncated, false, "ends at 0x050"},
		{"truncated in the extended caps", full[:0x150], ExtentTruncated, 0, false, Truncated, false, "ends at 0x150"},
		{"no capability list", noCaps.Encode(), ExtentLegacy, 0, true, 0, true, ""},
		{"no extended capabilities", noExt.Encode(), ExtentFull, 0, false, 0, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.b)
			if c.Extent != tt.extent {
				t.Errorf("extent %v, want %v", c.Extent, tt.extent)
			}
			_, err := c.Express()
			if errProblem(err) != tt.capProblem || errors.Is(err, ErrCapAbsent) != tt.capAbsent {
				t.Errorf("Express: %v (problem %v), want problem %v absent %v", err, errProblem(err), tt.capProblem, tt.capAbsent)
			}
			_, err = c.ACS()
			if errProblem(err) != tt.acsProblem || errors.Is(err, ErrCapAbsent) != tt.acsAbsent {
				t.Errorf("ACS: %v (problem %v), want problem %v absent %v", err, errProblem(err), tt.acsProblem, tt.acsAbsent)
			}
			if tt.acsContains != "" && (err == nil || !strings.Contains(err.Error(), tt.acsContains)) {
				t.Errorf("ACS error %v does not say %q", err, tt.acsContains)
			}
			if tt.acsProblem == Unreadable && !errors.Is(err, ErrConfigUnprivileged) {
				t.Errorf("ACS error %v does not wrap ErrConfigUnprivileged", err)
			}
			if tt.acsAbsent && errors.Is(err, ErrConfigUnprivileged) {
				t.Errorf("an absent ACS must not claim privilege: %v", err)
			}
		})
	}
}

func TestParseConfigHeaderErrors(t *testing.T) {
	ones := make([]byte, 256)
	for i := range ones {
		ones[i] = 0xff
	}
	for _, tt := range []struct {
		name string
		b    []byte
		want Problem
	}{
		{"empty", nil, Truncated},
		{"short", make([]byte, 63), Truncated},
		{"too long", make([]byte, 4097), Malformed},
		{"all ones", ones, Unreadable},
	} {
		_, err := ParseConfig(tt.b)
		if errProblem(err) != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

// Broken lists end with a Malformed error naming the offset, and keep
// what came before.
func TestConfigMalformedLists(t *testing.T) {
	le := binary.LittleEndian
	for _, tt := range []struct {
		name   string
		change func(b []byte)
		ext    bool
		keep   int // entries kept before the problem
		says   string
	}{
		{"pointer into the header", func(b []byte) { b[encPM+1] = 0x20 }, false, 2, "points into the 64-byte header"},
		{"loop", func(b []byte) { b[encMSIX+1] = encExpress }, false, 4, "loops back to 0x40"},
		{"self loop", func(b []byte) { b[encExpress+1] = encExpress }, false, 1, "loops back to 0x40"},
		{"id 0xff", func(b []byte) { b[encMSI] = 0xff }, false, 2, "list is broken"},
		{"ext loop", func(b []byte) {
			h := le.Uint32(b[0x100:])
			le.PutUint32(b[0x100:], h&0xfffff|0x100<<20)
		}, true, 1, "loops back to 0x100"},
		{"ext next below 0x100", func(b []byte) {
			h := le.Uint32(b[0x100:])
			le.PutUint32(b[0x100:], h&0xfffff|0x0f0<<20)
		}, true, 1, "below 0x100"},
		{"ext id 0xffff", func(b []byte) { le.PutUint16(b[0x150:], 0xffff) }, true, 1, "list is broken"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := gpuSpec().Encode()
			tt.change(b)
			c := mustParse(t, b)
			err, list := c.CapsErr, c.Caps
			if tt.ext {
				err, list = c.ExtCapsErr, c.ExtCaps
			}
			if errProblem(err) != Malformed || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error %v, want Malformed saying %q", err, tt.says)
			}
			if len(list) != tt.keep {
				t.Errorf("kept %d entries, want %d", len(list), tt.keep)
			}
		})
	}
}

// An SR-IOV VF reads 0xffff as vendor and device but has a header: it
// parses.
func TestConfigVF(t *testing.T) {
	s := ConfigSpec{Vendor: 0xffff, Device: 0xffff, Class: 0x020700, Express: &ExpressSpec{Type: PortEndpoint}}
	c := mustParse(t, s.Encode())
	if c.Class != 0x020700 {
		t.Errorf("class %06x", c.Class)
	}
	if _, err := c.Express(); err != nil {
		t.Error(err)
	}
}

func TestBARErrors(t *testing.T) {
	s := ConfigSpec{Vendor: 1, Device: 2, BARs: []BARSpec{{Index: 0, Address: 0x1000}}}
	b := s.Encode()
	binary.LittleEndian.PutUint32(b[0x10+4*5:], 0x4) // 64-bit in the last slot
	if bars, err := mustParse(t, b).BARs(); errProblem(err) != Malformed || len(bars) != 5 {
		t.Errorf("64-bit last BAR: %v, %d kept", err, len(bars))
	}
	binary.LittleEndian.PutUint32(b[0x14:], 0x6) // reserved type 11b
	if bars, err := mustParse(t, b).BARs(); errProblem(err) != Malformed || len(bars) != 1 {
		t.Errorf("reserved type: %v, %d kept", err, len(bars))
	}
}

func TestReBARAndSRIOVChecks(t *testing.T) {
	s := gpuSpec()
	b := s.Encode()
	c := mustParse(t, b)
	cp, _ := c.ExtCap(ExtCapIDReBAR)
	binary.LittleEndian.PutUint32(b[cp.Offset+8:], 7<<5) // 7 resizable BARs
	if _, err := mustParse(t, b).ResizableBARs(); errProblem(err) != Malformed {
		t.Errorf("7 resizable BARs: %v", err)
	}
	sr, _ := c.ExtCap(ExtCapIDSRIOV)
	binary.LittleEndian.PutUint16(b[sr.Offset+0x10:], 17) // NumVFs > TotalVFs
	if _, err := mustParse(t, b).SRIOV(); errProblem(err) != Malformed {
		t.Errorf("NumVFs > TotalVFs: %v", err)
	}

	d := &Device{Path: "/sys/devices/pci0000:00/0000:00:01.0", TotalVFs: ptr(8), NumVFs: ptr(2)}
	v, _ := c.SRIOV()
	var what []string
	for _, m := range v.Check(d) {
		what = append(what, m.What)
	}
	// sysfs total 8 < 16 is a driver's cap, not a mismatch; NumVFs 2 != 4 is.
	if d := cmp.Diff([]string{"SR-IOV NumVFs"}, what); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestCheckLink(t *testing.T) {
	c := mustParse(t, gpuSpec().Encode())
	e, _ := c.Express()
	gen := func(s string) *LinkSpeed { l, _ := ParseLinkSpeed(s); return &l }
	d := &Device{Path: "/d", Link: Link{CurrentSpeed: gen("16.0 GT/s PCIe"), MaxSpeed: gen("32.0 GT/s PCIe"), CurrentWidth: ptr(16), MaxWidth: ptr(16)}}
	if mm := e.CheckLink(d); len(mm) != 0 {
		t.Errorf("consistent link: %v", mm)
	}
	d.Link.CurrentWidth, d.Link.MaxSpeed = ptr(8), gen("16.0 GT/s PCIe")
	var got []string
	for _, m := range e.CheckLink(d) {
		got = append(got, m.String())
	}
	want := []string{
		"maximum link speed: config space says 32.0 GT/s, /d/max_link_speed says 16.0 GT/s PCIe",
		"current link width: config space says x16, /d/current_link_width says x8",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestParseResources(t *testing.T) {
	for _, bad := range []string{"0x1 0x2", "0x1 0x2 zz", strings.Repeat("0x0 0x0 0x0\n", 65)} {
		if _, err := ParseResources(bad); err == nil {
			t.Errorf("%q: no error", bad[:min(len(bad), 20)])
		}
	}
	r, err := ParseResources("0x00000000fd800000 0x00000000fd803fff 0x0000000000140204\n0x0 0x0 0x0\n")
	if err != nil || len(r) != 2 || r[0].Size() != 0x4000 || r[1].Size() != 0 {
		t.Errorf("%+v %v", r, err)
	}
}

func TestParseAERStats(t *testing.T) {
	st, err := ParseAERStats("RxErr 2\nBadTLP 0\nTOTAL_ERR_COR 2\n")
	if err != nil || st.Total != 2 || len(st.Counts) != 2 || st.Counts[0] != (AERCount{"RxErr", 2}) {
		t.Errorf("%+v %v", st, err)
	}
	if st, err := ParseAERStats("7\n"); err != nil || st.Total != 7 {
		t.Errorf("root port total: %+v %v", st, err)
	}
	for _, bad := range []string{"RxErr 2\n", "RxErr x\nTOTAL_ERR_COR 0", "a b c"} {
		if _, err := ParseAERStats(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestACSBitsSpelling(t *testing.T) {
	b := ACSSourceValidation | ACSCompletionRedirect
	if b.String() != "SV CR" || ACSBits(0).String() != "none" {
		t.Errorf("%q %q", b.String(), ACSBits(0).String())
	}
	if want := "SrcValid+ TransBlk- ReqRedir- CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-"; b.Flags() != want {
		t.Errorf("%q", b.Flags())
	}
}

// FuzzParseConfig: any bytes, parsed and decoded, end in a result or an
// error, never a panic or a hang, and every capability found lies inside
// what was read.
func FuzzParseConfig(f *testing.F) {
	full := gpuSpec().Encode()
	f.Add(full)
	f.Add(full[:64])
	f.Add(full[:256])
	f.Add(full[:0x123])
	loop := append([]byte(nil), full...)
	loop[encMSIX+1] = encExpress
	f.Add(loop)
	bridge := ConfigSpec{Vendor: 0x8086, Device: 0x1234, Class: 0x060400, Header: HeaderBridge, ACS: &ACSSpec{Cap: acsAll, Ctrl: ACSIsolation},
		Express: &ExpressSpec{Type: PortDownstream, MaxSpeedMTps: 8000, MaxWidth: 4, SpeedMTps: 8000, Width: 4}}
	f.Add(bridge.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			if c != nil {
				t.Fatal("a Config with an error")
			}
			return
		}
		seen := map[int]bool{}
		for _, cp := range append(append([]Cap{}, c.Caps...), c.ExtCaps...) {
			if cp.Offset < ConfigHeaderSize || cp.Offset >= len(b) || seen[cp.Offset] {
				t.Fatalf("capability at 0x%x of %d bytes, or twice", cp.Offset, len(b))
			}
			seen[cp.Offset] = true
		}
		c.Express()
		c.ACS()
		c.SRIOV()
		c.ARI()
		c.AER()
		c.ResizableBARs()
		c.BARs()
	})
}

// BenchmarkParseConfig: one 4 KiB config space, parsed and decoded.
func BenchmarkParseConfig(b *testing.B) {
	raw := gpuSpec().Encode()
	for b.Loop() {
		c, err := ParseConfig(raw)
		if err != nil {
			b.Fatal(err)
		}
		c.Express()
		c.ACS()
		c.SRIOV()
		c.BARs()
	}
}
