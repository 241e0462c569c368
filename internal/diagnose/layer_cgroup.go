package diagnose

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/devnode"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// Layer 4: may the target's processes open each accelerator node, and
// which rule or program decides? The target is Options.PID, or
// Options.Cgroup, or accel-doctor's own process ("self").

const (
	CodeCgroupMode          = "CGROUP_MODE"
	CodeCgroupModeUnknown   = "CGROUP_MODE_UNKNOWN"
	CodeCgroupAllowed       = "CGROUP_DEVICE_ALLOWED"
	CodeCgroupDenied        = "CGROUP_DEVICE_DENIED"
	CodeCgroupPartial       = "CGROUP_DEVICE_PARTIAL"
	CodeCgroupNotGranted    = "CGROUP_DEVICE_NOT_GRANTED"
	CodeCgroupUnreadable    = "CGROUP_POLICY_UNREADABLE"
	CodeCgroupDrift         = "CGROUP_DEVICE_DRIFT"
	CodeCgroupNoDrift       = "CGROUP_DEVICE_NO_DRIFT"
	CodeCgroupSpecUnusable  = "CGROUP_SPEC_UNREADABLE"
	CodeCgroupNodeUnchecked = "CGROUP_NODE_UNCHECKED"
)

var cgroupCodes = []Code{
	{Code: CodeCgroupMode, Layer: report.LayerCgroup, Title: "cgroup mode and the target's cgroups",
		Explain: `Which cgroup hierarchies the host mounts, read from /proc/self/mountinfo on the
live host, or from the host init's /proc/1/mountinfo when the host is mounted
at --root (in a pod, /proc/self/mountinfo is the pod's own mount table): v1 (the
devices controller decides), v2 (BPF_CGROUP_DEVICE programs decide) or hybrid
(both decide, and access needs both to allow). The evidence names the target
process or cgroup and where it lives in each hierarchy. When accel-doctor runs
in a cgroup namespace of its own (every pod on a cgroup v2 node), the kernel
shows other cgroups relative to that namespace ("/../../x"); those paths are
read again in the initial cgroup namespace and the evidence says so.`},
	{Code: CodeCgroupModeUnknown, Layer: report.LayerCgroup, Title: "cgroup hierarchies could not be read",
		Explain: `The root's mountinfo could not be read, or mounts no cgroup hierarchy, or the
target process's /proc/PID/cgroup could not be read, or the target could not be
placed in any mounted hierarchy. Without them the cgroup device policy cannot be
located, so every cgroup check is NOT_RUN. Snapshots and fixture trees without
/proc are the usual cause. In a cgroup namespace (a pod's), paths above the
namespace's root can only be resolved by joining the initial cgroup namespace,
which needs CAP_SYS_ADMIN; without it accel-doctor says so rather than judge a
directory that may belong to another cgroup.`,
		Remediation: "Run on the live host (or with the host's /proc mounted at --root/proc), and check that the --pid exists."},
	{Code: CodeCgroupAllowed, Layer: report.LayerCgroup, Title: "the cgroup allows read and write on the node",
		Explain: `The target's effective cgroup device policy allows opening the node for reading
and writing. On v1 the deciding line of devices.list is shown; on v2 the
program id and the index of the exit instruction that returned the verdict,
found by running the program's translated instructions in accel-doctor's own
interpreter over the bpf_cgroup_dev_ctx the kernel would pass. mknod (m) is
reported but not required: containers do not create device nodes.`},
	{Code: CodeCgroupDenied, Layer: report.LayerCgroup, Title: "the cgroup denies the node although the process can see it",
		Explain: `The node is present in the target's /dev, but the effective device policy denies
opening it: open() returns EPERM, CUDA reports no device and NVML fails to
initialize. This is the classic "device visible but unusable" case: the node was
bind-mounted or created in the container without a matching device rule, or the
rule was lost (a systemd daemon-reload re-applying a unit without the rule, or
a hook that added the rule outside the OCI spec).`,
		Remediation: "Give the container the device through the runtime (CDI injection, --device, or the device plugin's Allocate response) so that the rule is part of the OCI spec; do not add rules by hand or from legacy hooks, which systemd drops on daemon-reload."},
	{Code: CodeCgroupPartial, Layer: report.LayerCgroup, Title: "the cgroup allows only part of the access the node needs",
		Explain: `The policy allows one access and denies another, for example read allowed and
write denied ('c 195:0 r'). GPU, render and VFIO nodes are opened read-write,
so a read-only rule fails exactly like a denial, with EPERM on O_RDWR.`,
		Remediation: "Grant 'rw' (e.g. 'c 195:0 rw') in the container's device rules; check the device plugin's or CDI spec's permissions field."},
	{Code: CodeCgroupNotGranted, Layer: report.LayerCgroup, Title: "the node is denied and not in the process's /dev",
		Explain: `The policy denies the node and the target process has no such node in its own
/dev: the device was not given to this container, which is consistent and not a
fault (a pod with one GPU sees one /dev/nvidiaN). It is reported so that the
table shows every node of the host.`},
	{Code: CodeCgroupUnreadable, Layer: report.LayerCgroup, Title: "the exact device policy cannot be read",
		Explain: `The policy could not be decided from what the kernel exposes. Causes: a v1 cgroup
whose default is allow shows 'a *:* rwm' in devices.list and hides its deny
exceptions; cgroup v2 programs need root (CAP_SYS_ADMIN; CAP_BPF is not enough) to be
listed and read, and a non-root query gets EPERM; a snapshot or fixture holds no
BPF programs; a program uses an instruction accel-doctor's interpreter does not
model, or runs past its step limit. accel-doctor never guesses: the answer is
NOT_RUN, with the reason.`,
		Remediation: "cgroup v2 programs unreadable: run as root (CAP_SYS_ADMIN) on the live host, or snapshot there. A default-allow v1 cgroup hides its deny rules from everyone, root included: measure instead of reading, by opening the node from inside the container (`runc exec ID sh -c ': <> /dev/nvidia0'`, `kubectl exec`): EPERM means the cgroup denies it. To see what the kernel makes of a rule set, `accel-doctor sandbox --allow 'c 195:* rw' --device-node /dev/nvidia0` applies exactly those rules in a transient cgroup and probes the node."},
	{Code: CodeCgroupNodeUnchecked, Layer: report.LayerCgroup, Title: "a node was not evaluated",
		Explain: `The node's device number is unknown (it is missing and sysfs gives no number) or
an earlier layer already failed for it, so there is nothing meaningful for the
cgroup policy to decide about it.`,
		Remediation: "Fix the earlier layer's finding first."},
	{Code: CodeCgroupDrift, Layer: report.LayerCgroup, Title: "the kernel's device policy differs from the OCI spec",
		Explain: `The container's OCI spec (linux.resources.devices applied in order from a
default deny, last match winning, then the default device rules runc appends
to every container: mknod of anything, /dev/null, zero, full, random,
urandom, tty, console, ptmx, pts and net/tun) asks for one decision and the
kernel's effective policy gives another. Known causes: the runc rule-loading
race (the cgroup is briefly default-deny while rules are written), a systemd
daemon-reload that re-applies the unit's DeviceAllow= and drops rules added
outside the spec (the "Failed to initialize NVML: Unknown Error" case; runc's
DeviceAllow=/dev/char/M:m misses nodes without /dev/char links), or rules
changed by hand.`,
		Remediation: "Inject devices through the spec (CDI or the device plugin), create /dev/char links for NVIDIA nodes, and restart the container to re-apply its rules."},
	{Code: CodeCgroupNoDrift, Layer: report.LayerCgroup, Title: "the kernel's device policy matches the OCI spec",
		Explain: `For every accelerator node and every device the OCI spec names, the kernel's
effective decision equals what linux.resources.devices asks for.`},
	{Code: CodeCgroupSpecUnusable, Layer: report.LayerCgroup, Title: "the OCI spec given for the drift check could not be used",
		Explain: `The --oci-spec file could not be read or parsed as an OCI runtime config.json, or has
no linux.resources.devices, so there is nothing to compare the kernel's policy
with.`,
		Remediation: "Pass the container's config.json (runc: the bundle's config.json; containerd: /run/containerd/io.containerd.runtime.v2.task/<ns>/<id>/config.json)."},
}

