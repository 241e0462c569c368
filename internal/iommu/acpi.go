package iommu

import (
	"encoding/binary"
	"fmt"
	"path"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// TablesDir holds the ACPI tables the firmware handed the kernel
// (drivers/acpi/sysfs.c, acpi_table_attr_init): one file per table, mode
// 0400, so listing them works for anyone and reading them needs root.
const TablesDir = "/sys/firmware/acpi/tables"

// The tables that describe an IOMMU.
const (
	SigDMAR = "DMAR" // Intel VT-d: DMA Remapping Reporting (Intel VT-d spec, ch. 8)
	SigIVRS = "IVRS" // AMD-Vi: I/O Virtualization Reporting Structure (AMD IOMMU spec, ch. 5)
	SigIORT = "IORT" // Arm: IO Remapping Table (Arm DEN 0049), SMMU nodes
	SigVIOT = "VIOT" // virtio-iommu: Virtual I/O Translation table (ACPI 6.4)
)

// acpiHeaderSize is the standard table header (ACPI 6.5, 5.2.6).
const acpiHeaderSize = 36

// acpiTableLimit bounds a table read; DMAR, IVRS and IORT are a few KiB
// on the largest servers.
const acpiTableLimit = 1 << 20

// ACPIHeader is the standard ACPI table header.
type ACPIHeader struct {
	Signature   string
	Length      uint32
	Revision    uint8
	ChecksumOK  bool // the bytes of the table sum to 0 mod 256
	OEMID       string
	OEMTableID  string
	OEMRevision uint32
	CreatorID   string
}

// ACPITable is what was found of one table.
type ACPITable struct {
	Signature string
	Path      string
	// Present: the file is listed in TablesDir.
	Present bool
	// Err is why a present table could not be used: unreadable (it is
	// 0400 root, so an unprivileged run cannot read it) or malformed.
	// Presence alone is still evidence.
	Err    error
	Header *ACPIHeader
	DMAR   *DMAR
	IVRS   *IVRS
	IORT   *IORT
	VIOT   *VIOT
}

// DMAR is the part of the DMA Remapping table worth showing (Intel VT-d
// spec 8.1; include/acpi/actbl1.h struct acpi_table_dmar).
type DMAR struct {
	HostAddressWidth int // the field + 1: the DMA address width the platform supports
	Flags            uint8
	InterruptRemap   bool // INTR_REMAP
	X2APICOptOut     bool // X2APIC_OPT_OUT
	// PlatformOptIn is DMA_CTRL_PLATFORM_OPT_IN_FLAG: the firmware asks
	// the OS to keep DMA protection on (Thunderbolt kernel DMA
	// protection); the kernel then forces the IOMMU on if a PCI port is
	// marked external-facing, unless intel_iommu=off
	// (drivers/iommu/intel/iommu.c, platform_optin_force_iommu).
	PlatformOptIn bool
	// Remapping structures by type: DRHD (one per remapping unit), RMRR
	// (memory the firmware keeps using), ATSR, RHSA, ANDD, SATC.
	DRHD, RMRR, ATSR, RHSA, ANDD, SATC, Other int
}

// IVRS is the part of the AMD I/O Virtualization table worth showing.
type IVRS struct {
	IVInfo       uint32
	EFRSupported bool // IVinfo bit 0: the IVHDs carry the extended feature register
	VASize       int  // IVinfo bits 21:15: virtual address bits
	PASize       int  // IVinfo bits 14:8: physical address bits
	IVHD         int  // IOMMU hardware definition blocks (types 10h, 11h, 40h): one per IOMMU
	IVMD         int  // memory definition blocks (types 20h-22h)
	Other        int
}

// IORT is the node census of the IO Remapping Table.
type IORT struct {
	Nodes                                               int
	ITSGroups, NamedComponents, RootComplexes           int
	SMMUv1v2, SMMUv3, PMCG, ReservedMemoryRanges, Other int
}

// VIOT is the node census of the virtio-iommu table.
type VIOT struct {
	Nodes           int
	VirtioPCIIOMMUs int // type 3
	VirtioMMIOs     int // type 4
}

// Firmware is what TablesDir says about IOMMUs.
type Firmware struct {
	Dir string
	// Listed: TablesDir was listed. When it was not, Covered says whether
	// the host lacks ACPI (a device-tree platform, or acpi=off) or the
	// capture did not look.
	Listed  bool
	ListErr error
	Covered bool
	Tables  []ACPITable // DMAR, IVRS, IORT, VIOT, in that order, present or not
}

// Table returns the entry for a signature.
func (f *Firmware) Table(sig string) *ACPITable {
	for i := range f.Tables {
		if f.Tables[i].Signature == sig {
			return &f.Tables[i]
		}
	}
	return nil
}

// Describes says whether the firmware describes an IOMMU: Yes when a
// DMAR, IVRS or VIOT table is present, or an IORT with SMMU nodes (or one
// that could not be read); No when the directory was listed without any;
// Unknown when it could not be listed.
func (f *Firmware) Describes() Tri {
	if !f.Listed {
		return Unknown
	}
	for _, t := range f.Tables {
		if t.Present && (t.Signature != SigIORT || t.IORT == nil || t.IORT.SMMUv1v2+t.IORT.SMMUv3 > 0) {
			return Yes
		}
	}
	return No
}

// ReadFirmware lists TablesDir and reads the IOMMU tables in it.
func ReadFirmware(root *hostfs.Root) Firmware {
	f := Firmware{Dir: TablesDir}
	names, err := root.ReadDir(TablesDir)
	if err != nil {
		f.ListErr, f.Covered = err, root.Covers(TablesDir)
	} else {
		f.Listed, f.Covered = true, true
	}
	listed := map[string]bool{}
	for _, n := range names {
		listed[n] = true
	}
	for _, sig := range []string{SigDMAR, SigIVRS, SigIORT, SigVIOT} {
		t := ACPITable{Signature: sig, Path: path.Join(TablesDir, sig), Present: listed[sig]}
		if t.Present {
			b, err := root.ReadFileLimit(t.Path, acpiTableLimit)
			if err != nil {
				t.Err = err
			} else {
				t.Err = parseTable(&t, b)
			}
		}
		f.Tables = append(f.Tables, t)
	}
	return f
}

// ParseACPIHeader parses the 36-byte header and checks it against the
// data: the signature, a length within the data, the checksum.
func ParseACPIHeader(b []byte) (ACPIHeader, error) {
	if len(b) < acpiHeaderSize {
		return ACPIHeader{}, fmt.Errorf("%d bytes: shorter than the %d-byte ACPI table header", len(b), acpiHeaderSize)
	}
	le := binary.LittleEndian
	h := ACPIHeader{
		Signature: string(b[0:4]), Length: le.Uint32(b[4:]), Revision: b[8],
		OEMID: trimID(b[10:16]), OEMTableID: trimID(b[16:24]), OEMRevision: le.Uint32(b[24:]), CreatorID: trimID(b[28:32]),
	}
	if h.Length < acpiHeaderSize || int64(h.Length) > int64(len(b)) {
		return h, fmt.Errorf("header length %d, %d bytes read", h.Length, len(b))
	}
	var sum byte
	for _, x := range b[:h.Length] {
		sum += x
	}
	h.ChecksumOK = sum == 0
	return h, nil
}

func trimID(b []byte) string {
	s := strings.TrimRight(string(b), " \x00")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// parseTable fills t from the table's bytes.
func parseTable(t *ACPITable, b []byte) error {
	h, err := ParseACPIHeader(b)
	if err != nil {
		return fmt.Errorf("parse %s: %w", t.Path, err)
	}
	t.Header = &h
	if h.Signature != t.Signature {
		return fmt.Errorf("parse %s: signature %q", t.Path, h.Signature)
	}
	b = b[:h.Length]
	switch t.Signature {
	case SigDMAR:
		t.DMAR, err = ParseDMAR(b)
	case SigIVRS:
		t.IVRS, err = ParseIVRS(b)
	case SigIORT:
		t.IORT, err = ParseIORT(b)
	case SigVIOT:
		t.VIOT, err = ParseVIOT(b)
	}
	if err != nil {
		return fmt.Errorf("parse %s: %w", t.Path, err)
	}
	return nil
}

// walkSubtables visits the subtables from off to the end of b: each has
// a type at typeOff and a 16-bit length at lenOff (from its start). A
// length shorter than its own header, or running past the table, ends
// the walk with an error; it never loops.
func walkSubtables(b []byte, off, lenOff int, typeOf func(sub []byte) int, visit func(typ int)) error {
	for off < len(b) {
		if off+lenOff+2 > len(b) {
			return fmt.Errorf("subtable at %d: header runs past the table (%d bytes)", off, len(b))
		}
		n := int(binary.LittleEndian.Uint16(b[off+lenOff:]))
		if n < lenOff+2 || off+n > len(b) {
			return fmt.Errorf("subtable at %d: length %d", off, n)
		}
		visit(typeOf(b[off : off+n]))
		off += n
	}
	return nil
}

// ParseDMAR parses a DMAR table: the host address width, the flags and
// the remapping structures (type u16, length u16) from offset 48.
func ParseDMAR(b []byte) (*DMAR, error) {
	if len(b) < 48 {
		return nil, fmt.Errorf("%d bytes: a DMAR table has at least 48", len(b))
	}
	d := &DMAR{HostAddressWidth: int(b[36]) + 1, Flags: b[37]}
	d.InterruptRemap, d.X2APICOptOut, d.PlatformOptIn = d.Flags&1 != 0, d.Flags&2 != 0, d.Flags&4 != 0
	err := walkSubtables(b, 48, 2, func(s []byte) int { return int(binary.LittleEndian.Uint16(s)) }, func(typ int) {
		switch typ {
		case 0:
			d.DRHD++
		case 1:
			d.RMRR++
		case 2:
			d.ATSR++
		case 3:
			d.RHSA++
		case 4:
			d.ANDD++
		case 5:
			d.SATC++
		default:
			d.Other++
		}
	})
	return d, err
}

// ParseIVRS parses an IVRS table: IVinfo and the IVHD/IVMD blocks (type
// u8, flags u8, length u16) from offset 48.
func ParseIVRS(b []byte) (*IVRS, error) {
	if len(b) < 48 {
		return nil, fmt.Errorf("%d bytes: an IVRS table has at least 48", len(b))
	}
	info := binary.LittleEndian.Uint32(b[36:])
	v := &IVRS{IVInfo: info, EFRSupported: info&1 != 0, VASize: int(info >> 15 & 0x7f), PASize: int(info >> 8 & 0x7f)}
	err := walkSubtables(b, 48, 2, func(s []byte) int { return int(s[0]) }, func(typ int) {
		switch typ {
		case 0x10, 0x11, 0x40:
			v.IVHD++
		case 0x20, 0x21, 0x22:
			v.IVMD++
		default:
			v.Other++
		}
	})
	return v, err
}

// ParseIORT parses an IORT table: the node count and offset at 36 and
// 40, and the nodes (type u8, length u16) from that offset.
func ParseIORT(b []byte) (*IORT, error) {
	if len(b) < 48 {
		return nil, fmt.Errorf("%d bytes: an IORT table has at least 48", len(b))
	}
	n, off := binary.LittleEndian.Uint32(b[36:]), binary.LittleEndian.Uint32(b[40:])
	if off < 48 || int64(off) > int64(len(b)) {
		return nil, fmt.Errorf("node array at %d of %d bytes", off, len(b))
	}
	o := &IORT{}
	err := walkSubtables(b, int(off), 1, func(s []byte) int { return int(s[0]) }, func(typ int) {
		o.Nodes++
		switch typ {
		case 0:
			o.ITSGroups++
		case 1:
			o.NamedComponents++
		case 2:
			o.RootComplexes++
		case 3:
			o.SMMUv1v2++
		case 4:
			o.SMMUv3++
		case 5:
			o.PMCG++
		case 6:
			o.ReservedMemoryRanges++
		default:
			o.Other++
		}
	})
	if err == nil && uint32(o.Nodes) != n {
		err = fmt.Errorf("%d nodes found, the header says %d", o.Nodes, n)
	}
	return o, err
}

// ParseVIOT parses a VIOT table: the node count and offset (u16 at 36
// and 38) and the nodes (type u8, reserved u8, length u16).
func ParseVIOT(b []byte) (*VIOT, error) {
	if len(b) < 48 {
		return nil, fmt.Errorf("%d bytes: a VIOT table has at least 48", len(b))
	}
	n, off := int(binary.LittleEndian.Uint16(b[36:])), int(binary.LittleEndian.Uint16(b[38:]))
	if off < 48 || off > len(b) {
		return nil, fmt.Errorf("node array at %d of %d bytes", off, len(b))
	}
	v := &VIOT{}
	err := walkSubtables(b, off, 2, func(s []byte) int { return int(s[0]) }, func(typ int) {
		v.Nodes++
		switch typ {
		case 3:
			v.VirtioPCIIOMMUs++
		case 4:
			v.VirtioMMIOs++
		}
	})
	if err == nil && v.Nodes != n {
		err = fmt.Errorf("%d nodes found, the header says %d", v.Nodes, n)
	}
	return v, err
}
