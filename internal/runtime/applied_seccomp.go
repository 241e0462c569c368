package runtime

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// What the spec's seccomp profile does with the syscalls a device needs:
// open it (openat, and open where the architecture has it), drive it
// (ioctl) and map it (mmap). The profile is evaluated the way runc builds
// it with libseccomp, for an unconditional decision:
//
//   - runc resolves each rule's action with its errno (SCMP_ACT_ERRNO and
//     SCMP_ACT_TRACE default to EPERM, SCMP_ACT_KILL is KILL_THREAD) and
//     skips a rule whose resolved action is the default action's; it
//     ignores names libseccomp does not know (runc
//     libcontainer/seccomp/seccomp_linux.go getAction, matchCall);
//   - libseccomp keeps, for a syscall, the first rule without argument
//     conditions: a later one is dropped ("the existing filter is at least
//     as large"), and an unconditional rule after conditional ones
//     replaces their chains (libseccomp src/db.c db_rule_add);
//   - rules with conditions decide by the arguments: this says so and does
//     not guess.
//
// The spec is what the runtime was asked to apply; /proc/PID/status
// Seccomp and Seccomp_filters say whether a filter is attached at all (a
// filter inherited from the runtime's own process, or none where the spec
// has one, shows there).

// SyscallDecision is what a profile does with one syscall.
type SyscallDecision uint8

const (
	SyscallAllowed       SyscallDecision = iota // SCMP_ACT_ALLOW, SCMP_ACT_LOG, or no profile
	SyscallErrno                                // fails with Errno
	SyscallKilled                               // SCMP_ACT_KILL, _KILL_THREAD, _KILL_PROCESS
	SyscallTrapped                              // SCMP_ACT_TRAP: SIGSYS
	SyscallTraced                               // SCMP_ACT_TRACE: a ptracer decides; with none the call fails with ENOSYS (kernel/seccomp.c)
	SyscallNotified                             // SCMP_ACT_NOTIFY: the seccomp agent at listenerPath decides
	SyscallDependsOnArgs                        // a rule with argument conditions: decided per call
	SyscallNotOnArch                            // the architecture has no such syscall
	SyscallInvalid                              // an action runc refuses: it would not have started the container
)

func (d SyscallDecision) String() string {
	return [...]string{"allowed", "fails with errno", "kills the caller", "raises SIGSYS", "goes to a tracer",
		"goes to the seccomp agent", "depends on arguments", "not a syscall on this architecture", "invalid action"}[d]
}

// SyscallVerdict is the profile's decision for one syscall, with the rule
// that made it.
type SyscallVerdict struct {
	Syscall  string
	Decision SyscallDecision
	Action   specs.LinuxSeccompAction // the deciding action (a conditional rule's, for SyscallDependsOnArgs)
	Errno    uint                     // for SyscallErrno, and what SCMP_ACT_TRACE hands the tracer
	Rule     int                      // index in linux.seccomp.syscalls; -1 for the default action
	Evidence string
}

// SeccompEval is the spec's seccomp profile evaluated for some syscalls.
type SeccompEval struct {
	Profile       bool // the spec has linux.seccomp
	DefaultAction specs.LinuxSeccompAction
	DefaultErrno  uint   // for an ERRNO default
	Arch          string // the architecture evaluated for (NormalizeArch); "" unknown
	Verdicts      []SyscallVerdict
}

// Verdict returns the verdict for name.
func (e SeccompEval) Verdict(name string) (SyscallVerdict, bool) {
	for _, v := range e.Verdicts {
		if v.Syscall == name {
			return v, true
		}
	}
	return SyscallVerdict{}, false
}

// DeviceSyscalls are the syscalls a device user needs on arch: ioctl,
// openat, mmap, and open where the architecture has it (the asm-generic
// table of arm64, riscv64 and loongarch64 has no open:
// include/uapi/asm-generic/unistd.h), mmap2 on 32-bit x86 and ARM (EABI
// ARM has no old mmap: arch/arm/tools/syscall.tbl lists it oabi only).
func DeviceSyscalls(arch string) []string {
	out := []string{"ioctl", "open", "openat", "mmap", "mmap2"}
	return slices.DeleteFunc(out, func(s string) bool { return !SyscallOnArch(s, arch) })
}

