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
	// Seek, when set, lists every vendor Vendor keeps: LoadIDs then finds
	// their blocks instead of reading the whole file (see seekIDs).
	Seek []uint16
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

// States of the pci.ids parser: what the indented lines below the last
// top-level line belong to.
const (
	inNone       = iota // before the first top-level line
	inVendor            // children are devices of vendor
	inClass             // children are subclasses of class
	inSkip              // children belong to a vendor not kept, a bad line or an unknown section
	inSkipDevice        // grandchildren belong to a device not kept
)

// idsParser holds the state of one parse: the entries so far, the
// malformed lines, and the vendor/device or class/subclass the next
// indented line belongs to.
type idsParser struct {
	ids      *IDs
	f        Filter
	perr     *idsError
	lineNo   int
	state    int
	vendorID uint16
	vendor   *idVendor
	device   *idDevice
	class    *idClass
	subclass *idSubclass
}

func parseIDs(b []byte, f Filter) (*IDs, error) {
	p := newIDsParser(f)
	p.lines(b, false)
	return p.result()
}

func newIDsParser(f Filter) *idsParser {
	return &idsParser{ids: &IDs{vendors: map[uint16]*idVendor{}, classes: map[uint8]*idClass{}}, f: f}
}

func (p *idsParser) result() (*IDs, error) {
	if p.perr != nil {
		return p.ids, p.perr
	}
	return p.ids, nil
}

// lines parses b line by line; with block, it stops before the second
// top-level line (the end of the first line's vendor block).
func (p *idsParser) lines(b []byte, block bool) {
	for n := 0; len(b) > 0; n++ {
		if block && n > 0 && isTopLevel(b) {
			return
		}
		p.lineNo++
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		p.line(bytes.TrimRight(line, "\r"))
	}
}

// isTopLevel reports whether the line b starts with is a vendor or class
// line (neither indented, nor a comment, nor blank).
func isTopLevel(b []byte) bool {
	return len(b) > 0 && b[0] != '\t' && b[0] != '#' && b[0] != '\n' && b[0] != '\r'
}

// seekIDs names a few vendors' devices without reading the whole file:
// pci.ids keeps its vendors sorted by ID ("Please keep sorted" at its top),
// so each vendor's block is found by binary search over the vendor lines,
// and the class section, which follows every vendor, from the end. Inside
// a block only the wanted devices' lines are parsed (Intel's block alone
// is a quarter of the file). It touches a small part of a 1.4 MB file
// instead of all of it (the live check's largest single cost before). A
// vendor it does not find, a malformed line on its way (whose line number
// only a full parse knows), or a file without a class section gives ok
// false and the caller parses the whole file: a sorted-order assumption
// that does not hold can cost time, never a name, because a found block is
// the line that names exactly that vendor.
func seekIDs(b []byte, vendors []uint16, f Filter) (ids *IDs, err error, ok bool) {
	classes := bytes.LastIndex(b, []byte("\nC 00  "))
	if classes < 0 {
		return nil, nil, false
	}
	classes++ // the line, not the newline before it
	p := newIDsParser(f)
	vs := &vendorSeeker{b: b[:classes]}
	for _, v := range vendors {
		at, found := vs.find(v)
		if !found {
			return nil, nil, false
		}
		p.vendorBlock(b[at:classes])
	}
	p.lines(b[classes:], false)
	if p.perr != nil {
		return nil, nil, false
	}
	ids, err = p.result()
	return ids, err, true
}

// vendorBlock parses the vendor line b starts with and, of the device
// lines below it, only those the filter keeps (with their subsystems);
// the rest of the block is stepped over a line at a time.
func (p *idsParser) vendorBlock(b []byte) {
	eol := bytes.IndexByte(b, '\n')
	if eol < 0 {
		eol = len(b)
	}
	p.line(bytes.TrimRight(b[:eol], "\r"))
	keep := false
	for pos := eol + 1; pos < len(b); {
		rest := b[pos:]
		n := bytes.IndexByte(rest, '\n')
		if n < 0 {
			n = len(rest)
		}
		line := rest[:n]
		pos += n + 1
		switch {
		case isTopLevel(rest):
			return // the next vendor
		case len(line) < 2 || line[0] != '\t':
			// a comment or a blank line
		case line[1] != '\t': // a device line
			id, hex := hexBytes(line[1:min(5, len(line))])
			keep = !hex || len(line) < 5 || p.f.Device == nil || p.f.Device(p.vendorID, uint16(id))
			if keep {
				p.line(bytes.TrimRight(line, "\r"))
			}
		case keep:
			p.line(bytes.TrimRight(line, "\r"))
		}
	}
}

