package pci

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Decoders of the capabilities the diagnosis needs. Register offsets and
// bit fields are those of include/uapi/linux/pci_regs.h. Each decoder
// returns an error wrapping ErrCapAbsent when the capability is
// conclusively absent, and a *ConfigError (ErrConfigUnprivileged,
// Truncated, Malformed) when it could not be read.

var le = binary.LittleEndian

// PortType is the Device/Port Type of the PCI Express capability
// (PCI_EXP_FLAGS_TYPE, bits 7:4 of the capabilities register).
type PortType uint8

const (
	PortEndpoint       PortType = 0x0 // PCI_EXP_TYPE_ENDPOINT
	PortLegacyEndpoint PortType = 0x1 // PCI_EXP_TYPE_LEG_END
	PortRoot           PortType = 0x4 // PCI_EXP_TYPE_ROOT_PORT
	PortUpstream       PortType = 0x5 // PCI_EXP_TYPE_UPSTREAM: a switch's upstream port
	PortDownstream     PortType = 0x6 // PCI_EXP_TYPE_DOWNSTREAM: a switch's downstream port
	PortPCIeToPCI      PortType = 0x7 // PCI_EXP_TYPE_PCI_BRIDGE: PCIe-to-PCI/PCI-X bridge
	PortPCIToPCIe      PortType = 0x8 // PCI_EXP_TYPE_PCIE_BRIDGE: PCI/PCI-X-to-PCIe bridge
	PortRCEndpoint     PortType = 0x9 // PCI_EXP_TYPE_RC_END: root complex integrated endpoint
	PortRCEventColl    PortType = 0xa // PCI_EXP_TYPE_RC_EC: root complex event collector
)

func (t PortType) String() string {
	switch t {
	case PortEndpoint:
		return "endpoint"
	case PortLegacyEndpoint:
		return "legacy endpoint"
	case PortRoot:
		return "root port"
	case PortUpstream:
		return "switch upstream port"
	case PortDownstream:
		return "switch downstream port"
	case PortPCIeToPCI:
		return "PCIe-to-PCI bridge"
	case PortPCIToPCIe:
		return "PCI-to-PCIe bridge"
	case PortRCEndpoint:
		return "root complex integrated endpoint"
	case PortRCEventColl:
		return "root complex event collector"
	}
	return fmt.Sprintf("port type 0x%x", uint8(t))
}

// HasLink reports whether ports of this type have a link of their own
// (integrated endpoints and event collectors sit inside the root complex).
func (t PortType) HasLink() bool { return t != PortRCEndpoint && t != PortRCEventColl }

// Express is the PCI Express capability (PCI_CAP_ID_EXP).
type Express struct {
	Offset          int
	Version         uint8 // PCI_EXP_FLAGS_VERS: 1 or 2
	Type            PortType
	SlotImplemented bool   // PCI_EXP_FLAGS_SLOT
	DevCap          uint32 // PCI_EXP_DEVCAP
	LinkCap         uint32 // PCI_EXP_LNKCAP; 0 when the function has no link
	LinkStatus      uint16 // PCI_EXP_LNKSTA
	DevCap2         uint32 // PCI_EXP_DEVCAP2 (version 2); 0 otherwise
	DevCtl2         uint16 // PCI_EXP_DEVCTL2
	LinkCap2        uint32 // PCI_EXP_LNKCAP2 (version 2); 0 otherwise
}

// Link speed encodings of LNKCAP/LNKSTA: the value n names bit n-1 of
// the Supported Link Speeds vector (PCIe Base 6.0, 7.5.3.6), as the
// kernel's pcie_link_speed[] table maps them (drivers/pci/probe.c).
var expSpeedMTps = [...]int{0, 2500, 5000, 8000, 16000, 32000, 64000}

func speedCode(code uint32) int {
	if int(code) < len(expSpeedMTps) {
		return expSpeedMTps[code]
	}
	return 0
}

// MaxSpeedMTps is the maximum link speed the function supports: the
// highest bit of LNKCAP2's Supported Link Speeds vector when it is set,
// else LNKCAP's Max Link Speed, the order the kernel uses
// (drivers/pci/pci.c, pcie_get_speed_cap). 0 when unknown.
func (e Express) MaxSpeedMTps() int {
	if v := e.LinkCap2 >> 1 & 0x7f; v != 0 { // PCI_EXP_LNKCAP2_SLS
		for bit := 6; bit >= 0; bit-- {
			if v&(1<<bit) != 0 {
				return speedCode(uint32(bit + 1))
			}
		}
	}
	return speedCode(e.LinkCap & 0xf) // PCI_EXP_LNKCAP_SLS
}

