package cgroup

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/cilium/ebpf/asm"
)

// The interpreter runs BPF_PROG_TYPE_CGROUP_DEVICE programs as the kernel
// would for one access, over the instructions such programs use: ALU and
// ALU64, JMP and JMP32, loads from the context (struct bpf_cgroup_dev_ctx),
// 64-bit immediates, and the 512-byte stack. Semantics follow
// Documentation/bpf/standardization/instruction-set.rst. Helper calls, maps,
// atomics, packet loads and anything else it does not model stop it with a
// reason: the verdict is then undecided, never guessed.

// MaxSteps bounds one run. Device programs are straight-line rule lists
// (one compare chain per rule); the verifier bounds real programs at one
// million processed instructions, far above what a rule list needs.
const MaxSteps = 100000

// stackSize is MAX_BPF_STACK (include/linux/filter.h).
const stackSize = 512

var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// ProgResult is one program's verdict on one access.
type ProgResult struct {
	Known   bool
	Allowed bool
	// ExitInsn is the raw instruction offset (as bpftool and
	// asm.Instructions print it) of the exit that returned the verdict.
	ExitInsn int
	Reason   string // why undecided
	Steps    int
}

// DevCtx builds the context the kernel hands a device program (see
// DevCtxAccessType): access_type, major and minor in host byte order.
func DevCtx(dev DeviceRef, acc Access) ([DevCtxSize]byte, error) {
	var c [DevCtxSize]byte
	t, err := BPFDevType(dev.Type)
	if err != nil {
		return c, err
	}
	binary.NativeEndian.PutUint32(c[DevCtxAccessType:], uint32(acc)<<DevCtxAccessShift|t)
	binary.NativeEndian.PutUint32(c[DevCtxMajor:], dev.Major)
	binary.NativeEndian.PutUint32(c[DevCtxMinor:], dev.Minor)
	return c, nil
}

// DeviceProgram is a device program prepared for repeated evaluation.
type DeviceProgram struct {
	insns  asm.Instructions
	raw    []int // raw offset of each instruction
	target []int // slice index a jump goes to; -1 when not an instruction start
}

// NewDeviceProgram prepares insns. Jumps are resolved from their raw
// offsets, or from their label when they carry a reference to a symbol in
// insns (instructions built with asm but not yet loaded).
func NewDeviceProgram(insns asm.Instructions) *DeviceProgram {
	p := &DeviceProgram{insns: insns, raw: make([]int, len(insns)), target: make([]int, len(insns))}
	byRaw := map[int]int{}
	syms := map[string]int{}
	off := 0
	for i := range insns {
		p.raw[i] = off
		byRaw[off] = i
		if s := insns[i].Symbol(); s != "" {
			if _, dup := syms[s]; !dup {
				syms[s] = i
			}
		}
		off += int(insns[i].Width())
	}
	for i := range insns {
		ins := &insns[i]
		p.target[i] = -1
		if !ins.OpCode.Class().IsJump() {
			continue
		}
		if ref := ins.Reference(); ref != "" {
			if j, ok := syms[ref]; ok {
				p.target[i] = j
				continue
			}
		}
		rel := int(ins.Offset)
		if ins.OpCode.Class() == asm.Jump32Class && ins.OpCode.JumpOp() == asm.Ja {
			// gotol: the 32-bit jump offset is in imm.
			rel = int(int32(ins.Constant))
		}
		if j, ok := byRaw[p.raw[i]+int(ins.Width())+rel]; ok {
			p.target[i] = j
		}
	}
	return p
}

// Instructions returns the program's instructions.
func (p *DeviceProgram) Instructions() asm.Instructions { return p.insns }

// EvalDeviceProgram prepares insns and runs them for one access.
func EvalDeviceProgram(insns asm.Instructions, dev DeviceRef, acc Access) ProgResult {
	return NewDeviceProgram(insns).Eval(dev, acc)
}

// Eval runs the program for acc on dev. The kernel allows the access when
// the program returns non-zero: bpf_prog_run_array_cg (kernel/bpf/cgroup.c)
// turns a zero into -EPERM, and the verifier holds R0 of a cgroup device
// program to [0, 1] (check_return_code, kernel/bpf/verifier.c). The return
// value is a u32, so only the low 32 bits of R0 count.
func (p *DeviceProgram) Eval(dev DeviceRef, acc Access) ProgResult {
	ctx, err := DevCtx(dev, acc)
	if err != nil {
		return ProgResult{Reason: err.Error()}
	}
	return p.run(&ctx)
}

