package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func newCheckCmd(g *globals) *cobra.Command {
	var (
		snapshot string
		layers   []string
		devices  []string
		opts     diagnose.Options
		verbose  bool
		problems bool
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Diagnose this node (or a --root, or a --snapshot) layer by layer",
		Long: `check reads the host and reports, layer by layer, what stops its
accelerators from working: PCI inventory, driver, device nodes, the cgroup
device policy, the node's Kubernetes layer (the kubelet's device-plugin
sockets, its checkpoint and PodResources: each socket is dialed once with a
call that only reads) and the IOMMU. The verdict names the first layer with a FAIL, and every layer
that could not be judged, with the reason.

It is read-only. Exit status: 0 no FAIL; 1 at least one FAIL; 2 nothing
could be judged, or a usage error (a root, process, cgroup, device or
snapshot that does not exist is one, found before any work). '--snapshot
demo' replays a built-in 8-GPU host with faults.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := checkLayers(layers)
			if err != nil {
				return err
			}
			if opts.PID != 0 && opts.Cgroup != "" {
				return usageErr("--pid and --cgroup name two different targets: give one")
			}
			opts.Layers = ls
			root, source, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			opts.KubeletRPC = g.kubeletRPC()
			env := diagnose.NewEnv(root, opts)
			if err := preflight(env, root, snapshot, devices); err != nil {
				return err
			}
			rep := diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Tool: "accel-doctor " + Version, Command: "check", Source: source, Root: snapshotName(snapshot)})
			if err := g.render(rep, verbose); err != nil {
				return err
			}
			// Only where the bus was read and held no accelerator: a root
			// whose bus could not be read is not "no accelerator here".
			if len(rep.Devices) == 0 && snapshot == "" && g.output == "text" && slices.ContainsFunc(rep.Findings, func(f report.Finding) bool {
				return f.Code == diagnose.CodePCINoAccelerator
			}) {
				fmt.Fprintln(g.stderr, "No accelerator here. To see a diagnosis of a GPU host: accel-doctor check --snapshot demo")
			}
			return verdictExit(rep.ExitCode(), rep.Verdict.Summary)
		},
	}
	f := cmd.Flags()
	g.addRootFlag(cmd)
	Flag(f, "snapshot", "").String(&snapshot, "")
	f.StringSliceVar(&layers, "layer", nil, "only these layers (numbers or names: pci, driver, devnode, cgroup, kube, iommu)")
	Flag(f, "kubelet-root-dir", "").String(&opts.KubeletDir, "")
	Flag(f, "device", "").StringSlice(&devices, nil)
	Flag(f, "pid", ": judge its cgroup device policy (default: accel-doctor's own)").Int(&opts.PID, 0)
	Flag(f, "cgroup", ": judge its device policy instead of a process's").String(&opts.Cgroup, "")
	Flag(f, "oci-spec", ": report where the kernel's device policy drifts from it").String(&opts.Spec, "")
	Alias(f, "spec", "", "oci-spec", "")
	Flag(f, "verbose", "").Bool(&verbose, false)
	f.BoolVar(&problems, "problems", false, "text output: only what is not a PASS (the default now)")
	f.MarkHidden("problems")
	g.addOutputFlag(cmd)
	return cmd
}

// checkLayers parses --layer and refuses a layer that has no checks yet.
func checkLayers(layers []string) ([]report.Layer, error) {
	ls, err := parseLayers(layers)
	if err != nil {
		return nil, err
	}
	have := map[report.Layer]bool{}
	for _, c := range diagnose.Registry() {
		have[c.Layer] = true
	}
	for _, l := range ls {
		if !have[l] {
			var with []string
			for _, k := range report.Layers {
				if have[k] {
					with = append(with, k.String())
				}
			}
			return nil, usageErr("layer %s has no checks in this version; these do: %s", l, strings.Join(with, ", "))
		}
	}
	return ls, nil
}

// preflight refuses, before any check runs, a run whose target cannot be
// examined at all: a root with none of the trees the asked-for layers
// read, a --device that names no function, a --pid or --cgroup that does
// not exist, an --oci-spec that is not there. Each would otherwise come back as
// a report of NOT_RUNs that reads like a clean bill of health.
func preflight(env *diagnose.Env, root *hostfs.Root, snapshot string, devices []string) error {
	where := "under " + root.Dir()
	if snapshot != "" {
		where = "in snapshot " + snapshot
	}
	if err := examinable(env, root, where); err != nil {
		return err
	}
	if err := selectDevices(env, devices, where); err != nil {
		return err
	}
	o := env.Opts
	if o.PID < 0 {
		return usageErr("--pid %d is not a process ID", o.PID)
	}
	if o.PID > 0 && !root.Exists(fmt.Sprintf("/proc/%d", o.PID)) {
		msg := fmt.Sprintf("no process %d %s", o.PID, where)
		if m, ok := root.ReadSnapshotMeta(); ok && m.PID > 0 {
			msg += fmt.Sprintf(" (it was taken with --pid %d)", m.PID)
		}
		return usageErr("%s", msg)
	}
	if o.Cgroup != "" && wantsLayer(o.Layers, report.LayerCgroup) {
		p, err := env.CgroupPolicy()
		if err == nil && missingTarget(p) {
			return usageErr("cgroup %s: no such cgroup %s (%v; %v)", o.Cgroup, where, p.V1Err, p.V2Err)
		}
	}
	if o.KubeletDir != "" && !strings.HasPrefix(o.KubeletDir, "/") {
		return usageErr("--kubelet-root-dir %q is not an absolute path", o.KubeletDir)
	}
	if o.Spec != "" && !root.Exists(o.Spec) {
		return usageErr("--oci-spec %s: no such file %s", o.Spec, where)
	}
	return nil
}

func wantsLayer(ls []report.Layer, l report.Layer) bool {
	return len(ls) == 0 || slices.Contains(ls, l)
}

// examinable: the root holds at least one tree an asked-for layer reads
// (/sys for layers 1-3 and 7, /proc for layer 4, the kubelet's directory
// for layer 6).
func examinable(env *diagnose.Env, root *hostfs.Root, where string) error {
	kdir := env.Opts.KubeletDir
	if kdir == "" {
		kdir = kubelet.DefaultKubeletDir
	}
	trees := map[string][]report.Layer{
		"/sys":  {report.LayerPCI, report.LayerDriver, report.LayerDevNode, report.LayerIOMMU},
		"/proc": {report.LayerCgroup},
		kdir:    {report.LayerKube},
	}
	var looked []string
	for _, t := range []string{"/sys", "/proc", kdir} {
		if !slices.ContainsFunc(trees[t], func(l report.Layer) bool { return wantsLayer(env.Opts.Layers, l) }) {
			continue
		}
		if root.Exists(t) {
			return nil
		}
		looked = append(looked, t)
	}
	if len(looked) == 0 {
		return nil
	}
	hint := "is it a host's root, with /sys and /proc?"
	if len(looked) == 1 && looked[0] == kdir {
		hint = "not a Kubernetes node, or its kubelet has another --root-dir: give it with --kubelet-root-dir"
	}
	return usageErr("nothing to examine %s: it has no %s (%s)", where, strings.Join(looked, " and no "), hint)
}

// selectDevices turns --device values into the kernel's address form and
// refuses one that matches no function, naming those that exist.
func selectDevices(env *diagnose.Env, devices []string, where string) error {
	if len(devices) == 0 {
		return nil
	}
	addrs := make([]pci.Address, len(devices))
	var want []string
	for i, d := range devices {
		a, err := pci.ParseAddress(strings.TrimSpace(d))
		if err != nil {
			return usageErr("--device %q is not a PCI address (want 0000:17:00.0, 17:00.0 or 00000000:17:00.0)", d)
		}
		addrs[i] = a
		if !slices.Contains(want, a.String()) {
			want = append(want, a.String())
		}
	}
	// Before the scan, which the report names the devices from: it reads
	// pci.ids only for a run that names a function (Env.PCI), and a
	// --device run names one.
	env.Opts.Devices = want
	inv, err := env.PCI()
	if err != nil {
		return usageErr("--device: the PCI bus %s could not be read: %v", where, err)
	}
	for i, a := range addrs {
		if inv.Lookup(a) == nil {
			return usageErr("--device %s: no PCI function %s %s; %s", devices[i], a, where, existingFunctions(inv))
		}
	}
	return nil
}

// existingFunctions names the accelerators, or the first functions when
// there is none.
func existingFunctions(inv *pci.Inventory) string {
	var accel, all []string
	for _, d := range inv.Devices {
		all = append(all, d.Address.String())
		if _, ok := pci.IsAccelerator(d); ok {
			accel = append(accel, d.Address.String())
		}
	}
	switch {
	case len(accel) > 0:
		return "its accelerators are " + strings.Join(accel, ", ")
	case len(all) == 0:
		return "it has no PCI function at all"
	case len(all) > 12:
		return fmt.Sprintf("it has no accelerator; its %d functions include %s ('accel-doctor pci' lists them)", len(all), strings.Join(all[:12], ", "))
	}
	return "it has no accelerator; its functions are " + strings.Join(all, ", ")
}

// CheckRunner prepares check over rootDir for a caller that runs it again
// and again (accel-doctor-kube's agent): it opens the root and refuses,
// with check's own preflight, a root that cannot be examined. Each call
// of run reads the host afresh (a new Env: nothing is memoized across
// runs) and returns the report with the Env it was judged on, whose
// memoized readings (the kubelet's state) the caller may reuse.
func CheckRunner(rootDir string, opts diagnose.Options, command string) (run func() (*report.Report, *diagnose.Env), err error) {
	root, err := hostfs.New(rootDir)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	source := "host root " + root.Dir()
	if root.IsLive() {
		host, _ := os.Hostname()
		source = "live host " + host
	}
	if err := preflight(diagnose.NewEnv(root, opts), root, "", nil); err != nil {
		return nil, err
	}
	meta := diagnose.Meta{Tool: "accel-doctor " + Version, Command: command, Source: source}
	return func() (*report.Report, *diagnose.Env) {
		env := diagnose.NewEnv(root, opts)
		return diagnose.Run(env, diagnose.Registry(), meta), env
	}, nil
}
