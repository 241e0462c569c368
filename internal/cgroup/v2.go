package cgroup

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// ErrCapturedHost is returned when v2 programs are asked of a root that is
// not the running host: BPF programs live in the kernel, not in files, so
// a snapshot or fixture tree cannot hold them.
var ErrCapturedHost = errors.New("cannot read BPF programs of a captured host: they live only in the running kernel")

// V2Program is one BPF_CGROUP_DEVICE program in effect for a cgroup.
type V2Program struct {
	ID    uint32
	Name  string
	Tag   string
	Insns asm.Instructions // xlated (as the verifier left them)
	Err   error            // reading this program failed

	once sync.Once
	prog *DeviceProgram
}

// NewV2Program wraps instructions that did not come from the kernel
// (tests, a generated program before it is loaded).
func NewV2Program(id uint32, name string, insns asm.Instructions) *V2Program {
	return &V2Program{ID: id, Name: name, Insns: insns}
}

func (p *V2Program) program() *DeviceProgram {
	p.once.Do(func() { p.prog = NewDeviceProgram(p.Insns) })
	return p.prog
}

func (p *V2Program) label() string {
	if p.Name == "" {
		return fmt.Sprintf("prog id %d", p.ID)
	}
	return fmt.Sprintf("prog id %d (%s)", p.ID, p.Name)
}

// V2Policy is the set of device programs in effect for a cgroup2
// directory: those attached to it and, with BPF_F_ALLOW_MULTI, to its
// ancestors (the kernel's effective array, kernel/bpf/cgroup.c
// compute_effective_progs).
type V2Policy struct {
	Dir      string // host path of the cgroup directory
	Programs []*V2Program
}

// ReadV2 queries the kernel for the effective BPF_CGROUP_DEVICE programs
// of dir and reads each one's name, tag and xlated instructions. It needs
// the live root (else ErrCapturedHost) and CAP_SYS_ADMIN (else
// an error that wraps unix.EPERM). A program that cannot be read is kept
// with its Err.
//
// "Live" is decided by the directory itself, not by the root being "/": a
// host mounted at /host in a pod has its real cgroup2 under
// /host/sys/fs/cgroup, and the kernel answers for it; a directory that is
// not on a cgroup2 filesystem (a snapshot, a fixture) cannot answer.
//
// A snapshot taken by `accel-doctor snapshot` holds the programs it read
// (hostfs Capture); a replay evaluates those, labelled as captured.
func ReadV2(root *hostfs.Root, dir string) (*V2Policy, error) {
	fd, err := root.OpenDirFD(dir)
	if err != nil {
		if !root.IsLive() {
			return readCapturedV2(root, dir)
		}
		return nil, err
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil || sfs.Type != unix.CGROUP2_SUPER_MAGIC {
		return readCapturedV2(root, dir)
	}
	p, err := readV2Live(fd, dir)
	if err == nil && root.Recording() { // encoded only for a snapshot
		if b, merr := marshalV2(p); merr == nil {
			root.Capture(capturedV2Name(dir), b)
		}
	}
	return p, err
}

func readV2Live(fd int, dir string) (*V2Policy, error) {
	ids, err := queryDevicePrograms(fd)
	if err != nil {
		return nil, fmt.Errorf("query device programs of %s: %w", dir, err)
	}
	p := &V2Policy{Dir: dir}
	for _, id := range ids {
		p.Programs = append(p.Programs, readProgram(id))
	}
	return p, nil
}

// bpfQueryAttr is the BPF_PROG_QUERY part of union bpf_attr
// (include/uapi/linux/bpf.h) up to prog_cnt; the kernel accepts a shorter
// attr and treats the rest as zero.
type bpfQueryAttr struct {
	targetFD    uint32
	attachType  uint32
	queryFlags  uint32
	attachFlags uint32
	progIDs     uint64
	progCnt     uint32
	_           uint32
}

// queryDevicePrograms issues BPF_PROG_QUERY itself rather than through
// cilium/ebpf's link.QueryPrograms: on EPERM that function runs a feature
// probe that also fails for lack of privilege and reports "not supported",
// which would hide the real cause.
func queryDevicePrograms(fd int) ([]uint32, error) {
	for try := 0; try < 4; try++ {
		attr := bpfQueryAttr{targetFD: uint32(fd), attachType: unix.BPF_CGROUP_DEVICE, queryFlags: unix.BPF_F_QUERY_EFFECTIVE}
		if err := bpfQuery(&attr); err != nil {
			return nil, err
		}
		if attr.progCnt == 0 {
			return nil, nil
		}
		ids := make([]uint32, attr.progCnt)
		want := attr.progCnt
		attr.progIDs = uint64(uintptr(unsafe.Pointer(&ids[0])))
		err := bpfQuery(&attr)
		runtime.KeepAlive(ids)
		if errors.Is(err, unix.ENOSPC) {
			continue // programs were attached between the two calls
		}
		if err != nil {
			return nil, err
		}
		if attr.progCnt > want {
			continue
		}
		return ids[:attr.progCnt], nil
	}
	return nil, errors.New("the set of programs kept changing")
}

func bpfQuery(attr *bpfQueryAttr) error {
	_, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_QUERY, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
	if e != 0 {
		return permHint(e)
	}
	return nil
}

// permHint adds what EPERM means here to an error that wraps it.
func permHint(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w (reading a cgroup's BPF programs needs CAP_SYS_ADMIN: listing them needs CAP_NET_ADMIN or CAP_SYS_ADMIN, opening one by ID CAP_SYS_ADMIN, CAP_BPF is not enough; running as uid %d)", err, os.Geteuid())
	}
	return err
}

func readProgram(id uint32) *V2Program {
	vp := &V2Program{ID: id}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		vp.Err = fmt.Errorf("prog id %d: %w", id, permHint(err))
		return vp
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		vp.Err = fmt.Errorf("prog id %d: info: %w", id, permHint(err))
		return vp
	}
	vp.Name, vp.Tag = info.Name, info.Tag
	insns, err := info.Instructions()
	if err != nil {
		// cilium/ebpf says "not supported" when the kernel returned no
		// instructions, which it does to a caller without CAP_BPF
		// (bpf_prog_get_info_by_fd, kernel/bpf/syscall.c).
		if errors.Is(err, ebpf.ErrNotSupported) && os.Geteuid() != 0 {
			err = fmt.Errorf("%w: %w (no xlated instructions are given to a caller without CAP_BPF)", unix.EPERM, err)
		}
		vp.Err = fmt.Errorf("prog id %d (%s): instructions: %w", id, vp.Name, err)
		return vp
	}
	vp.Insns = insns
	return vp
}