type regKind uint8

const (
	kUnknown regKind = iota // never written, or derived from what we do not model
	kScalar
	kCtx   // pointer into bpf_cgroup_dev_ctx; v is the offset
	kStack // pointer into the stack frame; v is the offset from r10 (<= 0)
)

type reg struct {
	k regKind
	v uint64
}

type stack struct {
	b     [stackSize]byte
	known [stackSize]bool
	ptr   [stackSize / 8]reg // pointers spilled as whole aligned 8-byte slots
}

func sizeBytes(s asm.Size) int {
	switch s {
	case asm.Byte:
		return 1
	case asm.Half:
		return 2
	case asm.Word:
		return 4
	case asm.DWord:
		return 8
	}
	return 0
}

func (p *DeviceProgram) run(ctx *[DevCtxSize]byte) ProgResult {
	m := &machine{p: p, ctx: ctx}
	m.r[asm.R1] = reg{k: kCtx}
	m.r[asm.R10] = reg{k: kStack}
	for steps := 1; ; steps++ {
		if steps > MaxSteps {
			return m.stop(steps-1, fmt.Sprintf("step limit %d reached", MaxSteps))
		}
		if m.pc < 0 || m.pc >= len(p.insns) {
			return ProgResult{Steps: steps - 1, Reason: "execution ran past the end of the program"}
		}
		res, why, done := m.step()
		switch {
		case why != "":
			return m.stop(steps, why)
		case done:
			res.Steps = steps
			return res
		}
	}
}

// machine is the state of one run: registers, stack and program counter.
type machine struct {
	p   *DeviceProgram
	ctx *[DevCtxSize]byte
	r   [11]reg
	st  stack
	pc  int
}

// stop is an undecided result naming the instruction it stopped at.
func (m *machine) stop(steps int, why string) ProgResult {
	res := ProgResult{Steps: steps, Reason: why}
	if m.pc >= 0 && m.pc < len(m.p.raw) {
		res.Reason = fmt.Sprintf("insn %d: %s", m.p.raw[m.pc], why)
	}
	return res
}

// step runs the instruction at pc: done with the program's verdict at
// exit, or why it cannot go on.
func (m *machine) step() (res ProgResult, why string, done bool) {
	ins := &m.p.insns[m.pc]
	if ins.Dst > asm.R10 || ins.Src > asm.R10 {
		return res, fmt.Sprintf("register out of range (dst r%d, src r%d)", ins.Dst, ins.Src), false
	}
	cls := ins.OpCode.Class()
	writes := cls == asm.ALUClass || cls == asm.ALU64Class || cls == asm.LdXClass || cls == asm.LdClass
	if writes && ins.Dst == asm.R10 {
		return res, "write to the read-only frame pointer r10", false
	}
	switch cls {
	case asm.ALUClass, asm.ALU64Class:
		why = alu(ins, cls == asm.ALU64Class, &m.r)
	case asm.JumpClass, asm.Jump32Class:
		return m.jump(ins, cls == asm.Jump32Class)
	case asm.LdXClass:
		why = m.loadX(ins)
	case asm.StClass, asm.StXClass:
		why = m.storeX(ins, cls == asm.StXClass)
	case asm.LdClass:
		why = m.loadImm64(ins)
	default:
		why = fmt.Sprintf("instruction class %#x is not modelled", uint8(cls))
	}
	if why == "" {
		m.pc++ // (on a stop, pc stays on the instruction that stopped)
	}
	return res, why, false
}

