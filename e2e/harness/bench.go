package harness

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks' shared pieces: sizes from the environment, filling the
// API server in parallel, and the CPU and peak RSS of a command run under
// GNU time.

// EnvInt is the count in environment variable name, def when it is unset.
func EnvInt(b testing.TB, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// Parallel runs f(0..n-1) on 32 workers and fails b on the first error.
func Parallel(b testing.TB, n int, f func(int) error) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		once sync.Once
		ferr error
		next = make(chan int)
	)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { ferr = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if ferr != nil {
		b.Fatal(ferr)
	}
}

// ReadTime reads the "%U %S %M" line GNU time wrote to path (the last
// line: time writes a "Command exited with non-zero status" line before it
// on a non-zero exit): user plus system CPU seconds, and the peak RSS in
// KiB.
func ReadTime(path string) (cpu float64, kib int64, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 3 {
		return 0, 0, fmt.Errorf("%s: %q: want user, system and RSS", path, raw)
	}
	u, err1 := strconv.ParseFloat(f[0], 64)
	s, err2 := strconv.ParseFloat(f[1], 64)
	k, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("%s: %q: %w", path, raw, err)
	}
	return u + s, k, nil
}

// SummaryTime is the time of an agent summary a test plants: now, when it
// is planted, so that cluster and dra judge it current (a summary older
// than 3 of the agent's intervals is stale: internal/cluster
// Summary.Stale).
func SummaryTime() string { return time.Now().UTC().Format(time.RFC3339) }
