package diagnose

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// A reader runs once however many goroutines ask for it at once; every
// caller gets its result and error.
func TestMemoOnceAcrossGoroutines(t *testing.T) {
	e := NewEnv(hostfs.MustNew(t.TempDir()), Options{})
	var runs atomic.Int32
	release := make(chan struct{})
	boom := errors.New("unreadable")
	var wg sync.WaitGroup
	got := make([]int, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = memo(e, "k", func() (int, error) {
				runs.Add(1)
				<-release // the others arrive while it is in flight
				return 42, boom
			})
		})
	}
	close(release)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Errorf("the reader ran %d times", n)
	}
	for i := range got {
		if got[i] != 42 || !errors.Is(errs[i], boom) {
			t.Errorf("caller %d: %d, %v", i, got[i], errs[i])
		}
	}
	if v, ran, err := e.memoDone("k"); !ran || v != 42 || !errors.Is(err, boom) {
		t.Errorf("memoDone: %v %v %v", v, ran, err)
	}
	if _, ran, _ := e.memoDone("never"); ran {
		t.Error("memoDone ran a reader nobody asked for")
	}
}

// A reader's panic reaches every check that uses it, with the reader's
// stack, whether a prefetch or the check ran it; the run still reports.
func TestReaderPanicReachesEveryCheck(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		root := hostfs.MustNew(t.TempDir())
		var runs atomic.Int32
		reader := func(e *Env) int {
			v, _ := memo(e, "bad", func() (int, error) {
				runs.Add(1)
				var m map[string]int
				m["x"] = 1 // a reader's bug
				return 0, nil
			})
			return v
		}
		use := func(e *Env, o *Out) { o.Add("Y", report.Pass, "host", "read "+string(rune('0'+reader(e)))) }
		checks := []Check{
			{ID: "t.first", Layer: report.LayerDriver, Title: "first", Codes: []string{"Y"}, Run: use},
			{ID: "t.second", Layer: report.LayerIOMMU, Title: "second", Codes: []string{"Y"}, Run: use},
			{ID: "t.ok", Layer: report.LayerIOMMU, Title: "ok", Codes: []string{"Y"}, Run: func(_ *Env, o *Out) { o.Add("Y", report.Pass, "host", "fine") }},
		}
		if prefetch {
			checks[1].Prefetch = func(e *Env) { reader(e) }
		}
		rep := Run(NewEnv(root, Options{}), checks, Meta{Command: "test"})
		if n := runs.Load(); n != 1 {
			t.Errorf("prefetch %v: the reader ran %d times", prefetch, n)
		}
		if len(rep.Findings) != 3 {
			t.Fatalf("prefetch %v: findings %+v", prefetch, rep.Findings)
		}
		for _, f := range rep.Findings[:2] {
			if f.Code != CodeCheckCrashed || !strings.Contains(f.Reason, "nil map") ||
				// the stack where the reader panicked, not where memo
				// handed the panic on
				len(f.Evidence) != 1 || !strings.Contains(f.Evidence[0].Value, "TestReaderPanicReachesEveryCheck.func1.1(") {
				t.Errorf("prefetch %v: %s: %+v", prefetch, f.Check, f)
			}
		}
		if f := rep.Findings[2]; f.Check != "t.ok" || f.Status != report.Pass {
			t.Errorf("prefetch %v: %+v", prefetch, f)
		}
	}
}

// A prefetch runs only for a check whose layer the run selects, before
// the earlier layers' checks are done, and Run returns after it.
func TestPrefetch(t *testing.T) {
	root := hostfs.MustNew(t.TempDir())
	started := make(chan struct{})
	var prefetched, ranDeselected atomic.Bool
	checks := []Check{
		{ID: "t.early", Layer: report.LayerPCI, Title: "early", Codes: []string{"Y"}, Run: func(_ *Env, o *Out) {
			select {
			case <-started: // the prefetch of a later layer's reader runs meanwhile
				o.Add("Y", report.Pass, "host", "early")
			case <-time.After(time.Minute): // a guard against a hang, not a measure
				o.Add("Y", report.Fail, "host", "the prefetch did not start while an earlier layer ran")
			}
		}},
		{ID: "t.late", Layer: report.LayerIOMMU, Title: "late", Codes: []string{"Y"},
			Prefetch: func(e *Env) {
				memo(e, "slow", func() (string, error) {
					close(started)
					prefetched.Store(true)
					return "from the prefetch", nil
				})
			},
			Run: func(e *Env, o *Out) {
				v, _ := memo(e, "slow", func() (string, error) { return "from the check", nil })
				o.Add("Y", report.Pass, "host", v)
			}},
		{ID: "t.deselected", Layer: report.LayerDriver, Title: "not run", Codes: []string{"Y"},
			Prefetch: func(*Env) { ranDeselected.Store(true) },
			Run:      func(*Env, *Out) {}},
	}
	rep := Run(NewEnv(root, Options{Layers: []report.Layer{report.LayerPCI, report.LayerIOMMU}}), checks, Meta{Command: "test"})
	if len(rep.Findings) != 2 || rep.Findings[0].Status != report.Pass || rep.Findings[1].Summary != "from the prefetch" {
		t.Errorf("findings %+v", rep.Findings)
	}
	if !prefetched.Load() || ranDeselected.Load() {
		t.Errorf("prefetched %v, the deselected layer's prefetch ran %v", prefetched.Load(), ranDeselected.Load())
	}
}

// Prefetching changes no finding: the registry with and without its
// prefetches, over this machine and every committed host tree.
func TestPrefetchChangesNothing(t *testing.T) {
	roots := []string{"/"}
	hosts, err := os.ReadDir(hostsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.IsDir() {
			roots = append(roots, filepath.Join(hostsDir, h.Name()))
		}
	}
	sequential := Registry()
	for i := range sequential {
		sequential[i].Prefetch = nil
	}
	prefetched := 0
	for _, c := range Registry() {
		if c.Prefetch != nil {
			prefetched++
		}
	}
	if prefetched == 0 {
		t.Fatal("no check prefetches: nothing to compare")
	}
	for _, dir := range roots {
		want := Run(NewEnv(hostfs.MustNew(dir), Options{}), sequential, Meta{})
		got := Run(NewEnv(hostfs.MustNew(dir), Options{}), Registry(), Meta{})
		want.Generated, got.Generated = time.Time{}, time.Time{}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-sequential +prefetched):\n%s", dir, diff)
		}
		for _, f := range got.Findings {
			if f.Code == CodeCheckCrashed {
				t.Errorf("%s: %s crashed: %s", dir, f.Check, f.Reason)
			}
		}
	}
}
