package testutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Binaries builds accel-doctor and accel-doctor-kube once per test binary,
// side by side as they ship (static, stripped: the README's build), for
// tests that run them as processes; repo is the repository root relative
// to the test's package. It returns accel-doctor's path.
func Binaries(t testing.TB, repo string) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "adbin")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		build := exec.Command("go", "build", "-trimpath", "-tags=grpcnotrace", "-ldflags=-s -w", "-o", dir+"/", "./cmd/accel-doctor", "./cmd/accel-doctor-kubelet", "./cmd/accel-doctor-kube")
		build.Dir = repo
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatalf("build: %v", binErr)
	}
	return filepath.Join(binDir, "accel-doctor")
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
