package kubecli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/claim"
	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
)

func newDRACmd(g *cli.Globals) *cobra.Command {
	var opts cluster.ConfigOptions
	cmd := &cobra.Command{
		Use:   "dra",
		Short: "DRA across the fleet: accelerator nodes without a ResourceSlice, pools of mixed generations or incomplete, pending pods by claim (read-only)",
		Long: `dra reads the cluster's Nodes, ResourceSlices, ResourceClaims and Pending Pods
(paged LISTs of 500, at once) and reports: nodes whose accelerator hardware
(Node Feature Discovery's pci labels, or the agent's accel-doctor.io/summary)
no ResourceSlice names; pools whose slices are of several generations, or fewer
or more than their resourceSliceCount; the Pending pods grouped by the claim
they wait on. Whether a slice's driver is registered with its node's kubelet is
node-local: it is NOT_RUN here (run check on the node).

It reaches the cluster as kubectl does (--kubeconfig, $KUBECONFIG,
~/.kube/config, the in-cluster config; --context). It writes nothing.
Exit status: 0 no FAIL (every finding here is a WARN at most); 2 nothing could
be read, or a usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, host, err := cluster.RESTConfig(opts)
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			client, err := claim.NewClient(cfg)
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			f := claim.NewFleet()
			if err := claim.CollectFleet(cmd.Context(), client, f); err != nil {
				return err
			}
			rep := f.Report(claim.Meta{Tool: "accel-doctor " + cli.Version, Source: host, Now: time.Now()})
			if err := g.Render(rep, true); err != nil {
				return err
			}
			return cli.ExitFor(rep)
		},
	}
	f := cmd.Flags()
	cli.Flag(f, "kubeconfig", cli.KubeconfigDefault).String(&opts.Kubeconfig, "")
	cli.Flag(f, "context", "").String(&opts.Context, "")
	g.AddOutputFlag(cmd)
	return cmd
}
