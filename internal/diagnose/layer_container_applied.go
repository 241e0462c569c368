package diagnose

import (
	"fmt"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// Checkpoint 3: what the runtime applied to the container's init process,
// read from the host through /proc/PID (internal/runtime.ReadApplied),
// against what checkpoint 2 asked for. Every difference names the missing
// piece; a node that is there but cannot be opened says why (nodev, an
// unmapped owner, its mode), which is not the cgroup's doing.

// Codes of internal/runtime's catalog (applied_codes.go) used here.
const (
	codeNodeApplied   = "RUNTIME_NODE_APPLIED"
	codeNodeMissing   = "RUNTIME_NODE_MISSING"
	codeNodeMismatch  = "RUNTIME_NODE_MISMATCH"
	codeNodeUnmapped  = "RUNTIME_NODE_OWNER_UNMAPPED"
	codeNodeModeDeny  = "RUNTIME_NODE_MODE_DENIED"
	codeNodeNodev     = "RUNTIME_NODE_NODEV"
	codeMountApplied  = "RUNTIME_MOUNT_APPLIED"
	codeMountMissing  = "RUNTIME_MOUNT_MISSING"
	codeMountMismatch = "RUNTIME_MOUNT_MISMATCH"
	codeEnvApplied    = "RUNTIME_ENV_APPLIED"
	codeEnvMissing    = "RUNTIME_ENV_MISSING"
	codeSeccompDenies = "RUNTIME_SECCOMP_DENIES"
	codeSeccompMaybe  = "RUNTIME_SECCOMP_CONDITIONAL"
	codeSeccompOdd    = "RUNTIME_SECCOMP_UNEXPLAINED"
	codeCapsDrift     = "RUNTIME_CAPS_DRIFT"
	codeMemlock       = "RUNTIME_MEMLOCK_LIMITED"
	codeProcUnread    = "RUNTIME_PROC_UNREADABLE"
	codeProcGone      = "RUNTIME_PROCESS_GONE"
	codeNotCaptured   = "RUNTIME_NOT_CAPTURED"
	codeProcMalformed = "RUNTIME_PROC_MALFORMED"
)

func checkContainerApplied(e *Env, out *Out) {
	c := e.Opts.Container
	if c == nil || !c.Alive() {
		return // CONTAINER_NOT_RUNNING says so once
	}
	a := e.ContainerApplied()
	if !a.Process.OK() {
		unknownApplied(e, out, c.Ref(), "the container's process", a.Process)
		return
	}
	want := e.containerWant()
	notStarted := c.Status == runtime.StatusCreated || strings.HasPrefix(a.Status.Name, "runc:[")
	checks := a.Compare(want)
	// Nodes it holds without its spec asking (a bind mount of a host node,
	// one a hook made) are judged as they are: openable or not.
	for _, cn := range e.ContainerNodes() {
		if cn.from != "its spec" {
			typ := hostfs.TypeChar
			if cn.typ == 'b' {
				typ = hostfs.TypeBlock
			}
			checks = append(checks, a.CheckNode(runtime.ExpectedNode{Path: cn.path, Type: typ, Major: cn.major, Minor: cn.minor}))
		}
	}
	var envOK []string
	for _, ch := range checks {
		switch ch.Kind {
		case "node":
			judgeAppliedNode(e, a, out, ch)
		case "mount":
			judgeAppliedMount(e, out, ch)
		case "env":
			if notStarted {
				continue // said once below
			}
			if ch.Outcome == runtime.CheckPresent {
				envOK = append(envOK, ch.Subject)
				continue
			}
			judgeAppliedEnv(e, out, ch)
		}
	}
	if notStarted && len(want.Env) > 0 {
		out.NotRun(CodeContainerNotStarted, c.Ref(), "the environment not judged",
			report.Explain("the container's init is still the runtime's ("+a.Status.Name+", status "+string(c.Status)+"): the spec's environment is set only when it execs the workload",
				"Run accel-doctor again once the container runs its workload (`crictl ps` shows it Running)."),
			Ev(a.StatusRead.Path, "Name: "+a.Status.Name))
	}
	if len(envOK) > 0 {
		out.Add(codeEnvApplied, report.Pass, c.Ref(), fmt.Sprintf("%d of the spec's %d environment variables are set in the process (values not read)", len(envOK), len(want.Env)),
			Ev(fmt.Sprintf("/proc/%d/environ", a.PID), "names: "+strings.Join(envOK, " ")))
	}
	if len(e.ContainerNodes()) > 0 {
		judgeSeccomp(e, a, out, c)
		judgeProcess(e, a, out, c)
	}
}

// appliedCodesEmitted are the checkpoint-3 codes this layer emits (of
// those internal/runtime proposes; the LSM label is shown, not judged:
// the common profiles do not refuse device nodes the cgroup allows).
var appliedCodesEmitted = []string{codeNodeApplied, codeNodeMissing, codeNodeMismatch, codeNodeUnmapped, codeNodeModeDeny, codeNodeNodev,
	codeMountApplied, codeMountMissing, codeMountMismatch, codeEnvApplied, codeEnvMissing, codeSeccompDenies, codeSeccompMaybe,
	codeSeccompOdd, codeCapsDrift, codeMemlock, codeProcUnread, codeProcGone, codeNotCaptured, codeProcMalformed, CodeContainerNotStarted}

// judgeProcess compares the process's capabilities and seccomp state with
// the spec, and its locked-memory limit with what pinning devices need.
func judgeProcess(e *Env, a *runtime.Applied, out *Out, c *runtime.Container) {
	if !a.StatusRead.OK() || c.Spec == nil || c.Spec.Process == nil {
		return
	}
	st := a.Status
	status := Ev(a.StatusRead.Path, fmt.Sprintf("CapEff %s; CapBnd %s", st.CapEff, st.CapBnd))
	if caps := c.Spec.Process.Capabilities; caps != nil {
		eff, _ := runtime.CapSetOf(caps.Effective)
		bnd, _ := runtime.CapSetOf(caps.Bounding)
		if eff != st.CapEff || bnd != st.CapBnd {
			out.Add(codeCapsDrift, report.Warn, c.Ref(), "the process's capabilities are not the spec's", status,
				Ev(c.ConfigPath, fmt.Sprintf("spec: effective %s; bounding %s", eff, bnd)))
		}
	}
	hasProfile := c.Spec.Linux != nil && c.Spec.Linux.Seccomp != nil
	if st.Seccomp != nil && (*st.Seccomp == 2) != hasProfile {
		out.Add(codeSeccompOdd, report.Warn, c.Ref(), fmt.Sprintf("seccomp mode %d in the process; the spec has %s", *st.Seccomp, map[bool]string{true: "a profile", false: "none"}[hasProfile]),
			Ev(a.StatusRead.Path, fmt.Sprintf("Seccomp: %d", *st.Seccomp)))
	}
	if !pinsMemory(e.ContainerNodes()) || !a.LimitsRead.OK() {
		return
	}
	const capIPCLock = 14 // CAP_IPC_LOCK, include/uapi/linux/capability.h
	if ml, ok := a.Limits.MemLock(); ok && ml.Soft != runtime.RLimInfinity && !st.CapEff.Has(capIPCLock) {
		out.Add(codeMemlock, report.Warn, c.Ref(), fmt.Sprintf("locked memory limited to %s without CAP_IPC_LOCK: DMA mapping beyond it fails with ENOMEM", ml), Ev(a.LimitsRead.Path, runtime.MemLockName+": "+ml.String()), status)
	}
}

// pinsMemory: the container holds a node whose users pin memory for DMA
// (VFIO, RDMA verbs).
func pinsMemory(nodes []containerNode) bool {
	for _, n := range nodes {
		if strings.HasPrefix(n.path, "/dev/vfio/") || strings.HasPrefix(n.path, "/dev/infiniband/") {
			return true
		}
	}
	return false
}

// capPtrace is what reading another user's /proc/PID/environ, root and
// mountinfo takes instead of root (ptrace read access:
// fs/proc/base.c proc_mem_open, proc_root_link).
const capPtrace = "CAP_SYS_PTRACE"

// procWhy is why a read of the container's process failed, by its read
// state: gone (run again), not captured, malformed, refused.
func procWhy(e *Env, r runtime.ProcRead) report.Why {
	switch r.State {
	case runtime.ReadGone:
		return report.Again(r.String()).With("The process exited while it was read: run again while the container runs.")
	case runtime.ReadNotCaptured:
		return e.missing(r.String(), r.Path)
	case runtime.ReadMalformed:
		return report.Unusable(r.String(), r.Path)
	}
	if r.Err == nil {
		return report.Unusable(r.String(), r.Path)
	}
	return e.errWhy(r.String(), r.Err, r.Path, capPtrace)
}

// unknownApplied is the NOT_RUN for a part of the process that could not
// be read, with the code its read state calls for.
func unknownApplied(e *Env, out *Out, subject, what string, r runtime.ProcRead) {
	code := codeProcUnread
	switch r.State {
	case runtime.ReadGone:
		code = codeProcGone
	case runtime.ReadNotCaptured:
		code = codeNotCaptured
	case runtime.ReadMalformed:
		code = codeProcMalformed
	}
	out.NotRun(code, subject, what+" not judged", procWhy(e, r), Ev(r.Path, r.State.String()))
}

func appliedEvidence(ch runtime.AppliedCheck) []report.Evidence {
	var ev []report.Evidence
	for _, d := range ch.Diffs {
		ev = append(ev, Ev("", d))
	}
	for _, s := range ch.Evidence {
		ev = append(ev, Ev("", s))
	}
	return ev
}

// judgeAppliedNode: the node is there, openable by mode, on a mount that
// allows devices, with the expected numbers; else which of these fails.
func judgeAppliedNode(e *Env, a *runtime.Applied, out *Out, ch runtime.AppliedCheck) {
	ev := appliedEvidence(ch)
	switch ch.Outcome {
	case runtime.CheckUnknown:
		unknownApplied(e, out, ch.Subject, ch.Subject, checkRead(ch))
		return
	case runtime.CheckMissing:
		out.Add(codeNodeMissing, report.Fail, ch.Subject, ch.Subject+": asked for, not in the container: open gives ENOENT", ev...)
		return
	}
	entry := *ch.Entry
	if nodev, known := entry.OnNodev(); known && nodev {
		out.Add(codeNodeNodev, report.Fail, ch.Subject, fmt.Sprintf("%s is on a nodev mount (%s): open gives EACCES before any cgroup check", ch.Subject, entry.Mount.Mountpoint), ev...)
		return
	}
	mode := a.ModeCheck(entry, runtime.MayRW)
	switch {
	case mode.Known && !mode.Allowed && (!entry.Owner.Mapped || !entry.Group.Mapped):
		out.Add(codeNodeUnmapped, report.Fail, ch.Subject, fmt.Sprintf("%s: its owner is not mapped in the container's user namespace (shows as %d): open gives EACCES", ch.Subject, entry.Owner.Inside), ev...)
	case mode.Known && !mode.Allowed:
		out.Add(codeNodeModeDeny, report.Fail, ch.Subject, fmt.Sprintf("%s: its mode refuses the process a read-write open (%s): EACCES", ch.Subject, mode.By), ev...)
	case ch.Outcome == runtime.CheckDifferent && numbersDiffer(ch):
		out.Add(codeNodeMismatch, report.Fail, ch.Subject, ch.Subject+": not the node asked for: "+strings.Join(ch.Diffs, "; "), ev...)
	case ch.Outcome == runtime.CheckDifferent:
		out.Add(codeNodeMismatch, report.Warn, ch.Subject, ch.Subject+": there, with another mode or owner than asked: "+strings.Join(ch.Diffs, "; "), ev...)
	default:
		out.Add(codeNodeApplied, report.Pass, ch.Subject, ch.Subject+": in the container as asked, openable read-write by its mode", ev...)
	}
}

// checkRead is the read that left a check unknown, with its host path
// and error.
func checkRead(ch runtime.AppliedCheck) runtime.ProcRead {
	if ch.Read.State == ch.State && ch.Read.Path != "" {
		return ch.Read
	}
	return runtime.ProcRead{Path: ch.Subject, State: ch.State}
}

// numbersDiffer: a difference of type or major:minor (open reaches another
// device or none), not only of mode or owner.
func numbersDiffer(ch runtime.AppliedCheck) bool {
	for _, d := range ch.Diffs {
		if strings.HasPrefix(d, "type ") || strings.HasPrefix(d, "major:minor ") {
			return true
		}
	}
	return false
}

func judgeAppliedMount(e *Env, out *Out, ch runtime.AppliedCheck) {
	ev := appliedEvidence(ch)
	switch ch.Outcome {
	case runtime.CheckUnknown:
		unknownApplied(e, out, ch.Subject, ch.Subject, checkRead(ch))
	case runtime.CheckMissing:
		out.Add(codeMountMissing, report.Fail, ch.Subject, ch.Subject+": the bind mount asked for is not in the container", ev...)
	case runtime.CheckDifferent:
		out.Add(codeMountMismatch, report.Fail, ch.Subject, ch.Subject+": mounted from somewhere else than asked: "+strings.Join(ch.Diffs, "; "), ev...)
	default:
		what := "mounted as asked"
		if !ch.SourceVerified {
			what += " (its source not verified)"
		}
		out.Add(codeMountApplied, report.Pass, ch.Subject, ch.Subject+": "+what, ev...)
	}
}

func judgeAppliedEnv(e *Env, out *Out, ch runtime.AppliedCheck) {
	switch ch.Outcome {
	case runtime.CheckUnknown:
		unknownApplied(e, out, ch.Subject, "environment variable "+ch.Subject, checkRead(ch))
	case runtime.CheckMissing:
		out.Add(codeEnvMissing, report.Fail, ch.Subject, "environment variable "+ch.Subject+" asked for, not set in the process", appliedEvidence(ch)...)
	}
}

// judgeSeccomp: the spec's seccomp profile lets a device user open, ioctl
// and mmap (a profile that refuses ioctl makes every driver call EPERM).
func judgeSeccomp(e *Env, a *runtime.Applied, out *Out, c *runtime.Container) {
	if c.Spec == nil {
		return
	}
	arch, _ := runtime.HostArch(e.Root)
	ev := runtime.EvaluateSeccomp(c.Spec, arch, runtime.DeviceSyscalls(arch)...)
	if !ev.Profile {
		return
	}
	for _, v := range ev.Verdicts {
		evid := Ev(c.ConfigPath, v.Evidence)
		switch v.Decision {
		case runtime.SyscallErrno, runtime.SyscallKilled, runtime.SyscallTrapped, runtime.SyscallTraced:
			out.Add(codeSeccompDenies, report.Fail, c.Ref(), fmt.Sprintf("the spec's seccomp profile refuses %s: %s", v.Syscall, v.Decision), evid)
		case runtime.SyscallDependsOnArgs, runtime.SyscallNotified:
			out.Add(codeSeccompMaybe, report.Warn, c.Ref(), fmt.Sprintf("the spec's seccomp profile decides %s per call: %s", v.Syscall, v.Decision), evid)
		}
	}
}
