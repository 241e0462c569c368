package kubecli

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startAgent starts the built accel-doctor-kube agent over the demo host
// and returns the process, its stderr lines and its metrics address.
func startAgent(t *testing.T, extra ...string) (*exec.Cmd, <-chan string, *strings.Builder, *sync.Mutex, string) {
	t.Helper()
	kube := filepath.Join(filepath.Dir(binary(t)), "accel-doctor-kube")
	args := append([]string{"--root", "../../testdata/hosts/demo-h100x8-faults", "agent", "--node-name", "node-a",
		"--interval", "1h", "--metrics-address", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(kube, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
	// A pipe of our own, not StderrPipe: Wait closes that one as soon as
	// the process is gone, and the last lines (the "agent: stopped" a
	// test looks for) could be lost with it. This one reads to EOF, and
	// lines is closed only after the last line.
	stderr, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); stderr.Close() })
	lines := make(chan string, 100)
	var all strings.Builder
	var mu sync.Mutex
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			all.WriteString(sc.Text() + "\n")
			mu.Unlock()
			lines <- sc.Text()
		}
	}()
	addr := ""
	for addr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("agent ended before it served: %s", all.String())
			}
			if i := strings.Index(l, "metrics on http://"); i >= 0 {
				addr = strings.TrimSuffix(l[i+len("metrics on http://"):], "/metrics")
			}
		case <-time.After(60 * time.Second):
			t.Fatal("agent did not say where it serves in 60s")
		}
	}
	return cmd, lines, &all, &mu, addr
}

func waitLine(t *testing.T, lines <-chan string, sub string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stderr ended before a line with %q", sub)
			}
			if strings.Contains(l, sub) {
				return
			}
		case <-deadline:
			t.Fatalf("no stderr line with %q in 60s", sub)
		}
	}
}

// drain reads the stderr lines to their end (the process has exited).
func drain(t *testing.T, lines <-chan string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("stderr not closed 60s after the exit")
		}
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("killed by %v", ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// SIGTERM and SIGINT stop the agent normally: exit 0, and its metrics
// endpoint is closed. (The kubelet sends SIGTERM at every rollout and
// drain; the shared handler's 143 would read as a crash.)
func TestAgentBinaryStopsCleanlyOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, lines, all, mu, addr := startAgent(t, "--metrics-only")
			waitLine(t, lines, "check:")
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := exitCode(t, cmd)
			drain(t, lines)
			mu.Lock()
			out := all.String()
			mu.Unlock()
			if code != 0 || !strings.Contains(out, "agent: stopped") {
				t.Errorf("after %v: exit %d, stderr:\n%s\nwant exit 0 and \"agent: stopped\"", sig, code, out)
			}
			if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
				t.Errorf("/metrics still answers after the agent exited")
			}
		})
	}
}

// A SIGTERM that comes while the condition patch is in flight lets that
// publication finish (the patch answered, then the annotation) before the
// agent exits 0. The API server here is an HTTP stub: what is under test is
// the agent's stop, not the API (e2e/agent runs it against a real one).
func TestAgentBinaryFinishesItsPublicationOnSIGTERM(t *testing.T) {
	var (
		mu       sync.Mutex
		seen     []string
		inStatus = make(chan struct{})
		release  = make(chan struct{})
		once     sync.Once
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && r.URL.Path == "/api/v1/nodes/node-a":
			fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a","uid":"u1"}}`)
		case r.Method == "PATCH" && r.URL.Path == "/api/v1/nodes/node-a/status":
			once.Do(func() { close(inStatus) })
			<-release
			fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a"}}`)
		case r.Method == "PATCH" && r.URL.Path == "/api/v1/nodes/node-a":
			fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a"}}`)
		case r.Method == "POST" && r.URL.Path == "/api/v1/namespaces/default/events":
			w.WriteHeader(201)
			fmt.Fprint(w, `{"kind":"Event","apiVersion":"v1","metadata":{"name":"e","namespace":"default"}}`)
		default:
			http.Error(w, "unexpected", 404)
		}
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, lines, all, omu, _ := startAgent(t, "--kubeconfig", kc)
	select {
	case <-inStatus:
	case <-time.After(60 * time.Second):
		t.Fatal("the agent did not patch its node's status in 60s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Let the agent take the signal before the patch is answered.
	time.Sleep(200 * time.Millisecond)
	close(release)
	code := exitCode(t, cmd)
	drain(t, lines)
	omu.Lock()
	out := all.String()
	omu.Unlock()
	mu.Lock()
	got := strings.Join(seen, "\n")
	mu.Unlock()
	if code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0; stderr:\n%s", code, out)
	}
	if !strings.Contains(out, "agent: stopping") {
		t.Errorf("the agent did not take the signal while the patch was held; stderr:\n%s", out)
	}
	if !strings.Contains(got, "PATCH /api/v1/nodes/node-a\n") && !strings.HasSuffix(got, "PATCH /api/v1/nodes/node-a") {
		t.Errorf("the annotation was not written after the held status patch: requests\n%s", got)
	}
}
