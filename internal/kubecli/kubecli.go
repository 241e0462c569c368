// Package kubecli holds the commands of accel-doctor-kube: those that
// link the Kubernetes client and API types (lint, cluster, agent, claim,
// dra, and the DRA mock and tester of the plugin command). It extends
// internal/cli (cli.Extension); accel-doctor hands these commands over to
// accel-doctor-kube, so that the node diagnosis does not carry their code
// (see cli.KubeBinary).
package kubecli

import (
	"github.com/accel-doctor/accel-doctor/internal/kubeletcli"
	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"
	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cli"
)

// Extension is accel-doctor-kube's part of the CLI.
func Extension() *cli.Extension {
	return &cli.Extension{
		Binary: cli.KubeBinary,
		Commands: func(g *cli.Globals) []*cobra.Command {
			return append(kubeletcli.Commands(g), newLintCmd(g), newClusterCmd(g), newAgentCmd(g), newClaimCmd(g), newDRACmd(g))
		},
		DRA:        draPlugin(),
		KubeletRPC: grpccall.Caller{},
	}
}