func cgroupChecks() []Check {
	return []Check{
		{ID: "cgroup.mode", Layer: report.LayerCgroup, Title: "cgroup hierarchies and the target's cgroups",
			Codes: []string{CodeCgroupMode, CodeCgroupModeUnknown}, Run: checkCgroupMode,
			// mountinfo, the target's cgroups, devices.list and the BPF
			// programs: nothing an earlier layer reads.
			Prefetch: func(e *Env) { e.CgroupPolicy() }},
		{ID: "cgroup.access", Layer: report.LayerCgroup, Title: "effective device access of the target for every accelerator node",
			Codes: []string{CodeCgroupAllowed, CodeCgroupDenied, CodeCgroupPartial, CodeCgroupNotGranted, CodeCgroupUnreadable, CodeCgroupNodeUnchecked},
			Run:   checkCgroupAccess},
		{ID: "cgroup.drift", Layer: report.LayerCgroup, Title: "kernel device policy against the container's OCI spec",
			Codes: []string{CodeCgroupDrift, CodeCgroupNoDrift, CodeCgroupSpecUnusable, CodeCgroupUnreadable}, Run: checkCgroupDrift},
	}
}

// cgroupTarget is what the layer judges.
func (e *Env) cgroupTarget() cgroup.Target {
	switch {
	case e.Opts.Cgroup != "":
		return cgroup.Target{Cgroup: e.Opts.Cgroup}
	case e.Opts.PID > 0:
		return cgroup.Target{PID: e.Opts.PID}
	}
	return cgroup.Target{Self: true}
}

