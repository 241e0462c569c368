package iommu

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// table builds an ACPI table from a body (bytes 36 on) and fixes the
// length and checksum.
func table(sig string, body []byte) []byte {
	b := make([]byte, 36, 36+len(body))
	copy(b, sig)
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)))
	copy(b[10:], "OEMID ")
	var sum byte
	for _, x := range b {
		sum += x
	}
	b[9] = -sum
	return b
}

func sub16(typ uint16, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint16(b, typ)
	binary.LittleEndian.PutUint16(b[2:], uint16(n))
	return b
}

func TestParseDMAR(t *testing.T) {
	body := make([]byte, 12)
	body[0], body[1] = 47, 0x5 // 48-bit, INTR_REMAP | platform opt-in
	for _, s := range [][]byte{sub16(0, 16), sub16(0, 24), sub16(1, 32), sub16(2, 8), sub16(9, 8)} {
		body = append(body, s...)
	}
	b := table("DMAR", body)
	h, err := ParseACPIHeader(b)
	if err != nil || !h.ChecksumOK || h.OEMID != "OEMID" || h.Signature != "DMAR" {
		t.Fatalf("header %+v %v", h, err)
	}
	d, err := ParseDMAR(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &DMAR{HostAddressWidth: 48, Flags: 5, InterruptRemap: true, PlatformOptIn: true, DRHD: 2, RMRR: 1, ATSR: 1, Other: 1}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	b[20]++ // the checksum no longer matches
	if h, _ := ParseACPIHeader(b); h.ChecksumOK {
		t.Error("checksum not checked")
	}
}

func TestParseTablesMalformed(t *testing.T) {
	zeroLen := append(make([]byte, 12), sub16(0, 16)...)
	binary.LittleEndian.PutUint16(zeroLen[12+2:], 0) // a subtable of length 0: must not loop
	long := append(make([]byte, 12), sub16(0, 16)...)
	binary.LittleEndian.PutUint16(long[12+2:], 64) // runs past the table
	for name, b := range map[string][]byte{
		"zero-length subtable":  table("DMAR", zeroLen),
		"subtable past the end": table("DMAR", long),
		"short":                 table("DMAR", nil),
	} {
		if _, err := ParseDMAR(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ParseACPIHeader([]byte("DMAR")); err == nil {
		t.Error("short header: no error")
	}
	b := table("DMAR", make([]byte, 12))
	binary.LittleEndian.PutUint32(b[4:], 4096)
	if _, err := ParseACPIHeader(b); err == nil || !strings.Contains(err.Error(), "4096") {
		t.Errorf("length beyond the data: %v", err)
	}
}

func TestParseIVRSIORTVIOT(t *testing.T) {
	iv := make([]byte, 12)
	binary.LittleEndian.PutUint32(iv, 0x00203041) // VA 64? fields below
	hd := func(typ byte, n int) []byte {
		b := make([]byte, n)
		b[0] = typ
		binary.LittleEndian.PutUint16(b[2:], uint16(n))
		return b
	}
	for _, s := range [][]byte{hd(0x11, 40), hd(0x40, 40), hd(0x21, 32)} {
		iv = append(iv, s...)
	}
	v, err := ParseIVRS(table("IVRS", iv))
	if err != nil || v.IVHD != 2 || v.IVMD != 1 || !v.EFRSupported || v.PASize != 0x30 || v.VASize != 0x40 {
		t.Errorf("IVRS %+v %v", v, err)
	}

	node := func(typ byte, n int) []byte {
		b := make([]byte, n)
		b[0] = typ
		binary.LittleEndian.PutUint16(b[1:], uint16(n))
		return b
	}
	io := make([]byte, 12)
	binary.LittleEndian.PutUint32(io[0:], 3)
	binary.LittleEndian.PutUint32(io[4:], 48)
	for _, s := range [][]byte{node(0, 24), node(4, 68), node(2, 36)} {
		io = append(io, s...)
	}
	o, err := ParseIORT(table("IORT", io))
	if err != nil || o.Nodes != 3 || o.SMMUv3 != 1 || o.ITSGroups != 1 || o.RootComplexes != 1 {
		t.Errorf("IORT %+v %v", o, err)
	}
	binary.LittleEndian.PutUint32(io[0:], 4) // the header claims a node that is not there
	if _, err := ParseIORT(table("IORT", io)); err == nil {
		t.Error("IORT node count mismatch: no error")
	}

	vi := make([]byte, 12)
	binary.LittleEndian.PutUint16(vi[0:], 2)
	binary.LittleEndian.PutUint16(vi[2:], 48)
	for _, s := range [][]byte{hd(3, 16), hd(1, 24)} {
		vi = append(vi, s...)
	}
	w, err := ParseVIOT(table("VIOT", vi))
	if err != nil || w.Nodes != 2 || w.VirtioPCIIOMMUs != 1 {
		t.Errorf("VIOT %+v %v", w, err)
	}
}

// FuzzParseACPI: any bytes end in a table or an error, never a panic or
// a loop.
func FuzzParseACPI(f *testing.F) {
	f.Add(table("DMAR", append(make([]byte, 12), sub16(0, 16)...)))
	f.Add(table("IORT", make([]byte, 24)))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseACPIHeader(b)
		ParseDMAR(b)
		ParseIVRS(b)
		ParseIORT(b)
		ParseVIOT(b)
	})
}

func TestParseCmdline(t *testing.T) {
	for _, tt := range []struct {
		line     string
		intelOn  Tri
		sm       Tri
		pt       Tri
		ptFrom   string
		amdOff   bool
		x86Off   bool
		unknown  []string
		noteHas  string
		override bool
	}{
		{line: "BOOT_IMAGE=/vmlinuz ro quiet", intelOn: Unknown, pt: Unknown},
		{line: "ro intel_iommu=on", intelOn: Yes, noteHas: "turns the Intel IOMMU driver on"},
		{line: "ro intel_iommu=sm_on", intelOn: Unknown, sm: Yes, noteHas: "does not turn the IOMMU on"},
		{line: "intel_iommu=on,sm_on iommu=pt", intelOn: Yes, sm: Yes, pt: Yes, ptFrom: "iommu=pt", noteHas: "identity (passthrough)"},
		{line: "intel_iommu=on intel_iommu=off", intelOn: No},
		{line: "iommu=pt iommu.passthrough=0", pt: No, ptFrom: "iommu.passthrough=0"},
		{line: "iommu.passthrough=1 iommu=nopt", pt: No, ptFrom: "iommu=nopt"},
		{line: "amd_iommu=on", unknown: []string{"amd_iommu=on"}, noteHas: "common misconception"},
		{line: "amd_iommu=off,force_isolation", amdOff: true},
		{line: "iommu=off", x86Off: true},
		{line: "intel_iommu=bogus", unknown: []string{"intel_iommu=bogus"}, noteHas: "Unknown option"},
		{line: "ro -- intel_iommu=on", intelOn: Unknown},   // after "--": init's arguments
		{line: `foo="a b" intel_iommu="on"`, intelOn: Yes}, // quotes group and are dropped
		{line: "pcie_acs_override=downstream,multifunction", override: true, noteHas: "not a mainline parameter"},
		{line: "iommu.passthrough=maybe", pt: Unknown, unknown: []string{"iommu.passthrough=maybe"}},
	} {
		c := ParseCmdline(tt.line)
		if c.IntelOn != tt.intelOn || c.IntelScalable != tt.sm || c.Passthrough != tt.pt || c.AMDOff != tt.amdOff || c.X86Off != tt.x86Off ||
			c.ACSOverride != tt.override || tt.ptFrom != "" && c.PassthroughFrom != tt.ptFrom {
			t.Errorf("%q: %+v", tt.line, c)
		}
		if diff := cmp.Diff(tt.unknown, c.Unknown); diff != "" {
			t.Errorf("%q: unknown (-want +got):\n%s", tt.line, diff)
		}
		if tt.noteHas != "" && !strings.Contains(strings.Join(c.Notes, "\n"), tt.noteHas) {
			t.Errorf("%q: notes %q lack %q", tt.line, c.Notes, tt.noteHas)
		}
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add(`intel_iommu=on,sm_on iommu=pt "quoted arg" -- x`)
	f.Add("amd_iommu=,,off,,")
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseCmdline(s)
		if len(c.Params) > len(s) {
			t.Fatalf("%d params from %d bytes", len(c.Params), len(s))
		}
	})
}

