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
	"sort"
	"strings"
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

// TestE2E runs `go test ./...` in the e2e module and reports each of its
// tests as a subtest here, with its output, passing, failing or skipping as
// it did. Those tests run the kubelet's device manager in a private mount
// namespace, so they need root; elsewhere this skips, saying so, without
// building them.
//
// The first build of the e2e module compiles much of k8s.io/kubernetes (see
// e2e/README.md for the time it takes); the go build cache keeps it, and later
// runs take seconds. The e2e run is bounded by this test binary's own
// deadline (go test's -timeout, 10 minutes unless given), less a minute for
// the report.
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the e2e module's tests are not run")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the e2e tests run the kubelet's device manager in a private mount namespace (see e2e/README.md)")
	}
	recordInputs(t)

	ctx := context.Background()
	args := []string{"test", "-json", "-count=1"}
	if d, ok := t.Deadline(); ok {
		left := time.Until(d) - time.Minute
		if left < time.Minute {
			t.Fatalf("only %v left before this test binary's deadline: too little for the e2e module", time.Until(d).Round(time.Second))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
		args = append(args, "-timeout", left.Round(time.Second).String())
	}
	args = append(args, "./...")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = e2e
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("go %s in e2e/ did not finish in %v: a first build of k8s.io/kubernetes may take longer than this test binary's -timeout; "+
			"build it once with `go -C e2e test -run '^$' ./...`, or give go test a longer -timeout\n%s%s",
			strings.Join(args, " "), elapsed.Round(time.Second), tail(stdout.String()), stderr.String())
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
		t.Fatalf("go %s in e2e/: %v\n%s", strings.Join(args, " "), err, stderr.String())
	case err != nil && !t.Failed():
		// go test failed but no package said why: a go.mod or
		// build problem, reported on stderr or as build output.
		t.Fatalf("go %s in e2e/: %v\n%s%s", strings.Join(args, " "), err, pkgs[""].output.String(), stderr.String())
	case err == nil && ran == 0:
		t.Fatalf("go %s in e2e/ ran no test\n%s", strings.Join(args, " "), stderr.String())
	}
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