// findVendor finds the line "vvvv  name" of vendor v in the vendor section
// b by binary search over byte offsets.
func findVendor(b []byte, v uint16) (int, bool) {
	return (&vendorSeeker{b: b}).find(v)
}

// vendorSeeker finds vendor lines in one vendor section, keeping what each
// walk to a vendor line established. The searches for a host's few
// vendors start with the same probes, and a probe that lands in a big
// block walks line by line to its end (Intel's block is a quarter of the
// file: most of a search's cost); a later probe in the stretch a walk
// crossed is answered from memory, with the answer the walk would give.
type vendorSeeker struct {
	b     []byte
	spans []vendorSpan
}

// vendorSpan is one walk: no vendor line starts in [from, at); with found,
// the line at at is vendor id's, else the walk, bounded by at, found none.
type vendorSpan struct {
	from, at int
	id       uint16
	found    bool
}

// next is nextVendor(s.b, pos, hi).
func (s *vendorSeeker) next(pos, hi int) (at int, id uint16, ok bool) {
	for _, sp := range s.spans {
		switch {
		case pos < sp.from:
		case sp.found && pos <= sp.at:
			// The first vendor line at or after pos is sp's.
			if sp.at < hi {
				return sp.at, sp.id, true
			}
			return 0, 0, false
		case !sp.found && hi <= sp.at:
			return 0, 0, false
		}
	}
	at, id, ok = nextVendor(s.b, pos, hi)
	if ok {
		s.spans = append(s.spans, vendorSpan{from: pos, at: at, id: id, found: true})
	} else {
		s.spans = append(s.spans, vendorSpan{from: pos, at: hi})
	}
	return at, id, ok
}

// find is findVendor through s.
func (s *vendorSeeker) find(v uint16) (int, bool) {
	b := s.b
	lo, hi := 0, len(b)
	for lo < hi {
		mid := lo + (hi-lo)/2
		at, id, ok := s.next(mid, hi)
		switch {
		case !ok || id > v:
			hi = mid // no vendor line in [mid, at): the one wanted starts before mid
		case id == v:
			return at, true
		default:
			lo = at + 1
		}
	}
	return 0, false
}

// nextVendor returns the first vendor line that starts in [pos, hi).
func nextVendor(b []byte, pos, hi int) (at int, id uint16, ok bool) {
	if pos > 0 && b[pos-1] != '\n' {
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			return 0, 0, false
		}
		pos += i + 1
	}
	for pos < hi {
		line := b[pos:]
		if len(line) >= 6 && line[4] == ' ' && line[5] == ' ' {
			if n, hex := hexBytes(line[:4]); hex {
				return pos, uint16(n), true
			}
		}
		i := bytes.IndexByte(line, '\n')
		if i < 0 {
			break
		}
		pos += i + 1
	}
	return 0, 0, false
}

func (p *idsParser) bad(msg string) {
	if p.perr == nil {
		p.perr = &idsError{first: msg, line: p.lineNo}
	}
	p.perr.count++
}

// line dispatches one line by its indentation; comments and blank lines
// are skipped, and so are the children of entries not kept.
func (p *idsParser) line(line []byte) {
	if len(line) == 0 || line[0] == '#' {
		return
	}
	tabs := 0
	for tabs < len(line) && line[tabs] == '\t' {
		tabs++
	}
	if tabs > 0 && p.state == inSkip || tabs > 1 && p.state == inSkipDevice {
		return
	}
	body := line[tabs:]
	if len(body) == 0 || body[0] == '#' {
		return // blank or indented comment
	}
	switch tabs {
	case 0:
		p.top(body)
	case 1:
		p.child(body)
	case 2:
		p.grandchild(body)
	default:
		p.bad("indented more than two tabs")
	}
}

