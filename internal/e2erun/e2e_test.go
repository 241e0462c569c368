package e2erun

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

const (
	repo = "../.."
	e2e  = "../../e2e"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, and the
// build events of go 1.24+).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
	ImportPath  string
}

type result struct {
	action string
	output strings.Builder
}

// runReserve is what the e2e tests' own run is kept of this test binary's
// time while their binaries build: twice what they take on two busy cores
// (about 2 minutes, e2e/README.md), and the margin for this test's report.
// A first build that does not finish by then stops, so that this test
// never takes more than half of go test's default 10 minutes to say so.
const runReserve = 5 * time.Minute

// TestE2E runs the tests of the e2e module and reports each of them as a
// subtest here, with its output, passing, failing or skipping as it did.
// Those tests run the kubelet's device manager in a private mount
// namespace, so they need root; elsewhere this skips, saying so, without
// building them.
//
// It runs in two steps, each bounded by this test binary's deadline (go
// test's -timeout, 10 minutes unless given). First it builds the e2e test
// binaries (go test -c) into a directory kept between runs beside the
// product's (internal/testbin): go finds them up to date by their build
// IDs, so a run that changed only the product, which the e2e tests run as
// processes, links nothing; and the third-party plugins and driver those
// tests run (e2e/cmd/thirdparty), each built once from its release. The
// first build on a machine compiles much of k8s.io/kubernetes (and the
// third parties' own dependencies), which can take longer than a test
// binary has beside the rest of this module's tests on two cores: when the
// build has not
// finished with runReserve left, it is stopped and the test skips, saying
// so; the go build cache keeps every package compiled so far, and the next
// run goes on from there. Then it runs the binaries, two at a time as go
// test would, each in its package's directory, through test2json.
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the e2e module's tests are not run")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the e2e tests run the kubelet's device manager in a private mount namespace (see e2e/README.md)")
	}
	recordInputs(t)

	deadline, bounded := t.Deadline()
	step := func(reserve time.Duration) (context.Context, context.CancelFunc) {
		if !bounded {
			return context.WithCancel(context.Background())
		}
		return context.WithDeadline(context.Background(), deadline.Add(-reserve))
	}
	cache, err := testbin.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(e2e)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(abs))
	bins := filepath.Join(cache, fmt.Sprintf("e2e-%x", sum[:8])) // one per checkout
	if err := os.MkdirAll(bins, 0o755); err != nil {
		t.Fatal(err)
	}

	// The build.
	ctx, cancel := step(runReserve)
	start := time.Now()
	var failed []string
	for _, args := range [][]string{
		{"test", "-c", "-o", bins + "/", "./..."},
		{"vet", "./..."},
		// The third-party plugins and driver the tests run, each from its
		// released source (e2e/harness/thirdparty.go); kept between runs.
		{"run", "./cmd/thirdparty"},
	} {
		out, err := runIn(ctx, e2e, "go", args...)
		if ctx.Err() != nil {
			cancel()
			notCached(t, skipStamp)
			t.Skipf("the e2e module's build did not finish in the %v this test binary could give it (%v before its -timeout): "+
				"the first build compiles much of k8s.io/kubernetes (e2e/README.md says how long it takes). "+
				"The go build cache keeps what was compiled: the next go test ./... goes on from there; "+
				"or build it once beforehand with `go -C e2e test -run '^$' ./... && go -C e2e run ./cmd/thirdparty` (.ci/run builds it beforehand)",
				time.Since(start).Round(time.Second), runReserve)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("go %s in e2e/: %v\n%s", strings.Join(args, " "), err, out.String()))
		}
	}
	cancel()
	if failed != nil {
		t.Fatal(strings.Join(failed, "\n"))
	}
	t.Logf("go test -c and go vet in e2e/: %v", time.Since(start).Round(time.Millisecond))

	// The tests.
	ctx, cancel = step(time.Minute)
	defer cancel()
	list, err := runIn(ctx, e2e, "go", "list", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}} {{.Name}}{{end}}", "./...")
	if err != nil {
		t.Fatalf("go list in e2e/: %v\n%s", err, list.String())
	}
	type pkg struct{ path, dir, bin string }
	var todo []pkg
	for _, l := range strings.Split(strings.TrimSpace(list.String()), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			todo = append(todo, pkg{f[0], f[1], filepath.Join(bins, path.Base(f[0])+".test")})
		}
	}
	timeout := "0"
	if bounded {
		left := time.Until(deadline) - time.Minute
		if left < time.Minute {
			t.Fatalf("only %v left before this test binary's deadline: too little for the e2e module", time.Until(deadline).Round(time.Second))
		}
		timeout = left.Round(time.Second).String()
	}
	start = time.Now()
	outs := make([]*bytes.Buffer, len(todo))
	errs := make([]error, len(todo))
	took := make([]time.Duration, len(todo))
	sem := make(chan struct{}, 2) // go test's -p on this project's two cores
	var wg sync.WaitGroup
	for i, p := range todo {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			began := time.Now()
			outs[i], errs[i] = runIn(ctx, p.dir, "go", "tool", "test2json", "-p", p.path, "-t", p.bin,
				"-test.v=test2json", "-test.paniconexit0", "-test.count=1", "-test.timeout="+timeout)
			took[i] = time.Since(began)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var stdout bytes.Buffer
	for _, o := range outs {
		stdout.Write(o.Bytes())
	}
	if ctx.Err() != nil {
		var which []string
		for i, p := range todo {
			which = append(which, fmt.Sprintf("%s %v (%v)", path.Base(p.path), took[i].Round(time.Second), errs[i]))
		}
		t.Fatalf("the e2e tests did not finish in %v: %s\n%s", elapsed.Round(time.Second), strings.Join(which, "; "), tail(stdout.String()))
	}
	t.Logf("the e2e tests of %d packages: %v", len(todo), elapsed.Round(time.Millisecond))
	err = errors.Join(errs...)

	tests, pkgs, order := parse(t, stdout.Bytes())
	var ran int
	for _, pkg := range order {
		short := strings.TrimPrefix(pkg, "github.com/accel-doctor/accel-doctor/e2e/")
		names := tests[pkg]
		t.Run(short, func(t *testing.T) {
			for _, name := range names.order {
				r := names.byName[name]
				ran++
				t.Run(name, func(t *testing.T) {
					out := strings.TrimRight(r.output.String(), "\n")
					switch r.action {
					case "pass":
						t.Log("\n" + out)
					case "skip":
						t.Skip("\n" + out)
					default: // fail, or no end: the binary died
						t.Error("\n" + out)
					}
				})
			}
			if p := pkgs[pkg]; p.action == "fail" {
				t.Errorf("package %s failed:\n%s", pkg, p.output.String())
			}
		})
	}
	var ee *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &ee):
		t.Fatalf("the e2e tests: %v", err)
	case err != nil && !t.Failed():
		// A binary failed but no package said why.
		t.Fatalf("the e2e tests: %v\n%s%s", err, pkgs[""].output.String(), tail(stdout.String()))
	case err == nil && ran == 0:
		t.Fatalf("no e2e test ran")
	}
}

