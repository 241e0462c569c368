// Command bench runs accel-doctor and its peer tools side by side on this
// machine, alternating, several runs each, and prints the median wall time,
// the peak RSS and the ratios. It is a benchmark, not a test: nothing here
// passes or fails.
//
//	go run ./bench [-runs 15] [-bin PATH]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

type subject struct {
	name string
	argv []string
	wall []time.Duration
	rss  []int64 // KiB
	rc   int
}

func main() {
	runs := flag.Int("runs", 15, "runs of each command")
	bin := flag.String("bin", "", "accel-doctor binary (default: build one)")
	flag.Parse()
	dir, err := os.MkdirTemp("", "accel-doctor-bench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin = filepath.Join(dir, "accel-doctor")
		goBuild("./cmd/accel-doctor", *bin, "")
	}
	// The floor: what any Go binary costs to start on this machine.
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module empty\n\ngo 1.22\n"), 0o644); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		fail(err)
	}
	goBuild(".", empty, dir)
	subjects := []*subject{
		{name: "accel-doctor check (live)", argv: []string{*bin, "check"}},
		{name: "empty Go binary (func main(){})", argv: []string{empty}},
		{name: "virt-host-validate", argv: []string{"virt-host-validate"}},
		{name: "lspci -vvv", argv: []string{"lspci", "-vvv"}},
		{name: "accel-doctor check (nvidia-h100x8 fixture)", argv: []string{*bin, "check", "--root", "testdata/hosts/nvidia-h100x8"}},
		{name: "accel-doctor check --snapshot demo", argv: []string{*bin, "check", "--snapshot", "demo"}},
	}
	var present []*subject
	for _, s := range subjects {
		if _, err := exec.LookPath(s.argv[0]); err != nil {
			fmt.Printf("%-44s not installed (%v): skipped\n", s.name, err)
			continue
		}
		present = append(present, s)
	}
	// Alternate so that a change in machine load hits every tool alike.
	for i := 0; i < *runs+1; i++ {
		for _, s := range present {
			w, rss, rc := runOnce(s.argv)
			if i == 0 {
				continue // warm-up: page cache, first exec
			}
			s.wall, s.rss, s.rc = append(s.wall, w), append(s.rss, rss), rc
		}
	}
	fmt.Printf("%d runs each, alternating, after one warm-up run\n\n", *runs)
	fmt.Printf("%-44s %12s %12s %6s\n", "command", "median wall", "peak RSS", "exit")
	med := map[string]time.Duration{}
	rss := map[string]int64{}
	for _, s := range present {
		med[s.name] = medianDur(s.wall)
		rss[s.name] = maxInt(s.rss)
		fmt.Printf("%-44s %10.1fms %9.1fMiB %6d\n", s.name, ms(med[s.name]), float64(rss[s.name])/1024, s.rc)
	}
	fmt.Println()
	ratio := func(a, b string) {
		if med[a] == 0 || med[b] == 0 {
			return
		}
		fmt.Printf("wall  %-28s / %-20s = %.2f\n", a, b, float64(med[a])/float64(med[b]))
		fmt.Printf("RSS   %-28s / %-20s = %.2f\n", a, b, float64(rss[a])/float64(rss[b]))
	}
	ratio("accel-doctor check (live)", "virt-host-validate")
	ratio("empty Go binary (func main(){})", "virt-host-validate")
	ratio("accel-doctor check (live)", "lspci -vvv")
	fmt.Println("\ngoals: live check wall <= 0.4 x virt-host-validate, peak RSS <= 12 MiB (the empty binary's ratio is the floor)")
}

// goBuild builds a static binary the way the README does (CGO_ENABLED=0).
func goBuild(pkg, out, dir string) {
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fail(fmt.Errorf("build %s: %w", pkg, err))
	}
}

func runOnce(argv []string) (time.Duration, int64, int) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		fail(err)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss // KiB on Linux (getrusage(2))
	}
	return wall, rss, rc
}

func medianDur(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func maxInt(v []int64) int64 {
	var m int64
	for _, x := range v {
		if x > m {
			m = x
		}
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(2)
}
