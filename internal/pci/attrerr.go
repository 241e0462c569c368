package pci

import (
	"errors"
	"fmt"
	"io/fs"
)

// Problem says what is wrong with an attribute that could not be used.
// Absent, unreadable and malformed are different answers (STYLE.md habit
// 3): an absent optional attribute is no problem at all and is not
// recorded; the three kinds below are.
type Problem uint8

const (
	// Absent: a mandatory attribute (vendor, device, class) is not there.
	// The kernel creates them for every function
	// (drivers/pci/pci-sysfs.c, pci_dev_attrs), so this is an incomplete
	// capture or a tree that is not the kernel's.
	Absent Problem = iota + 1
	// Unreadable: the attribute is there but reading it failed (permission,
	// over the size bound, not a regular file, a symlink loop).
	Unreadable
	// Malformed: it was read but its content does not parse.
	Malformed
	// Truncated: it was read and parses, but ends before data it must
	// hold: a config space cut short by a capture (config.go). A config
	// space cut at 64 bytes is not truncated but Unreadable beyond them
	// (ErrConfigUnprivileged): that is the kernel's answer to a reader
	// without CAP_SYS_ADMIN.
	Truncated
)

func (p Problem) String() string {
	switch p {
	case Absent:
		return "absent"
	case Unreadable:
		return "unreadable"
	case Malformed:
		return "malformed"
	case Truncated:
		return "truncated"
	}
	return "problem"
}

// ErrLinkCopied is a directory where the kernel has a symlink (driver,
// iommu_group, physfn, virtfnN): a capture made by a copy that followed
// the links, as node-feature-discovery's test trees are. What the link
// named is lost.
var ErrLinkCopied = errors.New("a directory where sysfs has a symlink: the capture copied the link's target, not the link")

// AttrError is one attribute or link of a function that could not be
// used, with its host path.
type AttrError struct {
	Attr    string // "numa_node", "driver", "virtfn3"
	Path    string // host path of the attribute
	Problem Problem
	Err     error
}

func (e *AttrError) Error() string {
	if e.Problem == Malformed || e.Problem == Truncated {
		return fmt.Sprintf("parse %s: %v", e.Path, e.Err)
	}
	// Read errors from hostfs already name the path.
	var pe *fs.PathError
	if errors.As(e.Err, &pe) && pe.Path == e.Path {
		return e.Err.Error()
	}
	return fmt.Sprintf("read %s: %v", e.Path, e.Err)
}

func (e *AttrError) Unwrap() error { return e.Err }

// AttrErr returns the recorded problem of the attribute name, nil when it
// was read fine or is simply absent (optional attributes).
func (d *Device) AttrErr(name string) *AttrError {
	for _, err := range d.Errors {
		var ae *AttrError
		if errors.As(err, &ae) && ae.Attr == name {
			return ae
		}
	}
	return nil
}

// AttrState describes an attribute for evidence: its problem ("malformed:
// parse ...: not a decimal number") or absent.
func (d *Device) AttrState(name string) string {
	if ae := d.AttrErr(name); ae != nil {
		return ae.Problem.String() + ": " + ae.Error()
	}
	return "absent"
}
