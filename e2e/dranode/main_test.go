package dranode

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// harness.Main runs the tests in a private mount namespace, as the other
// e2e packages do (the device manager's directory and the node's
// /var/lib/kubelet/plugins are bind mounts there), and removes the
// binaries harness.AccelDoctor builds.
func TestMain(m *testing.M) { harness.Main(m) }
