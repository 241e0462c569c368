package testutil

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

// Binaries builds accel-doctor, accel-doctor-kubelet and accel-doctor-kube
// side by side, for tests that run them as processes, and returns
// accel-doctor's path; repo is the repository root relative to the test's
// package. internal/testbin builds them once for every test binary of a
// run, with go test's own settings: a test file of the calling package
// imports internal/testbin/product, so that the build only links.
func Binaries(t testing.TB, repo string) string {
	t.Helper()
	return filepath.Join(testbin.Dir(t, repo, testbin.Options{}), "accel-doctor")
}

// SockDir is a short temporary directory (a socket's path must fit
// sun_path, 108 bytes), removed at the end of the test.
func SockDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Proc is a started process whose stdout lines can be awaited.
type Proc struct {
	Cmd   *exec.Cmd
	lines chan string
	out   strings.Builder
	mu    sync.Mutex
	done  chan struct{}
}

// Start starts bin with args; it is killed at the end of the test.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Cmd: exec.Command(bin, args...), lines: make(chan string, 100), done: make(chan struct{})}
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd.Stderr = io.Discard
	if testing.Verbose() {
		p.Cmd.Stderr = os.Stderr
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() { p.Cmd.Process.Kill(); p.Cmd.Wait() })
	return p
}

// WaitLine waits (30 s at most) for a stdout line with prefix.
func (p *Proc) WaitLine(t testing.TB, prefix string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line %q from %v in 30s", prefix, p.Cmd.Args)
		}
	}
}

// Wait returns the exit status and all of stdout.
func (p *Proc) Wait(t testing.TB) (int, string) {
	t.Helper()
	<-p.done
	err := p.Cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return code, p.out.String()
}

// Codes maps each finding code of a JSON report to its status.
func Codes(t testing.TB, js string) map[string]string {
	t.Helper()
	return CodesAs[string](t, js)
}

// CodesAs is Codes with the status as S (report.Status in the tests that
// may import report; testutil imports nothing of the project).
func CodesAs[S ~string](t testing.TB, js string) map[string]S {
	t.Helper()
	var r struct {
		Findings []struct{ Code, Status string }
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	out := map[string]S{}
	for _, f := range r.Findings {
		out[f.Code] = S(f.Status)
	}
	return out
}