// runIn runs a command in dir and returns its stdout and stderr, in that
// order, in one buffer. It runs in a process group of its own, killed as a
// whole when ctx ends and with this process (Pdeathsig): the compilers and
// test binaries it starts are stopped with it, never left running.
func runIn(ctx context.Context, dir, name string, args ...string) (*bytes.Buffer, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A child that outlives the command and holds its output open does
	// not hold the wait (go test gives its test binaries the same).
	cmd.WaitDelay = 10 * time.Second
	runtime.LockOSThread() // Pdeathsig follows the thread that forked
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return &out, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	// What the command left in its group (a test's child that outlived
	// it) goes with it.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return &out, err
}

type pkgTests struct {
	order  []string
	byName map[string]*result
}

// parse groups the events by package and top-level test; a subtest's
// output goes to its top-level test. pkgs[""] collects build output.
func parse(t *testing.T, out []byte) (map[string]*pkgTests, map[string]*result, []string) {
	tests := map[string]*pkgTests{}
	pkgs := map[string]*result{"": {}}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			pkgs[""].output.WriteString(sc.Text() + "\n")
			continue
		}
		if strings.HasPrefix(ev.Action, "build-") {
			pkgs[""].output.WriteString(ev.Output)
			continue
		}
		if _, ok := pkgs[ev.Package]; !ok {
			pkgs[ev.Package] = &result{}
			tests[ev.Package] = &pkgTests{byName: map[string]*result{}}
			order = append(order, ev.Package)
		}
		if ev.Test == "" {
			switch ev.Action {
			case "output":
				pkgs[ev.Package].output.WriteString(ev.Output)
			case "pass", "fail", "skip":
				pkgs[ev.Package].action = ev.Action
			}
			continue
		}
		top, _, sub := strings.Cut(ev.Test, "/")
		pt := tests[ev.Package]
		r, ok := pt.byName[top]
		if !ok {
			r = &result{}
			pt.byName[top] = r
			pt.order = append(pt.order, top)
		}
		switch ev.Action {
		case "output":
			r.output.WriteString(ev.Output)
		case "pass", "fail", "skip":
			if !sub {
				r.action = ev.Action
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading go test -json: %v", err)
	}
	// Packages without tests (the harness) say nothing worth a subtest.
	var kept []string
	for _, p := range order {
		if len(tests[p].order) > 0 || pkgs[p].action == "fail" {
			kept = append(kept, p)
		}
	}
	sort.Strings(kept)
	return tests, pkgs, kept
}

// recordInputs lists every directory of the repository through os.Open, so
// that go test's result cache, which knows only what this test binary
// itself opened, sees what the e2e run depends on: the e2e module's files
// and this module's (whose binary the e2e tests build). A change to any of
// them (its size or mtime, as go test's cache compares them) runs TestE2E
// again; nothing changed, the cached result stands, as for any package.
func recordInputs(t *testing.T) {
	for _, v := range []string{"CGO_ENABLED", "GOFLAGS", "GOTOOLCHAIN", "GOEXPERIMENT", "GOARCH", "GOOS"} {
		os.Getenv(v)
	}
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "...\n" + s[len(s)-4000:]
	}
	return s
}

// notCached keeps go test from caching this run's result: it opens a file
// it has just written. go test caches a result only when every file the
// test opened inside the module was last modified more than two seconds
// before it checks them (cmd/go's modTimeCutoff), so a skip for the
// build's time is run again by the next go test ./..., which goes on with
// the build, instead of being replayed. The file is in this package's
// directory (go test does not look at files outside the module) and
// ignored by git.
func notCached(t *testing.T, name string) {
	if err := os.WriteFile(name, []byte("skipped\n"), 0o644); err != nil {
		t.Logf("the skip may be cached: %v", err)
		return
	}
	if f, err := os.Open(name); err == nil {
		f.Close()
	}
}

// skipStamp is TestE2E's file for notCached, in the package's directory
// (the test's working directory).
const skipStamp = ".build-skipped"
