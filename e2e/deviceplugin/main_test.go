// Package deviceplugin tests device plugins against the kubelet's own
// device manager (see ../harness). Today the plugin under test is
// stubPlugin, written here from the v1beta1 API, which proves the harness;
// accel-doctor's `plugin serve` and `plugin mock` run through the same
// scenarios once they exist (see ../README.md).
package deviceplugin

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
