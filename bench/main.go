// Command bench runs accel-doctor and its peer tools side by side on this
// machine, alternating, several runs each, and prints the median wall time,
// the peak RSS and the ratios. It is a benchmark, not a test: nothing here
// passes or fails.
//
//	go run ./bench [-runs 15] [-bin PATH] [-corpus DIR] [-only SUBSTRING]
package main

import (
	"archive/tar"
	"compress/bzip2"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	corpus := flag.String("corpus", "../shared/corpus", "the corpus of real captures (for topo against lspci -tv)")
	only := flag.String("only", "", "run only the commands whose name holds this")
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
	// Each binary is timed as an install leaves it: written with write(2)
	// (a download, a copy, an image layer). A file the linker has just
	// written is slower to start, by about 1 ms here, until its pages are
	// written back and dropped (measured: the same bytes, copied, start
	// 1.1 ms sooner in the same run), which no installed binary is.
	*bin = installed(*bin, filepath.Join(dir, "installed-accel-doctor"))
	empty = installed(empty, filepath.Join(dir, "installed-empty"))
	subjects := []*subject{
		{name: "accel-doctor check (live)", argv: []string{*bin, "check"}},
		{name: "empty Go binary (func main(){})", argv: []string{empty}},
		{name: "virt-host-validate", argv: []string{"virt-host-validate"}},
		{name: "lspci -vvv", argv: []string{"lspci", "-vvv"}},
		{name: "accel-doctor check (nvidia-h100x8 fixture)", argv: []string{*bin, "check", "--root", "testdata/hosts/nvidia-h100x8"}},
		{name: "accel-doctor check --snapshot demo", argv: []string{*bin, "check", "--snapshot", "demo"}},
	}
	// topo against lspci -tv over the same tree: hwloc's capture of a host
	// with 8 NEC VectorEngines behind two PLX switches (28 functions),
	// unpacked here, with this machine's pci.ids copied in so that both
	// name every device. lspci reads the tree through its sysfs access
	// method pointed at the capture.
	if ve, err := unpackCapture(filepath.Join(*corpus, "hwloc", "linux", "32intel64-2p8co2t+8ve.tar.bz2"), dir); err != nil {
		fmt.Printf("%-44s skipped: %v\n", "topo on the 8-VE capture", err)
	} else {
		subjects = append(subjects,
			&subject{name: topoVE, argv: []string{*bin, "topo", "--root", ve}},
			&subject{name: topoVEDraw, argv: []string{*bin, "topo", "--check=false", "--root", ve}},
			&subject{name: lspciVE, argv: []string{"lspci", "-tv", "-A", "linux-sysfs", "-O", "sysfs.path=" + filepath.Join(ve, "sys", "bus", "pci")}},
		)
	}
	var present []*subject
	for _, s := range subjects {
		if *only != "" && !strings.Contains(s.name, *only) {
			continue
		}
		if _, err := exec.LookPath(s.argv[0]); err != nil {
			fmt.Printf("%-44s not installed (%v): skipped\n", s.name, err)
			continue
		}
		present = append(present, s)
	}
	// Alternate so that a change in machine load hits every tool alike,
	// in a new order each round, so that no tool always runs after the
	// same one (after check --snapshot demo, say, whose unpacked tree the
	// kernel is still freeing). Peak RSS is measured apart, afterwards: a
	// run under /usr/bin/time is not one to time (nor to follow).
	order := rand.New(rand.NewPCG(1, uint64(len(present))))
	for i := 0; i < *runs+1; i++ {
		round := slices.Clone(present)
		order.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		for _, s := range round {
			w, rc := runOnce(s.argv)
			if i == 0 {
				continue // warm-up: page cache, first exec
			}
			s.wall, s.rc = append(s.wall, w), rc
		}
	}
	for range rssRuns {
		for _, s := range present {
			s.rss = append(s.rss, peakRSS(s.argv))
		}
	}
	fmt.Printf("%d runs each, alternating in a shuffled order, after one warm-up run; peak RSS of %d more\n\n", *runs, rssRuns)
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
	ratio(topoVE, lspciVE)
	ratio(topoVEDraw, lspciVE)
	fmt.Println("\ngoals: live check wall <= 0.4 x virt-host-validate, peak RSS <= 12 MiB (the empty binary's ratio is the floor);")
	fmt.Println("       topo on the 8-VE capture wall <= 0.5 x lspci -tv on it")
}

// installed copies the executable src to dst with write(2) and returns dst.
func installed(src, dst string) string {
	b, err := os.ReadFile(src)
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		fail(err)
	}
	return dst
}

// goBuild builds a static binary the way the README does (CGO_ENABLED=0).
func goBuild(pkg, out, dir string) {
	build := exec.Command("go", "build", "-trimpath", "-tags=grpcnotrace", "-ldflags=-s -w", "-o", out, pkg)
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fail(fmt.Errorf("build %s: %w", pkg, err))
	}
}

const (
	topoVE     = "accel-doctor topo (8-VE capture)"
	topoVEDraw = "accel-doctor topo --check=false (8-VE)" // the tree alone, no checks: what lspci -tv does
	lspciVE    = "lspci -tv (8-VE capture)"
)

// unpackCapture extracts a .tar.bz2 capture under dir, keeping its
// symlinks, copies this machine's pci.ids into it, and returns the
// directory that holds sys/.
func unpackCapture(archive, dir string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	dst := filepath.Join(dir, "capture")
	tr := tar.NewReader(bzip2.NewReader(f))
	root := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		name := filepath.Clean(h.Name)
		if strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var out *os.File
			if out, err = os.Create(p); err == nil {
				_, err = io.Copy(out, io.LimitReader(tr, 64<<20))
				out.Close()
			}
		}
		if err != nil {
			return "", err
		}
		if root == "" && strings.HasSuffix(name, filepath.Join("sys", "bus", "pci")) {
			root = filepath.Join(dst, strings.TrimSuffix(name, filepath.Join("sys", "bus", "pci")))
		}
	}
	if root == "" {
		return "", fmt.Errorf("%s holds no sys/bus/pci", archive)
	}
	for _, ids := range []string{"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"} {
		b, err := os.ReadFile(ids)
		if err != nil {
			continue
		}
		p := filepath.Join(root, "usr", "share", "misc", "pci.ids")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		return root, os.WriteFile(p, b, 0o644)
	}
	return root, nil
}

// rssRuns are the runs of each command under /usr/bin/time for its peak
// RSS (the largest is shown).
const rssRuns = 3

func runOnce(argv []string) (time.Duration, int) {
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
	return wall, rc
}

// peakRSS runs argv once more under /usr/bin/time, whose fork(2)ed child
// starts from time's own small image, and returns the child's ru_maxrss
// (KiB). The child's rusage cannot be read directly here: Go starts
// children with CLONE_VM|CLONE_VFORK, and exec(2) folds the mm the child
// left (the bench's own, shared until exec) into its maxrss
// (setmax_mm_hiwater_rss in fs/exec.c), so every command would show at
// least this program's RSS. 0 when /usr/bin/time is not installed
// (Debian's "time" package).
func peakRSS(argv []string) int64 {
	f, err := os.CreateTemp("", "bench-rss")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	f.Close()
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", f.Name()}, argv...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return 0
		}
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return 0
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	kib, _ := strconv.ParseInt(strings.TrimSpace(lines[len(lines)-1]), 10, 64)
	return kib
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
