package pci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Configuration space layout. Offsets and sizes are those of
// include/uapi/linux/pci_regs.h, which follows the PCI Local Bus
// Specification 3.0 (chapter 6) and the PCI Express Base Specification
// (chapter 7).
const (
	// ConfigHeaderSize is the standard header (PCI_STD_HEADER_SIZEOF),
	// and what a reader without CAP_SYS_ADMIN gets of the sysfs config
	// file.
	ConfigHeaderSize = 64
	// ConfigSize is conventional config space (PCI_CFG_SPACE_SIZE).
	ConfigSize = 256
	// ConfigExpSize is PCI Express extended config space
	// (PCI_CFG_SPACE_EXP_SIZE).
	ConfigExpSize = 4096
)

// Header types (PCI_HEADER_TYPE_*, the low 7 bits of offset 0x0e).
const (
	HeaderNormal  = 0 // endpoints: six BARs
	HeaderBridge  = 1 // PCI-to-PCI bridges: two BARs and the bus numbers
	HeaderCardBus = 2 // CardBus bridges
)

// ConfigAttr is the sysfs attribute holding a function's config space
// (drivers/pci/pci-sysfs.c, bin_attr_config).
const ConfigAttr = "config"

// Extent says how much of a function's config space a read returned, and
// so what lies beyond it.
type Extent uint8

const (
	// ExtentFull: 4096 bytes, the header, the capability list and the
	// extended capability list.
	ExtentFull Extent = iota + 1
	// ExtentLegacy: 256 bytes. The kernel sizes the sysfs file by the
	// function's cfg_size, which is 256 for conventional PCI and PCI-X
	// functions and for PCIe functions whose extended space cannot be
	// reached (drivers/pci/probe.c, pci_cfg_space_size): the kernel itself
	// then sees no extended capability, ACS included
	// (drivers/pci/pci.c, pci_find_next_ext_capability returns 0 when
	// cfg_size <= PCI_CFG_SPACE_SIZE).
	ExtentLegacy
	// ExtentUnprivileged: 64 bytes (128 for a CardBus bridge), what
	// pci_read_config (drivers/pci/pci-sysfs.c) returns to an opener
	// without CAP_SYS_ADMIN in the initial user namespace
	// (file_ns_capable on the opener's credentials: root in a user
	// namespace gets the same), whatever the file's size says; a capture
	// made by such a reader has the same. The capability lists start
	// beyond it: they are not readable, never absent.
	ExtentUnprivileged
	// ExtentTruncated: any other length up to 4096, a file cut short (a
	// partial copy). What lies beyond the end is unknown.
	ExtentTruncated
)

func (e Extent) String() string {
	switch e {
	case ExtentFull:
		return "full (4096 bytes)"
	case ExtentLegacy:
		return "conventional (256 bytes, no extended space)"
	case ExtentUnprivileged:
		return "header only (the kernel's answer without CAP_SYS_ADMIN)"
	case ExtentTruncated:
		return "truncated"
	}
	return "unknown"
}

// ErrConfigUnprivileged is the reason config space beyond the header
// could not be read. Checks that need it are NOT_RUN with this reason,
// never "absent".
var ErrConfigUnprivileged = errors.New("config space beyond the first 64 bytes is not readable without CAP_SYS_ADMIN " +
	"(drivers/pci/pci-sysfs.c, pci_read_config)")

// ErrCapAbsent says a capability list was read to its end, or is declared
// empty, and does not hold the capability asked for: a conclusive absence.
var ErrCapAbsent = errors.New("not in the capability list")

// ConfigError is a problem inside a config space that was read: where it
// lies and which kind it is (Unreadable with ErrConfigUnprivileged,
// Truncated, or Malformed).
type ConfigError struct {
	Offset  int // byte offset in config space; -1 when it concerns the whole
	Problem Problem
	Err     error
}