// MaxWidth is LNKCAP's Maximum Link Width (PCI_EXP_LNKCAP_MLW).
func (e Express) MaxWidth() int { return int(e.LinkCap >> 4 & 0x3f) }

// SpeedMTps is the negotiated speed, LNKSTA's Current Link Speed
// (PCI_EXP_LNKSTA_CLS); 0 when reserved.
func (e Express) SpeedMTps() int { return speedCode(uint32(e.LinkStatus & 0xf)) }

// Width is LNKSTA's Negotiated Link Width (PCI_EXP_LNKSTA_NLW).
func (e Express) Width() int { return int(e.LinkStatus >> 4 & 0x3f) }

// ARIForwarding reports DEVCAP2's ARI Forwarding Supported
// (PCI_EXP_DEVCAP2_ARI) and whether DEVCTL2 enables it.
func (e Express) ARIForwarding() (supported, enabled bool) {
	return e.DevCap2&0x20 != 0, e.DevCtl2&0x20 != 0
}

// Express decodes the PCI Express capability.
func (c *Config) Express() (Express, error) {
	cp, err := c.Cap(CapIDExpress)
	if err != nil {
		return Express{}, err
	}
	// Version 1 ends after the link registers (or the device registers
	// of an integrated endpoint); version 2 defines every register up to
	// Slot Status 2 (PCI_CAP_EXP_ENDPOINT_SIZEOF_V2 and beyond).
	head, err := c.body(cp, 4)
	if err != nil {
		return Express{}, err
	}
	flags := le.Uint16(head[2:])
	e := Express{Offset: cp.Offset, Version: uint8(flags & 0xf), Type: PortType(flags >> 4 & 0xf), SlotImplemented: flags&0x100 != 0}
	need := 0x0c
	switch {
	case e.Version >= 2:
		need = 0x30
	case e.Type.HasLink():
		need = 0x14
	}
	b, err := c.body(cp, need)
	if err != nil {
		return Express{}, err
	}
	e.DevCap = le.Uint32(b[0x04:])
	if need >= 0x14 {
		e.LinkCap, e.LinkStatus = le.Uint32(b[0x0c:]), le.Uint16(b[0x12:])
	}
	if need >= 0x30 {
		e.DevCap2, e.DevCtl2, e.LinkCap2 = le.Uint32(b[0x24:]), le.Uint16(b[0x28:]), le.Uint32(b[0x2c:])
	}
	return e, nil
}

// ACSBits are the ACS capability and control bits (PCI_ACS_*).
type ACSBits uint16

const (
	ACSSourceValidation    ACSBits = 0x0001 // PCI_ACS_SV
	ACSTranslationBlocking ACSBits = 0x0002 // PCI_ACS_TB
	ACSRequestRedirect     ACSBits = 0x0004 // PCI_ACS_RR
	ACSCompletionRedirect  ACSBits = 0x0008 // PCI_ACS_CR
	ACSUpstreamForwarding  ACSBits = 0x0010 // PCI_ACS_UF
	ACSEgressControl       ACSBits = 0x0020 // PCI_ACS_EC
	ACSDirectTranslated    ACSBits = 0x0040 // PCI_ACS_DT

	// ACSIsolation are the controls the kernel requires on every port
	// between a device and the root for the device to get an IOMMU group
	// of its own: REQ_ACS_FLAGS of drivers/iommu/iommu.c.
	ACSIsolation = ACSSourceValidation | ACSRequestRedirect | ACSCompletionRedirect | ACSUpstreamForwarding

	acsAll = 0x7f
)

var acsNames = []struct {
	bit         ACSBits
	short, long string
}{
	{ACSSourceValidation, "SV", "SrcValid"},
	{ACSTranslationBlocking, "TB", "TransBlk"},
	{ACSRequestRedirect, "RR", "ReqRedir"},
	{ACSCompletionRedirect, "CR", "CmpltRedir"},
	{ACSUpstreamForwarding, "UF", "UpstreamFwd"},
	{ACSEgressControl, "EC", "EgressCtrl"},
	{ACSDirectTranslated, "DT", "DirectTrans"},
}

