package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The layout of /etc/ld.so.cache, as glibc's sysdeps/generic/dl-cache.h
// defines it (facts, restated here):
//
// Old format (libc5, glibc 2.0/2.1): magic "ld.so-1.7.0" (11 bytes), a
// 32-bit nlibs at offset 12 (the magic is padded to 4-byte alignment),
// then nlibs entries of {int32 flags; uint32 key, value} (12 bytes); key
// and value index a string table that starts right after the entries.
//
// New format (glibc 2.2+; the only one ldconfig writes since glibc 2.32):
// magic "glibc-ld.so.cache" (17 bytes), version "1.1" (3 bytes), uint32
// nlibs, uint32 len_strings, uint8 flags (endianness: 2 little, 3 big),
// 3 bytes padding, uint32 extension_offset, 3 unused uint32, so entries
// start at offset 48. Each entry is {int32 flags; uint32 key, value;
// uint32 osversion; uint64 hwcap} (24 bytes). key and value are offsets
// from the start of the new header.
//
// A transitional file has the old format first and the new header after
// the old entries, aligned to the new header's alignment (8).
const (
	ldCacheOldMagic   = "ld.so-1.7.0"
	ldCacheNewMagic   = "glibc-ld.so.cache"
	ldCacheNewVersion = "1.1"

	ldCacheOldHeader = 16
	ldCacheOldEntry  = 12
	ldCacheNewHeader = 48
	ldCacheNewEntry  = 24

	// maxLDCacheString bounds one name or path; PATH_MAX is 4096.
	maxLDCacheString = 4096
)

// Flag bits of an entry (dl-cache.h): the low byte is the library type,
// the high byte the ABI it requires.
const (
	LDCacheFlagTypeMask     = 0x00ff
	LDCacheFlagELFLibc6     = 0x0003
	LDCacheFlagRequiredMask = 0xff00
	LDCacheFlagX8664Lib64   = 0x0300
	LDCacheFlagPowerPCLib64 = 0x0500
	LDCacheFlagAArch64Lib64 = 0x0a00
)

// LDCacheEntry is one library the dynamic loader's cache knows.
type LDCacheEntry struct {
	Name  string // the soname, "libcuda.so.1"
	Path  string // the path the loader opens, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
	Flags uint32 // type and required ABI, see the LDCacheFlag constants
}

// Is64 reports whether the entry is for a 64-bit ABI that ldconfig marks
// (x86-64, aarch64, ppc64, ...): i386 libraries carry no required-ABI bits.
func (e LDCacheEntry) Is64() bool {
	switch e.Flags & LDCacheFlagRequiredMask {
	case 0x0100, 0x0200, LDCacheFlagX8664Lib64, 0x0400, LDCacheFlagPowerPCLib64, 0x0700, LDCacheFlagAArch64Lib64, 0x1000, 0x1200:
		return true
	}
	return false
}

// ParseLDCache parses an ld.so.cache in either format. Every offset is
// checked against the data: a truncated or hostile file is an error,
// never a panic, and no allocation exceeds the input's size.
func ParseLDCache(b []byte) ([]LDCacheEntry, error) {
	switch {
	case bytes.HasPrefix(b, []byte(ldCacheNewMagic)):
		return parseLDCacheNew(b)
	case bytes.HasPrefix(b, []byte(ldCacheOldMagic)):
		return parseLDCacheOld(b)
	}
	return nil, errors.New("ld.so.cache: unknown magic")
}

func parseLDCacheOld(b []byte) ([]LDCacheEntry, error) {
	if len(b) < ldCacheOldHeader {
		return nil, errors.New("ld.so.cache: old header truncated")
	}
	// The old format has no endianness flag: it is the host's. Try little
	// endian (every platform accel-doctor targets); a count that cannot
	// fit is an error either way.
	n := uint64(binary.LittleEndian.Uint32(b[12:16]))
	end := uint64(ldCacheOldHeader) + n*ldCacheOldEntry
	if end > uint64(len(b)) {
		return nil, fmt.Errorf("ld.so.cache: %d old entries do not fit in %d bytes", n, len(b))
	}
	// A new-format table after the old one is preferred: it is what glibc
	// itself reads (elf/dl-cache.c).
	for _, off := range []uint64{(end + 7) &^ 7, end} {
		if off < uint64(len(b)) && bytes.HasPrefix(b[off:], []byte(ldCacheNewMagic)) {
			return parseLDCacheNew(b[off:])
		}
	}
	strs := b[end:]
	out := make([]LDCacheEntry, 0, n)
	for i := uint64(0); i < n; i++ {
		e := b[ldCacheOldHeader+i*ldCacheOldEntry:]
		flags := binary.LittleEndian.Uint32(e[0:4])
		name, err := cString(strs, uint64(binary.LittleEndian.Uint32(e[4:8])))
		if err != nil {
			return nil, fmt.Errorf("ld.so.cache: old entry %d key: %w", i, err)
		}
		p, err := cString(strs, uint64(binary.LittleEndian.Uint32(e[8:12])))
		if err != nil {
			return nil, fmt.Errorf("ld.so.cache: old entry %d value: %w", i, err)
		}
		out = append(out, LDCacheEntry{Name: name, Path: p, Flags: flags})
	}
	return out, nil
}

func parseLDCacheNew(b []byte) ([]LDCacheEntry, error) {
	if len(b) < ldCacheNewHeader {
		return nil, errors.New("ld.so.cache: new header truncated")
	}
	if string(b[len(ldCacheNewMagic):len(ldCacheNewMagic)+len(ldCacheNewVersion)]) != ldCacheNewVersion {
		return nil, fmt.Errorf("ld.so.cache: unsupported version %q", b[len(ldCacheNewMagic):len(ldCacheNewMagic)+len(ldCacheNewVersion)])
	}
	var bo binary.ByteOrder = binary.LittleEndian
	switch b[28] {
	case 0, 2: // unknown (older ldconfig) or little endian
	case 3:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("ld.so.cache: bad endianness flag %d", b[28])
	}
	n := uint64(bo.Uint32(b[20:24]))
	end := uint64(ldCacheNewHeader) + n*ldCacheNewEntry
	if end > uint64(len(b)) {
		return nil, fmt.Errorf("ld.so.cache: %d entries do not fit in %d bytes", n, len(b))
	}
	out := make([]LDCacheEntry, 0, n)
	for i := uint64(0); i < n; i++ {
		e := b[ldCacheNewHeader+i*ldCacheNewEntry:]
		flags := bo.Uint32(e[0:4])
		name, err := cString(b, uint64(bo.Uint32(e[4:8])))
		if err != nil {
			return nil, fmt.Errorf("ld.so.cache: entry %d key: %w", i, err)
		}
		p, err := cString(b, uint64(bo.Uint32(e[8:12])))
		if err != nil {
			return nil, fmt.Errorf("ld.so.cache: entry %d value: %w", i, err)
		}
		out = append(out, LDCacheEntry{Name: name, Path: p, Flags: flags})
	}
	return out, nil
}

// cString returns the NUL-terminated string at off in b.
func cString(b []byte, off uint64) (string, error) {
	if off >= uint64(len(b)) {
		return "", fmt.Errorf("string offset %d beyond %d bytes", off, len(b))
	}
	s := b[off:]
	if len(s) > maxLDCacheString+1 {
		s = s[:maxLDCacheString+1]
	}
	i := bytes.IndexByte(s, 0)
	if i < 0 {
		return "", fmt.Errorf("string at offset %d is not terminated within %d bytes", off, maxLDCacheString)
	}
	return string(s[:i]), nil
}
