// Package cluster tests `accel-doctor cluster` against a real API server
// and scheduler (../apiserver), and proves that harness: what the real
// scheduler says about a Pod that asks for more of an extended resource
// than any node has.
package cluster

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// harness.Main runs the tests in a private mount namespace as root (the
// device-manager tests need it; these do not mind) and removes the
// accel-doctor binary harness.AccelDoctor builds.
func TestMain(m *testing.M) { harness.Main(m) }
