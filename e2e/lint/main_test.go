// Package lint tests `accel-doctor lint --cluster` against a real API
// server and scheduler (../apiserver): the cluster of
// internal/lint/testdata/cluster/objects.yaml is created there, each
// planted manifest of internal/lint/testdata/planted-cluster is flagged
// with its code and nothing else, the real scheduler (or admission) says
// the same of the pod, and the manifests of deploy/ are clean.
package lint

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
