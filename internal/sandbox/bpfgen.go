package sandbox

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
)

// ProgramName is the object name of every program DeviceProgramSpec
// makes, so that a leftover one can be recognised (BPF_OBJ_NAME_LEN is 16,
// include/uapi/linux/bpf.h).
const ProgramName = "adoc_sandbox"

// Registers of the generated program.
const (
	regType   = asm.R3 // access_type & DevCtxTypeMask
	regAccess = asm.R4 // access_type >> DevCtxAccessShift
	regMajor  = asm.R5
	regMinor  = asm.R2
	regTmp    = asm.R0
)

// DeviceInstructions generates a BPF_PROG_TYPE_CGROUP_DEVICE program that
// decides as s.Decide does for cgroup.EnforcerV2, the semantics of the
// program runc generates (devicefilter.go in
// github.com/opencontainers/cgroups): every exception has the verdict
// opposite to the default, and an exception matches when the device's
// type, major and minor match and the requested access is a subset of the
// exception's (an O_RDWR open asks for r and w in one call of the
// program). The first matching exception decides; with none, the default.
// The program returns 1 to allow and 0 to deny (bpf_prog_run_array_cg,
// kernel/bpf/cgroup.c, turns 0 into EPERM).
//
// Over a default allow this is not what the v1 controller does with the
// same list (see cgroup/rules.go): the sandbox reproduces runc's program
// on v2, since that is what a container on a cgroup2 host gets, and says
// where the two differ.
func DeviceInstructions(s *cgroup.DeviceRules) (asm.Instructions, error) {
	insns := asm.Instructions{
		asm.LoadMem(regMinor, asm.R1, cgroup.DevCtxAccessType, asm.Word),
		asm.Mov.Reg32(regType, regMinor),
		asm.And.Imm32(regType, cgroup.DevCtxTypeMask),
		asm.Mov.Reg32(regAccess, regMinor),
		asm.RSh.Imm32(regAccess, cgroup.DevCtxAccessShift),
		asm.LoadMem(regMajor, asm.R1, cgroup.DevCtxMajor, asm.Word),
		asm.LoadMem(regMinor, asm.R1, cgroup.DevCtxMinor, asm.Word),
	}
	for i, x := range s.Exceptions {
		block, err := exceptionBlock(x, fmt.Sprintf("exception%d", i+1))
		if err != nil {
			return nil, err
		}
		// The first instruction of each block is where the previous one's
		// misses jump.
		block[0] = block[0].WithSymbol(fmt.Sprintf("exception%d", i))
		insns = append(insns, block...)
	}
	def, match := int32(0), int32(1)
	if s.DefaultAllow {
		def, match = 1, 0
	}
	insns = append(insns,
		asm.Mov.Imm32(asm.R0, def).WithSymbol(fmt.Sprintf("exception%d", len(s.Exceptions))),
		asm.Return())
	// The verifier rejects unreachable instructions (kernel/bpf/verifier.c
	// check_cfg), so the matched exit exists only when an exception does.
	if len(s.Exceptions) > 0 {
		insns = append(insns, asm.Mov.Imm32(asm.R0, match).WithSymbol("matched"), asm.Return())
	}
	return insns, nil
}

// exceptionBlock tests one exception: on a miss it jumps to next, on a
// match to "matched".
func exceptionBlock(x cgroup.DeviceException, next string) (asm.Instructions, error) {
	typ, err := cgroup.BPFDevType(x.Type)
	if err != nil {
		return nil, err
	}
	if x.Major > cgroup.MaxMajor || x.Minor > cgroup.MaxMinor {
		return nil, fmt.Errorf("exception %s: number out of a dev_t's range", x)
	}
	b := asm.Instructions{asm.JNE.Imm(regType, int32(typ), next)}
	if x.Access != cgroup.AccessAll {
		// A subset test: access & exception's == access.
		b = append(b,
			asm.Mov.Reg32(regTmp, regAccess),
			asm.And.Imm32(regTmp, int32(x.Access)),
			asm.JNE.Reg(regTmp, regAccess, next))
	}
	if x.Major != config.Wildcard {
		b = append(b, asm.JNE.Imm(regMajor, int32(x.Major), next))
	}
	if x.Minor != config.Wildcard {
		b = append(b, asm.JNE.Imm(regMinor, int32(x.Minor), next))
	}
	return append(b, asm.Ja.Label("matched")), nil
}

// DeviceProgramSpec wraps DeviceInstructions in a loadable spec named
// ProgramName. Device programs call no GPL-only helper, so the license
// need not be GPL.
func DeviceProgramSpec(s *cgroup.DeviceRules) (*ebpf.ProgramSpec, error) {
	insns, err := DeviceInstructions(s)
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