// CgroupPolicy reads the target's device policy once per run.
func (e *Env) CgroupPolicy() (*cgroup.Policy, error) {
	return memo(e, "cgroup.policy", func() (*cgroup.Policy, error) {
		return cgroup.ReadPolicy(e.Root, e.cgroupTarget())
	})
}

// targetName says whose policy is judged. Without --pid or --cgroup it is
// the process behind the root's /proc/self: accel-doctor itself on a live
// host, the process that took a snapshot in a replay.
func targetName(e *Env) string {
	t := e.cgroupTarget()
	switch {
	case t.Cgroup != "":
		return "cgroup " + t.Cgroup
	case e.Opts.PID > 0:
		return fmt.Sprintf("pid %d", e.Opts.PID)
	case e.Root.IsLive():
		return "accel-doctor's own process"
	}
	if m, ok := e.Root.ReadSnapshotMeta(); ok && m.SelfPID > 0 {
		return fmt.Sprintf("the process that took the snapshot (pid %d then)", m.SelfPID)
	}
	return "the process whose /proc/self this root holds"
}

// policyReason says why the policy could not be read: what the capture
// lacks when the file that failed is one it does not hold, else the error.
func policyReason(e *Env, err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		return err.Error()
	}
	const why = ": the cgroup hierarchies and the target's cgroup cannot be located"
	if gap, ok := captureGap(e.Root, pe.Path); ok {
		return gap + " (" + pe.Path + ")" + why
	}
	// Every running Linux host has its mount table: under any root but
	// the live one, its absence is the capture's.
	if strings.HasSuffix(pe.Path, "/mountinfo") && !e.Root.IsLive() {
		return "the capture holds no " + pe.Path + why
	}
	return err.Error()
}

