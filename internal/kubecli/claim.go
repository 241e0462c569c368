package kubecli

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/claim"
	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
)

func newClaimCmd(g *cli.Globals) *cobra.Command {
	var opts cluster.ConfigOptions
	cmd := &cobra.Command{
		Use:   "claim NAMESPACE/NAME",
		Short: "Why a DRA ResourceClaim is not allocated: per device, the selector or capacity that excludes it; confirmed by the scheduler's allocator (read-only)",
		Long: `claim reads one ResourceClaim (resource.k8s.io/v1) and says whether it is
allocated (on which node, which devices, reserved for which pods). When it is
not, it says why: for each request, whether its DeviceClass exists, then its
class and request CEL selectors, evaluated with the scheduler's own CEL
library (k8s.io/dynamic-resource-allocation/cel) against every device of every
ResourceSlice (each pool's newest generation), naming per node, pool and
device the first selector (class or request, by index and expression) that
excludes it, and whether enough free devices are left on one node for the
request's count. Then it runs the scheduler's allocator
(k8s.io/dynamic-resource-allocation/structured) offline on the same objects,
node by node, and says whether it agrees.

It reaches the cluster as kubectl does (--kubeconfig, $KUBECONFIG,
~/.kube/config, the in-cluster config; --context). It needs get on the
claim and list on deviceclasses, resourceslices, resourceclaims and nodes
(paged LISTs of 500); it writes nothing. Constraints (matchAttribute) and the
node selectors of slices are left to the allocator; device taints,
partitionable devices' counters and consumable capacity are evaluated by
neither (the allocator runs without those features).
Exit status: 0 allocated or allocatable; 1 the claim cannot be allocated;
2 it could not be read, or a usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, ok := strings.Cut(args[0], "/")
			if !ok {
				ns, name = opts.Namespace, args[0]
				if ns == "" {
					ns = "default"
				}
			}
			if ns == "" || name == "" || strings.Contains(name, "/") {
				return cli.UsageErr("claim: want NAMESPACE/NAME, got %q", args[0])
			}
			cfg, host, err := cluster.RESTConfig(opts)
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			client, err := claim.NewClient(cfg)
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			meta := claim.Meta{Tool: "accel-doctor " + cli.Version, Source: host, Now: time.Now()}
			in, err := claim.Gather(cmd.Context(), client, ns, name)
			if err != nil {
				rep := claim.NotRead(meta, "resourceclaim/"+ns+"/"+name, err)
				if rerr := g.Render(rep, true); rerr != nil {
					return rerr
				}
				return cli.ExitFor(rep)
			}
			e, err := claim.Explain(cmd.Context(), in)
			if err != nil {
				return err
			}
			rep := e.Report(meta)
			if err := g.Render(rep, true); err != nil {
				return err
			}
			return cli.ExitFor(rep)
		},
	}
	f := cmd.Flags()
	cli.Flag(f, "kubeconfig", cli.KubeconfigDefault).String(&opts.Kubeconfig, "")
	cli.Flag(f, "context", "").String(&opts.Context, "")
	cli.Flag(f, "namespace", ": the claim's, when the argument is a bare NAME (default: default)").String(&opts.Namespace, "")
	g.AddOutputFlag(cmd)
	return cmd
}
