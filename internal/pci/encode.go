package pci

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// ConfigSpec describes a function's config space in readable terms, for
// fixtures and tests: Encode writes the bytes a device with these
// registers shows in sysfs, and ResourceFile the `resource` file the
// kernel derives from them. Fixture trees are made of these real bytes,
// so the parser that reads a live host reads them unchanged.
//
// The layout Encode chooses is fixed (the offsets below); what it writes
// at each is the register format of pci_regs.h, so `lspci -F` decodes a
// hex dump of it (TestEncodeMatchesLspci).
type ConfigSpec struct {
	Vendor, Device uint16
	Class          uint32 // 0xCCSSPP
	Revision       uint8
	Header         uint8 // HeaderNormal or HeaderBridge
	MultiFunction  bool
	Command        uint16

	SubsystemVendor, SubsystemDevice         uint16 // type 0
	PrimaryBus, SecondaryBus, SubordinateBus uint8  // type 1

	InterruptLine, InterruptPin uint8

	BARs []BARSpec

	// Conventional capabilities, chained in this order: PCI Express at
	// 0x40, power management at 0x80, MSI at 0x90, MSI-X at 0xb0.
	Express         *ExpressSpec
	PowerManagement bool
	MSI             bool
	MSIXVectors     int // 0: no MSI-X capability

	// Extended capabilities, chained from 0x100 in this order, each at
	// the next 16-byte boundary.
	AER   bool
	ACS   *ACSSpec
	ARI   *ARISpec
	SRIOV *SRIOVSpec
	ReBAR []ReBARSpec

	// Size is the length of the image Encode returns: 0 picks 4096 when
	// the function is PCI Express or has extended capabilities, else
	// 256. 64 gives what a reader without CAP_SYS_ADMIN sees.
	Size int
}

// BARSpec is one BAR: its kind, the address it is programmed with and
// the size the kernel found (ResourceFile).
type BARSpec struct {
	Index        int
	IO           bool
	Mem64        bool
	Prefetchable bool
	Address      uint64
	Size         uint64
}

// ExpressSpec is the PCI Express capability (version 2).
type ExpressSpec struct {
	Type                   PortType
	Slot                   bool
	PortNumber             uint8
	MaxSpeedMTps, MaxWidth int // LNKCAP, and LNKCAP2's vector up to MaxSpeed
	SpeedMTps, Width       int // LNKSTA
	ARIForwarding          bool
}

// ACSSpec is the ACS capability and control registers.
type ACSSpec struct{ Cap, Ctrl ACSBits }

// ARISpec is the ARI capability.
type ARISpec struct{ NextFunction uint8 }

// SRIOVSpec is the SR-IOV capability.
type SRIOVSpec struct {
	InitialVFs, TotalVFs, NumVFs uint16
	FirstVFOffset, VFStride      uint16
	VFDevice                     uint16
	VFBARs                       []BARSpec
}

// ReBARSpec is one resizable BAR: supported sizes and the current one,
// in bytes (powers of two from 1 MiB).
type ReBARSpec struct {
	BAR     int
	Sizes   []uint64
	Current uint64
}

// Offsets Encode uses for the conventional capabilities.
const (
	encExpress = 0x40
	encPM      = 0x80
	encMSI     = 0x90
	encMSIX    = 0xb0
)

func mtpsCode(mtps int) uint32 {
	for i, v := range expSpeedMTps {
		if v == mtps && i > 0 {
			return uint32(i)
		}
	}
	return 0
}

func log2MiB(size uint64) int {
	n := 0
	for s := size >> 20; s > 1; s >>= 1 {
		n++
	}
	return n
}

