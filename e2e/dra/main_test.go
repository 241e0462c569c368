// Package dra tests `accel-doctor claim` against a real API server and
// scheduler (../apiserver) with Dynamic Resource Allocation
// (resource.k8s.io/v1, GA and on by default since Kubernetes 1.34): the
// claims the scheduler cannot allocate, and the reason it gives, against
// what `claim` names.
package dra

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// harness.Main runs the tests as the other e2e packages do and removes the
// binaries harness.AccelDoctor builds.
func TestMain(m *testing.M) { harness.Main(m) }