func TestParseKernelConfig(t *testing.T) {
	got := ParseKernelConfig([]byte("CONFIG_INTEL_IOMMU=y\n# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set\nCONFIG_VFIO_PCI=m\nCONFIG_OTHER=y\n# comment\n"))
	want := map[string]string{"CONFIG_INTEL_IOMMU": "y", "CONFIG_INTEL_IOMMU_DEFAULT_ON": "n", "CONFIG_VFIO_PCI": "m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	k := KernelConfig{Options: got}
	if k.Enabled("CONFIG_VFIO_PCI") != Yes || k.Enabled("CONFIG_INTEL_IOMMU_DEFAULT_ON") != No || k.Enabled("CONFIG_AMD_IOMMU") != Unknown {
		t.Errorf("Enabled: %v %v %v", k.Enabled("CONFIG_VFIO_PCI"), k.Enabled("CONFIG_INTEL_IOMMU_DEFAULT_ON"), k.Enabled("CONFIG_AMD_IOMMU"))
	}
}

func TestIsVFIODriver(t *testing.T) {
	for d, want := range map[string]bool{"vfio-pci": true, "mlx5_vfio_pci": true, "nvgrace_gpu_vfio_pci": true, "xe-vfio-pci": true,
		"future_vfio_pci": true, "vfio-platform": true, "pci-stub": false, "nvidia": false, "snd_hda_intel": false, "vfio": false} {
		if IsVFIODriver(d) != want {
			t.Errorf("%s: %v", d, !want)
		}
	}
}