// jump runs exit, call and the jumps, moving pc itself.
func (m *machine) jump(ins *asm.Instruction, is32 bool) (res ProgResult, why string, done bool) {
	op := ins.OpCode
	jop := op.JumpOp()
	switch jop {
	case asm.Exit:
		if m.r[asm.R0].k != kScalar {
			return res, "exit with r0 not a known number", false
		}
		return ProgResult{Known: true, Allowed: uint32(m.r[asm.R0].v) != 0, ExitInsn: m.p.raw[m.pc]}, "", true
	case asm.Call:
		return res, fmt.Sprintf("call (helper, kfunc or bpf-to-bpf, imm %d) is not modelled", ins.Constant), false
	case asm.Ja:
		return res, m.goTo(), false
	case asm.InvalidJumpOp, asm.JCOND:
		return res, fmt.Sprintf("jump opcode %#x is not modelled", uint32(op)), false
	}
	dst := m.r[ins.Dst]
	src := reg{k: kScalar, v: uint64(ins.Constant)}
	switch op.Source() {
	case asm.RegSource:
		src = m.r[ins.Src]
	case asm.ImmSource:
	default:
		return res, fmt.Sprintf("jump source of opcode %#x is not modelled", uint32(op)), false
	}
	if dst.k != kScalar || src.k != kScalar {
		return res, "comparison of a pointer or of a value the interpreter does not know", false
	}
	taken, ok := compare(jop, dst.v, src.v, is32)
	switch {
	case !ok:
		return res, fmt.Sprintf("jump opcode %#x is not modelled", uint32(op)), false
	case !taken:
		m.pc++
		return res, "", false
	}
	return res, m.goTo(), false
}

// goTo moves pc to the current jump's target.
func (m *machine) goTo() string {
	if m.p.target[m.pc] < 0 {
		return "jump to a place that is not an instruction start"
	}
	m.pc = m.p.target[m.pc]
	return ""
}

// loadX is a load from memory (the context or the stack) into a register.
func (m *machine) loadX(ins *asm.Instruction) string {
	op := ins.OpCode
	mode := op.Mode()
	if mode != asm.MemMode && mode != asm.MemSXMode {
		return fmt.Sprintf("load mode %#x is not modelled", uint8(mode))
	}
	n := sizeBytes(op.Size())
	v, why := load(m.r[ins.Src], int64(ins.Offset), n, m.ctx, &m.st)
	if why != "" {
		return why
	}
	if mode == asm.MemSXMode {
		if v.k != kScalar || n == 8 {
			return fmt.Sprintf("sign-extending load of %d bytes is not modelled", n)
		}
		shift := uint(64 - 8*n)
		v.v = uint64(int64(v.v<<shift) >> shift)
	}
	m.r[ins.Dst] = v
	return ""
}

// storeX is a store of an immediate (st) or a register (stx) to the stack.
func (m *machine) storeX(ins *asm.Instruction, fromReg bool) string {
	op := ins.OpCode
	if op.Mode() != asm.MemMode {
		return fmt.Sprintf("store mode %#x (atomic or other) is not modelled", uint8(op.Mode()))
	}
	val := reg{k: kScalar, v: uint64(ins.Constant)}
	if fromReg {
		val = m.r[ins.Src]
	}
	return store(m.r[ins.Dst], int64(ins.Offset), sizeBytes(op.Size()), val, &m.st)
}

// loadImm64 is the two-slot immediate load (lddw).
func (m *machine) loadImm64(ins *asm.Instruction) string {
	if !ins.OpCode.IsDWordLoad() {
		return "legacy packet load is not modelled"
	}
	if ins.Src == asm.R0 {
		m.r[ins.Dst] = reg{k: kScalar, v: uint64(ins.Constant)}
	} else {
		// A map, BTF or function reference: not a number we know.
		m.r[ins.Dst] = reg{}
	}
	return ""
}

// load reads n bytes at base+off. Only the context and the stack are
// readable. Context reads follow cgroup_dev_is_valid_access
// (kernel/bpf/cgroup.c): whole aligned u32 fields, and narrow aligned reads
// inside access_type.
func load(base reg, off int64, n int, ctx *[DevCtxSize]byte, st *stack) (reg, string) {
	if n == 0 {
		return reg{}, "load size is not modelled"
	}
	addr := int64(base.v) + off
	switch base.k {
	case kCtx:
		ok := addr >= 0 && addr+int64(n) <= DevCtxSize && addr%int64(n) == 0 &&
			(n == 4 || (n < 4 && addr+int64(n) <= DevCtxAccessType+4))
		if !ok {
			return reg{}, fmt.Sprintf("load of %d bytes at context offset %d is outside bpf_cgroup_dev_ctx's fields", n, addr)
		}
		return reg{k: kScalar, v: readN(ctx[addr : addr+int64(n)])}, ""
	case kStack:
		if addr < -stackSize || addr+int64(n) > 0 {
			return reg{}, fmt.Sprintf("load of %d bytes at stack offset %d is outside the frame", n, addr)
		}
		i := int(addr + stackSize)
		if n == 8 && i%8 == 0 && st.ptr[i/8].k != kUnknown {
			return st.ptr[i/8], ""
		}
		for j := i; j < i+n; j++ {
			if !st.known[j] {
				// Reading what was never written as a number.
				return reg{}, ""
			}
		}
		return reg{k: kScalar, v: readN(st.b[i : i+n])}, ""
	}
	return reg{}, "load through a register that is not the context or stack pointer"
}

