package diagnose

import (
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// The work of a check run grows linearly with the accelerators: over a
// fixture.Scale host with four times the functions, a run makes at most
// five times the allocations (linear is four, a step that visits every
// device or every node again for each device makes it sixteen). Counted,
// not timed: BenchmarkCheckScale measures the time. Both hosts are
// healthy: every device listed, no FAIL.
//
// Allocations count the steps that read the host for every pair of
// devices: when each device listed /sys/class/accel and resolved every
// entry again, 150 and 600 accelerators made 123,194 and 760,766
// allocations (6.2x); now 100,913 and 399,936 (4.0x). A scan of an
// in-memory list for each device allocates nothing and is the
// benchmark's to see.
func TestCheckScalesLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("writes two host trees of 300 and 1,200 PCI functions (a few seconds)")
	}
	const n = 150
	allocs := map[int]float64{}
	for _, accel := range []int{n, 4 * n} {
		root, err := fixture.NewRoot(filepath.Join(t.TempDir(), "host"), fixture.Scale(accel, 0))
		if err != nil {
			t.Fatal(err)
		}
		var rep *report.Report
		allocs[accel] = testing.AllocsPerRun(1, func() {
			rep = Run(NewEnv(root, Options{}), Registry(), Meta{})
		})
		if len(rep.Devices) != accel {
			t.Errorf("%d accelerators: %d devices in the report", accel, len(rep.Devices))
		}
		for _, f := range rep.Findings {
			if f.Status == report.Fail {
				t.Errorf("%d accelerators: FAIL %s %s: %s", accel, f.Code, f.Subject, f.Summary)
			}
		}
	}
	ratio := allocs[4*n] / allocs[n]
	t.Logf("allocations: %.0f for %d accelerators, %.0f for %d: %.2fx", allocs[n], n, allocs[4*n], 4*n, ratio)
	if ratio > 5 {
		t.Errorf("4x the accelerators made %.2fx the allocations (%.0f, %.0f): some step grows faster than the machine", ratio, allocs[n], allocs[4*n])
	}
}