// SyscallOnArch reports whether arch (NormalizeArch; "" when unknown, then
// every name counts) has the syscall, for the few names DeviceSyscalls
// uses; other names are taken to exist.
func SyscallOnArch(name, arch string) bool {
	if arch == "" {
		return name != "mmap2"
	}
	switch name {
	case "open":
		return arch != "arm64" && arch != "riscv64" && arch != "loong64"
	case "mmap2":
		return arch == "386" || arch == "arm" || arch == "mips" || arch == "mipsle"
	case "mmap":
		return arch != "arm"
	}
	return true
}

// NormalizeArch maps a kernel machine name (uname -m, /proc/sys/kernel/arch)
// or a GOARCH to GOARCH's spelling.
func NormalizeArch(machine string) string {
	switch m := strings.TrimSpace(machine); {
	case m == "x86_64" || m == "amd64":
		return "amd64"
	case m == "aarch64" || m == "arm64" || m == "aarch64_be":
		return "arm64"
	case m == "i386" || m == "i486" || m == "i586" || m == "i686" || m == "386" || m == "x86":
		return "386"
	case strings.HasPrefix(m, "armv") || m == "arm":
		return "arm"
	case m == "loongarch64" || m == "loong64":
		return "loong64"
	default:
		return m // ppc64le, ppc64, s390x, riscv64, mips64...
	}
}

// HostArch is the host's architecture: /proc/sys/kernel/arch (the
// machine field of uname, kernel/utsname_sysctl.c, Linux 6.1), else, when
// the root's /proc is this machine's live procfs, this binary's. The
// ProcRead says where it came from.
func HostArch(root *hostfs.Root) (string, ProcRead) {
	pr := &procReader{root: root}
	b, r := pr.read("/proc/sys/kernel/arch", sysctlValueLimit)
	if r.OK() {
		return NormalizeArch(string(b)), r
	}
	if root.LiveProc() {
		return runtime.GOARCH, ProcRead{Path: "this binary's GOARCH (" + r.String() + ")", State: ReadOK}
	}
	return "", r
}

// seccompAct is an action as runc resolves it.
type seccompAct struct {
	decision SyscallDecision
	errno    uint
	kill     bool // KILL and KILL_THREAD are one libseccomp action; KILL_PROCESS another
	log      bool // LOG allows, and is not ALLOW
}

func resolveAction(a specs.LinuxSeccompAction, errnoRet *uint) seccompAct {
	ret := uint(unix.EPERM) // runc's actErrno and actTrace
	if errnoRet != nil {
		ret = *errnoRet
	}
	switch a {
	case specs.ActAllow:
		return seccompAct{decision: SyscallAllowed}
	case specs.ActLog:
		return seccompAct{decision: SyscallAllowed, log: true}
	case specs.ActErrno:
		return seccompAct{decision: SyscallErrno, errno: ret}
	case specs.ActTrace:
		return seccompAct{decision: SyscallTraced, errno: ret}
	case specs.ActTrap:
		return seccompAct{decision: SyscallTrapped}
	case specs.ActKill, specs.ActKillThread:
		return seccompAct{decision: SyscallKilled, kill: true}
	case specs.ActKillProcess:
		return seccompAct{decision: SyscallKilled}
	case specs.ActNotify:
		return seccompAct{decision: SyscallNotified}
	}
	return seccompAct{decision: SyscallInvalid}
}