func readN(b []byte) uint64 {
	var buf [8]byte
	if hostLittleEndian {
		copy(buf[:], b)
		return binary.LittleEndian.Uint64(buf[:])
	}
	copy(buf[8-len(b):], b)
	return binary.BigEndian.Uint64(buf[:])
}

func store(base reg, off int64, n int, val reg, st *stack) string {
	if n == 0 {
		return "store size is not modelled"
	}
	if base.k != kStack {
		return "store through a register that is not the stack pointer"
	}
	addr := int64(base.v) + off
	if addr < -stackSize || addr+int64(n) > 0 {
		return fmt.Sprintf("store of %d bytes at stack offset %d is outside the frame", n, addr)
	}
	i := int(addr + stackSize)
	for j := i / 8; j <= (i+n-1)/8; j++ {
		st.ptr[j] = reg{}
	}
	switch {
	case val.k == kScalar:
		var buf [8]byte
		if hostLittleEndian {
			binary.LittleEndian.PutUint64(buf[:], val.v)
			copy(st.b[i:i+n], buf[:n])
		} else {
			binary.BigEndian.PutUint64(buf[:], val.v)
			copy(st.b[i:i+n], buf[8-n:])
		}
		for j := i; j < i+n; j++ {
			st.known[j] = true
		}
	case (val.k == kCtx || val.k == kStack) && n == 8 && i%8 == 0:
		st.ptr[i/8] = val
		for j := i; j < i+n; j++ {
			st.known[j] = false
		}
	default:
		for j := i; j < i+n; j++ {
			st.known[j] = false
		}
	}
	return ""
}

// alu executes one ALU or ALU64 instruction. It returns a reason when the
// instruction is not one the interpreter models; an operand it does not
// know makes the result unknown rather than stopping, since an unknown
// value only matters when a jump or the exit reads it.
func alu(ins *asm.Instruction, is64 bool, r *[11]reg) string {
	op := ins.OpCode
	aop := op.ALUOp()
	dst := &r[ins.Dst]
	if aop == asm.Swap {
		if dst.k != kScalar {
			*dst = reg{}
			return ""
		}
		v, ok := swap(dst.v, ins.Constant, is64, op.Endianness())
		if !ok {
			return fmt.Sprintf("byte swap of width %d is not modelled", ins.Constant)
		}
		dst.v = v
		return ""
	}
	var src reg
	switch op.Source() {
	case asm.ImmSource:
		// imm is sign-extended to 64 bits; ALU32 uses its low 32 bits.
		src = reg{k: kScalar, v: uint64(ins.Constant)}
	case asm.RegSource:
		src = r[ins.Src]
	default:
		return fmt.Sprintf("ALU opcode %#x is not modelled", uint32(op))
	}
	if aop == asm.Mov && is64 {
		*dst = src // a 64-bit move keeps what the value is, pointer or not
		return ""
	}
	if aop == asm.Neg {
		src = reg{k: kScalar}
	}
	// Pointer arithmetic with a known number moves the pointer.
	if is64 && (dst.k == kCtx || dst.k == kStack) && src.k == kScalar && (aop == asm.Add || aop == asm.Sub) {
		if aop == asm.Add {
			dst.v += src.v
		} else {
			dst.v -= src.v
		}
		return ""
	}
	if src.k != kScalar || (dst.k != kScalar && aop != asm.Mov && aop != asm.MovSX8 && aop != asm.MovSX16 && aop != asm.MovSX32) {
		*dst = reg{}
		return ""
	}
	a, b := dst.v, src.v
	if !is64 {
		a, b = uint64(uint32(a)), uint64(uint32(b))
	}
	res, why := arith(aop, a, b, is64)
	if why != "" {
		if why == errUnmodelled {
			why = fmt.Sprintf("ALU opcode %#x is not modelled", uint32(op))
		}
		return why
	}
	if !is64 {
		// ALU32 results are zero-extended to 64 bits.
		res = uint64(uint32(res))
	}
	*dst = reg{k: kScalar, v: res}
	return ""
}

