package kubecli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMetricsAddress(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{"127.0.0.1:9808", "127.0.0.1:9808", ""},
		{":9808", ":9808", ""}, // every interface, when asked for
		{"localhost:9808", "localhost:9808", ""},
		// [$(POD_IP)]:9808 expanded for either family.
		{"[10.244.1.7]:9808", "10.244.1.7:9808", ""},
		{"[fd00:10:244::7]:9808", "[fd00:10:244::7]:9808", ""},
		{"[fe80::1%eth0]:9808", "[fe80::1%eth0]:9808", ""},
		// An empty or unexpanded $(POD_IP), an IPv6 address without
		// brackets, no port.
		{"[]:9808", "", "nothing between the brackets"},
		{"[$(POD_IP)]:9808", "", "not an IP address"},
		{"[node-a]:9808", "", "not an IP address"},
		{"fd00:10:244::7:9808", "", "too many colons"},
		{"10.244.1.7", "", "missing port"},
		{"", "", "missing port"},
	} {
		got, err := metricsAddress(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("metricsAddress(%q) = %q, %v; want %q", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("metricsAddress(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
}

// The agent serves on [IP]:PORT for an IPv4 and an IPv6 address (the
// DaemonSet's [$(POD_IP)]:9808, loopback standing for the pod IP), and
// /healthz answers at the URL the kubelet's liveness probe builds from
// the pod IP and the port (pkg/probe/http/request.go formatURL:
// net.JoinHostPort).
func TestAgentBinaryServesOnBracketedIP(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "::1"} {
		t.Run(ip, func(t *testing.T) {
			if l, err := net.Listen("tcp", net.JoinHostPort(ip, "0")); err != nil {
				t.Skipf("no %s on this host: %v", ip, err)
			} else {
				l.Close()
			}
			cmd, lines, _, _, addr := startAgent(t, "--metrics-only", "--metrics-address", "["+ip+"]:0")
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host != ip {
				t.Fatalf("serves on %q (%v), want %s", addr, err, ip)
			}
			waitLine(t, lines, "check:")
			resp, err := http.Get("http://" + net.JoinHostPort(ip, port) + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz: %s, want 200 after a run", resp.Status)
			}
			cmd.Process.Kill()
		})
	}
}

// Without --metrics-address the agent listens on loopback only,
// 127.0.0.1:9808 (and says so when that port is taken on this machine).
func TestAgentBinaryDefaultsToLoopback(t *testing.T) {
	kube := filepath.Join(filepath.Dir(binary(t)), "accel-doctor-kube")
	cmd := exec.Command(kube, "--root", "../../testdata/hosts/demo-h100x8-faults", "agent", "--node-name", "node-a", "--interval", "1h", "--metrics-only")
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		var all strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if i := strings.Index(sc.Text(), "metrics on http://"); i >= 0 {
				found <- strings.TrimSuffix(sc.Text()[i+len("metrics on http://"):], "/metrics")
				return
			}
		}
		found <- "exited: " + all.String()
	}()
	select {
	case got := <-found:
		if after, ok := strings.CutPrefix(got, "exited: "); ok {
			// Only a taken port may stop it, and the error names the
			// default address.
			if !strings.Contains(after, "--metrics-address 127.0.0.1:9808: ") || !strings.Contains(after, "address already in use") {
				t.Errorf("the agent ended without serving:\n%s", after)
			}
			return
		}
		if got != "127.0.0.1:9808" {
			t.Errorf("serves on %s by default, want 127.0.0.1:9808", got)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the agent did not say where it serves in 60s")
	}
}

// The DaemonSet's [$(POD_IP)]:9808 with an empty or unexpanded pod IP is
// a usage error (exit 2, naming the flag), not a listener on every
// interface. (The binary, with a deadline: an agent that took it would
// serve until stopped.)
func TestAgentBinaryRefusesABadPodIP(t *testing.T) {
	kube := filepath.Join(filepath.Dir(binary(t)), "accel-doctor-kube")
	for _, c := range []struct{ addr, want string }{
		{"[]:0", "--metrics-address []:0: nothing between the brackets"},
		{"[$(POD_IP)]:9808", `--metrics-address [$(POD_IP)]:9808: "$(POD_IP)" between the brackets is not an IP address`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, kube, "--root", "../../testdata/hosts/demo-h100x8-faults", "agent", "--metrics-only", "--node-name", "n", "--metrics-address", c.addr)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("--metrics-address %s: %v (a deadline of 60 s ends one that serves), output %q; want exit 2 with %q", c.addr, err, out, c.want)
		}
	}
}