// policyWhy is why the policy could not be located (prefix, then
// policyReason's words): joining the initial cgroup namespace needs
// CAP_SYS_ADMIN (setns(2) of a cgroup namespace); what the capture or
// the pod lacks; a --pid that names no process; no cgroup mounted.
func policyWhy(e *Env, err error, prefix string) report.Why {
	reason := prefix + policyReason(e, err)
	var pe *fs.PathError
	switch {
	case errors.Is(err, cgroup.ErrAboveNamespace):
		return report.Privilege(reason, capSysAdmin)
	case errors.Is(err, cgroup.ErrNoHierarchy):
		return report.Explain(reason, "Run accel-doctor where the host's cgroup file systems are mounted: on the host, or in a pod with hostPID and the host's / at --root (its /proc/1/mountinfo then names them).")
	case errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist):
		if _, ok := captureGap(e.Root, pe.Path); ok {
			return e.missing(reason, pe.Path)
		}
		if strings.HasSuffix(pe.Path, "/mountinfo") && !e.Root.IsLive() {
			return report.Capture(reason, pe.Path)
		}
		if t := e.cgroupTarget(); t.PID > 0 && pe.Path == fmt.Sprintf("/proc/%d/cgroup", t.PID) {
			return report.Input(reason, fmt.Sprintf("--pid with a running process (no process %d here: `ps -p %d`)", t.PID, t.PID))
		}
	}
	return e.errWhy(reason, err, "", "")
}

// measureFix is what tells a decision the files cannot: an open in the
// cgroup.
const measureFix = "Measure instead of reading: open the node from inside the container (`runc exec ID sh -c ': <> /dev/nvidia0'`, `kubectl exec`): EPERM means the cgroup denies it; `accel-doctor sandbox --allow 'c 195:* rw' --device-node /dev/nvidia0` shows what the kernel makes of a rule set."

// decisionWhy is why a decision is undecided (cgroup.Decision): a
// default-allow v1 cgroup hides its rules from everyone; a program
// that could not be read back (privilege, a capture without it); rules
// the interpreter could not evaluate.
func decisionWhy(e *Env, d cgroup.Decision) report.Why {
	switch {
	case d.Err != nil && cgroup.IsCapturedHost(d.Err):
		return report.Capture(d.Reason, "the cgroup's BPF device programs")
	case d.Err != nil:
		return e.errWhy(d.Reason, d.Err, "", capSysAdmin)
	case d.Hidden:
		return report.Explain(d.Reason, "No reader can see a default-allow v1 cgroup's deny rules, root included. "+measureFix)
	}
	return report.NotOffered(d.Reason, "an exact decision from these rules", measureFix)
}

