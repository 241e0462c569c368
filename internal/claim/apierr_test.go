package claim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// The claim's and the fleet's NOT_RUN findings get the fix of their
// error's class, from a real client: an API server that refuses the
// connection is to be reached, not granted RBAC verbs; a 403 names the
// verb and resource; a claim that is not there is looked up by name.
func TestClaimAndFleetFixFollowTheError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	status := func(code int, reason string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"%s %s","reason":%q,"code":%d}`, r.Method, r.URL.Path, reason, code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, c := range []struct {
		name, host  string
		claim, list []string // what the claim's fix and the fleet's LIST fix say
		not         string
	}{
		{"refused", refused, []string{"kubeconfig's server"}, []string{"kubeconfig's server"}, "auth can-i"},
		{"forbidden", status(403, "Forbidden"),
			[]string{"`kubectl auth can-i get resourceclaims.resource.k8s.io/c1 -n ml`"},
			[]string{"`kubectl auth can-i list resourceslices.resource.k8s.io`"}, "kubeconfig's server"},
		{"not found", status(404, "NotFound"),
			[]string{"`kubectl get resourceclaims.resource.k8s.io c1 -n ml`"}, []string{"does not serve resource.k8s.io/v1"}, "auth can-i"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := NewClient(&rest.Config{Host: c.host, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Gather(context.Background(), cl, "ml", "c1")
			if err == nil {
				t.Fatal("Gather read a claim from a server that serves none")
			}
			rep := NotRead(Meta{Now: time.Unix(0, 0)}, "resourceclaim/ml/c1", err)
			f := rep.Findings[0]
			if f.Status != report.NotRun || f.Code != "CLAIM_NOT_READ" {
				t.Fatalf("%+v", f)
			}
			judge(t, "claim", f, c.claim, c.not)

			fl := NewFleet()
			fl.Now = testNow
			if err := CollectFleet(context.Background(), cl, fl); err != nil {
				t.Fatal(err)
			}
			var slices report.Finding
			for _, f := range fl.Findings() {
				if f.Code == "DRA_FLEET_LIST_FAILED" && strings.Contains(f.Reason, "LIST resourceslices") {
					slices = f
				}
			}
			judge(t, "fleet", slices, c.list, c.not)
		})
	}
}

func judge(t *testing.T, what string, f report.Finding, want []string, not string) {
	t.Helper()
	if f.Status != report.NotRun {
		t.Errorf("%s: %+v", what, f)
		return
	}
	for _, w := range want {
		if !strings.Contains(f.Remediation, w) {
			t.Errorf("%s: fix %q does not say %q (reason %q)", what, f.Remediation, w, f.Reason)
		}
	}
	if strings.Contains(f.Remediation, not) {
		t.Errorf("%s: fix %q says %q, another error's fix", what, f.Remediation, not)
	}
	if cat, ok := CodeOf(f.Code); ok && cat.Remediation != "" && strings.Contains(f.Remediation, cat.Remediation) {
		t.Errorf("%s: the catalog's fix %q", what, f.Remediation)
	}
	if cat, ok := fleetCodeOf(f.Code); ok && cat.Remediation != "" && strings.Contains(f.Remediation, cat.Remediation) {
		t.Errorf("%s: the catalog's fix %q", what, f.Remediation)
	}
}
