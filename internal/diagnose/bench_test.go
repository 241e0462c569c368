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

// BenchmarkCheckLive is `check` over this machine, with the checks'
// prefetches (as `check` runs) and without them (one goroutine).
func BenchmarkCheckLive(b *testing.B) {
	sequential := Registry()
	for i := range sequential {
		sequential[i].Prefetch = nil
	}
	for _, c := range []struct {
		name   string
		checks []Check
	}{{"prefetch", Registry()}, {"sequential", sequential}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Run(NewEnv(hostfs.MustNew("/"), Options{}), c.checks, Meta{})
			}
		})
	}
}
