// Command accel-doctor finds why an accelerator is visible but unusable in
// a container or a Kubernetes pod, and says which layer broke.
package main

import (
	"os"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/enter"
	"github.com/accel-doctor/accel-doctor/internal/sandbox"
)

func main() {
	// The sandbox re-runs this binary for its helpers (command trampoline,
	// probe, reaper); they are chosen by an environment variable and never
	// reach the command line.
	if sandbox.TrampolineMain() {
		return
	}
	// container --probe re-runs this binary, from an fd opened before it
	// entered the container, as the probe's child (internal/enter).
	if enter.TrampolineMain() {
		return
	}
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
