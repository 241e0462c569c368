package kubecli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/lint"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Without --cluster lint sends nothing to the API server, even with a
// kubeconfig in the environment; --kubeconfig without --cluster is a
// usage error. (The cluster rules against a real API server are
// e2e/lint's.)
func TestLintWithoutClusterAsksNothing(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no", 500)
	}))
	defer srv.Close()
	kc := kubeconfigFor(t, srv.URL)
	t.Setenv("KUBECONFIG", kc)
	if _, stderr, code := run(t, "lint", "-f", lintData+"planted-cluster", "-o", "json"); code != 0 || requests.Load() != 0 {
		t.Errorf("offline lint: exit %d, %d request(s) to the API server: %s", code, requests.Load(), stderr)
	}
	if _, stderr, code := run(t, "lint", "--kubeconfig", kc, "-f", lintData+"planted-cluster"); code != 2 || !strings.Contains(stderr, "--cluster") {
		t.Errorf("--kubeconfig without --cluster: exit %d, %s; want 2", code, stderr)
	}
}

// An API server that refuses every LIST: each cluster rule that had
// something to judge is NOT_RUN with the server's answer, nothing is
// FAIL or WARN on its account, and the exit status is 2: --cluster
// examined nothing of the cluster.
func TestLintClusterUnreadableIsNotRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(403)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"dev\" cannot list %s","reason":"Forbidden","code":403}`, r.URL.Path)
	}))
	defer srv.Close()
	stdout, stderr, code := run(t, "lint", "--cluster", "--kubeconfig", kubeconfigFor(t, srv.URL), "-f", lintData+"planted-cluster", "-o", "json")
	if code != 2 || !strings.Contains(stderr, "answered none of the LISTs") {
		t.Fatalf("exit %d: %s; want 2 (nothing of the cluster was read)", code, stderr)
	}
	notRun := map[string]bool{}
	for c, st := range pluginCodes(t, stdout) {
		if strings.HasPrefix(c, "LINT_CLUSTER_") {
			if st != "NOT_RUN" {
				t.Errorf("%s %s with every LIST refused", c, st)
			}
			notRun[c] = true
		}
	}
	for _, c := range []string{"LINT_CLUSTER_RUNTIMECLASS_MISSING", "LINT_CLUSTER_DEVICECLASS_MISSING", "LINT_CLUSTER_NO_NODE_MATCHES", "LINT_CLUSTER_RESOURCE_NOT_ADVERTISED", "LINT_CLUSTER_TAINT_NOT_TOLERATED"} {
		if !notRun[c] {
			t.Errorf("%s is not reported NOT_RUN", c)
		}
	}
	if !strings.Contains(stdout, `cannot list /apis/node.k8s.io/v1/runtimeclasses`) || !strings.Contains(stdout, "cannot list /api/v1/nodes") {
		t.Errorf("the reasons do not carry the API server's answer:\n%s", stdout)
	}
}

// The cluster rules' NOT_RUN fixes follow the LIST's error: a 403 names
// the verb and resource (`kubectl auth can-i`), a server that refuses
// the connection is to be reached, with no word of RBAC; neither is the
// rule's own (WARN or FAIL) fix.
func TestLintClusterNotRunFixFollowsTheError(t *testing.T) {
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(403)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: %s","reason":"Forbidden","code":403}`, r.URL.Path)
	}))
	defer forbidden.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	for _, c := range []struct {
		server    string
		want, not map[string]string // code -> what its fix says / must not say
	}{
		{forbidden.URL,
			map[string]string{"LINT_CLUSTER_RUNTIMECLASS_MISSING": "`kubectl auth can-i list runtimeclasses.node.k8s.io`", "LINT_CLUSTER_NO_NODE_MATCHES": "`kubectl auth can-i list nodes`"},
			map[string]string{"LINT_CLUSTER_RUNTIMECLASS_MISSING": "kubeconfig's server"}},
		{refused,
			map[string]string{"LINT_CLUSTER_RUNTIMECLASS_MISSING": "kubeconfig's server", "LINT_CLUSTER_NO_NODE_MATCHES": "kubeconfig's server"},
			map[string]string{"LINT_CLUSTER_RUNTIMECLASS_MISSING": "auth can-i", "LINT_CLUSTER_NO_NODE_MATCHES": "auth can-i"}},
	} {
		stdout, _, _ := run(t, "lint", "--cluster", "--kubeconfig", kubeconfigFor(t, c.server), "-f", lintData+"planted-cluster", "-o", "json")
		var rep report.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%s: %v: %s", c.server, err, stdout)
		}
		seen := map[string]bool{}
		for _, f := range rep.Findings {
			if f.Status != report.NotRun || !strings.HasPrefix(f.Code, "LINT_CLUSTER_") {
				continue
			}
			seen[f.Code] = true
			if cat, ok := lint.Lookup(f.Code); f.Remediation == "" || ok && strings.Contains(f.Remediation, cat.Remediation) {
				t.Errorf("%s: %s: fix %q", c.server, f.Code, f.Remediation)
			}
			if w, ok := c.want[f.Code]; ok && !strings.Contains(f.Remediation, w) {
				t.Errorf("%s: %s: fix %q does not say %q", c.server, f.Code, f.Remediation, w)
			}
			if n, ok := c.not[f.Code]; ok && strings.Contains(f.Remediation, n) {
				t.Errorf("%s: %s: fix %q says %q", c.server, f.Code, f.Remediation, n)
			}
		}
		for code := range c.want {
			if !seen[code] {
				t.Errorf("%s: no NOT_RUN %s", c.server, code)
			}
		}
	}
}
