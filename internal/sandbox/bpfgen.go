package sandbox

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
)

// ProgramName is the object name of every program DeviceProgramSpec
// makes, so that a leftover one can be recognised (BPF_OBJ_NAME_LEN is 16,
// include/uapi/linux/bpf.h).
const ProgramName = "adoc_sandbox"

// Offsets in struct bpf_cgroup_dev_ctx (include/uapi/linux/bpf.h):
// access_type (u32) = access<<16 | type, then major, then minor.
const (
	ctxAccessType = 0
	ctxMajor      = 4
	ctxMinor      = 8
)

// Device types and access bits as the kernel puts them in the context
// (BPF_DEVCG_DEV_*, BPF_DEVCG_ACC_*, include/uapi/linux/bpf.h).
const (
	devBlock = 1
	devChar  = 2
	accMknod = 1
	accRead  = 2
	accWrite = 4
)

// accessBits are the access bits in the order the program tests them.
var accessBits = []struct {
	bit  int32
	perm byte
}{{accRead, 'r'}, {accWrite, 'w'}, {accMknod, 'm'}}

// validateRule rejects a rule the sandbox cannot apply.
func validateRule(r config.Rule) error {
	switch r.Type {
	case config.WildcardDevice:
		// 'a' covers every device and access: the other fields are ignored,
		// as config.Rule documents and as devices.allow treats "a".
		return nil
	case config.BlockDevice, config.CharDevice:
	default:
		return fmt.Errorf("rule %q: device type %q is not 'a', 'b' or 'c'", r.CgroupString(), r.Type)
	}
	if r.Major != config.Wildcard && (r.Major < 0 || r.Major > cgroup.MaxMajor) {
		return fmt.Errorf("rule %q: major %d out of range 0-%d", r.CgroupString(), r.Major, cgroup.MaxMajor)
	}
	if r.Minor != config.Wildcard && (r.Minor < 0 || r.Minor > cgroup.MaxMinor) {
		return fmt.Errorf("rule %q: minor %d out of range 0-%d", r.CgroupString(), r.Minor, cgroup.MaxMinor)
	}
	if r.Permissions == "" || !r.Permissions.IsValid() {
		return fmt.Errorf("rule %q: permissions %q are not a non-empty set of r, w, m", r.CgroupString(), r.Permissions)
	}
	for _, c := range r.Permissions {
		if c != 'r' && c != 'w' && c != 'm' {
			return fmt.Errorf("rule %q: permission %q is not r, w or m", r.CgroupString(), c)
		}
	}
	return nil
}

// ruleHas reports whether r speaks about access bit perm.
func ruleHas(r config.Rule, perm byte) bool {
	if r.Type == config.WildcardDevice {
		return true
	}
	for i := 0; i < len(r.Permissions); i++ {
		if r.Permissions[i] == perm {
			return true
		}
	}
	return false
}

// builder assembles straight-line code with forward jumps to named
// labels; offsets are resolved by hand so several labels may share an
// instruction.
type builder struct {
	ins    asm.Instructions
	labels map[string]int
	jumps  map[int]string // instruction index → label
}

func (b *builder) emit(i asm.Instruction) { b.ins = append(b.ins, i) }

func (b *builder) label(name string) { b.labels[name] = len(b.ins) }

// jump emits a conditional jump (op against imm) or, with op == asm.Ja, an
// unconditional one.
func (b *builder) jump(op asm.JumpOp, dst asm.Register, imm int32, to string) {
	b.jumps[len(b.ins)] = to
	b.emit(asm.Instruction{OpCode: op.Op(asm.ImmSource), Dst: dst, Constant: int64(imm)})
}

func (b *builder) finish() (asm.Instructions, error) {
	for at, to := range b.jumps {
		target, ok := b.labels[to]
		if !ok {
			return nil, fmt.Errorf("internal error: label %q not placed", to)
		}
		if target <= at {
			return nil, fmt.Errorf("internal error: backward jump to %q", to)
		}
		b.ins[at].Offset = int16(target - at - 1)
	}
	return b.ins, nil
}

