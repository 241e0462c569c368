package diagnose

import (
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// BenchmarkCheckH100x8 is `check` over the 8-GPU fixture, reports
// excluded (goal: <= 20 ms).
func BenchmarkCheckH100x8(b *testing.B) {
	for i := 0; i < b.N; i++ {
		root := hostfs.MustNew(filepath.Join(hostsDir, fixture.NameNVIDIAx8))
		Run(NewEnv(root, Options{}), Registry(), Meta{})
	}
}

// BenchmarkCheckLive is `check` over this machine.
func BenchmarkCheckLive(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Run(NewEnv(hostfs.MustNew("/"), Options{}), Registry(), Meta{})
	}
}
