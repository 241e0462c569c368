package deploy

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// harness.Main removes the binaries harness.AccelDoctor builds (the agent
// of TestAgentOwnNodePolicy) when the tests end; it runs them in a private
// mount namespace as root, which these do not mind.
func TestMain(m *testing.M) { harness.Main(m) }
