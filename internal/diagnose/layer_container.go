package diagnose

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/devnode"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// One container, four checkpoints (`accel-doctor container`): the host has
// the devices the container holds (checkpoint 1: layers 1-3 for them, and
// a driver behind every node it was given), something asks for them
// (checkpoint 2: its OCI spec, CDI specs, hooks), the runtime applied it to
// the container's init process (checkpoint 3: its /dev, mounts,
// environment, seccomp, and the cgroup layer for its PID against its
// spec), and a small request works (checkpoint 4, with --probe). These
// checks run only when Options.Container is set; a later checkpoint never
// makes up for an earlier one, and the verdict names the first that fails.

const (
	CodeContainerFound         = "CONTAINER_FOUND"
	CodeContainerNotRunning    = "CONTAINER_NOT_RUNNING"
	CodeContainerNotStarted    = "CONTAINER_NOT_STARTED"
	CodeContainerSpecUnusable  = "CONTAINER_SPEC_UNREADABLE"
	CodeContainerNodeDriver    = "CONTAINER_NODE_DRIVER"
	CodeContainerNodeNoDriver  = "CONTAINER_NODE_NO_DRIVER"
	CodeContainerDriverUnknown = "CONTAINER_NODE_DRIVER_UNKNOWN"
)

var containerCodes = []Code{
	{Code: CodeContainerFound, Layer: report.LayerRuntime, Title: "the container was found in the runtime's state",
		Explain: `accel-doctor found the container through its runtime's own state on the host
(runc's state.json, containerd's task bundle, CRI-O's storage), without a
runtime client: its ID, runtime, init PID, status (its init process as /proc
shows it, with the recorded start time guarding against a reused PID), its
OCI config.json, and the pod it belongs to when CRI annotations say so.`},
	{Code: CodeContainerNotRunning, Layer: report.LayerRuntime, Title: "the container has no running process to look at",
		Explain: `The container's state is there but its init process is not (stopped, or a
reused PID): what the runtime applied to a process (checkpoint 3) and a
functional probe (checkpoint 4) cannot be looked at. What should inject its
devices (checkpoint 2) is still judged from its spec.`,
		Remediation: "Start the container again (or look at the one that replaced it: `accel-doctor container --all`); `kubectl describe pod` shows why a pod's container exited."},
	{Code: CodeContainerNotStarted, Layer: report.LayerRuntime, Title: "the container is created but not started",
		Explain: `The runtime has made the container (its namespaces, mounts, /dev and cgroup
are there) but has not started it: its init process is still the runtime's
own, waiting to exec the workload (runc's exec.fifo is there). What depends
on the workload's exec, its environment, cannot be judged yet; the rest of
checkpoint 3 can.`,
		Remediation: "Start it (`runc start ID`; a CRI runtime starts it when the kubelet asks) and run accel-doctor again."},
	{Code: CodeContainerSpecUnusable, Layer: report.LayerRuntime, Title: "the container's OCI spec could not be read",
		Explain: `The container's config.json (in its bundle) could not be read or parsed, so
what its runtime was asked to inject is not known, and neither is what
checkpoint 3 should find.`,
		Remediation: "Run accel-doctor on the host as root (bundles are root-only), or with the host's /run mounted under --root."},
	{Code: CodeContainerNodeDriver, Layer: report.LayerDevNode, Title: "a driver on the host serves the container's node",
		Explain: `The device node the container was given (or holds in its /dev) is a character
device whose major number a driver on the host registered (/proc/devices):
open() reaches a driver. Whether the cgroup lets it through and whether the
device answers are later checkpoints.`},
	{Code: CodeContainerNodeNoDriver, Layer: report.LayerDevNode, Title: "no driver on the host serves the container's node: open gives ENXIO",
		Explain: `The container was given a character device node whose major number no driver
on the host registered (/proc/devices has no such major): however its
cgroup and mode allow it, open() gives ENXIO (No such device or address).
The typical case is a GPU node (195:0, nvidia) injected into a container on
a node whose NVIDIA driver is not loaded, or a device plugin advertising
devices of another node. This is the host's fault (checkpoint 1), not the
container runtime's or the cgroup's.`,
		Remediation: "Load the device's driver on the host (`modprobe nvidia` for 195, or the vendor's module) and check `accel-doctor check` there; if the node should not be in this container, fix whatever injected it (the device plugin, CDI spec or --device flag)."},
	{Code: CodeContainerDriverUnknown, Layer: report.LayerDevNode, Title: "whether a driver serves the container's node is not known",
		Explain: `The host's /proc/devices could not be read (or is not in this capture), so it
cannot be said whether a driver serves the node's major number.`,
		Remediation: "Run accel-doctor on the host with its /proc visible, or recapture the snapshot there."},
}

