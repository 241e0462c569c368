// Package kubeletcli is accel-doctor-kubelet's part of the CLI: the
// commands that speak the kubelet's gRPC APIs (plugin serve, mock and
// test; the hidden kubelet-rpc that makes layer 6's calls for
// accel-doctor), as a cli.Extension. accel-doctor-kube includes it.
// internal/cli's KubeletBinary says why these are not in accel-doctor.
package kubeletcli

import (
	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"
)

// Extension is accel-doctor-kubelet's.
func Extension() *cli.Extension {
	return &cli.Extension{
		Binary:     cli.KubeletBinary,
		Commands:   Commands,
		KubeletRPC: grpccall.Caller{},
	}
}

// Commands are its commands, for an Extension.
func Commands(g *cli.Globals) []*cobra.Command {
	return []*cobra.Command{NewPluginCmd(g), newKubeletRPCCmd(g)}
}

func newKubeletRPCCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "kubelet-rpc",
		Short:  "Make layer 6's read-only calls on the kubelet's sockets for accel-doctor (a JSON request on stdin, the replies on stdout)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := hostfs.New(g.RootDir())
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			if err := grpccall.Serve(cmd.Context(), root, cmd.InOrStdin(), g.Stdout()); err != nil {
				return cli.UsageErr("kubelet-rpc: %v", err)
			}
			return nil
		},
	}
	g.AddRootFlag(cmd)
	return cmd
}
