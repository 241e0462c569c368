package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/iommu"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func newIOMMUCmd(g *globals) *cobra.Command {
	var (
		snapshot, guest string
		devices         []string
		verbose         bool
		pid             int
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
controls that isolate it. For the devices meant for VFIO: the modules,
the binding, /dev/vfio/vfio and /dev/vfio/N; with --pid, the process's
locked-memory limit against what VFIO will pin for it (ENOMEM from
VFIO_IOMMU_MAP_DMA beyond it without CAP_IPC_LOCK) and who else holds its
groups (EBUSY, EPERM).

Unlike 'check' (which judges only groups someone set up for passthrough),
every accelerator is judged as meant for passthrough here, so an IOMMU that
is off, or that nothing describes, is a FAIL (check WARNs unless the host is
configured for VFIO), and the findings that follow from it (devices that
cannot be bound to vfio-pci) are listed under it as its consequences. The
locked-memory limit is judged without the guest's size where it does not
matter: CAP_IPC_LOCK or no limit covers any guest, and a limit below what
any guest pins (72 KiB for a QEMU running x86 guests) covers none. It is
read-only.
Exit status: 0 no FAIL; 1 a group that holds an accelerator is not viable,
the IOMMU is off or absent, or a VFIO fault (module, binding, node,
locked-memory limit, a group held by another process); 2 nothing could be
judged, or a usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, source, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			opts := diagnose.Options{Layers: []report.Layer{report.LayerPCI, report.LayerIOMMU}, Passthrough: true, PID: pid}
			if guest != "" {
				n, err := iommu.ParseQEMUSize(guest)
				if err != nil {
					return usageErr("--guest-memory %q: %v", guest, err)
				}
				opts.GuestMemory = &n
			}
			if pid < 0 || (pid > 0 && !root.Exists(fmt.Sprintf("/proc/%d", pid))) {
				return usageErr("--pid %d: no such process under %s", pid, root.Dir())
			}
			env := diagnose.NewEnv(root, opts)
			if err := selectDevices(env, devices, "under "+root.Dir()); err != nil {
				return err
			}
			rep := diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Tool: "accel-doctor " + Version, Command: "iommu", Source: source, Root: snapshotName(snapshot)})
			if err := g.render(rep, verbose); err != nil {
				return err
			}
			return verdictExit(rep.ExitCode(), rep.Verdict.Summary)
		},
	}
	f := cmd.Flags()
	g.addRootFlag(cmd)
	Flag(f, "snapshot", "").String(&snapshot, "")
	Flag(f, "device", "").StringSlice(&devices, nil)
	Flag(f, "verbose", "").Bool(&verbose, false)
	Flag(f, "pid", " that will use VFIO (QEMU, DPDK, a KubeVirt launcher): its RLIMIT_MEMLOCK against what VFIO pins for it, CAP_IPC_LOCK, who else holds its groups").Int(&pid, 0)
	f.StringVar(&guest, "guest-memory", "", "with --pid: the memory VFIO will pin for it (16G, 16384M; default: QEMU's -m on the live host)")
	g.addOutputFlag(cmd)
	return cmd
}
