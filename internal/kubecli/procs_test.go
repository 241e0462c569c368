package kubecli

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

	"github.com/accel-doctor/accel-doctor/internal/report"
)

var (
	pluginBinOnce sync.Once
	pluginBin     string
	pluginBinErr  error
)

// buildBinary builds accel-doctor and accel-doctor-kube once for the
// tests that run them as processes (a copy of internal/cli's plugin
// helpers: test files cannot be shared between packages).
func buildBinary() (string, error) {
	pluginBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "adbin")
		if err != nil {
			pluginBinErr = err
			return
		}
		pluginBin = filepath.Join(dir, "accel-doctor")
		// Both binaries, as they ship: accel-doctor hands plugin --dra
		// to accel-doctor-kube beside it, so the tests go through that.
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+"/", "../../cmd/accel-doctor", "../../cmd/accel-doctor-kube")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			pluginBinErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	return pluginBin, pluginBinErr
}

func binary(t testing.TB) string {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return bin
}

func sockDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "kd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// proc is a started accel-doctor whose stdout lines can be awaited.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	out   strings.Builder
	mu    sync.Mutex
	done  chan struct{}
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), args...), lines: make(chan string, 100), done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = io.Discard
	if testing.Verbose() {
		p.cmd.Stderr = os.Stderr
	}
	if err := p.cmd.Start(); err != nil {
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
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

func (p *proc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line %q from %v in 30s", prefix, p.cmd.Args)
		}
	}
}

// wait returns the exit status and all of stdout.
func (p *proc) wait(t *testing.T) (int, string) {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
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

func pluginCodes(t *testing.T, js string) map[string]report.Status {
	t.Helper()
	var r report.Report
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	out := map[string]report.Status{}
	for _, f := range r.Findings {
		out[f.Code] = f.Status
	}
	return out
}
