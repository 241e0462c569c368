package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/enter"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

func newContainerCmd(g *globals) *cobra.Command {
	var (
		snapshot, pod, name string
		all, verbose, probe bool
		specDirs            []string
	)
	cmd := &cobra.Command{
		Use:   "container (PID|ID|PREFIX | --all | --pod NAMESPACE/NAME [--container NAME])",
		Short: "One container, checkpoint by checkpoint: the host has its devices, what should inject them, what the runtime applied",
		Long: `container judges one container's devices in order, each checkpoint with its
evidence, and names the first that fails:

  1. the host has the devices the container holds: the PCI device, its
     driver and its nodes (layers 1-3), and a driver behind every node the
     container was given (a 195:0 node on a host without the NVIDIA driver
     gives ENXIO, whatever else allows it);
  2. what should inject them: the container's OCI spec (linux.devices), the
     CDI devices it names (each resolved against the host's CDI specs, each
     node, mount and hook of their edits there, the runtime's CDI support
     and version), the legacy NVIDIA hook, privileged;
  3. what the runtime applied to the container's init process, read from
     the host through /proc/PID without entering it: each node in its /dev
     (type, numbers, mode and owner as its user namespace sees them, a
     nodev mount), each bind mount, each environment variable (names only:
     values are never read out), the seccomp profile, capabilities, and the
     cgroup device policy of its PID against its spec (drift);
  4. with --probe: a small request, made as the container's own process
     would make it, from the host: each node opened, the kind's ioctl, the
     CUDA and NVML libraries when the container has them.

A later checkpoint never makes up for an earlier one. Containers are found
through the runtimes' own state (runc, crun, containerd, Docker, CRI-O),
without a runtime client, by PID (of its init or of any process in it), ID
or ID prefix; --pod finds a Kubernetes pod's containers on this node by the
CRI annotations in their specs. Without --probe it is read-only; it works
with --root /host in a pod and on a snapshot taken with 'snapshot
--container-id ID'. --probe joins the container's cgroups for its life (see
below): the one thing this command can change.

Exit status: 0 no FAIL, 1 a FAIL (with --all: in any container), 2 usage
error (no such container, or an ambiguous prefix) or nothing could be judged.
SIGINT or SIGTERM during --probe: the probe's processes in the container
are killed, nothing is reported, and it exits 128+N (130, 143).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n := countSet(len(args) == 1, all, pod != ""); n != 1 {
				return usageErr("container needs exactly one of PID|ID|PREFIX, --all or --pod NAMESPACE/NAME")
			}
			if name != "" && pod == "" {
				return usageErr("--container names a container of a --pod")
			}
			root, source, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			cs, err := pickContainers(root, args, all, pod, name)
			if err != nil {
				return err
			}
			for _, d := range specDirs {
				if !strings.HasPrefix(d, "/") {
					return usageErr("--cdi-spec-dir %q is not a host-absolute path", d)
				}
			}
			containerSpecDirs = specDirs
			if probe && (all || snapshot != "" || len(cs) != 1) {
				return usageErr("--probe runs in one live container: give one container, not --all or a snapshot")
			}
			if len(cs) == 1 && !all {
				rep, env := judgeContainerEnv(root, source, cs[0])
				if probe {
					takeCancel() // the probe's processes are ended through the context
					ctx := cmd.Context()
					probeContainer(ctx, rep, env, cs[0])
					if ctx.Err() != nil {
						return context.Cause(ctx) // a probe cut short judges nothing
					}
				}
				if err := g.render(rep, verbose); err != nil {
					return err
				}
				return verdictExit(rep.ExitCode(), rep.Verdict.Summary)
			}
			return g.containerTable(root, source, cs)
		},
	}
	f := cmd.Flags()
	g.addRootFlag(cmd)
	Flag(f, "snapshot", "").String(&snapshot, "")
	f.BoolVar(&all, "all", false, "every container on this host: one line each")
	f.StringVar(&pod, "pod", "", "a Kubernetes pod's containers, NAMESPACE/NAME (from CRI annotations)")
	Flag(f, "container", " (with --pod)").String(&name, "")
	Flag(f, "verbose", "").Bool(&verbose, false)
	f.BoolVar(&probe, "probe", false, "checkpoint 4: "+enter.FlagHelp)
	Flag(f, "cdi-spec-dir", CDISpecDirsHelp).StringSlice(&specDirs, nil)
	g.addOutputFlag(cmd)
	return cmd
}

// enterWhy is why the probe could not be run as the container's
// process: no root, a process that went away, or another failure to
// join it, which running the probe inside the container avoids.
func enterWhy(err error) report.Why {
	switch {
	case errors.Is(err, enter.ErrNeedsRoot), errors.Is(err, fs.ErrPermission), errors.Is(err, unix.EPERM):
		return report.Privilege(err.Error(), "")
	case errors.Is(err, enter.ErrGone), errors.Is(err, unix.ESRCH):
		return report.Again(err.Error()).With("The container's process went away: run again while it runs.")
	}
	return report.Explain(err.Error(), "Run the probe inside the container instead (`kubectl exec POD -- accel-doctor probe`, `crictl exec ID accel-doctor probe`): it needs nothing from the host.")
}

// probeContainer is checkpoint 4: the functional probe run as the
// container's process would (internal/enter), its findings added to the
// report, with what of the process it could not reproduce.
func probeContainer(ctx context.Context, rep *report.Report, env *diagnose.Env, c runtime.Container) {
	add := func(f report.Finding) {
		f.Checkpoint = report.CheckpointWorks
		rep.Findings = append(rep.Findings, f)
	}
	if !c.Alive() {
		f := report.Finding{Check: "probe.container", Code: probe.CodeNoNodes, Layer: report.LayerFunctional, Subject: c.Ref(), Summary: "not probed"}
		f.CouldNotLook(report.Explain("the container has no running process",
			"Start the container, or name one that runs (`crictl ps`, `docker ps`), and run again: the probe runs as its process."))
		add(f)
	} else if res, err := enter.Probe(ctx, c.PID, enter.Options{Nodes: env.ContainerNodePaths()}); err != nil {
		f := report.Finding{Check: "probe.container", Code: probe.CodeIoctlNotRun, Layer: report.LayerFunctional, Subject: c.Ref(), Summary: "the functional probe did not run"}
		f.CouldNotLook(enterWhy(err))
		add(f)
	} else {
		var missed []string
		for _, a := range res.Aspects {
			if !a.Reproduced {
				missed = append(missed, a.Name)
			}
		}
		for _, f := range ProbeFindings(res.Probe) {
			if len(missed) > 0 {
				f.Evidence = append(f.Evidence, report.Evidence{Value: "not reproduced from the host: " + strings.Join(missed, ", ")})
			}
			add(f)
		}
	}
	if !slices.Contains(rep.Layers, report.LayerFunctional) {
		rep.Layers = append(rep.Layers, report.LayerFunctional)
	}
	rep.Decide()
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// pickContainers resolves what the command was asked for; a query that
// matches nothing, or more than one container, is a usage error that says
// what it saw.
func pickContainers(root *hostfs.Root, args []string, all bool, pod, name string) ([]runtime.Container, error) {
	switch {
	case all:
		cs, _ := runtime.Containers(root)
		return cs, nil
	case pod != "":
		ns, podName, ok := strings.Cut(pod, "/")
		if !ok || ns == "" || podName == "" {
			return nil, usageErr("--pod %q: want NAMESPACE/NAME", pod)
		}
		cs, _, err := runtime.FindPod(root, ns, podName, name)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		var work []runtime.Container
		for _, c := range cs {
			if c.Pod == nil || !c.Pod.Sandbox {
				work = append(work, c)
			}
		}
		if len(work) == 0 {
			return nil, usageErr("pod %s has no workload container on this node (only its sandbox)", pod)
		}
		return work, nil
	}
	m, errs, err := runtime.Find(root, args[0])
	var nf *runtime.NotFoundError
	var amb *runtime.AmbiguousError
	switch {
	case errors.As(err, &amb):
		return nil, usageErr("%v", err)
	case errors.As(err, &nf) && len(errs) > 0:
		return nil, usageErr("%v (and %d runtime state source(s) could not be read: %v)", err, len(errs), errs[0])
	case err != nil:
		return nil, usageErr("%v", err)
	}
	return []runtime.Container{m.Container}, nil
}

// judgeContainer runs every check of a container's report over it.
func judgeContainer(root *hostfs.Root, source string, c runtime.Container) *report.Report {
	rep, _ := judgeContainerEnv(root, source, c)
	return rep
}

// containerSpecDirs is --cdi-spec-dir of this run.
var containerSpecDirs []string

func judgeContainerEnv(root *hostfs.Root, source string, c runtime.Container) (*report.Report, *diagnose.Env) {
	env := diagnose.NewEnv(root, diagnose.Options{Container: &c, CDISpecDirs: containerSpecDirs})
	diagnose.PrepareContainer(env)
	src := fmt.Sprintf("container %s (%s, pid %d, %s) on %s", c.Ref(), dash(string(c.Runtime)), c.PID, c.Status, source)
	if c.Pod != nil {
		src += fmt.Sprintf("; pod %s/%s container %s", c.Pod.Namespace, c.Pod.Name, dash(c.Pod.Container))
	}
	return diagnose.Run(env, diagnose.ContainerRegistry(), diagnose.Meta{Tool: "accel-doctor " + Version, Command: "container", Source: src}), env
}

// containerRow is one line of `container --all`.
type containerRow struct {
	Container  string            `json:"container"`
	Runtime    string            `json:"runtime"`
	Pod        string            `json:"pod,omitempty"`
	PID        int               `json:"pid"`
	Status     string            `json:"status"`
	Verdict    report.Status     `json:"verdict"`
	Checkpoint report.Checkpoint `json:"checkpoint,omitempty"`
	Summary    string            `json:"summary"`
}

// containerTable judges each container and prints one line each; the exit
// status is the worst of theirs.
func (g *globals) containerTable(root *hostfs.Root, source string, cs []runtime.Container) error {
	t := &report.Table{Title: []string{fmt.Sprintf("%d container(s) on %s", len(cs), source)},
		Header: []string{"CONTAINER", "RUNTIME", "POD", "PID", "STATUS", "VERDICT", "FIRST PROBLEM"}}
	rows := []containerRow{}
	worst := 0
	for _, c := range cs {
		rep := judgeContainer(root, source, c)
		row := containerRow{Container: c.Ref(), Runtime: string(c.Runtime), PID: c.PID, Status: string(c.Status),
			Verdict: rep.Verdict.Status, Checkpoint: rep.Verdict.Checkpoint, Summary: rep.Verdict.Summary}
		if c.Pod != nil {
			row.Pod = c.Pod.Namespace + "/" + c.Pod.Name + "/" + dash(c.Pod.Container)
		}
		rows = append(rows, row)
		t.Rows = append(t.Rows, []string{row.Container, row.Runtime, row.Pod, fmt.Sprint(row.PID), row.Status, string(row.Verdict), firstProblem(rep)})
		if code := rep.ExitCode(); code == 1 || (worst == 0 && code != 0) {
			worst = code
		}
	}
	if len(cs) == 0 {
		t.Notes = append(t.Notes, "no container found in the runtimes' state (runc, crun, containerd, Docker, CRI-O)")
	}
	if err := g.renderTable(t, rows); err != nil {
		return err
	}
	if worst == report.ExitUnknown && len(cs) > 0 {
		worst = 0 // a container that could not be judged does not make the listing an error
	}
	return verdictExit(worst, "")
}

// firstProblem is the verdict's first FAIL (or WARN) in a few words.
func firstProblem(rep *report.Report) string {
	for _, st := range []report.Status{report.Fail, report.Warn} {
		for _, f := range rep.Findings {
			if f.Status == st {
				return fmt.Sprintf("%s (checkpoint %d): %s", f.Code, int(f.Checkpoint), f.Summary)
			}
		}
	}
	return ""
}
