package pci

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Address is a PCI function address: domain (segment), bus, device, function.
// The domain is 32 bits wide because Linux names VMD and Hyper-V domains
// with more than four hex digits (e.g. "10000:e0:06.0"); the kernel prints
// addresses with "%04x:%02x:%02x.%d" (drivers/pci/probe.c, pci_setup_device).
type Address struct {
	Domain uint32
	Bus    uint8
	Dev    uint8 // 0..31
	Fn     uint8 // 0..7
}

// String formats the address as the kernel does: "0000:17:00.0".
func (a Address) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Dev, a.Fn)
}

// Compare orders addresses by domain, bus, device, function.
func (a Address) Compare(b Address) int {
	x := uint64(a.Domain)<<16 | uint64(a.Bus)<<8 | uint64(a.Dev)<<3 | uint64(a.Fn)
	y := uint64(b.Domain)<<16 | uint64(b.Bus)<<8 | uint64(b.Dev)<<3 | uint64(b.Fn)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

var errAddress = errors.New("not a PCI address")

// ParseAddress parses "DDDD:BB:DD.F" (domain of 4 to 8 hex digits) or the
// short "BB:DD.F" that lspci prints without -D (domain 0). Hex digits may
// be upper or lower case; nothing else is accepted around them.
func ParseAddress(s string) (Address, error) {
	if a, ok := AddressOf(s); ok {
		return a, nil
	}
	return Address{}, fmt.Errorf("%w: %q", errAddress, s)
}

// AddressOf is ParseAddress without the error: whether s is an address,
// for a caller that asks it of every component of a sysfs path (most of
// which are not) and has no use for why.
func AddressOf(s string) (Address, bool) {
	bad := func() (Address, bool) { return Address{}, false }
	var a Address
	rest := s
	if i := strings.IndexByte(rest, ':'); i >= 0 && strings.Count(rest, ":") == 2 {
		dom := rest[:i]
		if len(dom) < 4 || len(dom) > 8 {
			return bad()
		}
		v, ok := hexDigits(dom)
		if !ok {
			return bad()
		}
		a.Domain = uint32(v)
		rest = rest[i+1:]
	}
	// rest is "BB:DD.F"
	if len(rest) != 7 || rest[2] != ':' || rest[5] != '.' {
		return bad()
	}
	bus, ok1 := hexDigits(rest[0:2])
	dev, ok2 := hexDigits(rest[3:5])
	fn := rest[6]
	if !ok1 || !ok2 || dev > 0x1f || fn < '0' || fn > '7' {
		return bad()
	}
	a.Bus, a.Dev, a.Fn = uint8(bus), uint8(dev), fn-'0'
	return a, true
}

// hexDigits parses a string made only of hex digits (no sign, no prefix).
func hexDigits(s string) (uint64, bool) {
	if s == "" || len(s) > 16 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 16, 64)
	return v, err == nil
}