// DeviceInstructions generates a BPF_PROG_TYPE_CGROUP_DEVICE program for
// rules over a default.
//
// Semantics (the sandbox's, for v1 and v2 alike): each access bit (r, w, m)
// is decided on its own by the LAST rule, in the given order, whose type,
// major and minor match the device and whose permissions contain that bit;
// with no such rule the default decides. A rule of type 'a' matches every
// device and every bit. An access asking for several bits at once (open
// O_RDWR asks for r and w in one call of the program) is allowed only when
// every bit is. The program returns 1 to allow and 0 to deny.
//
// Registers: R2 = access_type, then minor; R3 = type; R4 = access bits;
// R5 = major. Each bit is a block that walks the rules from last to first
// and jumps to "deny" or to the next bit's block at the first match.
func DeviceInstructions(defaultAllow bool, rules []config.Rule) (asm.Instructions, error) {
	for _, r := range rules {
		if err := validateRule(r); err != nil {
			return nil, err
		}
	}
	b := &builder{labels: map[string]int{}, jumps: map[int]string{}}
	b.emit(asm.LoadMem(asm.R2, asm.R1, ctxAccessType, asm.Word))
	b.emit(asm.Mov.Reg(asm.R3, asm.R2))
	b.emit(asm.And.Imm(asm.R3, 0xffff))
	b.emit(asm.Mov.Reg(asm.R4, asm.R2))
	b.emit(asm.RSh.Imm(asm.R4, 16))
	b.emit(asm.LoadMem(asm.R5, asm.R1, ctxMajor, asm.Word))
	b.emit(asm.LoadMem(asm.R2, asm.R1, ctxMinor, asm.Word))

	for bi, bit := range accessBits {
		next := fmt.Sprintf("bit%d", bi+1)
		// Skip this block when the access does not ask for this bit.
		b.emit(asm.Mov.Reg(asm.R0, asm.R4))
		b.emit(asm.And.Imm(asm.R0, bit.bit))
		b.jump(asm.JEq, asm.R0, 0, next)
		decided := false
		for ri := len(rules) - 1; ri >= 0 && !decided; ri-- {
			r := rules[ri]
			if !ruleHas(r, bit.perm) {
				continue
			}
			verdict := next
			if !r.Allow {
				verdict = "deny"
			}
			if r.Type == config.WildcardDevice {
				// Matches everything: the rules before it cannot matter.
				b.jump(asm.Ja, asm.R0, 0, verdict)
				decided = true
				break
			}
			miss := fmt.Sprintf("bit%d.rule%d", bi, ri)
			typ := int32(devChar)
			if r.Type == config.BlockDevice {
				typ = devBlock
			}
			b.jump(asm.JNE, asm.R3, typ, miss)
			if r.Major != config.Wildcard {
				b.jump(asm.JNE, asm.R5, int32(r.Major), miss)
			}
			if r.Minor != config.Wildcard {
				b.jump(asm.JNE, asm.R2, int32(r.Minor), miss)
			}
			b.jump(asm.Ja, asm.R0, 0, verdict)
			b.label(miss)
		}
		if !decided {
			if defaultAllow {
				b.jump(asm.Ja, asm.R0, 0, next)
			} else {
				b.jump(asm.Ja, asm.R0, 0, "deny")
			}
		}
		b.label(next)
	}
	b.emit(asm.Mov.Imm(asm.R0, 1))
	b.emit(asm.Return())
	// The verifier rejects unreachable instructions (kernel/bpf/verifier.c
	// check_cfg), so the deny exit exists only when something jumps to it.
	if slices.Contains(slices.Collect(maps.Values(b.jumps)), "deny") {
		b.label("deny")
		b.emit(asm.Mov.Imm(asm.R0, 0))
		b.emit(asm.Return())
	}
	return b.finish()
}

// DeviceProgramSpec wraps DeviceInstructions in a loadable spec named
// ProgramName. Device programs call no GPL-only helper, so the license
// need not be GPL.
func DeviceProgramSpec(defaultAllow bool, rules []config.Rule) (*ebpf.ProgramSpec, error) {
	insns, err := DeviceInstructions(defaultAllow, rules)
	if err != nil {
		return nil, err
	}
	return &ebpf.ProgramSpec{
		Name:         ProgramName,
		Type:         ebpf.CGroupDevice,
		AttachType:   ebpf.AttachCGroupDevice,
		Instructions: insns,
		License:      "Apache-2.0",
	}, nil
}