// String lists the set bits by their short names ("SV RR CR UF"); "none"
// when no bit is set.
func (b ACSBits) String() string {
	var out []string
	for _, n := range acsNames {
		if b&n.bit != 0 {
			out = append(out, n.short)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// Flags spells every bit with + or -, in lspci's names and order
// ("SrcValid+ TransBlk- ..."), for evidence a reader can compare with
// `lspci -vvv`.
func (b ACSBits) Flags() string {
	out := make([]string, len(acsNames))
	for i, n := range acsNames {
		sign := "-"
		if b&n.bit != 0 {
			sign = "+"
		}
		out[i] = n.long + sign
	}
	return strings.Join(out, " ")
}

// ACS is the Access Control Services extended capability
// (PCI_EXT_CAP_ID_ACS): the capability register at +4 and the control
// register at +6.
type ACS struct {
	Offset int
	Cap    ACSBits // capability bits (PCI_ACS_CAP, bits 6:0)
	Ctrl   ACSBits // control bits (PCI_ACS_CTRL, bits 6:0)
	// Enhanced is bit 7 of the capability register, ACS Enhanced
	// Capability (PCIe 5.0): its controls live in bits the kernel
	// has only begun to read.
	Enhanced bool
	// EgressVectorBits is the Egress Control Vector Size (bits 15:8); 0
	// means 256 when EC is supported.
	EgressVectorBits int
}

// Missing returns the controls of want that the function leaves off, by
// the kernel's rule (drivers/pci/pci.c, pci_acs_flags_enabled): a
// feature the capability register does not advertise is treated as
// hard-wired on (the spec requires it, or requires it only when
// controllable), except egress control, which must be both.
func (a ACS) Missing(want ACSBits) ACSBits {
	req := want & (a.Cap | ACSEgressControl)
	return req &^ a.Ctrl
}

// ACS decodes the ACS extended capability.
func (c *Config) ACS() (ACS, error) {
	cp, err := c.ExtCap(ExtCapIDACS)
	if err != nil {
		return ACS{}, err
	}
	b, err := c.body(cp, 8)
	if err != nil {
		return ACS{}, err
	}
	capReg, ctrl := le.Uint16(b[4:]), le.Uint16(b[6:])
	return ACS{Offset: cp.Offset, Cap: ACSBits(capReg & acsAll), Ctrl: ACSBits(ctrl & acsAll),
		Enhanced: capReg&0x80 != 0, EgressVectorBits: int(capReg >> 8)}, nil
}

// SRIOV is the Single Root I/O Virtualization extended capability
// (PCI_EXT_CAP_ID_SRIOV, PCI_SRIOV_* registers).
type SRIOV struct {
	Offset              int
	Cap                 uint32 // PCI_SRIOV_CAP
	Control             uint16 // PCI_SRIOV_CTRL
	VFEnable            bool   // PCI_SRIOV_CTRL_VFE
	ARICapableHierarchy bool   // PCI_SRIOV_CTRL_ARI
	InitialVFs          uint16 // PCI_SRIOV_INITIAL_VF
	TotalVFs            uint16 // PCI_SRIOV_TOTAL_VF
	NumVFs              uint16 // PCI_SRIOV_NUM_VF
	FirstVFOffset       uint16 // PCI_SRIOV_VF_OFFSET
	VFStride            uint16 // PCI_SRIOV_VF_STRIDE
	VFDevice            uint16 // PCI_SRIOV_VF_DID
	SupportedPageSizes  uint32 // PCI_SRIOV_SUP_PGSIZE
	SystemPageSize      uint32 // PCI_SRIOV_SYS_PGSIZE
	VFBARs              [6]uint32
}

// SRIOV decodes the SR-IOV extended capability.
func (c *Config) SRIOV() (SRIOV, error) {
	cp, err := c.ExtCap(ExtCapIDSRIOV)
	if err != nil {
		return SRIOV{}, err
	}
	b, err := c.body(cp, 0x40) // PCI_EXT_CAP_SRIOV_SIZEOF
	if err != nil {
		return SRIOV{}, err
	}
	s := SRIOV{Offset: cp.Offset, Cap: le.Uint32(b[0x04:]), Control: le.Uint16(b[0x08:]),
		InitialVFs: le.Uint16(b[0x0c:]), TotalVFs: le.Uint16(b[0x0e:]), NumVFs: le.Uint16(b[0x10:]),
		FirstVFOffset: le.Uint16(b[0x14:]), VFStride: le.Uint16(b[0x16:]), VFDevice: le.Uint16(b[0x1a:]),
		SupportedPageSizes: le.Uint32(b[0x1c:]), SystemPageSize: le.Uint32(b[0x20:])}
	s.VFEnable, s.ARICapableHierarchy = s.Control&0x01 != 0, s.Control&0x10 != 0
	for i := range s.VFBARs {
		s.VFBARs[i] = le.Uint32(b[0x24+4*i:])
	}
	if s.NumVFs > s.TotalVFs {
		return s, fmt.Errorf("%s: %w", cp.Name(), malformed(cp.Offset+0x10, "NumVFs %d exceeds TotalVFs %d", s.NumVFs, s.TotalVFs))
	}
	return s, nil
}

// ARI is the Alternative Routing-ID Interpretation extended capability
// (PCI_EXT_CAP_ID_ARI).
type ARI struct {
	Offset       int
	Cap, Control uint16
	MFVC         bool  // PCI_ARI_CAP_MFVC
	ACSGroups    bool  // PCI_ARI_CAP_ACS: ACS function groups
	NextFunction uint8 // PCI_ARI_CAP_NFN
}

// ARI decodes the ARI extended capability.
func (c *Config) ARI() (ARI, error) {
	cp, err := c.ExtCap(ExtCapIDARI)
	if err != nil {
		return ARI{}, err
	}
	b, err := c.body(cp, 8)
	if err != nil {
		return ARI{}, err
	}
	capReg := le.Uint16(b[4:])
	return ARI{Offset: cp.Offset, Cap: capReg, Control: le.Uint16(b[6:]), MFVC: capReg&1 != 0,
		ACSGroups: capReg&2 != 0, NextFunction: uint8(capReg >> 8)}, nil
}

// AER is the Advanced Error Reporting extended capability
// (PCI_EXT_CAP_ID_ERR): the status, mask and severity registers.
type AER struct {
	Offset                int
	UncorrectableStatus   uint32 // PCI_ERR_UNCOR_STATUS
	UncorrectableMask     uint32 // PCI_ERR_UNCOR_MASK
	UncorrectableSeverity uint32 // PCI_ERR_UNCOR_SEVER
	CorrectableStatus     uint32 // PCI_ERR_COR_STATUS
	CorrectableMask       uint32 // PCI_ERR_COR_MASK
	CapControl            uint32 // PCI_ERR_CAP
}

// AER decodes the AER extended capability.
func (c *Config) AER() (AER, error) {
	cp, err := c.ExtCap(ExtCapIDAER)
	if err != nil {
		return AER{}, err
	}
	b, err := c.body(cp, 0x1c)
	if err != nil {
		return AER{}, err
	}
	return AER{Offset: cp.Offset, UncorrectableStatus: le.Uint32(b[0x04:]), UncorrectableMask: le.Uint32(b[0x08:]),
		UncorrectableSeverity: le.Uint32(b[0x0c:]), CorrectableStatus: le.Uint32(b[0x10:]),
		CorrectableMask: le.Uint32(b[0x14:]), CapControl: le.Uint32(b[0x18:])}, nil
}

// ResizableBAR is one BAR of the Resizable BAR extended capability
// (PCI_EXT_CAP_ID_REBAR).
type ResizableBAR struct {
	BAR int // PCI_REBAR_CTRL_BAR_IDX
	// Sizes are the supported sizes in bytes, ascending: bit n of
	// PCI_REBAR_CAP_SIZES (bits 31:4) is 1 MiB << (n-4).
	Sizes []uint64
	// Current is the size the BAR is set to (PCI_REBAR_CTRL_BAR_SIZE,
	// encoded 0 = 1 MiB).
	Current uint64
}

// ResizableBARs decodes the Resizable BAR capability: one entry per
// resizable BAR (PCI_REBAR_CTRL_NBAR, 1 to 6), eight bytes each.
func (c *Config) ResizableBARs() ([]ResizableBAR, error) {
	cp, err := c.ExtCap(ExtCapIDReBAR)
	if err != nil {
		return nil, err
	}
	b, err := c.body(cp, 12)
	if err != nil {
		return nil, err
	}
	n := int(le.Uint32(b[8:]) >> 5 & 7)
	if n < 1 || n > 6 {
		return nil, fmt.Errorf("%s: %w", cp.Name(), malformed(cp.Offset+8, "%d resizable BARs: the field allows 1 to 6", n))
	}
	if b, err = c.body(cp, 4+8*n); err != nil {
		return nil, err
	}
	out := make([]ResizableBAR, 0, n)
	for i := 0; i < n; i++ {
		capReg, ctrl := le.Uint32(b[4+8*i:]), le.Uint32(b[8+8*i:])
		r := ResizableBAR{BAR: int(ctrl & 7), Current: 1 << 20 << (ctrl >> 8 & 0x3f)}
		if r.BAR > 5 {
			return out, fmt.Errorf("%s: %w", cp.Name(), malformed(cp.Offset+8+8*i, "BAR index %d", r.BAR))
		}
		for bit := 4; bit < 32; bit++ {
			if capReg&(1<<bit) != 0 {
				r.Sizes = append(r.Sizes, 1<<20<<(bit-4))
			}
		}
		out = append(out, r)
	}
	return out, nil
}