// runtimeCodes are the checkpoint-3 codes internal/runtime proposes,
// taken into the catalog as they are.
func runtimeCodes() []Code {
	var out []Code
	for _, c := range runtime.AppliedCodes {
		if slices.Contains(appliedCodesEmitted, c.Code) {
			out = append(out, Code{Code: c.Code, Layer: report.LayerRuntime, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
		}
	}
	return out
}

func containerChecks() []Check {
	return []Check{
		{ID: "container.found", Layer: report.LayerRuntime, Checkpoint: report.CheckpointAsked, Title: "the container and its OCI spec",
			Codes: []string{CodeContainerFound, CodeContainerNotRunning, CodeContainerSpecUnusable}, Run: checkContainerFound},
		{ID: "container.inject", Layer: report.LayerRuntime, Checkpoint: report.CheckpointAsked, Title: "what should inject its devices (spec, CDI, hooks) points at real things",
			Codes: cdiCodeNames(), Run: checkContainerInject},
		{ID: "container.driver", Layer: report.LayerDevNode, Checkpoint: report.CheckpointHost, Title: "a host driver behind every node the container holds",
			Codes: []string{CodeContainerNodeDriver, CodeContainerNodeNoDriver, CodeContainerDriverUnknown}, Run: checkContainerDriver},
		{ID: "container.applied", Layer: report.LayerRuntime, Checkpoint: report.CheckpointApplied, Title: "what the runtime applied to the container's process",
			Codes: appliedCodesEmitted, Run: checkContainerApplied},
	}
}

// ContainerRegistry is every check of a container's report: the host's,
// restricted to the container's devices, and the container's own.
func ContainerRegistry() []Check {
	return append(Registry(), containerChecks()...)
}

// defaultCheckpoint is where a host check's findings stand in a container's
// report: layers 1-3 are the host, the cgroup layer judges what the
// runtime applied, the functional layer whether a request works.
func defaultCheckpoint(l report.Layer) report.Checkpoint {
	switch {
	case l <= report.LayerDevNode:
		return report.CheckpointHost
	case l == report.LayerFunctional:
		return report.CheckpointWorks
	case l == report.LayerRuntime:
		return report.CheckpointAsked
	}
	return report.CheckpointApplied
}

// containerWant is what the container's process should have been given:
// its spec's devices, bind mounts and environment, and the edits of the
// CDI devices it names. Read once per run.
func (e *Env) containerWant() runtime.Expected {
	w, _ := memo(e, "container.want", func() (runtime.Expected, error) {
		w := runtime.ExpectedFromSpec(e.Opts.Container.Spec)
		if e.Opts.Container.Spec != nil {
			addCDIEdits(e.Root, &w, e.ContainerCDI())
		}
		return w, nil
	})
	return w
}

// ContainerApplied reads the container's init process once per run.
func (e *Env) ContainerApplied() *runtime.Applied {
	a, _ := memo(e, "container.applied", func() (*runtime.Applied, error) {
		return runtime.ReadApplied(e.Root, e.Opts.Container.PID, e.containerWant()), nil
	})
	return a
}

// containerNode is a device node the container holds: one its spec asks
// for, or one found in its /dev.
type containerNode struct {
	path         string
	typ          byte // 'c' or 'b'
	major, minor uint32
	from         string // "its spec" (linux.devices, CDI edits) or "its /dev"
}

// standardNodes are the nodes every OCI runtime gives every container
// (runtime-spec config-linux.md "Default Devices", plus /dev/console and
// the pty multiplexer): not devices the container was given.
var standardNodes = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/full": true, "/dev/random": true,
	"/dev/urandom": true, "/dev/tty": true, "/dev/console": true, "/dev/ptmx": true}

// ContainerNodes are the device nodes the container was given or holds:
// every node of its spec's linux.devices, and every character or block
// node in its /dev but the standard ones.
func (e *Env) ContainerNodes() []containerNode {
	var out []containerNode
	seen := map[string]bool{}
	for _, n := range e.containerWant().Nodes {
		if n.Type != hostfs.TypeChar && n.Type != hostfs.TypeBlock {
			continue
		}
		seen[n.Path] = true
		out = append(out, containerNode{path: n.Path, typ: nodeTypeByte(n.Type), major: n.Major, minor: n.Minor, from: "its spec"})
	}
	if e.Opts.Container.Alive() {
		for _, d := range e.ContainerApplied().Dev.Entries {
			t := d.Node.Type
			if seen[d.Path] || standardNodes[d.Path] || strings.HasPrefix(d.Path, "/dev/pts/") || (t != hostfs.TypeChar && t != hostfs.TypeBlock) {
				continue
			}
			seen[d.Path] = true
			out = append(out, containerNode{path: d.Path, typ: nodeTypeByte(t), major: d.Node.Major, minor: d.Node.Minor, from: "its /dev"})
		}
	}
	return out
}

// ContainerNodePaths are the paths, inside the container, of the nodes
// it holds (what a functional probe opens).
func (e *Env) ContainerNodePaths() []string {
	var out []string
	for _, n := range e.ContainerNodes() {
		out = append(out, n.path)
	}
	return out
}

func nodeTypeByte(t hostfs.FileType) byte {
	if t == hostfs.TypeBlock {
		return 'b'
	}
	return 'c'
}

// PrepareContainer points a run at a container: its init PID and spec for
// the cgroup layer, and layers 1-3 at the host devices behind the nodes it
// holds, and at no other (a GPU host's other faults are not this
// container's).
func PrepareContainer(e *Env) {
	c := e.Opts.Container
	if c.Alive() {
		e.Opts.PID = c.PID
	}
	if c.Spec != nil {
		e.Opts.Spec = c.ConfigPath
	}
	held := map[[2]uint32]bool{}
	for _, n := range e.ContainerNodes() {
		if n.typ == 'c' {
			held[[2]uint32{n.major, n.minor}] = true
		}
	}
	// The host's expected nodes come from an unrestricted look at the host
	// (this run's own readers are memoized, and must see the restriction).
	var devs []string
	for _, n := range NewEnv(e.Root, Options{}).ExpectedNodes() {
		if !n.DevKnown || !held[[2]uint32{n.Major, n.Minor}] {
			continue
		}
		for _, s := range n.Subjects {
			if !slices.Contains(devs, s) {
				devs = append(devs, s)
			}
		}
	}
	e.Opts.Devices, e.Opts.DevicesOnly = devs, true
}

func checkContainerFound(e *Env, out *Out) {
	c := e.Opts.Container
	if c == nil {
		return
	}
	ev := []report.Evidence{Ev(c.StatePath, fmt.Sprintf("runtime %s, status %s (%s)", orElse(string(c.Runtime), "unknown"), c.Status, c.StatusReason))}
	if c.PID > 0 {
		ev = append(ev, Ev(fmt.Sprintf("/proc/%d", c.PID), "init process"))
	}
	if c.Pod != nil {
		ev = append(ev, Ev("", fmt.Sprintf("pod %s/%s, container %s", c.Pod.Namespace, c.Pod.Name, orElse(c.Pod.Container, "(sandbox)"))))
	}
	for _, err := range c.Errors {
		ev = append(ev, Ev("", err.Error()))
	}
	if c.Alive() {
		ev = append(ev, processEvidence(e.ContainerApplied())...)
	}
	out.Add(CodeContainerFound, report.Pass, c.Ref(), fmt.Sprintf("container %s (%s, pid %d, %s)", c.Ref(), orElse(string(c.Runtime), "unknown runtime"), c.PID, c.Status), ev...)
	if c.Spec == nil {
		out.NotRun(CodeContainerSpecUnusable, c.Ref(), "its OCI spec could not be read",
			e.errWhy("config.json unreadable: "+errorsText(c.Errors), errors.Join(c.Errors...), c.ConfigPath, ""), Ev(c.ConfigPath, "unreadable"))
	}
	if !c.Alive() {
		out.NotRun(CodeContainerNotRunning, c.Ref(), "no running process to look at",
			report.Explain(fmt.Sprintf("the container is %s: %s", c.Status, c.StatusReason),
				"Start the container, or name one that runs (`crictl ps`, `docker ps`, `kubectl get pod -o wide`), and run again: only a running process shows what the runtime applied."))
	}
}

// processEvidence is what an operator wants to see of the container's
// process beside the checks: who it runs as, its capabilities, seccomp,
// no_new_privs, LSM label and locked-memory limit.
func processEvidence(a *runtime.Applied) []report.Evidence {
	var ev []report.Evidence
	if a.StatusRead.OK() {
		st := a.Status
		line := fmt.Sprintf("%s, uid %d gid %d; CapEff %s", st.Name, st.UID[1], st.GID[1], st.CapEff)
		if st.Seccomp != nil {
			line += fmt.Sprintf("; seccomp mode %d", *st.Seccomp)
		}
		if st.NoNewPrivs != nil {
			line += fmt.Sprintf("; no_new_privs %v", *st.NoNewPrivs)
		}
		ev = append(ev, Ev(a.StatusRead.Path, line))
	}
	for _, l := range []struct {
		r     runtime.ProcRead
		label string
	}{{a.LSM.Current, a.LSM.CurrentLabel}, {a.LSM.AppArmor, a.LSM.AppArmorLabel}} {
		if l.r.OK() && l.label != "" {
			ev = append(ev, Ev(l.r.Path, "LSM label "+l.label))
		}
	}
	if a.LimitsRead.OK() {
		if ml, ok := a.Limits.MemLock(); ok {
			ev = append(ev, Ev(a.LimitsRead.Path, runtime.MemLockName+": "+ml.String()))
		}
	}
	return ev
}

func errorsText(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return orElse(strings.Join(s, "; "), "no error recorded")
}

func checkContainerDriver(e *Env, out *Out) {
	if e.Opts.Container == nil {
		return
	}
	nodes := e.ContainerNodes()
	if len(nodes) == 0 {
		return
	}
	pd, err := memo(e, "devnode.procdevices", func() (devnode.ProcDevices, error) { return devnode.ReadProcDevices(e.Root) })
	for _, n := range nodes {
		id := fmt.Sprintf("%c %d:%d", n.typ, n.major, n.minor)
		src := Ev("", fmt.Sprintf("%s %s (from %s)", n.path, id, n.from))
		switch {
		case n.typ != 'c':
			continue // block devices are not accelerators; the kernel's block layer serves them
		case err != nil && len(pd.Char) == 0:
			out.NotRun(CodeContainerDriverUnknown, n.path, n.path+": driver for major "+fmt.Sprint(n.major)+" not known",
				e.errWhy("/proc/devices: "+e.withGap(err), err, devnode.ProcDevicesPath, ""), src)
		case pd.CharRegistered(n.major):
			out.Add(CodeContainerNodeDriver, report.Pass, n.path, fmt.Sprintf("%s %s: major %d is %s's on the host", n.path, id, n.major, strings.Join(pd.CharNames(n.major), ", ")),
				src, Ev(devnode.ProcDevicesPath, fmt.Sprintf("char major %d: %s", n.major, strings.Join(pd.CharNames(n.major), ", "))))
		default:
			out.Add(CodeContainerNodeNoDriver, report.Fail, n.path, fmt.Sprintf("%s %s: no driver on the host for major %d: open gives ENXIO", n.path, id, n.major),
				src, Ev(devnode.ProcDevicesPath, fmt.Sprintf("no character device with major %d", n.major)))
		}
	}
}
