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

// Every code of this binary's catalogs is one accel-doctor hands over
// (cli.KubeCodePrefixes), and every command is one it lists
// (cli.KubeCommands).
func TestHandedOver(t *testing.T) {
	for _, c := range Extension().Codes {
		found := false
		for _, p := range cli.KubeCodePrefixes {
			found = found || len(c.Code) > len(p) && c.Code[:len(p)] == p
		}
		if !found {
			t.Errorf("%s has no prefix in cli.KubeCodePrefixes: accel-doctor explain would not hand it over", c.Code)
		}
	}
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