func checkCgroupMode(e *Env, out *Out) {
	p, err := e.CgroupPolicy()
	if err != nil {
		out.NotRun(CodeCgroupModeUnknown, "host", "cgroup device policy not located", policyWhy(e, err, ""))
		return
	}
	ev := []report.Evidence{Ev(p.Mounts.Source, "mode "+p.Mounts.Mode.String())}
	if p.V1Applies {
		ev = append(ev, Ev(orElse(p.V1Dir, p.Mounts.DevicesV1), "v1 devices controller; target at "+placeNote(p.V1Path, p.V1Shown, p.Resolved)))
	}
	if p.V2Applies {
		ev = append(ev, Ev(orElse(p.V2Dir, p.Mounts.Unified), "cgroup2; target at "+placeNote(p.V2Path, p.V2Shown, p.Resolved)))
	}
	// The mode is what the device checks judge by, not a judgement of
	// a device: it never makes layer 4 PASS by itself.
	out.Add(CodeCgroupMode, report.Pass, "host", fmt.Sprintf("cgroup %s; judging %s", p.Mounts.Mode, targetName(e)), ev...).AsContext()
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// placeNote is a target's cgroup path and, when accel-doctor's own cgroup
// namespace showed it differently ("/../y"), how it was resolved.
func placeNote(at, shown, via string) string {
	if strings.HasPrefix(at, "/..") {
		return at + " (relative to accel-doctor's own cgroup namespace)"
	}
	if via == "" || shown == "" || shown == at {
		return at
	}
	return fmt.Sprintf("%s (resolved from %s through %s)", at, shown, via)
}

// cgroupNodes are the nodes whose access is judged: the host's
// accelerator nodes, or in a container's report the nodes the container
// holds, by the numbers they have there (a container's /dev/nvidia0 need
// not be the host's). A container's node is judged even when an earlier
// checkpoint failed for it: the policy is a fact of its own, and the
// verdict names the earliest failure.
func (e *Env) cgroupNodes() []devnode.ExpectedNode {
	if e.Opts.Container == nil {
		return e.ExpectedNodes()
	}
	var out []devnode.ExpectedNode
	for _, cn := range e.ContainerNodes() {
		typ := hostfs.TypeChar
		if cn.typ == 'b' {
			typ = hostfs.TypeBlock
		}
		out = append(out, devnode.ExpectedNode{Path: cn.path, Type: typ, Major: cn.major, Minor: cn.minor, DevKnown: true,
			DevSource: "the container's " + cn.from, Subjects: []string{e.Opts.Container.Ref()}, Required: true})
	}
	return out
}

// nodeDev is the device number to evaluate for an expected node: what is
// really on disk when the node exists, else what sysfs says it must be.
func nodeDev(n devnode.ExpectedNode, st devnode.NodeState) (cgroup.DeviceRef, bool) {
	typ := byte('c')
	if n.Type == hostfs.TypeBlock {
		typ = 'b'
	}
	if st.Exists && (st.Node.Type == hostfs.TypeChar || st.Node.Type == hostfs.TypeBlock) {
		if st.Node.Type == hostfs.TypeBlock {
			typ = 'b'
		}
		return cgroup.DeviceRef{Type: typ, Major: st.Node.Major, Minor: st.Node.Minor}, true
	}
	if n.DevKnown {
		return cgroup.DeviceRef{Type: typ, Major: n.Major, Minor: n.Minor}, true
	}
	return cgroup.DeviceRef{}, false
}

// visibleToTarget says whether the target process has the node in its own
// /dev. For accel-doctor itself the root's /dev is its /dev; for another
// PID it is /proc/PID/root/dev (on the live host the kernel's magic link,
// in a capture whatever the capture holds there). known is false when that
// directory cannot be read: then nobody can say.
func (e *Env) visibleToTarget(path string, st devnode.NodeState) (visible, known bool, where string) {
	if e.Opts.PID <= 0 || e.Opts.Cgroup != "" {
		return st.Exists, e.Opts.Cgroup == "", path
	}
	dir := fmt.Sprintf("/proc/%d/root/dev", e.Opts.PID)
	if n, err := e.Root.StatInProcess(e.Opts.PID, "/dev"); err != nil || n.Type != hostfs.TypeDir {
		return false, false, dir
	}
	_, err := e.Root.StatInProcess(e.Opts.PID, path)
	return err == nil, true, fmt.Sprintf("/proc/%d/root%s", e.Opts.PID, path)
}

func describeDecision(d cgroup.Decision) string {
	switch {
	case !d.Known:
		return "undecided (" + d.Reason + ")"
	case d.Allowed:
		return "allowed by " + d.DecidedBy
	}
	return "denied by " + d.DecidedBy
}

// decisionEvidence puts the four decisions on a node in as few lines as
// they need: one line per file or program that decided, naming it once.
func decisionEvidence(parts []struct {
	what string
	d    cgroup.Decision
}) []report.Evidence {
	var order []string
	byPath := map[string][]string{}
	for _, p := range parts {
		path, why := "", p.d.DecidedBy
		if strings.HasPrefix(why, "/") {
			if i := strings.Index(why, ": "); i > 0 {
				path, why = why[:i], why[i+2:]
			}
		}
		verdict := "denied"
		switch {
		case !p.d.Known:
			verdict, why = "undecided", p.d.Reason
		case p.d.Allowed:
			verdict = "allowed"
		}
		if _, ok := byPath[path]; !ok {
			order = append(order, path)
		}
		byPath[path] = append(byPath[path], fmt.Sprintf("%s %s (%s)", p.what, verdict, why))
	}
	var ev []report.Evidence
	for _, path := range order {
		ev = append(ev, Ev(path, strings.Join(byPath[path], "; ")))
	}
	return ev
}

func checkCgroupAccess(e *Env, out *Out) {
	p, err := e.CgroupPolicy()
	if err != nil {
		out.NotRun(CodeCgroupUnreadable, "host", "device access not evaluated", policyWhy(e, err, "cgroup policy not located: "))
		return
	}
	type item struct {
		n   devnode.ExpectedNode
		st  devnode.NodeState
		dev cgroup.DeviceRef
		res cgroup.Result   // r, w and m, each alone
		rw  cgroup.Decision // one O_RDWR open asking r and w together
	}
	var items []item
	for _, n := range e.cgroupNodes() {
		if f, failed := e.FailedBelow(n.Path, report.LayerCgroup); failed && e.Opts.Container == nil {
			out.NotRun(CodeCgroupNodeUnchecked, n.Path, "not evaluated", report.AfterFix("an earlier layer failed: "+f.Code+": "+f.Summary, f))
			continue
		}
		var st devnode.NodeState
		if e.Opts.Container == nil {
			st = e.NodeState(n.Path)
		}
		dev, ok := nodeDev(n, st)
		if !ok {
			why := report.Explain("its device number is unknown", "Look at the node and its device's dev attribute on the host (`ls -l "+n.Path+"`, `cat /sys/class/*/*/dev`): layer 3 names what it found.")
			if f, below := e.notRunBelow(n.Path, report.LayerCgroup); below {
				why = inherit("its device number is unknown", f)
			}
			out.NotRun(CodeCgroupNodeUnchecked, n.Path, "not evaluated", why)
			continue
		}
		// v1 needs a single exception holding every access one open asks
		// for, so r+w is decided as one request, not from r and w.
		items = append(items, item{n, st, dev,
			p.Evaluate(dev, cgroup.AccessRead|cgroup.AccessWrite|cgroup.AccessMknod),
			p.Evaluate(dev, cgroup.AccessRead|cgroup.AccessWrite).Whole.Combined})
	}
	// One cause, one finding: when no node can be decided, and for the same
	// reason (a default-allow v1 cgroup, programs unreadable without root),
	// say it once rather than once per node.
	if len(items) > 1 {
		reason := ""
		same := true
		for _, it := range items {
			rw := it.rw
			if rw.Known || (reason != "" && rw.Reason != reason) {
				same = false
				break
			}
			reason = rw.Reason
		}
		if same {
			why := decisionWhy(e, items[0].rw)
			var names []string
			for _, it := range items {
				names = append(names, it.n.Path)
			}
			out.NotRun(CodeCgroupUnreadable, "host", fmt.Sprintf("access of %s to the %d accelerator nodes undecided", targetName(e), len(items)), why,
				Ev("", strings.Join(names, " ")))
			return
		}
	}
	for _, it := range items {
		judgeAccess(e, out, it.n, it.st, it.dev, it.res, it.rw)
	}
}

// judgeAccess turns the decisions on one node into a finding: rw is what
// accelerator nodes are opened with; m is reported, never required.
func judgeAccess(e *Env, out *Out, n devnode.ExpectedNode, st devnode.NodeState, dev cgroup.DeviceRef, res cgroup.Result, rw cgroup.Decision) {
	var r, w, m cgroup.AccessResult
	for _, a := range res.Each {
		switch a.Access {
		case cgroup.AccessRead:
			r = a
		case cgroup.AccessWrite:
			w = a
		case cgroup.AccessMknod:
			m = a
		}
	}
	id := fmt.Sprintf("%c %d:%d", dev.Type, dev.Major, dev.Minor)
	ev := decisionEvidence([]struct {
		what string
		d    cgroup.Decision
	}{{"r", r.Combined}, {"w", w.Combined}, {"rw", rw}, {"m", m.Combined}})
	who := strings.Join(n.Subjects, ", ")
	if len(n.Subjects) > 2 {
		who = fmt.Sprintf("shared by %d devices", len(n.Subjects))
	}
	switch {
	case !r.Combined.Known || !w.Combined.Known || !rw.Known:
		undecided := r.Combined
		for _, d := range []cgroup.Decision{w.Combined, rw} {
			if undecided.Known || undecided.Reason == "" {
				undecided = d
			}
		}
		out.NotRun(CodeCgroupUnreadable, n.Path, fmt.Sprintf("%s (%s): access undecided", id, who), decisionWhy(e, undecided), ev...)
	case rw.Allowed:
		out.Add(CodeCgroupAllowed, report.Pass, n.Path, fmt.Sprintf("%s (%s): rw allowed%s", id, who, mknodNote(m.Combined)), ev...)
	default:
		visible, known, where := e.visibleToTarget(n.Path, st)
		switch {
		case !known:
			ev = append(ev, Ev(where, "unreadable: whether the target sees the node is unknown"))
		case visible:
			ev = append(ev, Ev(where, "present in the target's /dev"))
		default:
			ev = append(ev, Ev(where, "absent from the target's /dev"))
		}
		partial := r.Combined.Allowed || w.Combined.Allowed
		switch {
		case !known:
			out.Add(CodeCgroupDenied, report.Warn, n.Path, fmt.Sprintf("%s (%s): denied by the cgroup; the target's /dev could not be read", id, who), ev...)
		case !visible:
			out.Add(CodeCgroupNotGranted, report.Pass, n.Path, fmt.Sprintf("%s (%s): denied and not in the target's /dev: not given to it", id, who), ev...)
		case partial:
			out.Add(CodeCgroupPartial, report.Fail, n.Path, fmt.Sprintf("%s (%s): only %s allowed; rw is denied (EPERM)", id, who, allowedList(r.Combined, w.Combined)), ev...)
		default:
			st := report.Fail
			if !n.Required {
				st = report.Warn
			}
			out.Add(CodeCgroupDenied, st, n.Path, fmt.Sprintf("%s (%s): visible but denied by the cgroup (open gives EPERM)", id, who), ev...)
		}
	}
}

func mknodNote(m cgroup.Decision) string {
	if m.Known && !m.Allowed {
		return " (mknod denied, as usual)"
	}
	return ""
}

func allowedList(r, w cgroup.Decision) string {
	switch {
	case r.Allowed && !w.Allowed:
		return "read"
	case w.Allowed && !r.Allowed:
		return "write"
	}
	return "read and write separately"
}

// specInput is the --oci-spec the drift check needs.
const specInput = "--oci-spec with the container's own config.json, as its runtime wrote it (runc: the bundle's; containerd: /run/containerd/io.containerd.runtime.v2.task/NAMESPACE/ID/config.json)"

// errNoDeviceRules: an --oci-spec without linux.resources.devices.
var errNoDeviceRules = errors.New("no linux.resources.devices")

// specWhy is why the --oci-spec could not be used: not there or without
// device rules (give the container's), unreadable, or not JSON.
func specWhy(e *Env, err error) report.Why {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNoDeviceRules):
		return report.Input(err.Error(), specInput)
	}
	return e.errWhy(err.Error(), err, e.Opts.Spec, "")
}

