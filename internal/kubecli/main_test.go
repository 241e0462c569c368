package kubecli

import (
	"bytes"
	"context"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/cli"
)

// run runs accel-doctor-kube's command line in process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = cli.MainWith(context.Background(), args, &o, &e, Extension())
	return o.String(), e.String(), code
}

// Every command of this binary is one accel-doctor lists and hands over
// (cli.KubeCommands).
func TestHandedOver(t *testing.T) {
	names := map[string]bool{}
	for _, c := range cli.KubeCommands {
		names[c.Name] = true
	}
	for _, c := range cli.KubeletCommands {
		names[c.Name] = true // accel-doctor-kubelet's, which this binary includes
	}
	for _, c := range Extension().Commands(&cli.Globals{}) {
		if !names[c.Name()] && !c.Hidden {
			t.Errorf("command %s is not in cli.KubeCommands: accel-doctor would not hand it over", c.Name())
		}
	}
}
