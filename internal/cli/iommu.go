package cli

import (
	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func newIOMMUCmd(g *globals) *cobra.Command {
	var (
		snapshot string
		devices  []string
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "iommu",
		Short: "Passthrough readiness: IOMMU on, each accelerator's group viable for VFIO, the ACS path (read-only)",
		Long: `iommu judges the host for device passthrough (KubeVirt, Kata, DPDK,
vfio-user): is the IOMMU present and on (ACPI DMAR/IVRS/IORT, the kernel's
groups, the command line read as the kernel reads it: intel_iommu=sm_on
selects scalable mode and does not turn the IOMMU on; iommu=pt keeps it on
with identity default domains), and for each IOMMU group that holds an
accelerator, whether VFIO can take it whole (every member on vfio-pci,
pci-stub or no driver; bridges allowed), naming the member that breaks it
and the commands and vfio-pci.ids line that would fix it, and, for a shared
group, the first bridge on the path to the root port without the ACS
controls that isolate it.

Unlike 'check' (which judges only groups someone set up for passthrough),
every accelerator is judged as meant for passthrough here. It is read-only.
Exit status: 0 no FAIL; 1 a group that holds an accelerator is not viable,
or the IOMMU is off or absent; 2 nothing could be judged, or a usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, source, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			env := diagnose.NewEnv(root, diagnose.Options{Layers: []report.Layer{report.LayerPCI, report.LayerIOMMU}, Passthrough: true})
			if err := selectDevices(env, devices, "under "+root.Dir()); err != nil {
				return err
			}
			rep := diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Tool: "accel-doctor " + Version, Command: "iommu", Source: source, Root: snapshotName(snapshot)})
			if err := g.render(rep, verbose); err != nil {
				return err
			}
			return exitFor(rep.ExitCode())
		},
	}
	f := cmd.Flags()
	f.StringVar(&snapshot, "snapshot", "", "read a snapshot archive instead of the host")
	f.StringSliceVar(&devices, "device", nil, "only these PCI functions (0000:17:00.0, 17:00.0, ...)")
	f.BoolVarP(&verbose, "verbose", "v", false, "text output: list every check, the ones that passed too")
	g.addOutputFlag(cmd)
	return cmd
}
