package pci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// IDsPaths are where distributions install pci.ids: Debian/Ubuntu
// (pciutils, /usr/share/misc), Fedora/RHEL/Arch (hwdata), and a few others.
var IDsPaths = []string{"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids"}

// idsReadLimit bounds the pci.ids read: the file is about 1.4 MB in 2023
// and grows by a few percent a year.
const idsReadLimit = 16 << 20

// IDs is a parsed pci.ids database, possibly restricted to some vendors.
// A nil *IDs answers every lookup with ("", false).
type IDs struct {
	vendors map[uint16]*idVendor
	classes map[uint8]*idClass
}

type idVendor struct {
	name    string
	devices map[uint16]*idDevice
}

type idDevice struct {
	name string
	subs map[uint32]string // subvendor<<16 | subdevice
}

type idClass struct {
	name string
	subs map[uint8]*idSubclass
}

type idSubclass struct {
	name    string
	progifs map[uint8]string
}

// ParseIDs parses a whole pci.ids file (the format described at its top:
// "vendor  name", "\tdevice  name", "\t\tsubvendor subdevice  name", and a
// class section of "C xx  name", "\txx  name", "\t\txx  name"; '#' starts a
// comment line). The reader is read to its end: bound it if it is not
// trusted.
//
// Malformed lines are skipped and reported: the returned *IDs holds every
// well-formed entry even when the error is non-nil, so that one bad line in
// a host's file does not lose every name.
func ParseIDs(r io.Reader) (*IDs, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return parseIDs(b, Filter{})
}

// Filter selects the entries ParseIDsFor keeps. Every class is always
// kept (the class section is small).
type Filter struct {
	Vendor func(vendor uint16) bool         // nil: every vendor
	Device func(vendor, device uint16) bool // nil: every device of a kept vendor
}

// ParseIDsFor is ParseIDs over bytes, keeping only the entries f selects.
// Lines of other vendors and devices are skipped without being stored,
// which makes naming one host's devices several times cheaper than
// parsing the whole file (BenchmarkParseIDs): Scan keeps only the
// vendor:device pairs it found.
func ParseIDsFor(b []byte, f Filter) (*IDs, error) {
	return parseIDs(b, f)
}

// idsError describes the malformed lines of a pci.ids file.
type idsError struct {
	first string
	line  int
	count int
}

func (e *idsError) Error() string {
	if e.count == 1 {
		return fmt.Sprintf("pci.ids line %d: %s", e.line, e.first)
	}
	return fmt.Sprintf("pci.ids: %d malformed lines, the first at line %d: %s", e.count, e.line, e.first)
}

func parseIDs(b []byte, f Filter) (*IDs, error) {
	ids := &IDs{vendors: map[uint16]*idVendor{}, classes: map[uint8]*idClass{}}
	var perr *idsError
	bad := func(line int, msg string) {
		if perr == nil {
			perr = &idsError{first: msg, line: line}
		}
		perr.count++
	}
	const (
		inNone       = iota // before the first top-level line
		inVendor            // children are devices of vendor
		inClass             // children are subclasses of class
		inSkip              // children belong to a vendor not kept, a bad line or an unknown section
		inSkipDevice        // grandchildren belong to a device not kept
	)
	state := inNone
	var (
		vendorID uint16
		vendor   *idVendor
		device   *idDevice
		class    *idClass
		subclass *idSubclass
	)
	lineNo := 0
	for len(b) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		tabs := 0
		for tabs < len(line) && line[tabs] == '\t' {
			tabs++
		}
		if tabs > 0 && state == inSkip || tabs > 1 && state == inSkipDevice {
			continue
		}
		body := line[tabs:]
		if len(body) == 0 || body[0] == '#' {
			continue // blank or indented comment
		}
		switch tabs {
		case 0:
			device, subclass = nil, nil
			if len(body) >= 2 && body[0] == 'C' && body[1] == ' ' {
				id, name, ok := splitID(body[2:], 2)
				if !ok {
					bad(lineNo, "bad class line")
					state = inSkip
					continue
				}
				class = &idClass{name: string(name), subs: map[uint8]*idSubclass{}}
				if _, dup := ids.classes[uint8(id)]; !dup {
					ids.classes[uint8(id)] = class
				}
				state = inClass
				continue
			}
			if len(body) >= 2 && body[1] == ' ' && !isHex(body[0]) {
				// Another section (usb.ids-style "X  name"): not used by
				// pci.ids today; skip it and its children.
				state = inSkip
				continue
			}
			id, name, ok := splitID(body, 4)
			if !ok {
				bad(lineNo, "bad vendor line")
				state = inSkip
				continue
			}
			if f.Vendor != nil && !f.Vendor(uint16(id)) {
				state = inSkip
				continue
			}
			vendorID = uint16(id)
			if v, dup := ids.vendors[uint16(id)]; dup {
				vendor = v
			} else {
				vendor = &idVendor{name: string(name), devices: map[uint16]*idDevice{}}
				ids.vendors[uint16(id)] = vendor
			}
			state = inVendor
		case 1:
			switch state {
			case inVendor, inSkipDevice:
				state = inVendor
				id, name, ok := splitID(body, 4)
				if !ok {
					bad(lineNo, "bad device line")
					device = nil
					continue
				}
				if f.Device != nil && !f.Device(vendorID, uint16(id)) {
					state = inSkipDevice
					device = nil
					continue
				}
				if d, dup := vendor.devices[uint16(id)]; dup {
					device = d
				} else {
					device = &idDevice{name: string(name)}
					vendor.devices[uint16(id)] = device
				}
			case inClass:
				id, name, ok := splitID(body, 2)
				if !ok {
					bad(lineNo, "bad subclass line")
					subclass = nil
					continue
				}
				if s, dup := class.subs[uint8(id)]; dup {
					subclass = s
				} else {
					subclass = &idSubclass{name: string(name)}
					class.subs[uint8(id)] = subclass
				}
			default:
				bad(lineNo, "entry outside a vendor or class")
			}
		case 2:
			switch {
			case state == inVendor && device != nil:
				// "subvendor subdevice  name"
				if len(body) < 10 || body[4] != ' ' {
					bad(lineNo, "bad subsystem line")
					continue
				}
				sv, ok1 := hexBytes(body[:4])
				sd, name, ok2 := splitID(body[5:], 4)
				if !ok1 || !ok2 {
					bad(lineNo, "bad subsystem line")
					continue
				}
				if device.subs == nil {
					device.subs = map[uint32]string{}
				}
				k := uint32(sv)<<16 | uint32(sd)
				if _, dup := device.subs[k]; !dup {
					device.subs[k] = string(name)
				}
			case state == inClass && subclass != nil:
				id, name, ok := splitID(body, 2)
				if !ok {
					bad(lineNo, "bad prog-if line")
					continue
				}
				if subclass.progifs == nil {
					subclass.progifs = map[uint8]string{}
				}
				if _, dup := subclass.progifs[uint8(id)]; !dup {
					subclass.progifs[uint8(id)] = string(name)
				}
			default:
				bad(lineNo, "entry outside a device or subclass")
			}
		default:
			bad(lineNo, "indented more than two tabs")
		}
	}
	if perr != nil {
		return ids, perr
	}
	return ids, nil
}

