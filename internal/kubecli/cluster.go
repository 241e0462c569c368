package kubecli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
)

func newClusterCmd(g *cli.Globals) *cobra.Command {
	var (
		opts    cluster.ConfigOptions
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "The fleet through the API server: resources not allocatable, hardware not advertised, plugin pods not Ready, Pending pods, agents' FAILs (read-only)",
		Long: `cluster reads the cluster's Nodes, Pods and FailedScheduling Events through
the API server (paged LISTs of 500, never a GET per object) and reports, per
node: each extended resource whose allocatable is below its capacity; accelerator
hardware present (Node Feature Discovery's feature.node.kubernetes.io/pci-<class>_<vendor>.present
labels, or the agent's accel-doctor.io/summary annotation) with no resource
advertised; device-plugin and DRA-driver pods that are not Ready; the agent's
FAIL with its first failing layer and code. Then the Pending pods, grouped by
what the scheduler said they lack (Insufficient RESOURCE, cannot allocate all
claims, untolerated taints, other reasons).

It reaches the cluster as kubectl does: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the pod's service account; --context picks a context. It
needs list on nodes, pods and events; it writes nothing.
Exit status: 0 no FAIL; 1 a node has a FAIL (its agent reports one, a resource
with nothing allocatable, a plugin pod not Ready); 2 nothing could be read, or a
usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, host, err := cluster.RESTConfig(opts)
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			client, err := cluster.NewClient(cfg)
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			a := cluster.NewAnalyzer()
			if err := cluster.Collect(cmd.Context(), client, opts.Namespace, a); err != nil {
				return err
			}
			rep := a.Report(cluster.Meta{Tool: "accel-doctor " + cli.Version, Source: host, Now: time.Now()})
			if err := g.Render(rep, verbose); err != nil {
				return err
			}
			if t := a.ResourceTable(); t != nil && g.Output() != "json" {
				fmt.Fprintln(g.Stdout())
				if err := g.RenderTable(t, nil); err != nil {
					return err
				}
			}
			return cli.ExitFor(rep)
		},
	}
	f := cmd.Flags()
	cli.Flag(f, "kubeconfig", cli.KubeconfigDefault).String(&opts.Kubeconfig, "")
	cli.Flag(f, "context", "").String(&opts.Context, "")
	cli.Flag(f, "namespace", ": only its pods and events (default: all namespaces; nodes are always all)").String(&opts.Namespace, "")
	cli.Flag(f, "verbose", " (every node, the healthy ones too)").Bool(&verbose, false)
	g.AddOutputFlag(cmd)
	return cmd
}
