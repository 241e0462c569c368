// Package agent tests `accel-doctor agent` (the DaemonSet mode) against a
// real API server (../apiserver) with RBAC on: the agent runs as its
// ServiceAccount, with the RBAC of internal/agent/testdata/rbac.yaml, over
// fixture roots of testdata/hosts; the test reads back the node's
// condition, the Event and the annotation, scrapes /metrics, and checks
// what that identity may and may not do.
package agent

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// harness.Main runs the tests as root in a private mount namespace and
// removes the binaries harness.AccelDoctor builds.
func TestMain(m *testing.M) { harness.Main(m) }