const errUnmodelled = "unmodelled"

// arith is an ALU operation on two known numbers (operands of ALU32
// already cut to 32 bits).
func arith(aop asm.ALUOp, a, b uint64, is64 bool) (uint64, string) {
	switch aop {
	case asm.Add:
		return a + b, ""
	case asm.Sub:
		return a - b, ""
	case asm.Mul:
		return a * b, ""
	case asm.Div, asm.SDiv, asm.Mod, asm.SMod:
		return divMod(aop, a, b, is64), ""
	case asm.Or:
		return a | b, ""
	case asm.And:
		return a & b, ""
	case asm.Xor:
		return a ^ b, ""
	case asm.LSh, asm.RSh, asm.ArSh:
		return shift(aop, a, b, is64), ""
	case asm.Neg:
		return -a, ""
	case asm.Mov:
		return b, ""
	case asm.MovSX8:
		return uint64(int64(int8(b))), ""
	case asm.MovSX16:
		return uint64(int64(int16(b))), ""
	case asm.MovSX32:
		if !is64 {
			return 0, "32-bit movsx of 32 bits is not an instruction"
		}
		return uint64(int64(int32(b))), ""
	}
	return 0, errUnmodelled
}

// divMod: division by zero sets dst to zero; modulo by zero leaves dst
// (ALU32: its low 32 bits) unchanged (Documentation/bpf/standardization/
// instruction-set.rst).
func divMod(aop asm.ALUOp, a, b uint64, is64 bool) uint64 {
	switch {
	case b == 0 && (aop == asm.Div || aop == asm.SDiv):
		return 0
	case b == 0:
		return a
	case aop == asm.Div:
		return a / b
	case aop == asm.Mod:
		return a % b
	case aop == asm.SDiv && is64:
		return uint64(int64(a) / int64(b)) // Go defines MinInt64 / -1 as MinInt64, as BPF does
	case aop == asm.SDiv:
		return uint64(uint32(int32(a) / int32(b)))
	case is64:
		return uint64(int64(a) % int64(b))
	}
	return uint64(uint32(int32(a) % int32(b)))
}

// shift: amounts are masked to the operand width.
func shift(aop asm.ALUOp, a, b uint64, is64 bool) uint64 {
	mask := uint64(31)
	if is64 {
		mask = 63
	}
	s := b & mask
	switch {
	case aop == asm.LSh:
		return a << s
	case aop == asm.RSh:
		return a >> s
	case is64:
		return uint64(int64(a) >> s)
	}
	return uint64(uint32(int32(uint32(a)) >> s))
}

// swap is BPF_END: ALU to_le/to_be convert between host order and the
// named order at width 16, 32 or 64 (zero-extending); ALU64 is an
// unconditional byte swap.
func swap(v uint64, width int64, is64 bool, e asm.Endianness) (uint64, bool) {
	doSwap := is64 || (e == asm.BE) == hostLittleEndian
	switch width {
	case 16:
		x := uint16(v)
		if doSwap {
			x = bits.ReverseBytes16(x)
		}
		return uint64(x), true
	case 32:
		x := uint32(v)
		if doSwap {
			x = bits.ReverseBytes32(x)
		}
		return uint64(x), true
	case 64:
		if doSwap {
			v = bits.ReverseBytes64(v)
		}
		return v, true
	}
	return 0, false
}

func compare(op asm.JumpOp, a, b uint64, is32 bool) (taken, ok bool) {
	if is32 {
		a, b = uint64(uint32(a)), uint64(uint32(b))
	}
	sa, sb := int64(a), int64(b)
	if is32 {
		sa, sb = int64(int32(uint32(a))), int64(int32(uint32(b)))
	}
	switch op {
	case asm.JEq:
		return a == b, true
	case asm.JNE:
		return a != b, true
	case asm.JGT:
		return a > b, true
	case asm.JGE:
		return a >= b, true
	case asm.JLT:
		return a < b, true
	case asm.JLE:
		return a <= b, true
	case asm.JSet:
		return a&b != 0, true
	case asm.JSGT:
		return sa > sb, true
	case asm.JSGE:
		return sa >= sb, true
	case asm.JSLT:
		return sa < sb, true
	case asm.JSLE:
		return sa <= sb, true
	}
	return false, false
}
