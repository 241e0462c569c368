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

// BenchmarkCheckScale is `check` over fixture.Scale hosts of 1,000 to
// 10,000 accelerator functions (each behind a root port of its own) and
// over 4,000 NICs (no accelerator: the control), reports excluded. The
// cost must grow linearly with the functions (goal: 10k in <= 1 s of
// CPU). Writing the trees takes longer than checking them.
//
//	go test -run XXX -bench CheckScale -benchtime 1x ./internal/diagnose
func BenchmarkCheckScale(b *testing.B) {
	for _, c := range []struct {
		name        string
		accel, nics int
	}{{"1k", 1000, 0}, {"2k", 2000, 0}, {"4k", 4000, 0}, {"10k", 10000, 0}, {"nic4k", 0, 4000}} {
		b.Run(c.name, func(b *testing.B) {
			root, err := fixture.NewRoot(filepath.Join(b.TempDir(), "host"), fixture.Scale(c.accel, c.nics))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				rep := Run(NewEnv(root, Options{}), Registry(), Meta{})
				if len(rep.Devices) != c.accel {
					b.Fatalf("%d devices, want %d", len(rep.Devices), c.accel)
				}
			}
		})
	}
}
