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

	"github.com/accel-doctor/accel-doctor/internal/claim"
	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/dramock"
	"github.com/accel-doctor/accel-doctor/internal/lint"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Extension is accel-doctor-kube's part of the CLI.
func Extension() *cli.Extension {
	return &cli.Extension{
		Binary: cli.KubeBinary,
		Commands: func(g *cli.Globals) []*cobra.Command {
			return append(kubeletcli.Commands(g), newLintCmd(g), newClusterCmd(g), newAgentCmd(g), newClaimCmd(g), newDRACmd(g))
		},
		Codes:      codes(),
		DRA:        draPlugin(),
		KubeletRPC: grpccall.Caller{},
	}
}

// codes are the catalogs of this binary's commands, for explain.
func codes() []diagnose.Code {
	var out []diagnose.Code
	for _, c := range lint.Codes {
		out = append(out, diagnose.Code{Code: c.Code, Layer: report.LayerKube, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	for _, c := range dramock.Codes {
		// plugin test --dra's codes carry their meaning in the title
		// (docs/dra.md has them as a table).
		out = append(out, diagnose.Code{Code: c.Code, Layer: report.LayerKube, Title: c.Title, Explain: c.Title + ". Reported by `plugin test --dra` (status " + c.Status + "); docs/dra.md lists every code.", Remediation: c.Remediation})
	}
	for _, c := range cluster.Codes {
		out = append(out, diagnose.Code{Code: c.Code, Layer: report.LayerKube, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	for _, c := range append(append([]claim.Code(nil), claim.Codes...), claim.FleetCodes...) {
		out = append(out, diagnose.Code{Code: c.Code, Layer: report.LayerKube, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	return out
}
