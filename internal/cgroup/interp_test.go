package cgroup

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
)

func TestALUSemantics(t *testing.T) {
	const (
		R1 = asm.R1
		R2 = asm.R2
	)
	neg1 := uint64(math.MaxUint64)
	for _, tt := range []struct {
		ins    asm.Instruction
		r1, r2 uint64
		want   uint64
	}{
		{asm.Add.Imm(R1, -1), 0, 0, neg1},
		{asm.Add.Imm32(R1, -1), 0, 0, 0xffffffff}, // ALU32 zero-extends
		{asm.Sub.Reg32(R1, R2), 1 << 32, 1, 0xffffffff},
		{asm.Mul.Imm(R1, 3), 5, 0, 15},
		{asm.Div.Reg(R1, R2), 7, 0, 0},           // div by zero -> 0
		{asm.Mod.Reg(R1, R2), 7, 0, 7},           // mod by zero -> unchanged
		{asm.Mod.Reg32(R1, R2), 1<<32 | 7, 0, 7}, // ALU32: upper half zeroed
		{asm.Div.Reg32(R1, R2), 1<<32 | 8, 2, 4}, // operands are 32-bit
		{asm.SDiv.Imm(R1, -2), uint64(1<<64 - 8), 0, 4},
		{asm.SDiv.Reg(R1, R2), 1 << 63, neg1, 1 << 63}, // INT64_MIN / -1
		{asm.SMod.Imm(R1, -3), uint64(1<<64 - 7), 0, uint64(1<<64 - 1)},
		{asm.SMod.Reg(R1, R2), 1 << 63, neg1, 0},
		{asm.LSh.Reg(R1, R2), 1, 65, 2},   // shift masked to 63
		{asm.LSh.Reg32(R1, R2), 1, 33, 2}, // and to 31
		{asm.RSh.Imm(R1, 4), 0xff, 0, 0xf},
		{asm.ArSh.Imm(R1, 4), 1 << 63, 0, 0xf8 << 56},
		{asm.ArSh.Imm32(R1, 4), 0x80000000, 0, 0xf8000000},
		{asm.Neg.Imm(R1, 0), 1, 0, neg1},
		{asm.Neg.Imm32(R1, 0), 1, 0, 0xffffffff},
		{asm.Xor.Reg(R1, R2), 0b1100, 0b1010, 0b0110},
		{asm.Or.Imm(R1, 1), 2, 0, 3},
		{asm.And.Imm32(R1, 0xffff), 1<<40 | 0x12345, 0, 0x2345},
		{asm.Mov.Imm32(R1, -1), 5, 0, 0xffffffff},
		{asm.Mov.Imm(R1, -1), 5, 0, neg1},
		{asm.Instruction{OpCode: asm.MovSX8.Op(asm.RegSource), Dst: R1, Src: R2}, 0, 0x80, uint64(1<<64 - 128)},
		{asm.Instruction{OpCode: asm.MovSX16.Op32(asm.RegSource), Dst: R1, Src: R2}, 0, 0x8000, 0xffff8000},
		{asm.HostTo(asm.BE, R1, asm.Half), 0x1234, 0, 0x3412},
		{asm.HostTo(asm.LE, R1, asm.Word), 1<<40 | 0x12345678, 0, 0x12345678},
	} {
		t.Run(fmt.Sprint(tt.ins), func(t *testing.T) {
			var r [11]reg
			r[1], r[2] = reg{kScalar, tt.r1}, reg{kScalar, tt.r2}
			if why := alu(&tt.ins, tt.ins.OpCode.Class() == asm.ALU64Class, &r); why != "" {
				t.Fatal(why)
			}
			if r[1].k != kScalar || r[1].v != tt.want {
				t.Errorf("r1 = %#x (kind %d), want %#x", r[1].v, r[1].k, tt.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	for _, tt := range []struct {
		op   asm.JumpOp
		a, b uint64
		is32 bool
		want bool
	}{
		{asm.JGT, math.MaxUint64, 1, false, true},
		{asm.JSGT, math.MaxUint64, 1, false, false},
		{asm.JSLT, 0xffffffff, 0, true, true},
		{asm.JSLT, 0xffffffff, 0, false, false},
		{asm.JEq, 1<<32 | 5, 5, true, true},
		{asm.JEq, 1<<32 | 5, 5, false, false},
		{asm.JSet, 6, 4, false, true},
		{asm.JLE, 3, 3, false, true},
		{asm.JSGE, 1 << 63, 0, false, false},
	} {
		got, ok := compare(tt.op, tt.a, tt.b, tt.is32)
		if !ok || got != tt.want {
			t.Errorf("%v(%#x, %#x, 32=%v) = %v, %v; want %v", tt.op, tt.a, tt.b, tt.is32, got, ok, tt.want)
		}
	}
}

var (
	c1_3   = DeviceRef{'c', 1, 3}
	allowP = asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}
)

func TestInterpreterUndecided(t *testing.T) {
	for _, tt := range []struct {
		name  string
		insns asm.Instructions
		why   string
	}{
		{"helper call", asm.Instructions{asm.FnGetPrandomU32.Call(), asm.Return()}, "call"},
		{"context load past the struct", asm.Instructions{asm.LoadMem(asm.R0, asm.R1, 12, asm.Word), asm.Return()}, "outside bpf_cgroup_dev_ctx"},
		{"misaligned context load", asm.Instructions{asm.LoadMem(asm.R0, asm.R1, 2, asm.Word), asm.Return()}, "outside bpf_cgroup_dev_ctx"},
		{"narrow load of major", asm.Instructions{asm.LoadMem(asm.R0, asm.R1, 4, asm.Byte), asm.Return()}, "outside bpf_cgroup_dev_ctx"},
		{"store to context", asm.Instructions{asm.StoreImm(asm.R1, 0, 1, asm.Word), asm.Mov.Imm(asm.R0, 1), asm.Return()}, "not the stack pointer"},
		{"load through a scalar", asm.Instructions{asm.Mov.Imm(asm.R2, 64), asm.LoadMem(asm.R0, asm.R2, 0, asm.Word), asm.Return()}, "not the context"},
		{"uninitialised r0", asm.Instructions{asm.Return()}, "exit with r0"},
		{"uninitialised compare", asm.Instructions{asm.JEq.Imm(asm.R3, 0, "x"), asm.Mov.Imm(asm.R0, 1).WithSymbol("x"), asm.Return()}, "comparison"},
		{"map value", asm.Instructions{asm.LoadMapPtr(asm.R2, 3), asm.JEq.Imm(asm.R2, 0, "x"), asm.Mov.Imm(asm.R0, 1).WithSymbol("x"), asm.Return()}, "comparison"},
		{"pointer compare", asm.Instructions{asm.JEq.Imm(asm.R1, 0, "x"), asm.Mov.Imm(asm.R0, 1).WithSymbol("x"), asm.Return()}, "comparison"},
		{"stack read never written", asm.Instructions{asm.LoadMem(asm.R0, asm.RFP, -8, asm.DWord), asm.Return()}, "exit with r0"},
		{"stack outside frame", asm.Instructions{asm.StoreImm(asm.RFP, 0, 1, asm.Word), asm.Return()}, "outside the frame"},
		{"infinite loop", asm.Instructions{asm.Ja.Label("l").WithSymbol("l")}, "step limit"},
		{"falls off the end", asm.Instructions{asm.Mov.Imm(asm.R0, 1)}, "past the end"},
		{"jump into ld_imm64", asm.Instructions{{OpCode: asm.Ja.Op(asm.ImmSource), Offset: 1}, asm.LoadImm(asm.R0, 1, asm.DWord), asm.Return()}, "not an instruction start"},
		{"atomic add", asm.Instructions{asm.StoreImm(asm.RFP, -8, 0, asm.DWord), asm.Mov.Imm(asm.R2, 1), asm.StoreXAdd(asm.RFP, asm.R2, asm.DWord), asm.Return()}, "atomic"},
		{"write r10", asm.Instructions{asm.Mov.Imm(asm.RFP, 0), asm.Return()}, "r10"},
		{"empty program", nil, "past the end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := EvalDeviceProgram(tt.insns, c1_3, AccessRead)
			if res.Known || !strings.Contains(res.Reason, tt.why) {
				t.Errorf("got %+v, want undecided with %q", res, tt.why)
			}
		})
	}
}

func TestInterpreterDecides(t *testing.T) {
	// Spilling and reloading the context pointer keeps it usable, and
	// pointer arithmetic moves it.
	spill := asm.Instructions{
		asm.StoreMem(asm.RFP, -16, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 0),
		asm.LoadMem(asm.R6, asm.RFP, -16, asm.DWord),
		asm.Add.Imm(asm.R6, 4),
		asm.LoadMem(asm.R0, asm.R6, 4, asm.Word), // minor
		asm.Sub.Imm(asm.R0, 3),
		asm.JEq.Imm(asm.R0, 0, "yes"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("yes"),
		asm.Return(),
	}
	if res := EvalDeviceProgram(spill, c1_3, AccessRead); !res.Known || !res.Allowed || res.ExitInsn != 10 {
		t.Errorf("c 1:3: %+v, want allowed at insn 10", res)
	}
	if res := EvalDeviceProgram(spill, DeviceRef{'c', 1, 4}, AccessRead); !res.Known || res.Allowed || res.ExitInsn != 8 {
		t.Errorf("c 1:4: %+v, want denied at insn 8", res)
	}
	// Only the low 32 bits of r0 are the verdict.
	hi := asm.Instructions{asm.LoadImm(asm.R0, 1<<32, asm.DWord), asm.Return()}
	if res := EvalDeviceProgram(hi, c1_3, AccessRead); !res.Known || res.Allowed || res.ExitInsn != 2 {
		t.Errorf("r0 = 1<<32: %+v, want denied at raw insn 2 (after the two-slot ld_imm64)", res)
	}
	// The context: access << 16 | type, major, minor.
	ctx, _ := DevCtx(DeviceRef{'b', 8, 2}, AccessRead|AccessMknod)
	if got := binary.NativeEndian.Uint32(ctx[:]); got != (2|1)<<16|1 {
		t.Errorf("access_type = %#x", got)
	}
	if _, err := DevCtx(DeviceRef{'p', 1, 1}, AccessRead); err == nil {
		t.Error("fifo device: no error")
	}
}

// parseListing turns a cilium/ebpf instruction listing (the format of
// runc's devicefilter golden tests) into instructions, for the subset of
// mnemonics those listings use. Jumps keep their labels (offset -1), as
// runc's generator leaves them before loading.
func parseListing(t *testing.T, text string) asm.Instructions {
	t.Helper()
	insRE := regexp.MustCompile(`^\s*\d+: (\w+)((?: (?:dst|src|off|imm): r?-?\d+)*)(?: <([\w-]+)>)?\s*$`)
	fieldRE := regexp.MustCompile(`(dst|src|off|imm): r?(-?\d+)`)
	var out asm.Instructions
	sym := ""
	for _, line := range strings.Split(text, "\n") {
		trim := strings.TrimSpace(line)
		if trim == "" || strings.HasPrefix(trim, "//") {
			continue
		}
		if strings.HasSuffix(trim, ":") && !strings.Contains(trim, " ") {
			sym = strings.TrimSuffix(trim, ":")
			continue
		}
		m := insRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("listing line %q: not understood", line)
		}
		f := map[string]int64{}
		for _, kv := range fieldRE.FindAllStringSubmatch(m[2], -1) {
			v, err := strconv.ParseInt(kv[2], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			f[kv[1]] = v
		}
		label := m[3]
		dst, src := asm.Register(f["dst"]), asm.Register(f["src"])
		imm := int32(f["imm"])
		var ins asm.Instruction
		switch m[1] {
		case "LdXMemW":
			ins = asm.LoadMem(dst, src, int16(f["off"]), asm.Word)
		case "AndImm32":
			ins = asm.And.Imm32(dst, imm)
		case "RShImm32":
			ins = asm.RSh.Imm32(dst, imm)
		case "MovReg32":
			ins = asm.Mov.Reg32(dst, src)
		case "MovImm32":
			ins = asm.Mov.Imm32(dst, imm)
		case "JNEImm":
			ins = asm.JNE.Imm(dst, imm, label)
		case "JNEReg":
			ins = asm.JNE.Reg(dst, src, label)
		case "Exit":
			ins = asm.Return()
		default:
			t.Fatalf("listing mnemonic %s not handled", m[1])
		}
		if sym != "" {
			ins = ins.WithSymbol(sym)
			sym = ""
		}
		out = append(out, ins)
	}
	return out
}

// TestCorpusRuncListings interprets runc's golden device-filter listings
// (code we did not write) and checks the decisions their rules state.
func TestCorpusRuncListings(t *testing.T) {
	secs := readSections(t, filepath.Join(corpusDir(t, "cgroups-devicefilter"), "devicefilter-golden-listings.txt"))
	type check struct {
		dev     DeviceRef
		acc     Access
		allowed bool
	}
	want := map[string][]check{
		"TestDeviceFilter_Nil": {{c1_3, AccessRead, false}, {DeviceRef{'b', 8, 0}, AccessMknod, false}},
		"TestDeviceFilter_BuiltInAllowList": {
			{c1_3, AccessAll, true}, {DeviceRef{'c', 1, 4}, AccessRead, false}, {DeviceRef{'c', 1, 4}, AccessMknod, true},
			{DeviceRef{'c', 136, 7}, AccessRead | AccessWrite, true}, {DeviceRef{'c', 10, 200}, AccessWrite, true},
			{DeviceRef{'c', 10, 201}, AccessWrite, false}, {DeviceRef{'b', 8, 0}, AccessMknod, true},
			{DeviceRef{'b', 8, 0}, AccessRead, false}, {DeviceRef{'c', 5, 2}, AccessRead, true},
			{DeviceRef{'c', 195, 0}, AccessRead, false}, {DeviceRef{'c', 195, 0}, AccessRead | AccessMknod, false},
		},
		"TestDeviceFilter_Privileged": {{c1_3, AccessAll, true}, {DeviceRef{'b', 8, 0}, AccessWrite, true}},
		"TestDeviceFilter_PrivilegedExceptSingleDevice": {
			{DeviceRef{'b', 8, 0}, AccessRead, false}, {DeviceRef{'b', 8, 1}, AccessRead, true}, {DeviceRef{'c', 8, 0}, AccessRead, true},
		},
		"TestDeviceFilter_Weird": {{DeviceRef{'b', 8, 2}, AccessMknod, false}, {DeviceRef{'b', 8, 0}, AccessMknod, true}},
	}
	if len(secs) != len(want) {
		t.Errorf("corpus has %d listings, the test knows %d", len(secs), len(want))
	}
	for name, body := range secs {
		t.Run(name, func(t *testing.T) {
			checks, ok := want[name]
			if !ok {
				t.Skipf("no expectations for %s", name)
			}
			p := NewDeviceProgram(parseListing(t, body))
			for _, c := range checks {
				res := p.Eval(c.dev, c.acc)
				if !res.Known || res.Allowed != c.allowed {
					t.Errorf("%s %s: %+v, want allowed=%v", c.dev, c.acc, res, c.allowed)
				}
			}
		})
	}
}

// insnsFromBytes makes instructions from fuzz input, 8 bytes each, with
// any opcode (including invalid and extended ones) and any registers.
func insnsFromBytes(b []byte) asm.Instructions {
	var out asm.Instructions
	for len(b) >= 8 && len(out) < 256 {
		op := asm.OpCode(b[0]) | asm.OpCode(b[1]&0x3)<<8
		ins := asm.Instruction{
			OpCode:   op,
			Dst:      asm.Register(b[1] >> 4 % 12),
			Src:      asm.Register(b[2] % 12),
			Offset:   int16(int8(b[3])),
			Constant: int64(int32(binary.LittleEndian.Uint32(b[4:8]))),
		}
		if b[2]&0x80 != 0 {
			ins.Constant = int64(binary.LittleEndian.Uint32(b[4:8])) << 29
		}
		out = append(out, ins)
		b = b[8:]
	}
	return out
}

func FuzzInterpreter(f *testing.F) {
	f.Add([]byte{0xb7, 0, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0}, uint32(1), uint32(3), uint8(2))
	f.Add([]byte{0x61, 0x21, 0, 0, 0, 0, 0, 0, 0x05, 0, 0, 0xff, 0, 0, 0, 0}, uint32(1), uint32(3), uint8(2))
	f.Add([]byte{0x18, 0, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0}, uint32(195), uint32(0), uint8(6))
	f.Fuzz(func(t *testing.T, b []byte, major, minor uint32, acc uint8) {
		insns := insnsFromBytes(b)
		res := EvalDeviceProgram(insns, DeviceRef{'c', major, minor}, Access(acc%8))
		if res.Steps > MaxSteps {
			t.Fatalf("ran %d steps", res.Steps)
		}
		if res.Known == (res.Reason != "") {
			t.Fatalf("known=%v with reason %q", res.Known, res.Reason)
		}
	})
}
