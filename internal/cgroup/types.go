package cgroup

import (
	"fmt"
	"strings"
)

// Access is a set of device accesses. The values are the kernel's
// DEVCG_ACC_* / BPF_DEVCG_ACC_* bits (include/uapi/linux/bpf.h,
// include/linux/device_cgroup.h), so a set can go straight into
// bpf_cgroup_dev_ctx.access_type.
type Access uint8

const (
	AccessMknod Access = 1 // BPF_DEVCG_ACC_MKNOD, "m"
	AccessRead  Access = 2 // BPF_DEVCG_ACC_READ, "r"
	AccessWrite Access = 4 // BPF_DEVCG_ACC_WRITE, "w"

	AccessAll = AccessRead | AccessWrite | AccessMknod
)

// String writes the set in devices.list order ("rwm"); "" for none.
func (a Access) String() string {
	var b strings.Builder
	if a&AccessRead != 0 {
		b.WriteByte('r')
	}
	if a&AccessWrite != 0 {
		b.WriteByte('w')
	}
	if a&AccessMknod != 0 {
		b.WriteByte('m')
	}
	return b.String()
}

// Bits splits the set into single accesses, in r, w, m order.
func (a Access) Bits() []Access {
	var out []Access
	for _, b := range []Access{AccessRead, AccessWrite, AccessMknod} {
		if a&b != 0 {
			out = append(out, b)
		}
	}
	return out
}

// ParseAccess parses "r", "rw", "rwm"... (any order, no repeats).
func ParseAccess(s string) (Access, error) {
	var a Access
	for _, c := range s {
		var b Access
		switch c {
		case 'r':
			b = AccessRead
		case 'w':
			b = AccessWrite
		case 'm':
			b = AccessMknod
		default:
			return 0, fmt.Errorf("access %q: unknown letter %q (want r, w, m)", s, c)
		}
		if a&b != 0 {
			return 0, fmt.Errorf("access %q: %q repeated", s, c)
		}
		a |= b
	}
	if a == 0 {
		return 0, fmt.Errorf("access %q: empty", s)
	}
	return a, nil
}

// DeviceRef names a device node by type and number.
type DeviceRef struct {
	Type  byte // 'c' or 'b'
	Major uint32
	Minor uint32
}

func (d DeviceRef) String() string { return fmt.Sprintf("%c %d:%d", d.Type, d.Major, d.Minor) }

// bpfType is the device type as bpf_cgroup_dev_ctx carries it
// (BPF_DEVCG_DEV_BLOCK = 1, BPF_DEVCG_DEV_CHAR = 2, include/uapi/linux/bpf.h).
func (d DeviceRef) bpfType() (uint32, error) {
	switch d.Type {
	case 'b':
		return 1, nil
	case 'c':
		return 2, nil
	}
	return 0, fmt.Errorf("device type %q is not 'c' or 'b'", d.Type)
}

// Decision is what one layer (v1, v2 or both) says about one access.
// Known false means the policy could not be read or evaluated exactly; the
// diagnosis reports that as NOT_RUN with Reason, never as allowed.
type Decision struct {
	Allowed   bool
	Known     bool
	Reason    string // why undecided, or a short note
	DecidedBy string // the file and line, or the program and instruction
}

func undecided(reason string) Decision { return Decision{Reason: reason} }
