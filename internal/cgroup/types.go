package cgroup

import (
	"fmt"
	"strings"
)

// Access is a set of device accesses. The values are the kernel's
// DEVCG_ACC_* / BPF_DEVCG_ACC_* bits (include/uapi/linux/bpf.h,
// include/linux/device_cgroup.h), so a set can go straight into
// bpf_cgroup_dev_ctx.access_type. These are the one definition of the
// access bits in this module: the interpreter, the evaluator and the
// sandbox's program generator all use them.
type Access uint8

const (
	AccessMknod Access = 1 // BPF_DEVCG_ACC_MKNOD, "m"
	AccessRead  Access = 2 // BPF_DEVCG_ACC_READ, "r"
	AccessWrite Access = 4 // BPF_DEVCG_ACC_WRITE, "w"

	AccessAll = AccessRead | AccessWrite | AccessMknod
)

// The context of a BPF_PROG_TYPE_CGROUP_DEVICE program, struct
// bpf_cgroup_dev_ctx (include/uapi/linux/bpf.h): three u32 fields in host
// byte order. The kernel fills access_type as access<<16 | type
// (__cgroup_bpf_check_dev_permission, kernel/bpf/cgroup.c), with access a
// set of BPF_DEVCG_ACC_* bits (Access) and type one BPF_DEVCG_DEV_* value.
// These are the one definition of the layout in this module: the
// interpreter reads programs with it and the sandbox generates them with it.
const (
	DevCtxAccessType  = 0      // offset of access_type
	DevCtxMajor       = 4      // offset of major
	DevCtxMinor       = 8      // offset of minor
	DevCtxSize        = 12     // sizeof(struct bpf_cgroup_dev_ctx)
	DevCtxAccessShift = 16     // access_type >> 16 is the access set
	DevCtxTypeMask    = 0xffff // access_type & 0xffff is the device type
)

// Device types as bpf_cgroup_dev_ctx carries them (include/uapi/linux/bpf.h).
const (
	DevTypeBlock uint32 = 1 // BPF_DEVCG_DEV_BLOCK
	DevTypeChar  uint32 = 2 // BPF_DEVCG_DEV_CHAR
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

// BPFDevType is the device type t ('c' or 'b') as bpf_cgroup_dev_ctx
// carries it: DevTypeChar or DevTypeBlock.
func BPFDevType(t byte) (uint32, error) {
	switch t {
	case 'b':
		return DevTypeBlock, nil
	case 'c':
		return DevTypeChar, nil
	}
	return 0, fmt.Errorf("device type %q is not 'c' or 'b'", t)
}

// Decision is what one layer (v1, v2 or both) says about one access.
// Known false means the policy could not be read or evaluated exactly; the
// diagnosis reports that as NOT_RUN with Reason, never as allowed.
type Decision struct {
	Allowed   bool
	Known     bool
	Reason    string // why undecided, or a short note
	DecidedBy string // the file and line, or the program and instruction
	// Undecided, the error that left it so (a program that could not be
	// read back: EPERM, ErrCapturedHost; a devices.list that could not
	// be read), when one did; nil when no error did.
	Err error
	// Hidden: undecided because a default-allow v1 cgroup hides its deny
	// rules: no reader, root included, can see them; only an open in the
	// cgroup can tell.
	Hidden bool
}

func undecided(reason string) Decision { return Decision{Reason: reason} }

func undecidedErr(reason string, err error) Decision { return Decision{Reason: reason, Err: err} }
