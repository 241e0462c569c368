package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// productModule is the module whose binary the e2e tests drive.
const productModule = "github.com/accel-doctor/accel-doctor"

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// AccelDoctor is the path of the accel-doctor binary built from the
// repository that holds this module, with accel-doctor-kubelet and
// accel-doctor-kube beside it as they ship (accel-doctor hands plugin,
// cluster, agent, lint, claim, dra and plugin --dra to them). The product
// module's internal/testbin builds them, once for every test binary of a
// run (the e2e packages' and the product's own), into a directory it
// keeps between runs; with nothing changed that costs go build's check.
func AccelDoctor(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { builtBin, buildErr = buildAccelDoctor(t) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func buildAccelDoctor(t testing.TB) (string, error) {
	root, err := productRoot()
	if err != nil {
		return "", err
	}
	// testbin is a command of the product module (this module cannot
	// import its packages); it stops its build at -timeout, leaving this
	// test binary time to say so.
	args := []string{"run", "./internal/testbin/cmd/testbin"}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			args = append(args, "-timeout", time.Until(dl.Add(-30*time.Second)).Round(time.Second).String())
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Its own process group, killed with this process: a test binary that
	// go test stops leaves no build behind (testbin's go build dies with
	// testbin).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), root, err, stderr.String())
	}
	return filepath.Join(strings.TrimSpace(string(out)), "accel-doctor"), nil
}

// productRoot finds the product module's directory.
func productRoot() (string, error) { return findModule(productModule) }

// findModule is the nearest directory above the working directory whose
// go.mod declares module mod.
func findModule(mod string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == mod {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no directory above %s holds the go.mod of %s", wd, mod)
		}
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// Proc is an accel-doctor process a test started (plugin serve, plugin
// mock): its stdout lines are kept, in order, for WaitLine (the commands
// print one line per event: "SERVING RESOURCE SOCKET", "REGISTERED ...",
// "REGISTER_FAILED ... \"ERR\"", docs/device-plugin.md "Ready lines"); its
// stderr (the slog log) goes to the test's log when it exits.
type Proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	desc string // the command line, for messages

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed when a line comes or the process exits, then replaced
	stderr  bytes.Buffer
	exited  bool
	code    int
	done    chan struct{}
}

// StartAccelDoctor runs the accel-doctor binary (AccelDoctor) with args in
// the test's mount namespace. The process is stopped (SIGTERM, then
// SIGKILL after 10 s) when the test ends, if it still runs.
func StartAccelDoctor(t testing.TB, args ...string) *Proc {
	t.Helper()
	return StartCommand(t, exec.Command(AccelDoctor(t), args...))
}

// StartCommand starts cmd (a binary of ours or a third party's: see
// ThirdParty) as StartAccelDoctor starts ours: its stdout lines kept for
// WaitLine, its stderr logged when it ends, stopped with SIGTERM when the
// test ends.
func StartCommand(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{t: t, cmd: cmd, desc: filepath.Base(cmd.Path) + " " + strings.Join(cmd.Args[1:], " "),
		changed: make(chan struct{}), done: make(chan struct{})}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, b: &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.desc, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode() // -1 when killed by a signal
		} else if err != nil {
			code = -1
		}
		p.mu.Lock()
		p.exited, p.code = true, code
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Logf("%s: exit %d; stdout:\n%s\nstderr:\n%s", p.desc, p.code, strings.Join(p.lines, "\n"), p.stderr.String())
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

// WaitLine waits until the process has printed n lines that begin with
// prefix (n >= 1) and returns the n-th. It fails when ctx ends or the
// process exits first.
func (p *Proc) WaitLine(ctx context.Context, prefix string, n int) (string, error) {
	for {
		p.mu.Lock()
		seen := 0
		for _, l := range p.lines {
			if strings.HasPrefix(l, prefix) {
				if seen++; seen == n {
					p.mu.Unlock()
					return l, nil
				}
			}
		}
		exited, code, changed := p.exited, p.code, p.changed
		lines := strings.Join(p.lines, "\n")
		p.mu.Unlock()
		if exited {
			return "", fmt.Errorf("%s exited (%d) before printing %q %d time(s); stdout:\n%s", p.desc, code, prefix, n, lines)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s: %q not printed %d time(s): %v; stdout:\n%s", p.desc, prefix, n, ctx.Err(), lines)
		case <-changed:
		}
	}
}

// Count is how many lines beginning with prefix the process has printed.
func (p *Proc) Count(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// Wait waits for the process to exit and gives its exit status (-1 when a
// signal killed it).
func (p *Proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return 0, fmt.Errorf("%s did not exit: %v", p.desc, ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, nil
}

// Stop sends SIGTERM (the commands remove their sockets and exit 0),
// waits up to 10 s, then kills; it returns the exit status. Stopping a
// process that has exited returns its status.
func (p *Proc) Stop() int {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.t.Errorf("%s: no exit 10 s after SIGTERM; killed", p.desc)
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill kills the process (SIGKILL: it removes nothing) and waits for it.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Stdout is the process's stdout so far, its lines joined.
func (p *Proc) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// Output is what the process has written so far: its stdout lines, and
// its stderr (a third party's log goes there).
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n") + "\n" + p.stderr.String()
}

// Finding is one finding of an accel-doctor report (-o json), read here
// without the product's types, as a script reading the JSON would.
type Finding struct {
	Code    string `json:"code"`
	Layer   int    `json:"layer"`
	Status  string `json:"status"`
	Subject string `json:"subject"`
	Summary string `json:"summary"`
	Reason  string `json:"reason"`
	// CausedBy names the finding this one follows from, when it does.
	CausedBy *struct {
		Code    string `json:"code"`
		Subject string `json:"subject"`
	} `json:"caused_by"`
}

// Run runs bin ARGS to its end and returns what it wrote and its exit
// code; a binary that could not be started (or was killed by a signal)
// fails the test.
func Run(t testing.TB, ctx context.Context, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %s %v: %v\n%s", bin, args, err, e.String())
	}
	return o.String(), e.String(), code
}

// CheckKube runs `accel-doctor check --root ROOT --layer kube -o json`
// over what the Kubelet left in its directory, and returns the findings
// and the raw report. Exit 2 with a report is a verdict (every finding
// NOT_RUN); exit 2 without one is a usage error, and fails the test: the
// layer exists, so check must be able to judge the directory.
func (k *Kubelet) CheckKube(t testing.TB) (findings []Finding, raw string) {
	t.Helper()
	stdout, stderr, code := Run(t, context.Background(), AccelDoctor(t), "check", "--root", k.Root, "--layer", "kube", "-o", "json")
	if code != 0 && code != 1 && code != 2 {
		t.Fatalf("accel-doctor check --layer kube: exit %d: %s\n%s", code, stderr, stdout)
	}
	var rep struct {
		Findings []Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("accel-doctor check --root %s --layer kube: exit %d, not a report (%v): %s\n%s", k.Root, code, err, strings.TrimSpace(stderr), stdout)
	}
	return rep.Findings, stdout
}