// EvaluateSeccomp evaluates the spec's seccomp profile for syscalls on arch
// (NormalizeArch; DeviceSyscalls(arch) when none are named).
func EvaluateSeccomp(s *specs.Spec, arch string, syscalls ...string) SeccompEval {
	if len(syscalls) == 0 {
		syscalls = DeviceSyscalls(arch)
	}
	e := SeccompEval{Arch: arch}
	var sc *specs.LinuxSeccomp
	if s != nil && s.Linux != nil {
		sc = s.Linux.Seccomp
	}
	if sc == nil {
		for _, name := range syscalls {
			v := SyscallVerdict{Syscall: name, Decision: SyscallAllowed, Rule: -1,
				Evidence: "the spec has no linux.seccomp: the runtime attaches no filter to " + name}
			if !SyscallOnArch(name, arch) {
				v.Decision, v.Evidence = SyscallNotOnArch, fmt.Sprintf("%s has no %s syscall", arch, name)
			}
			e.Verdicts = append(e.Verdicts, v)
		}
		return e
	}
	e.Profile, e.DefaultAction = true, sc.DefaultAction
	def := resolveAction(sc.DefaultAction, sc.DefaultErrnoRet)
	if def.decision == SyscallErrno {
		e.DefaultErrno = def.errno
	}
	for _, name := range syscalls {
		e.Verdicts = append(e.Verdicts, evalSyscall(sc, def, name, arch))
	}
	return e
}

func evalSyscall(sc *specs.LinuxSeccomp, def seccompAct, name, arch string) SyscallVerdict {
	v := SyscallVerdict{Syscall: name, Rule: -1}
	if !SyscallOnArch(name, arch) {
		v.Decision = SyscallNotOnArch
		v.Evidence = fmt.Sprintf("%s has no %s syscall", arch, name)
		return v
	}
	if def.decision == SyscallInvalid {
		v.Decision, v.Action = SyscallInvalid, sc.DefaultAction
		v.Evidence = fmt.Sprintf("linux.seccomp.defaultAction %q is not an action runc knows", sc.DefaultAction)
		return v
	}
	var cond []int
	for i, r := range sc.Syscalls {
		if !slices.Contains(r.Names, name) {
			continue
		}
		act := resolveAction(r.Action, r.ErrnoRet)
		if act.decision == SyscallInvalid {
			v.Decision, v.Action, v.Rule = SyscallInvalid, r.Action, i
			v.Evidence = fmt.Sprintf("linux.seccomp.syscalls[%d] action %q is not an action runc knows", i, r.Action)
			return v
		}
		if act == def {
			continue // runc skips a rule that repeats the default
		}
		if len(r.Args) > 0 {
			cond = append(cond, i)
			continue
		}
		// The first unconditional rule decides, whatever came before or
		// comes after.
		v.Decision, v.Action, v.Errno, v.Rule = act.decision, r.Action, act.errno, i
		v.Evidence = fmt.Sprintf("linux.seccomp.syscalls[%d] (%s) %s", i, ruleString(r), decisionString(name, act))
		if len(cond) > 0 {
			v.Evidence += fmt.Sprintf("; it replaces the conditional rules %v", cond)
		}
		return v
	}
	if len(cond) > 0 {
		r := sc.Syscalls[cond[0]]
		act := resolveAction(r.Action, r.ErrnoRet)
		v.Decision, v.Action, v.Errno, v.Rule = SyscallDependsOnArgs, r.Action, act.errno, cond[0]
		v.Evidence = fmt.Sprintf("linux.seccomp.syscalls%v (%s) decide %s by its arguments; otherwise the default %s", cond, ruleString(r), name, sc.DefaultAction)
		return v
	}
	v.Decision, v.Action, v.Errno = def.decision, sc.DefaultAction, def.errno
	if def.decision != SyscallErrno && def.decision != SyscallTraced {
		v.Errno = 0
	}
	v.Evidence = fmt.Sprintf("no rule names %s: the default action %s %s", name, sc.DefaultAction, decisionString(name, def))
	return v
}

func decisionString(name string, a seccompAct) string {
	switch a.decision {
	case SyscallErrno:
		return fmt.Sprintf("makes %s fail with %s", name, errnoName(a.errno))
	case SyscallAllowed:
		return "allows " + name
	}
	return a.decision.String()
}

func ruleString(r specs.LinuxSyscall) string {
	s := fmt.Sprintf("names %s, action %s", strings.Join(r.Names, ","), r.Action)
	if r.ErrnoRet != nil {
		s += fmt.Sprintf(", errnoRet %d", *r.ErrnoRet)
	}
	if len(r.Args) > 0 {
		s += fmt.Sprintf(", %d argument conditions", len(r.Args))
	}
	return s
}

func errnoName(n uint) string {
	if name := unix.ErrnoName(syscall.Errno(n)); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", n)
}