// Encode returns the config space bytes. It panics on a description that
// cannot be encoded (a BAR index out of range, a 64-bit BAR in the last
// slot): fixtures are code, and a wrong one must fail loudly.
func (s ConfigSpec) Encode() []byte {
	b := make([]byte, ConfigExpSize)
	put16 := func(off int, v uint16) { binary.LittleEndian.PutUint16(b[off:], v) }
	put32 := func(off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
	put16(0x00, s.Vendor)
	put16(0x02, s.Device)
	put16(0x04, s.Command)
	b[0x08] = s.Revision
	b[0x09], b[0x0a], b[0x0b] = byte(s.Class), byte(s.Class>>8), byte(s.Class>>16)
	b[0x0e] = s.Header
	if s.MultiFunction {
		b[0x0e] |= 0x80
	}
	nbars := 6
	switch s.Header {
	case HeaderNormal:
		put16(0x2c, s.SubsystemVendor)
		put16(0x2e, s.SubsystemDevice)
	case HeaderBridge:
		nbars = 2
		b[0x18], b[0x19], b[0x1a] = s.PrimaryBus, s.SecondaryBus, s.SubordinateBus
	default:
		panic(fmt.Sprintf("pci: ConfigSpec header type %d is not encoded", s.Header))
	}
	b[0x3c], b[0x3d] = s.InterruptLine, s.InterruptPin
	for _, bar := range s.BARs {
		encodeBAR(b, 0x10, nbars, bar)
	}

	// Conventional capabilities.
	var caps []int
	if e := s.Express; e != nil {
		caps = append(caps, encExpress)
		b[encExpress] = CapIDExpress
		flags := uint16(2) | uint16(e.Type)<<4
		if e.Slot {
			flags |= 0x100
		}
		put16(encExpress+0x02, flags)
		if e.Type.HasLink() {
			maxCode := mtpsCode(e.MaxSpeedMTps)
			put32(encExpress+0x0c, maxCode|uint32(e.MaxWidth)<<4|uint32(e.PortNumber)<<24)
			lnksta := uint16(mtpsCode(e.SpeedMTps)) | uint16(e.Width)<<4
			if e.Type == PortRoot || e.Type == PortDownstream {
				lnksta |= 0x2000 // PCI_EXP_LNKSTA_DLLLA: the port reports its data link up
			}
			put16(encExpress+0x12, lnksta)
			if maxCode > 0 {
				put32(encExpress+0x2c, (1<<maxCode-1)<<1) // PCI_EXP_LNKCAP2_SLS: every speed up to the maximum
			}
		}
		if e.ARIForwarding {
			put32(encExpress+0x24, 0x20) // PCI_EXP_DEVCAP2_ARI
		}
	}
	if s.PowerManagement {
		caps = append(caps, encPM)
		b[encPM] = CapIDPM
		put16(encPM+2, 0x0003) // PMC: version 3
	}
	if s.MSI {
		caps = append(caps, encMSI)
		b[encMSI] = CapIDMSI
		put16(encMSI+2, 0x0080) // 64-bit address capable
	}
	if s.MSIXVectors > 0 {
		caps = append(caps, encMSIX)
		b[encMSIX] = CapIDMSIX
		put16(encMSIX+2, uint16(s.MSIXVectors-1)&0x7ff)
	}
	if len(caps) > 0 {
		put16(0x06, statusCapList)
		b[0x34] = byte(caps[0])
		for i := 0; i+1 < len(caps); i++ {
			b[caps[i]+1] = byte(caps[i+1])
		}
	}

	// Extended capabilities.
	var ext []int
	next := ConfigSize
	place := func(id uint16, version uint8, size int) int {
		off := next
		next = (off + size + 15) &^ 15
		put32(off, uint32(id)|uint32(version)<<16)
		ext = append(ext, off)
		return off
	}
	if s.AER {
		place(ExtCapIDAER, 2, 0x48)
	}
	if a := s.ACS; a != nil {
		off := place(ExtCapIDACS, 1, 8)
		put16(off+4, uint16(a.Cap))
		put16(off+6, uint16(a.Ctrl))
	}
	if a := s.ARI; a != nil {
		off := place(ExtCapIDARI, 1, 8)
		put16(off+4, uint16(a.NextFunction)<<8)
	}
	if v := s.SRIOV; v != nil {
		off := place(ExtCapIDSRIOV, 1, 0x40)
		put32(off+0x04, 0x2) // PCI_SRIOV_CAP: ARI capable hierarchy preserved
		ctrl := uint16(0)
		if v.NumVFs > 0 {
			ctrl = 0x1 | 0x8 // VF enable, VF memory space enable
		}
		put16(off+0x08, ctrl)
		put16(off+0x0c, v.InitialVFs)
		put16(off+0x0e, v.TotalVFs)
		put16(off+0x10, v.NumVFs)
		put16(off+0x14, v.FirstVFOffset)
		put16(off+0x16, v.VFStride)
		put16(off+0x1a, v.VFDevice)
		put32(off+0x1c, 0x553) // supported page sizes: 4K 8K 64K 256K 1M 4M
		put32(off+0x20, 0x1)   // system page size 4K
		for _, bar := range v.VFBARs {
			encodeBAR(b, off+0x24, 6, bar)
		}
	}
	if len(s.ReBAR) > 0 {
		off := place(ExtCapIDReBAR, 1, 4+8*len(s.ReBAR))
		for i, r := range s.ReBAR {
			var capReg uint32
			for _, sz := range r.Sizes {
				capReg |= 1 << (4 + log2MiB(sz))
			}
			ctrl := uint32(r.BAR) | uint32(log2MiB(r.Current))<<8
			if i == 0 {
				ctrl |= uint32(len(s.ReBAR)) << 5
			}
			put32(off+4+8*i, capReg)
			put32(off+8+8*i, ctrl)
		}
	}
	for i := 0; i+1 < len(ext); i++ {
		h := binary.LittleEndian.Uint32(b[ext[i]:])
		put32(ext[i], h|uint32(ext[i+1])<<20)
	}

	size := s.Size
	if size == 0 {
		size = ConfigSize
		if s.Express != nil || len(ext) > 0 {
			size = ConfigExpSize
		}
	}
	if size > ConfigExpSize || size < ConfigHeaderSize {
		panic(fmt.Sprintf("pci: ConfigSpec size %d", size))
	}
	if size < ConfigExpSize && len(ext) > 0 && size > ConfigSize {
		panic("pci: ConfigSpec with extended capabilities cut inside the extended space")
	}
	return b[:size]
}

func encodeBAR(b []byte, base, n int, bar BARSpec) {
	if bar.Index < 0 || bar.Index >= n || bar.Mem64 && bar.Index+1 >= n {
		panic(fmt.Sprintf("pci: BAR %d does not fit %d BAR slots", bar.Index, n))
	}
	off := base + 4*bar.Index
	if bar.IO {
		binary.LittleEndian.PutUint32(b[off:], uint32(bar.Address)&^3|1)
		return
	}
	v := uint32(bar.Address) &^ 0xf
	if bar.Prefetchable {
		v |= 8
	}
	if bar.Mem64 {
		v |= 4
		binary.LittleEndian.PutUint32(b[off+4:], uint32(bar.Address>>32))
	}
	binary.LittleEndian.PutUint32(b[off:], v)
}

// resourceFlags are the flags the kernel gives a BAR's resource: the
// space, IORESOURCE_SIZEALIGN (0x40000), 64-bit and prefetch, and the
// BAR's low type bits (IORESOURCE_BITS), as drivers/pci/probe.c
// decode_bar sets them.
func resourceFlags(bar BARSpec) uint64 {
	if bar.IO {
		return ResourceIO | 0x40000 | 0x1
	}
	f := uint64(ResourceMem | 0x40000)
	if bar.Mem64 {
		f |= ResourceMem64 | 0x4
	}
	if bar.Prefetchable {
		f |= ResourcePrefetch | 0x8
	}
	return f
}

// ResourceFile is the sysfs `resource` file for the spec: 13 lines (BARs,
// ROM, SR-IOV VF BARs) for an endpoint, 17 for a bridge (the windows
// after them, listed as zero here), as resource_show writes them.
func (s ConfigSpec) ResourceFile() string {
	n := 13
	if s.Header == HeaderBridge {
		n = 17
	}
	lines := make([][3]uint64, n)
	for _, bar := range s.BARs {
		if bar.Size > 0 {
			lines[bar.Index] = [3]uint64{bar.Address, bar.Address + bar.Size - 1, resourceFlags(bar)}
		}
	}
	if v := s.SRIOV; v != nil {
		for _, bar := range v.VFBARs {
			if bar.Size > 0 && 7+bar.Index < n {
				total := bar.Size * uint64(v.TotalVFs)
				lines[7+bar.Index] = [3]uint64{bar.Address, bar.Address + total - 1, resourceFlags(bar)}
			}
		}
	}
	var sb strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&sb, "0x%016x 0x%016x 0x%016x\n", l[0], l[1], l[2])
	}
	return sb.String()
}
