package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// BenchmarkContainers100 lists the containers of a host running 100 runc
// containers (busybox sleep, runc's default root), the work of
// `accel-doctor container --all`; the goal is at most 1 s. Also
// lookups by an init PID, by a PID in no container (which reads every
// container's cgroups) and by ID.
//
//	go test ./internal/runtime -run '^$' -bench Containers100 -benchtime 20x
func BenchmarkContainers100(b *testing.B) {
	e := needRunc(b)
	const n = 100
	ids := make([]string, n)
	pids := make([]int, n)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	sem := make(chan struct{}, 4)
	bundles := b.TempDir()
	for i := range n {
		ids[i] = fmt.Sprintf("accel-doctor-bench-%s-%03d", e.tag, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pid, err := e.startErr(b, ctr{id: ids[i], bundle: filepath.Join(bundles, ids[i]),
				annotations: map[string]string{annCRINamespace: "bench", annCRIName: fmt.Sprintf("pod-%d", i), annCRIContainer: "c"}})
			mu.Lock()
			pids[i] = pid
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d containers did not start: %v", len(errs), errs[0])
	}
	root := hostfs.MustNew("/")
	count := func(cs []Container) int {
		k := 0
		for _, c := range cs {
			if strings.HasPrefix(c.ID, "accel-doctor-bench-"+e.tag) && c.Status == StatusRunning {
				k++
			}
		}
		return k
	}
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			cs, _ := Containers(root)
			if k := count(cs); k != n {
				b.Fatalf("%d of our %d containers found running", k, n)
			}
		}
	})
	b.Run("pid-init", func(b *testing.B) {
		for b.Loop() {
			if m, _, err := Find(root, fmt.Sprint(pids[n-1])); err != nil || m.ID != ids[n-1] {
				b.Fatalf("Find: %s %v", m.ID, err)
			}
		}
	})
	// A PID in no container: every running container's cgroups are read.
	b.Run("pid-none", func(b *testing.B) {
		self := fmt.Sprint(os.Getpid())
		for b.Loop() {
			if _, _, err := Find(root, self); err == nil {
				b.Fatal("our own process found in a container")
			}
		}
	})
	b.Run("id", func(b *testing.B) {
		for b.Loop() {
			if m, _, err := Find(root, ids[n/2]); err != nil || m.ID != ids[n/2] {
				b.Fatalf("Find: %s %v", m.ID, err)
			}
		}
	})
}