// readSpec reads the --oci-spec config.json (redacted in a snapshot) and
// wants device rules in it.
func readSpec(root *hostfs.Root, p string) (*specs.Spec, error) {
	s, err := runtime.ReadSpec(root, p)
	if err != nil {
		return nil, err
	}
	if s.Linux == nil || s.Linux.Resources == nil {
		return nil, fmt.Errorf("%s: %w", p, errNoDeviceRules)
	}
	return s, nil
}

func checkCgroupDrift(e *Env, out *Out) {
	if e.Opts.Spec == "" {
		return // asked for only with --oci-spec: nothing to compare with
	}
	s, err := readSpec(e.Root, e.Opts.Spec)
	if err != nil {
		out.NotRun(CodeCgroupSpecUnusable, "host", "drift not checked", specWhy(e, err))
		return
	}
	p, err := e.CgroupPolicy()
	if err != nil {
		out.NotRun(CodeCgroupUnreadable, "host", "drift not checked", policyWhy(e, err, "cgroup policy not located: "))
		return
	}
	devs := driftDevices(e, s)
	dr, err := p.Drift(s.Linux.Resources.Devices, devs)
	if err != nil {
		out.NotRun(CodeCgroupSpecUnusable, "host", "drift not checked", report.Unusable(err.Error(), e.Opts.Spec).With("Its linux.resources.devices must be rules runc takes (type a, b or c; major and minor numbers or *; access of r, w, m)."))
		return
	}
	// One finding per device: the accesses that drifted, with the spec's
	// rule and the kernel's decision for each.
	var order []cgroup.DeviceRef
	byDev := map[cgroup.DeviceRef][]cgroup.DriftItem{}
	for _, d := range dr.Differ {
		if _, ok := byDev[d.Device]; !ok {
			order = append(order, d.Device)
		}
		byDev[d.Device] = append(byDev[d.Device], d)
	}
	want := map[bool]string{true: "allows", false: "denies"}
	for _, dev := range order {
		items := byDev[dev]
		id := fmt.Sprintf("%c %d:%d", dev.Type, dev.Major, dev.Minor)
		var accs []string
		ev := []report.Evidence{}
		for _, d := range items {
			accs = append(accs, d.Access.String())
			ev = append(ev, Ev(e.Opts.Spec, fmt.Sprintf("%s: spec %s (%s)", d.Access, want[d.SpecAllowed], d.SpecRule)),
				Ev("", fmt.Sprintf("%s: kernel %s", d.Access, describeDecision(d.Kernel))))
		}
		first := items[0]
		out.Add(CodeCgroupDrift, report.Fail, id,
			fmt.Sprintf("%s %s: the spec %s it, the kernel %s it", id, strings.Join(accs, "+"), want[first.SpecAllowed], want[first.Kernel.Allowed]), ev...)
	}
	for _, d := range dr.Undecided {
		id := fmt.Sprintf("%c %d:%d", d.Device.Type, d.Device.Major, d.Device.Minor)
		out.NotRun(CodeCgroupUnreadable, id, fmt.Sprintf("%s %s: drift undecided", id, d.Access), decisionWhy(e, d.Kernel))
	}
	if len(dr.Differ) == 0 && len(dr.Undecided) == 0 {
		out.Add(CodeCgroupNoDrift, report.Pass, "host",
			fmt.Sprintf("kernel policy matches the spec's %d device rules (and runc's %d defaults) on %d devices", len(s.Linux.Resources.Devices), len(cgroup.RuncDefaultDevices), len(devs)),
			Ev(e.Opts.Spec, "linux.resources.devices"))
	}
}

// driftDevices are the devices compared: every accelerator node, every
// node the spec creates, and every specific device its rules name.
func driftDevices(e *Env, s *specs.Spec) []cgroup.DeviceRef {
	seen := map[cgroup.DeviceRef]bool{}
	var out []cgroup.DeviceRef
	add := func(d cgroup.DeviceRef) {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, n := range e.ExpectedNodes() {
		if d, ok := nodeDev(n, e.NodeState(n.Path)); ok {
			add(d)
		}
	}
	for _, d := range s.Linux.Devices {
		if t := d.Type; t == "c" || t == "b" || t == "u" {
			typ := byte('c')
			if t == "b" {
				typ = 'b'
			}
			add(cgroup.DeviceRef{Type: typ, Major: uint32(d.Major), Minor: uint32(d.Minor)})
		}
	}
	for _, r := range s.Linux.Resources.Devices {
		if r.Major != nil && r.Minor != nil && *r.Major >= 0 && *r.Minor >= 0 && (r.Type == "c" || r.Type == "b") {
			add(cgroup.DeviceRef{Type: r.Type[0], Major: uint32(*r.Major), Minor: uint32(*r.Minor)})
		}
	}
	return out
}
