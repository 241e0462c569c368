// Command accel-doctor-kubelet is accel-doctor with the commands that
// speak the kubelet's gRPC APIs (plugin serve, plugin mock, plugin test,
// and kubelet-rpc, which makes layer 6's read-only calls on the kubelet's
// sockets for accel-doctor): see internal/cli's KubeletBinary. accel-doctor
// runs it for those; it runs every other command itself too.
package main

import (
	"os"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/enter"
	"github.com/accel-doctor/accel-doctor/internal/kubeletcli"
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
	os.Exit(cli.RunWith(os.Args[1:], os.Stdout, os.Stderr, kubeletcli.Extension()))
}
