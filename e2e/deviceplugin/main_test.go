// Package deviceplugin tests device plugins against the kubelet's own
// device manager (see ../harness): stubPlugin, written here from the
// v1beta1 API, proves the harness; accel-doctor's `plugin serve`
// (ours_test.go) and `plugin mock` in every mode (mock_test.go) run as
// processes through the same calls, and `accel-doctor check --layer kube`
// judges what each scenario left on the node (see ../README.md).
package deviceplugin

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