func (e *ConfigError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("config space %s: %v", e.Problem, e.Err)
	}
	return fmt.Sprintf("config space %s at 0x%03x: %v", e.Problem, e.Offset, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

func malformed(off int, format string, args ...any) *ConfigError {
	return &ConfigError{Offset: off, Problem: Malformed, Err: fmt.Errorf(format, args...)}
}

// Cap is one entry of a capability list.
type Cap struct {
	ID       uint16 // PCI_CAP_ID_* (8 bits) or PCI_EXT_CAP_ID_*
	Offset   int
	Version  uint8 // extended capabilities: bits 19:16 of the header
	Extended bool
}

// Name is the capability's name as pci_regs.h spells its id.
func (c Cap) Name() string {
	if c.Extended {
		if n, ok := extCapNames[c.ID]; ok {
			return n
		}
		return fmt.Sprintf("extended capability 0x%04x", c.ID)
	}
	if n, ok := capNames[uint8(c.ID)]; ok {
		return n
	}
	return fmt.Sprintf("capability 0x%02x", c.ID)
}

// Capability ids used by the decoders (include/uapi/linux/pci_regs.h).
const (
	CapIDPM      = 0x01 // PCI_CAP_ID_PM
	CapIDMSI     = 0x05 // PCI_CAP_ID_MSI
	CapIDExpress = 0x10 // PCI_CAP_ID_EXP
	CapIDMSIX    = 0x11 // PCI_CAP_ID_MSIX

	ExtCapIDAER   = 0x0001 // PCI_EXT_CAP_ID_ERR
	ExtCapIDDSN   = 0x0003 // PCI_EXT_CAP_ID_DSN
	ExtCapIDACS   = 0x000d // PCI_EXT_CAP_ID_ACS
	ExtCapIDARI   = 0x000e // PCI_EXT_CAP_ID_ARI
	ExtCapIDATS   = 0x000f // PCI_EXT_CAP_ID_ATS
	ExtCapIDSRIOV = 0x0010 // PCI_EXT_CAP_ID_SRIOV
	ExtCapIDReBAR = 0x0015 // PCI_EXT_CAP_ID_REBAR
	ExtCapIDPASID = 0x001b // PCI_EXT_CAP_ID_PASID
)

var capNames = map[uint8]string{
	0x01: "Power Management", 0x02: "AGP", 0x03: "Vital Product Data", 0x04: "Slot Identification",
	0x05: "MSI", 0x06: "CompactPCI Hot Swap", 0x07: "PCI-X", 0x08: "HyperTransport",
	0x09: "Vendor-Specific", 0x0a: "Debug port", 0x0b: "CompactPCI Central Resource Control",
	0x0c: "PCI Standard Hot-Plug Controller", 0x0d: "Bridge Subsystem Vendor/Device ID", 0x0e: "AGP 8x",
	0x0f: "Secure Device", 0x10: "PCI Express", 0x11: "MSI-X", 0x12: "SATA Data/Index Configuration",
	0x13: "PCI Advanced Features", 0x14: "Enhanced Allocation", 0x15: "Flattening Portal Bridge",
}

var extCapNames = map[uint16]string{
	0x0000: "Null", 0x0001: "Advanced Error Reporting", 0x0002: "Virtual Channel", 0x0003: "Device Serial Number",
	0x0004: "Power Budgeting", 0x0005: "Root Complex Link Declaration", 0x0006: "Root Complex Internal Link Control",
	0x0007: "Root Complex Event Collector Endpoint Association", 0x0008: "Multi-Function Virtual Channel",
	0x0009: "Virtual Channel (MFVC present)", 0x000a: "Root Complex Register Block", 0x000b: "Vendor-Specific",
	0x000c: "Configuration Access Correlation", 0x000d: "Access Control Services",
	0x000e: "Alternative Routing-ID Interpretation", 0x000f: "Address Translation Services",
	0x0010: "Single Root I/O Virtualization", 0x0011: "Multi-Root I/O Virtualization", 0x0012: "Multicast",
	0x0013: "Page Request Interface", 0x0014: "Reserved for AMD", 0x0015: "Resizable BAR",
	0x0016: "Dynamic Power Allocation", 0x0017: "TPH Requester", 0x0018: "Latency Tolerance Reporting",
	0x0019: "Secondary PCI Express", 0x001a: "Protocol Multiplexing", 0x001b: "Process Address Space ID",
	0x001c: "LN Requester", 0x001d: "Downstream Port Containment", 0x001e: "L1 PM Substates",
	0x001f: "Precision Time Measurement", 0x0020: "PCI Express over M-PHY", 0x0021: "FRS Queueing",
	0x0022: "Readiness Time Reporting", 0x0023: "Designated Vendor-Specific", 0x0024: "VF Resizable BAR",
	0x0025: "Data Link Feature", 0x0026: "Physical Layer 16.0 GT/s", 0x0027: "Lane Margining at the Receiver",
	0x0028: "Hierarchy ID", 0x0029: "Native PCIe Enclosure Management", 0x002a: "Physical Layer 32.0 GT/s",
	0x002b: "Alternate Protocol", 0x002c: "System Firmware Intermediary", 0x002d: "Shadow Functions",
	0x002e: "Data Object Exchange", 0x002f: "Device 3", 0x0030: "Integrity and Data Encryption",
	0x0031: "Physical Layer 64.0 GT/s", 0x0032: "Flit Logging", 0x0033: "Flit Performance Measurement",
	0x0034: "Flit Error Injection",
}

// Config is a parsed config space. Raw is the bytes as read; the parser
// does not change them, and the Config keeps a reference.
type Config struct {
	Raw    []byte
	Extent Extent

	Vendor, Device  uint16
	Command, Status uint16
	Revision        uint8
	Class           uint32 // 0xCCSSPP
	HeaderType      uint8  // the low 7 bits: HeaderNormal, HeaderBridge, HeaderCardBus
	MultiFunction   bool   // bit 7 of the header type: the device has more functions
	CapPointer      uint8  // 0x34 (0x14 on a CardBus bridge)

	// Subsystem ids (header type 0 only, offsets 0x2c/0x2e).
	SubsystemVendor, SubsystemDevice uint16
	// Bus numbers (header type 1 only, offsets 0x18-0x1a).
	PrimaryBus, SecondaryBus, SubordinateBus uint8

	// Caps and ExtCaps are the capability lists in list order. CapsErr
	// and ExtCapsErr are nil when the list was read to its end (or is
	// declared empty); otherwise they say why the walk stopped: a
	// *ConfigError that is Unreadable (ErrConfigUnprivileged), Truncated
	// or Malformed. The entries found before the problem are kept.
	Caps       []Cap
	CapsErr    error
	ExtCaps    []Cap
	ExtCapsErr error
}

// statusCapList is PCI_STATUS_CAP_LIST: the function has a capability list.
const statusCapList = 0x10

// ParseConfig parses a config space as the sysfs config file gives it.
// It fails only when the 64-byte header itself is unusable (shorter,
// longer than 4096 bytes, or all ones); problems beyond the header are
// recorded in the Config (CapsErr, ExtCapsErr) and by the decoders. It
// never reads beyond b, never loops: each list is walked once, an offset
// visited twice ends it.
func ParseConfig(b []byte) (*Config, error) {
	switch {
	case len(b) < ConfigHeaderSize:
		return nil, &ConfigError{Offset: len(b), Problem: Truncated,
			Err: fmt.Errorf("%d bytes: the 64-byte header is incomplete", len(b))}
	case len(b) > ConfigExpSize:
		return nil, &ConfigError{Offset: -1, Problem: Malformed,
			Err: fmt.Errorf("%d bytes: config space is at most %d", len(b), ConfigExpSize)}
	}
	le := binary.LittleEndian
	c := &Config{Raw: b}
	c.Vendor, c.Device = le.Uint16(b[0x00:]), le.Uint16(b[0x02:])
	if allOnes(b[:ConfigHeaderSize]) {
		// A read no function answers returns all ones (PCI_ERROR_RESPONSE,
		// drivers/pci/access.c): the device is powered off, removed or in
		// reset. Vendor and device alone are not enough: an SR-IOV VF
		// reads 0xffff there by the spec (the kernel takes its ids from
		// the PF's SR-IOV capability, drivers/pci/iov.c) and has a header.
		return nil, &ConfigError{Offset: 0, Problem: Unreadable,
			Err: errors.New("the header reads all ones: the function did not answer (powered off, removed or in reset)")}
	}
	c.Command, c.Status = le.Uint16(b[0x04:]), le.Uint16(b[0x06:])
	c.Revision = b[0x08]
	c.Class = uint32(b[0x0b])<<16 | uint32(b[0x0a])<<8 | uint32(b[0x09])
	c.HeaderType = b[0x0e] & 0x7f
	c.MultiFunction = b[0x0e]&0x80 != 0
	switch c.HeaderType {
	case HeaderNormal:
		c.SubsystemVendor, c.SubsystemDevice = le.Uint16(b[0x2c:]), le.Uint16(b[0x2e:])
		c.CapPointer = b[0x34]
	case HeaderBridge:
		c.PrimaryBus, c.SecondaryBus, c.SubordinateBus = b[0x18], b[0x19], b[0x1a]
		c.CapPointer = b[0x34]
	case HeaderCardBus:
		c.CapPointer = b[0x14]
	}

	switch n := len(b); {
	case n == ConfigExpSize:
		c.Extent = ExtentFull
	case n == ConfigSize:
		c.Extent = ExtentLegacy
	case n == ConfigHeaderSize, n == 128 && c.HeaderType == HeaderCardBus:
		c.Extent = ExtentUnprivileged
	default:
		c.Extent = ExtentTruncated
	}
	c.walkCaps()
	c.walkExtCaps()
	return c, nil
}

func allOnes(b []byte) bool {
	for _, x := range b {
		if x != 0xff {
			return false
		}
	}
	return true
}

// beyond is the error for data at off that the read did not return.
func (c *Config) beyond(off int) *ConfigError {
	if c.Extent == ExtentUnprivileged {
		return &ConfigError{Offset: off, Problem: Unreadable, Err: ErrConfigUnprivileged}
	}
	return &ConfigError{Offset: off, Problem: Truncated,
		Err: fmt.Errorf("the config space read ends at 0x%03x", len(c.Raw))}
}

// walkCaps follows the capability list from the capabilities pointer.
// The kernel's walk (drivers/pci/pci.c, __pci_find_next_cap_ttl) masks
// the low two bits of each pointer, stops at a pointer below 0x40 and at
// id 0xff, and gives up after 48 steps; lspci (ls-caps.c) reports a
// revisited offset as "<chain looped>" and id 0xff as "<chain broken>".
// Here a nonzero pointer into the header, id 0xff and a loop are
// Malformed: the list ends there and the error says so.
func (c *Config) walkCaps() {
	if c.Status&statusCapList == 0 {
		return
	}
	b := c.Raw
	var seen [ConfigSize / 4]bool
	from := 0x34
	if c.HeaderType == HeaderCardBus {
		from = 0x14
	}
	for p := int(c.CapPointer &^ 3); p != 0; {
		if p < ConfigHeaderSize {
			c.CapsErr = malformed(from, "capability pointer 0x%02x points into the 64-byte header", p)
			return
		}
		if p+2 > len(b) {
			c.CapsErr = c.beyond(p)
			return
		}
		if seen[p/4] {
			c.CapsErr = malformed(from, "the capability list loops back to 0x%02x", p)
			return
		}
		seen[p/4] = true
		id := b[p]
		if id == 0xff {
			c.CapsErr = malformed(p, "capability id 0xff: the list is broken")
			return
		}
		c.Caps = append(c.Caps, Cap{ID: uint16(id), Offset: p})
		from, p = p+1, int(b[p+1]&^3)
	}
}

// walkExtCaps follows the extended capability list from 0x100
// (drivers/pci/pci.c, pci_find_next_ext_capability): a header of 0 at
// 0x100 means no extended capabilities; each header holds the id (bits
// 15:0), the version (19:16) and the next offset (31:20, low two bits
// reserved); a next offset of 0 ends the list. A next offset below 0x100,
// a revisited offset and id 0xffff are Malformed.
func (c *Config) walkExtCaps() {
	switch c.Extent {
	case ExtentLegacy:
		return // no extended space: ExtCap says why
	case ExtentUnprivileged:
		c.ExtCapsErr = c.beyond(ConfigSize)
		return
	}
	b := c.Raw
	var seen [ConfigExpSize / 4]bool
	for p, from := ConfigSize, -1; ; {
		if p+4 > len(b) {
			c.ExtCapsErr = c.beyond(p)
			return
		}
		h := binary.LittleEndian.Uint32(b[p:])
		if p == ConfigSize && h == 0 {
			return
		}
		if seen[p/4] {
			c.ExtCapsErr = malformed(from, "the extended capability list loops back to 0x%03x", p)
			return
		}
		seen[p/4] = true
		id := uint16(h)
		if id == 0xffff {
			c.ExtCapsErr = malformed(p, "extended capability id 0xffff: the list is broken")
			return
		}
		c.ExtCaps = append(c.ExtCaps, Cap{ID: id, Offset: p, Version: uint8(h>>16) & 0xf, Extended: true})
		next := int(h>>20) &^ 3
		if next == 0 {
			return
		}
		if next < ConfigSize {
			c.ExtCapsErr = malformed(p, "next extended capability at 0x%03x, below 0x100", next)
			return
		}
		from, p = p, next
	}
}

// Cap finds a capability of the conventional list. The error wraps
// ErrCapAbsent when the list was read whole without it (or the status
// register declares no list), and is the walk's *ConfigError when the
// list could not be read that far.
func (c *Config) Cap(id uint8) (Cap, error) {
	for _, cp := range c.Caps {
		if cp.ID == uint16(id) {
			return cp, nil
		}
	}
	name := Cap{ID: uint16(id)}.Name()
	if c.CapsErr != nil {
		return Cap{}, fmt.Errorf("%s (capability 0x%02x): %w", name, id, c.CapsErr)
	}
	if c.Status&statusCapList == 0 {
		return Cap{}, fmt.Errorf("%s (capability 0x%02x): %w: the status register declares no capability list", name, id, ErrCapAbsent)
	}
	return Cap{}, fmt.Errorf("%s (capability 0x%02x): %w", name, id, ErrCapAbsent)
}

// ExtCap finds an extended capability, with ErrCapAbsent and the walk's
// error as Cap does. A 256-byte config space has no extended space: the
// capability is absent as far as the kernel can see too.
func (c *Config) ExtCap(id uint16) (Cap, error) {
	for _, cp := range c.ExtCaps {
		if cp.ID == id {
			return cp, nil
		}
	}
	name := Cap{ID: id, Extended: true}.Name()
	switch {
	case c.ExtCapsErr != nil:
		return Cap{}, fmt.Errorf("%s (extended capability 0x%04x): %w", name, id, c.ExtCapsErr)
	case c.Extent == ExtentLegacy:
		return Cap{}, fmt.Errorf("%s (extended capability 0x%04x): %w: the config space is 256 bytes, so the kernel "+
			"reads no extended capability of this function (drivers/pci/pci.c, pci_find_next_ext_capability)", name, id, ErrCapAbsent)
	}
	return Cap{}, fmt.Errorf("%s (extended capability 0x%04x): %w", name, id, ErrCapAbsent)
}

// body returns n bytes of a capability's registers, or why it cannot: a
// capability that runs past its space (256 bytes for the conventional
// list, 4096 for the extended one) is Malformed; one that runs past what
// was read is beyond the read.
func (c *Config) body(cp Cap, n int) ([]byte, error) {
	end, limit := cp.Offset+n, ConfigSize
	if cp.Extended {
		limit = ConfigExpSize
	}
	if end > limit {
		return nil, fmt.Errorf("%s: %w", cp.Name(),
			malformed(cp.Offset, "%d bytes of registers at 0x%03x run past 0x%03x", n, cp.Offset, limit))
	}
	if end > len(c.Raw) {
		return nil, fmt.Errorf("%s: %w", cp.Name(), c.beyond(len(c.Raw)))
	}
	return c.Raw[cp.Offset:end], nil
}

// ReadConfig reads and parses the config attribute of d. A file that is
// absent, unreadable, too large or unusable is an *AttrError (Attr
// "config"); otherwise the Config says how much was read (Extent) and
// holds the problems beyond the header.
func ReadConfig(root *hostfs.Root, d *Device) (*Config, error) {
	p := d.AttrPath(ConfigAttr)
	var b []byte
	var err error
	if d.ConfigRead != nil {
		b, err = d.ConfigRead.Bytes, d.ConfigRead.Err // read by the scan (FieldBridgeConfig)
	} else {
		b, err = root.ReadFileLimit(p, ConfigExpSize)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &AttrError{Attr: ConfigAttr, Path: p, Problem: Absent, Err: err}
	case errors.Is(err, hostfs.ErrTooLarge):
		return nil, &AttrError{Attr: ConfigAttr, Path: p, Problem: Malformed, Err: err}
	case err != nil:
		return nil, &AttrError{Attr: ConfigAttr, Path: p, Problem: Unreadable, Err: err}
	}
	c, err := ParseConfig(b)
	if err != nil {
		var ce *ConfigError
		prob := Malformed
		if errors.As(err, &ce) {
			prob = ce.Problem
		}
		return nil, &AttrError{Attr: ConfigAttr, Path: p, Problem: prob, Err: err}
	}
	return c, nil
}