// hexBytes parses a short run of hex digits without allocating.
func hexBytes(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 8 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// splitID splits "hhhh  name" into a hex id of exactly width digits and a
// name; the file separates them with two spaces, but any run of blanks is
// accepted. A missing name is an empty name.
// The name is returned as bytes: it is copied only when kept.
func splitID(b []byte, width int) (uint64, []byte, bool) {
	if len(b) < width {
		return 0, nil, false
	}
	v, ok := hexBytes(b[:width])
	if !ok {
		return 0, nil, false
	}
	rest := b[width:]
	if len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' {
		return 0, nil, false
	}
	return v, bytes.TrimSpace(rest), true
}

// VendorName returns the vendor's name.
func (ids *IDs) VendorName(vendor uint16) (string, bool) {
	if ids == nil {
		return "", false
	}
	v, ok := ids.vendors[vendor]
	if !ok {
		return "", false
	}
	return v.name, true
}

// DeviceName returns the device's name.
func (ids *IDs) DeviceName(vendor, device uint16) (string, bool) {
	if d := ids.device(vendor, device); d != nil {
		return d.name, true
	}
	return "", false
}

// SubsystemName returns the name of a subsystem of a device, as listed
// under that device.
func (ids *IDs) SubsystemName(vendor, device, subVendor, subDevice uint16) (string, bool) {
	d := ids.device(vendor, device)
	if d == nil {
		return "", false
	}
	n, ok := d.subs[uint32(subVendor)<<16|uint32(subDevice)]
	return n, ok
}

func (ids *IDs) device(vendor, device uint16) *idDevice {
	if ids == nil {
		return nil
	}
	if v, ok := ids.vendors[vendor]; ok {
		return v.devices[device]
	}
	return nil
}

// ClassName returns the name lspci prints for a class code (0xCCSSPP):
// the subclass name, or the base class name when the subclass is unknown.
func (ids *IDs) ClassName(class uint32) (string, bool) {
	c := ids.class(class)
	if c == nil {
		return "", false
	}
	if s, ok := c.subs[uint8(class>>8)]; ok {
		return s.name, true
	}
	return c.name, true
}

// ProgIfName returns the name of the programming interface of a class code.
func (ids *IDs) ProgIfName(class uint32) (string, bool) {
	c := ids.class(class)
	if c == nil {
		return "", false
	}
	s, ok := c.subs[uint8(class>>8)]
	if !ok {
		return "", false
	}
	n, ok := s.progifs[uint8(class)]
	return n, ok
}

func (ids *IDs) class(class uint32) *idClass {
	if ids == nil {
		return nil
	}
	return ids.classes[uint8(class>>16)]
}

// LoadIDs reads the first pci.ids of IDsPaths present under root, keeping
// only the entries f selects. It returns the host path it read; (nil, "",
// nil) when there is none. A malformed file still returns what parsed,
// with the error.
func LoadIDs(root *hostfs.Root, f Filter) (*IDs, string, error) {
	for _, p := range IDsPaths {
		b, unmap, err := root.MapFile(p, idsReadLimit)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, p, err
		}
		ids, err := parseMapped(b, f)
		unmap()
		if err != nil {
			err = fmt.Errorf("%s: %w", p, err)
		}
		return ids, p, err
	}
	return nil, "", nil
}

// parseMapped parses a mapped pci.ids. The names are copied out, so
// nothing refers to the mapping afterwards; a file truncated under us
// faults, which SetPanicOnFault turns into an error here.
func parseMapped(b []byte, f Filter) (ids *IDs, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			ids, err = nil, fmt.Errorf("reading the mapped file failed: %v", p)
		}
	}()
	return parseIDs(b, f)
}
