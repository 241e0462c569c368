package cgroup

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/cilium/ebpf/asm"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// capturedV2Format is the version of the capture below.
const capturedV2Format = 1

// capturedV2 is how a snapshot keeps the device programs of one cgroup2
// directory: what BPF_PROG_QUERY and the xlated instructions gave, in the
// kernel's own instruction encoding (little-endian, struct bpf_insn).
type capturedV2 struct {
	Format   int               `json:"format"`
	Dir      string            `json:"dir"`
	Programs []capturedProgram `json:"programs"`
}

type capturedProgram struct {
	ID    uint32 `json:"id"`
	Name  string `json:"name,omitempty"`
	Tag   string `json:"tag,omitempty"`
	Insns []byte `json:"insns,omitempty"` // encoding/json writes base64
	Err   string `json:"error,omitempty"`
}

func capturedV2Name(dir string) string { return path.Join("cgroup2", dir, "device-programs.json") }

func marshalV2(p *V2Policy) ([]byte, error) {
	c := capturedV2{Format: capturedV2Format, Dir: p.Dir}
	for _, vp := range p.Programs {
		cp := capturedProgram{ID: vp.ID, Name: vp.Name, Tag: vp.Tag}
		if vp.Err != nil {
			cp.Err = vp.Err.Error()
		} else {
			var b bytes.Buffer
			if err := vp.Insns.Marshal(&b, binary.LittleEndian); err != nil {
				cp.Err = "instructions could not be encoded: " + err.Error()
			} else {
				cp.Insns = b.Bytes()
			}
		}
		c.Programs = append(c.Programs, cp)
	}
	return json.Marshal(c)
}

// unmarshalV2 decodes a capture. It is a parser of untrusted bytes (a
// snapshot from someone else's machine): bad input is an error.
func unmarshalV2(b []byte) (*V2Policy, error) {
	var c capturedV2
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if c.Format != capturedV2Format {
		return nil, fmt.Errorf("capture format %d, want %d", c.Format, capturedV2Format)
	}
	if len(c.Programs) > 64 { // the kernel's BPF_CGROUP_MAX_PROGS
		return nil, fmt.Errorf("%d programs: more than a cgroup can hold", len(c.Programs))
	}
	p := &V2Policy{Dir: c.Dir}
	for _, cp := range c.Programs {
		vp := &V2Program{ID: cp.ID, Name: cp.Name + " (captured)", Tag: cp.Tag}
		if cp.Err != "" {
			vp.Err = errors.New(cp.Err)
		} else if len(cp.Insns) > 1<<20 {
			vp.Err = fmt.Errorf("prog id %d: %d bytes of instructions: too many", cp.ID, len(cp.Insns))
		} else if insns, err := decodeInsns(cp.Insns); err != nil {
			vp.Err = fmt.Errorf("prog id %d: captured instructions: %w", cp.ID, err)
		} else {
			vp.Insns = insns
		}
		p.Programs = append(p.Programs, vp)
	}
	return p, nil
}

// decodeInsns reads struct bpf_insn records (8 bytes; 16 for a 64-bit
// immediate load) until the end.
func decodeInsns(b []byte) (asm.Instructions, error) {
	if len(b)%asm.InstructionSize != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of instructions", len(b))
	}
	r := bytes.NewReader(b)
	var out asm.Instructions
	for r.Len() > 0 {
		var ins asm.Instruction
		if err := ins.Unmarshal(r, binary.LittleEndian, "linux"); err != nil {
			return nil, fmt.Errorf("instruction %d: %w", len(out), err)
		}
		out = append(out, ins)
	}
	return out, nil
}

// readCapturedV2 answers for a root that is not the running kernel: the
// programs a snapshot captured for dir, or ErrCapturedHost.
func readCapturedV2(root *hostfs.Root, dir string) (*V2Policy, error) {
	b, ok := root.Captured(capturedV2Name(dir))
	if !ok {
		return nil, fmt.Errorf("%s: %w", dir, ErrCapturedHost)
	}
	p, err := unmarshalV2(b)
	if err != nil {
		return nil, fmt.Errorf("%s: captured device programs: %w", dir, err)
	}
	return p, nil
}
