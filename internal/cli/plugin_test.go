package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

var (
	pluginBinOnce sync.Once
	pluginBin     string
	pluginBinErr  error
)

// binary builds accel-doctor once for the tests that run it as the e2e
// suite does: as a process, stopped with SIGTERM.
func binary(t *testing.T) string {
	t.Helper()
	pluginBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "adbin")
		if err != nil {
			pluginBinErr = err
			return
		}
		pluginBin = filepath.Join(dir, "accel-doctor")
		out, err := exec.Command("go", "build", "-o", pluginBin, "../../cmd/accel-doctor").CombinedOutput()
		if err != nil {
			pluginBinErr = err
			pluginBin = string(out)
		}
	})
	if pluginBinErr != nil {
		t.Fatalf("build: %v: %s", pluginBinErr, pluginBin)
	}
	return pluginBin
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

func waitFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Lstat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// The binaries as the e2e suite runs them: plugin test acting as the
// kubelet, the mock as another process (timed through SIGUSR1, found by
// the socket's peer credentials), a clean exit on SIGTERM that leaves no
// socket behind.
func TestPluginBinaryMockAndTest(t *testing.T) {
	dir := sockDir(t)
	tester := start(t, "plugin", "test", "--kubelet-dir", dir, "--timeout", "5s", "--watch", "300ms", "-o", "json")
	waitFile(t, filepath.Join(dir, deviceplugin.KubeletSocket))
	mock := start(t, "plugin", "mock", "--kubelet-dir", dir, "--resource", "fake.example.com/gpu", "--devices", "2", "--mode", "healthy")
	line := mock.waitLine(t, "REGISTERED ")
	if want := "REGISTERED fake.example.com/gpu " + filepath.Join(dir, "accel-doctor-mock-fake.example.com-gpu.sock"); line != want {
		t.Errorf("ready line %q, want %q", line, want)
	}
	code, out := tester.wait(t)
	if code != 0 {
		t.Fatalf("plugin test exit %d:\n%s", code, out)
	}
	got := pluginCodes(t, out)
	for _, c := range []string{deviceplugin.CodeRegistered, deviceplugin.CodeHealthUpdate, deviceplugin.CodeAllocateOK, deviceplugin.CodeReregistered} {
		if got[c] != report.Pass {
			t.Errorf("%s: %q, want PASS\n%s", c, got[c], out)
		}
	}
	mock.cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := mock.wait(t); code != 0 {
		t.Errorf("mock exit %d after SIGTERM, want 0", code)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
}

func TestPluginBinaryFindsPlantedFailures(t *testing.T) {
	for mode, want := range map[string]string{
		"fail-allocate=no GPU for you": deviceplugin.CodeAllocateFailed,
		"crash-allocate":               deviceplugin.CodeCrashed,
	} {
		t.Run(strings.Fields(mode)[0], func(t *testing.T) {
			dir := sockDir(t)
			tester := start(t, "plugin", "test", "--kubelet-dir", dir, "--timeout", "5s", "--watch", "200ms")
			waitFile(t, filepath.Join(dir, deviceplugin.KubeletSocket))
			mock := start(t, "plugin", "mock", "--kubelet-dir", dir, "--mode", mode)
			code, out := tester.wait(t)
			if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "Measured:") {
				t.Errorf("exit %d, want 1 with %s and the measurements:\n%s", code, want, out)
			}
			if mode == "fail-allocate=no GPU for you" && !strings.Contains(out, "no GPU for you") {
				t.Errorf("the planted error text is not shown:\n%s", out)
			}
			if mode == "crash-allocate" {
				if c, _ := mock.wait(t); c != 3 {
					t.Errorf("crashed mock exit %d, want 3", c)
				}
			}
		})
	}
}

// plugin serve as a process, over a fixture host (--root), passes
// plugin test, and on SIGTERM removes its socket; its CDI spec stays.
func TestPluginBinaryServe(t *testing.T) {
	host := sockDir(t)
	if out, err := exec.Command("cp", "-a", hosts+"nvidia-h100x8/.", host).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cfg := filepath.Join(host, "plugin.yaml")
	os.WriteFile(cfg, []byte(`resources:
- name: example.com/gpu
  selector: {pci: {vendor: "10de", class: "0302", drivers: [nvidia]}}
  container: {deviceIDsEnv: ACCEL_VISIBLE_DEVICES}
- name: example.com/gpu-cdi
  selector: {pci: {vendor: "10de", class: "0302"}}
  cdi: {vendor: example.com, class: gpu}
`), 0o644)
	dir := sockDir(t)
	tester := start(t, "--root", host, "plugin", "test", "--kubelet-dir", dir, "--timeout", "5s", "--watch", "200ms", "-o", "json")
	waitFile(t, filepath.Join(dir, deviceplugin.KubeletSocket))
	serve := start(t, "--root", host, "plugin", "serve", "--kubelet-dir", dir, "--config", cfg, "--metrics-address", "127.0.0.1:0")
	serve.waitLine(t, "SERVING example.com/gpu ")
	code, out := tester.wait(t)
	if code != 0 {
		t.Fatalf("plugin test of plugin serve: exit %d\n%s", code, out)
	}
	got := pluginCodes(t, out)
	if got[deviceplugin.CodeAllocateCDIResolved] != report.Pass || got[deviceplugin.CodeReregistered] != report.Pass {
		t.Errorf("findings %v", got)
	}
	serve.cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := serve.wait(t); code != 0 {
		t.Errorf("serve exit %d after SIGTERM, want 0", code)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the kubelet directory: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(host, "var/run/cdi/accel-doctor-example.com-gpu.json")); err != nil {
		t.Errorf("CDI spec: %v", err)
	}
}

func TestPluginUsageErrors(t *testing.T) {
	dir := sockDir(t)
	for _, args := range [][]string{
		{"plugin", "test"},
		{"plugin", "test", "--kubelet-dir", dir, "--socket", "/x"},
		{"plugin", "test", "--socket", "/nonexistent.sock"},
		{"plugin", "test", "--kubelet-dir", dir, "-o", "yaml"},
		{"plugin", "mock", "--kubelet-dir", dir, "--mode", "bogus"},
		{"plugin", "mock", "--kubelet-dir", dir, "--mode", "healthy=1s"},
		{"plugin", "mock", "--kubelet-dir", dir, "--mode", "flapping=soon"},
		{"plugin", "mock", "--kubelet-dir", dir, "--resource", "gpu"},
		{"plugin", "mock", "--kubelet-dir", "relative"},
		{"plugin", "serve", "--kubelet-dir", dir},
		{"plugin", "serve", "--kubelet-dir", dir, "--config", "/nonexistent.yaml"},
	} {
		if _, stderr, code := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a usage error left %v", ents)
	}
}

// Every `accel-doctor ...` command that plugin test's codes name parses.
func TestPluginRemediationCommandsExist(t *testing.T) {
	span := regexp.MustCompile("`accel-doctor ([^`]*)`")
	n := 0
	for _, c := range deviceplugin.Codes {
		for _, m := range span.FindAllStringSubmatch(c.Explain+"\n"+c.Remediation, -1) {
			args := splitArgs(m[1])
			if _, stderr, code := run(t, append(args, "--help")...); code != 0 {
				t.Errorf("%s names `accel-doctor %s`, which does not parse: %s", c.Code, m[1], stderr)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no accel-doctor command found in the codes")
	}
}
