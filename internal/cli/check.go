package cli

import (
	"slices"
	"strings"

	"fmt"

	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
)

func newCheckCmd(g *globals) *cobra.Command {
	var (
		snapshot string
		layers   []string
		devices  []string
		opts     diagnose.Options
		problems bool
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Diagnose this node (or a --root, or a --snapshot) layer by layer",
		Long: `check reads the host and reports, layer by layer, what stops its
accelerators from working: PCI inventory, driver, device nodes and the cgroup
device policy. The verdict names the first layer with a FAIL.

It is read-only. Exit status: 0 no FAIL, 1 at least one FAIL, 2 usage or
internal error. '--snapshot demo' replays a built-in 8-GPU host with faults.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := parseLayers(layers)
			if err != nil {
				return err
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
					return usageErr("layer %s has no checks in this version; these do: %s", l, strings.Join(with, ", "))
				}
			}
			opts.Layers = ls
			opts.Devices = devices
			root, source, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			env := diagnose.NewEnv(root, opts)
			rep := diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Tool: "accel-doctor " + Version, Command: "check", Source: source, Root: snapshotName(snapshot)})
			if err := g.render(rep, problems); err != nil {
				return err
			}
			if len(rep.Devices) == 0 && snapshot == "" && g.output == "text" && slices.Contains(rep.Layers, report.LayerPCI) {
				fmt.Fprintln(g.stderr, "No accelerator here. To see a diagnosis of a GPU host: accel-doctor check --snapshot demo")
			}
			if c := rep.ExitCode(); c != 0 {
				return &exitError{code: c, err: errFailFound}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&snapshot, "snapshot", "", "replay a snapshot archive instead of reading the host ('demo': the built-in scenario)")
	f.StringSliceVar(&layers, "layer", nil, "only these layers (numbers or names: pci, driver, devnode, cgroup)")
	f.StringSliceVar(&devices, "device", nil, "only these PCI addresses (e.g. 0000:17:00.0)")
	f.IntVar(&opts.PID, "pid", 0, "judge the cgroup device policy of this process (default: accel-doctor's own)")
	f.StringVar(&opts.Cgroup, "cgroup", "", "judge the device policy of this cgroup path instead of a process's")
	f.StringVar(&opts.Spec, "spec", "", "the container's OCI config.json (host path): report where the kernel's device policy drifts from it")
	g.addOutputFlag(cmd)
	f.BoolVar(&problems, "problems", false, "text output: leave out the checks that passed")
	return cmd
}