// top handles "vvvv  vendor" and "C cc  class" lines.
func (p *idsParser) top(body []byte) {
	p.device, p.subclass = nil, nil
	switch {
	case len(body) >= 2 && body[0] == 'C' && body[1] == ' ':
		p.classLine(body[2:])
	case len(body) >= 2 && body[1] == ' ' && !isHex(body[0]):
		// Another section (usb.ids-style "X  name"): not used by pci.ids
		// today; skip it and its children.
		p.state = inSkip
	default:
		p.vendorLine(body)
	}
}

func (p *idsParser) classLine(body []byte) {
	id, name, ok := splitID(body, 2)
	if !ok {
		p.bad("bad class line")
		p.state = inSkip
		return
	}
	p.class = &idClass{name: string(name), subs: map[uint8]*idSubclass{}}
	if _, dup := p.ids.classes[uint8(id)]; !dup {
		p.ids.classes[uint8(id)] = p.class
	}
	p.state = inClass
}

func (p *idsParser) vendorLine(body []byte) {
	id, name, ok := splitID(body, 4)
	switch {
	case !ok:
		p.bad("bad vendor line")
		p.state = inSkip
		return
	case p.f.Vendor != nil && !p.f.Vendor(uint16(id)):
		p.state = inSkip
		return
	}
	p.vendorID = uint16(id)
	if v, dup := p.ids.vendors[p.vendorID]; dup {
		p.vendor = v
	} else {
		p.vendor = &idVendor{name: string(name), devices: map[uint16]*idDevice{}}
		p.ids.vendors[p.vendorID] = p.vendor
	}
	p.state = inVendor
}

// child handles a device line under a vendor or a subclass line under a
// class.
func (p *idsParser) child(body []byte) {
	switch p.state {
	case inVendor, inSkipDevice:
		p.state = inVendor
		p.deviceLine(body)
	case inClass:
		p.subclassLine(body)
	default:
		p.bad("entry outside a vendor or class")
	}
}

func (p *idsParser) deviceLine(body []byte) {
	p.device = nil
	id, name, ok := splitID(body, 4)
	switch {
	case !ok:
		p.bad("bad device line")
		return
	case p.f.Device != nil && !p.f.Device(p.vendorID, uint16(id)):
		p.state = inSkipDevice
		return
	}
	if d, dup := p.vendor.devices[uint16(id)]; dup {
		p.device = d
	} else {
		p.device = &idDevice{name: string(name)}
		p.vendor.devices[uint16(id)] = p.device
	}
}

func (p *idsParser) subclassLine(body []byte) {
	p.subclass = nil
	id, name, ok := splitID(body, 2)
	if !ok {
		p.bad("bad subclass line")
		return
	}
	if s, dup := p.class.subs[uint8(id)]; dup {
		p.subclass = s
	} else {
		p.subclass = &idSubclass{name: string(name)}
		p.class.subs[uint8(id)] = p.subclass
	}
}

// grandchild handles "ssss dddd  name" under a device and "pp  name"
// (prog-if) under a subclass.
func (p *idsParser) grandchild(body []byte) {
	switch {
	case p.state == inVendor && p.device != nil:
		p.subsystemLine(body)
	case p.state == inClass && p.subclass != nil:
		id, name, ok := splitID(body, 2)
		if !ok {
			p.bad("bad prog-if line")
			return
		}
		if p.subclass.progifs == nil {
			p.subclass.progifs = map[uint8]string{}
		}
		if _, dup := p.subclass.progifs[uint8(id)]; !dup {
			p.subclass.progifs[uint8(id)] = string(name)
		}
	default:
		p.bad("entry outside a device or subclass")
	}
}

func (p *idsParser) subsystemLine(body []byte) {
	if len(body) < 10 || body[4] != ' ' {
		p.bad("bad subsystem line")
		return
	}
	sv, ok1 := hexBytes(body[:4])
	sd, name, ok2 := splitID(body[5:], 4)
	if !ok1 || !ok2 {
		p.bad("bad subsystem line")
		return
	}
	if p.device.subs == nil {
		p.device.subs = map[uint32]string{}
	}
	k := uint32(sv)<<16 | uint32(sd)
	if _, dup := p.device.subs[k]; !dup {
		p.device.subs[k] = string(name)
	}
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
		if err == nil && ids == nil {
			err = errors.New("internal error: no result")
		}
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
	if len(f.Seek) > 0 {
		if ids, err, ok := seekIDs(b, f.Seek, f); ok {
			return ids, err
		}
	}
	return parseIDs(b, f)
}
