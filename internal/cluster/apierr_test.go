package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// refusedAddr is a loopback port nothing listens on: one that was bound
// and closed.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// statusServer answers every request as the API server answers one it
// refuses: a metav1.Status of that code and reason.
func statusServer(t *testing.T, code int, reason string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"%s: %s %s","reason":%q,"code":%d}`,
			strings.ToLower(reason), r.Method, r.URL.Path, reason, code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestListFixFollowsTheError: the same LISTs, failing for different
// reasons, get different fixes. A server that refuses the connection
// is told to be reached (its address, the context), not to be granted
// RBAC verbs; 401 is the credentials; 403 names the verbs, as
// `kubectl auth can-i` takes them; a server that does not answer in
// time is a timeout. Each from a real client against a real socket.
func TestListFixFollowsTheError(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	for _, c := range []struct {
		name, host   string
		want, refuse []string
	}{
		{"refused", "http://" + refusedAddr(t),
			[]string{"connection refused", "kubeconfig's server", "current-context", "/readyz"}, []string{"auth can-i", "credentials"}},
		{"forbidden", statusServer(t, 403, "Forbidden"),
			[]string{"`kubectl auth can-i list nodes`", "RBAC"}, []string{"kubeconfig's server", "credentials"}},
		{"unauthorized", statusServer(t, 401, "Unauthorized"),
			[]string{"credentials", "kubectl auth whoami"}, []string{"auth can-i", "kubeconfig's server"}},
		{"timeout", slow.URL,
			[]string{"did not answer in time"}, []string{"auth can-i", "credentials"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := NewClient(&rest.Config{Host: c.host, Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			a := NewAnalyzer()
			if err := Collect(context.Background(), cl, "", a); err != nil {
				t.Fatal(err)
			}
			fs := a.Findings()
			if len(fs) != 3 {
				t.Fatalf("%d findings, want the 3 LISTs': %+v", len(fs), fs)
			}
			for _, f := range fs {
				if f.Code != "CLUSTER_LIST_FAILED" || f.Status != report.NotRun || f.Reason == "" {
					t.Errorf("%+v", f)
				}
			}
			var nodes report.Finding
			for _, f := range fs {
				if f.Subject == "nodes" {
					nodes = f
				}
			}
			for _, w := range c.want {
				if !strings.Contains(nodes.Remediation+" "+nodes.Reason, w) {
					t.Errorf("nodes: fix %q (reason %q) does not say %q", nodes.Remediation, nodes.Reason, w)
				}
			}
			for _, r := range c.refuse {
				if strings.Contains(nodes.Remediation, r) {
					t.Errorf("nodes: fix %q says %q, which is another error's fix", nodes.Remediation, r)
				}
			}
			if cat, _ := CodeOf("CLUSTER_LIST_FAILED"); strings.Contains(nodes.Remediation, cat.Remediation) {
				t.Errorf("the catalog's fix: %q", nodes.Remediation)
			}
			if c.name == "forbidden" {
				for _, f := range fs {
					if f.Subject == "pods (all namespaces)" && !strings.Contains(f.Remediation, "`kubectl auth can-i list pods --all-namespaces`") {
						t.Errorf("pods: fix %q", f.Remediation)
					}
				}
			}
		})
	}
}

// TestAPIWhyNamesTheRequest: a RequestError's verb, resource and object
// reach the fix; the text of the error is the error's own.
func TestAPIWhyNamesTheRequest(t *testing.T) {
	cl, err := NewClient(&rest.Config{Host: statusServer(t, 404, "NotFound")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.Nodes(context.Background(), metav1.ListOptions{})
	if err == nil {
		t.Fatal("a 404 answered nothing")
	}
	listed := Listing("resourceslices.resource.k8s.io", "resource.k8s.io/v1", "", false, err)
	if listed.Error() != err.Error() {
		t.Errorf("Listing changed the error's text: %q, was %q", listed, err)
	}
	if w := APIWhy("r", listed); w.Blocker != report.APINotServed || !strings.Contains(w.Fix(), "resource.k8s.io/v1") {
		t.Errorf("a LIST answered 404: %v, %q", w.Blocker, w.Fix())
	}
	got := &RequestError{Verb: "get", Resource: "resourceclaims.resource.k8s.io", Namespace: "ml", Name: "c1", Err: err}
	if w := APIWhy("r", got); w.Blocker != report.APINotFound || !strings.Contains(w.Fix(), "kubectl get resourceclaims.resource.k8s.io c1 -n ml") {
		t.Errorf("a GET answered 404: %v, %q", w.Blocker, w.Fix())
	}
	if Listing("nodes", "v1", "", false, nil) != nil {
		t.Error("Listing of no error is an error")
	}
}