// Evaluate decides acc on dev. The access is allowed only if every
// effective program allows it (bpf_prog_run_array_cg runs them all and
// any zero gives -EPERM, kernel/bpf/cgroup.c). A definite denial by one
// program decides even when another could not be evaluated.
func (p *V2Policy) Evaluate(dev DeviceRef, acc Access) Decision {
	if acc == 0 || acc&^AccessAll != 0 {
		return undecided(fmt.Sprintf("access %#x is not a set of r, w, m", uint8(acc)))
	}
	if len(p.Programs) == 0 {
		return Decision{Allowed: true, Known: true, DecidedBy: "no BPF_CGROUP_DEVICE program in effect for " + p.Dir}
	}
	var allowedBy, unknown []string
	var firstErr error
	for _, vp := range p.Programs {
		if vp.Err != nil {
			unknown = append(unknown, vp.Err.Error())
			if firstErr == nil {
				firstErr = vp.Err
			}
			continue
		}
		res := vp.program().Eval(dev, acc)
		switch {
		case !res.Known:
			unknown = append(unknown, fmt.Sprintf("%s: %s", vp.label(), res.Reason))
		case !res.Allowed:
			return Decision{Known: true, DecidedBy: fmt.Sprintf("%s insn %d", vp.label(), res.ExitInsn)}
		default:
			allowedBy = append(allowedBy, fmt.Sprintf("%s insn %d", vp.label(), res.ExitInsn))
		}
	}
	if len(unknown) > 0 {
		return Decision{Reason: strings.Join(unknown, "; "), DecidedBy: strings.Join(allowedBy, "; "), Err: firstErr}
	}
	return Decision{Allowed: true, Known: true, DecidedBy: strings.Join(allowedBy, "; ")}
}
