// Command accel-doctor-kube is accel-doctor with the commands that link
// the Kubernetes client and API types (lint, cluster, agent, claim, dra,
// plugin mock --dra, plugin test --dra): see internal/cli's KubeBinary.
// accel-doctor runs it for those commands; it runs every other command
// itself too.
package main

import (
	"os"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/enter"
	"github.com/accel-doctor/accel-doctor/internal/kubecli"
	"github.com/accel-doctor/accel-doctor/internal/sandbox"
)

func main() {
	// The same trampolines as accel-doctor's (cmd/accel-doctor): the
	// sandbox and container --probe re-run this binary.
	if sandbox.TrampolineMain() {
		return
	}
	if enter.TrampolineMain() {
		return
	}
	os.Exit(cli.RunWith(os.Args[1:], os.Stdout, os.Stderr, kubecli.Extension()))
}
