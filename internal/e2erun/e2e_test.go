package e2erun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
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

// runReserve is what the e2e tests' own run is given of this test
// binary's time once their build is done: about twice what they take on two
// busy cores with everything built (docs: e2e/README.md), and the margin
// for this test's report.
const runReserve = 4 * time.Minute

// TestE2E runs `go test ./...` in the e2e module and reports each of its
// tests as a subtest here, with its output, passing, failing or skipping as
// it did. Those tests run the kubelet's device manager in a private mount
// namespace, so they need root; elsewhere this skips, saying so, without
// building them.
//
// It runs in two steps, each bounded by this test binary's deadline (go
// test's -timeout, 10 minutes unless given). First it compiles every
// package the e2e tests need (go list -export: the compile go test would do,
// into the go build cache, without linking). The first build on a machine
// compiles much of k8s.io/kubernetes, which can take longer than a test
// binary has beside the rest of this module's tests on two cores: when the
// compile has not finished with runReserve left, it is stopped and the test
// skips, saying so; the build cache keeps every package compiled so far, and
// the next run goes on from there. Then it runs the tests with what is left.
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

	// The compile.
	ctx, cancel := step(runReserve)
	list := []string{"list", "-export", "-deps", "-test", "-e", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", "./..."}
	start := time.Now()
	out, err := goIn(ctx, e2e, list)
	cancel()
	switch {
	case ctx.Err() != nil:
		t.Skipf("the e2e module's build did not finish in the %v this test binary could give it (%v before its -timeout): "+
			"the first build compiles much of k8s.io/kubernetes (e2e/README.md says how long it takes). "+
			"The go build cache keeps what was compiled: the next go test ./... goes on from there; "+
			"or build it once beforehand with `go -C e2e test -run '^$' ./...` (.ci/run does)",
			time.Since(start).Round(time.Second), runReserve)
	case err != nil || strings.TrimSpace(out.String()) != "":
		t.Fatalf("go %s in e2e/: %v\n%s", strings.Join(list, " "), err, out.String())
	}
	t.Logf("go %s in e2e/: %v", strings.Join(list[:4], " "), time.Since(start).Round(time.Millisecond))

	// The tests.
	ctx, cancel = step(time.Minute)
	defer cancel()
	args := []string{"test", "-json", "-count=1"}
	if bounded {
		left := time.Until(deadline) - time.Minute
		if left < time.Minute {
			t.Fatalf("only %v left before this test binary's deadline: too little for the e2e module", time.Until(deadline).Round(time.Second))
		}
		args = append(args, "-timeout", left.Round(time.Second).String())
	}
	args = append(args, "./...")
	start = time.Now()
	stdout, err := goIn(ctx, e2e, args)
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("go %s in e2e/ did not finish in %v\n%s", strings.Join(args, " "), elapsed.Round(time.Second), tail(stdout.String()))
	}
	t.Logf("go %s in e2e/: %v", strings.Join(args, " "), elapsed.Round(time.Millisecond))

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
		t.Fatalf("go %s in e2e/: %v", strings.Join(args, " "), err)
	case err != nil && !t.Failed():
		// go test failed but no package said why: a go.mod or
		// build problem, reported on stderr or as build output.
		t.Fatalf("go %s in e2e/: %v\n%s%s", strings.Join(args, " "), err, pkgs[""].output.String(), tail(stdout.String()))
	case err == nil && ran == 0:
		t.Fatalf("go %s in e2e/ ran no test", strings.Join(args, " "))
	}
}

// goIn runs the go command in dir and returns its stdout and stderr, in
// that order, in one buffer (go test -json writes build failures to
// stderr). It runs in a process group of its own, killed as a whole when
// ctx ends and with this process (Pdeathsig): the compilers and test
// binaries it starts are stopped with it, never left running.
func goIn(ctx context.Context, dir string, args []string) (*bytes.Buffer, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
