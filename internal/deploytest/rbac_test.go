package deploytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/accel-doctor/accel-doctor/internal/agent"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
)

// agentSA is the agent's ServiceAccount, as agent-rbac.yaml names it
// and base/kustomization.yaml places it.
const agentSA = "accel-doctor/accel-doctor-agent"

// agentCalls are the API requests internal/agent's Client makes, as the
// authorizer sees them ("VERB GROUP/RESOURCE[/SUB] in NAMESPACE", the
// namespace empty for a cluster-scoped resource), sorted: each method of
// agent.API called once against a server that records the requests and
// answers as an API server would.
func agentCalls(t *testing.T) []string {
	t.Helper()
	// The agent reaches the API server only through agent.API (its
	// Config.API, which the agent command sets to an *agent.Client).
	// A method added there is a call this test does not make yet.
	var _ agent.API = (*agent.Client)(nil)
	if n := reflect.TypeFor[agent.API]().NumMethod(); n != 4 {
		t.Fatalf("agent.API has %d methods: call each new one below, so that its RBAC is checked", n)
	}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		attr, err := authzAttributes(r.Method, r.URL.Path)
		if err != nil {
			t.Errorf("the agent asked %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[attr] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/events") {
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"kind":"Event","apiVersion":"v1","metadata":{"name":"gpu-node-1.accel-doctor.x","namespace":"default"}}`)
			return
		}
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"gpu-node-1","uid":"9f3c1c1e-0000-4000-8000-000000000001"},`+
			`"status":{"conditions":[{"type":"AcceleratorsReady","status":"True","reason":"AcceleratorsReady"}]}}`)
	}))
	defer srv.Close()
	c, err := agent.NewClient(&rest.Config{Host: srv.URL}, "gpu-node-1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var api agent.API = c
	now := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	cond := agent.Condition{Status: "False", Reason: "KUBELET_PLUGIN_NOT_REGISTERED", Message: "m"}
	if _, _, _, err := api.Condition(ctx); err != nil {
		t.Fatal(err)
	}
	if err := api.PatchCondition(ctx, cond, now, now); err != nil {
		t.Fatal(err)
	}
	if err := api.Annotate(ctx, cluster.Summary{Version: cluster.SummaryVersion, Status: "FAIL"}); err != nil {
		t.Fatal(err)
	}
	if err := api.Event(ctx, cond, now); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// authzAttributes names a core/v1 request as the API server's request
// info resolver does (k8s.io/apiserver pkg/endpoints/request
// requestinfo.go): /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]],
// GET of a name "get", POST "create", PATCH "patch", PUT "update",
// DELETE "delete".
func authzAttributes(method, p string) (string, error) {
	tail, ok := strings.CutPrefix(p, "/api/v1/")
	if !ok {
		return "", fmt.Errorf("not a core/v1 path")
	}
	parts := strings.Split(tail, "/")
	ns := ""
	if parts[0] == "namespaces" && len(parts) >= 3 {
		ns, parts = parts[1], parts[2:]
	}
	res := parts[0]
	if len(parts) == 3 {
		res += "/" + parts[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPatch: "patch", http.MethodPut: "update", http.MethodDelete: "delete"}[method]
	if method == http.MethodGet {
		verb = "list"
		if len(parts) >= 2 {
			verb = "get"
		}
	}
	if verb == "" || len(parts) > 3 || method == http.MethodPost && len(parts) != 1 {
		return "", fmt.Errorf("a request this test does not name")
	}
	return verb + " /" + res + " in " + ns, nil
}

// grants expands what the RBAC objects give the ServiceAccount sa
// ("NAMESPACE/NAME") into "VERB GROUP/RESOURCE in NAMESPACE", sorted: a
// ClusterRoleBinding's rules in namespace "" (every namespace and the
// cluster-scoped resources), a RoleBinding's in its own. A wildcard, a
// resourceName or a non-resource URL is an error: the agent's rules name
// what they allow.
func grants(t *testing.T, objs []object, sa string) []string {
	t.Helper()
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // "ns/name"
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[v.Name] = v.Rules
		case *rbacv1.Role:
			roles[o.ns+"/"+v.Name] = v.Rules
		}
	}
	bound := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace+"/"+s.Name == sa {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	expand := func(where string, rules []rbacv1.PolicyRule, ok bool, ns string) {
		if !ok {
			t.Errorf("%s: no such role", where)
			return
		}
		for _, r := range rules {
			if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
				t.Errorf("%s: rule %+v has resourceNames or nonResourceURLs", where, r)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if g == "*" || res == "*" || v == "*" {
							t.Errorf("%s: rule %+v has a wildcard", where, r)
						}
						seen[v+" "+g+"/"+res+" in "+ns] = true
					}
				}
			}
		}
	}
	for _, o := range objs {
		switch b := o.obj.(type) {
		case *rbacv1.ClusterRoleBinding:
			if bound(b.Subjects) {
				rules, ok := clusterRoles[b.RoleRef.Name]
				expand("ClusterRoleBinding "+b.Name, rules, ok && b.RoleRef.Kind == "ClusterRole", "")
			}
		case *rbacv1.RoleBinding:
			if !bound(b.Subjects) {
				continue
			}
			rules, ok := roles[o.ns+"/"+b.RoleRef.Name]
			if b.RoleRef.Kind == "ClusterRole" {
				rules, ok = clusterRoles[b.RoleRef.Name]
			}
			expand("RoleBinding "+o.ns+"/"+b.Name, rules, ok, o.ns)
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// The RBAC that deploy/ installs for the agent (rendered: each object in
// the namespace kustomize gives it) grants exactly the requests the
// agent's code makes, where it makes them: get and patch of its Node,
// patch of the Node's status, create of Events in "default" only; no
// patch of Events, no events.k8s.io, no other namespace. So does
// internal/agent/testdata/rbac.yaml, which e2e/agent applies.
func TestAgentRBACIsWhatTheAgentCalls(t *testing.T) {
	calls := agentCalls(t)
	want := []string{"create /events in default", "get /nodes in ", "patch /nodes in ", "patch /nodes/status in "}
	if !slices.Equal(calls, want) {
		// The list above is what the docs (docs/agent.md) and the
		// manifests' comments say the agent does: change them with it.
		t.Errorf("the agent's Client makes %q, the docs say %q", calls, want)
	}
	if got := grants(t, readInstall(t, "deploy").objects, agentSA); !slices.Equal(got, calls) {
		t.Errorf("deploy/ grants the agent %q, its code makes %q", got, calls)
	}
	if got := grants(t, decodeFile(t, "internal/agent/testdata/rbac.yaml"), agentSA); !slices.Equal(got, calls) {
		t.Errorf("internal/agent/testdata/rbac.yaml grants the agent %q, its code makes %q", got, calls)
	}
	// The namespace the Events go to is the code's, not a copy.
	if agent.EventNamespace != "default" {
		t.Errorf("agent.EventNamespace is %q", agent.EventNamespace)
	}
	// The ServiceAccount the bindings name is the one deploy/ creates.
	if !slices.Contains(readInstall(t, "deploy").placed(), "ServiceAccount/"+agentSA) {
		t.Errorf("deploy/ creates no ServiceAccount %s", agentSA)
	}
}

// The detector itself: a ClusterRole for Events (every namespace), a
// Role in the agent's namespace, an extra verb, a wildcard are each
// told apart from the agent's calls.
func TestAgentRBACGrantsDetector(t *testing.T) {
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "accel-doctor-agent", Namespace: "accel-doctor"}}
	role := func(ns string, rules ...rbacv1.PolicyRule) []object {
		var out []object
		if ns == "" {
			out = append(out, object{kind: "ClusterRole", obj: &rbacv1.ClusterRole{Rules: rules}},
				object{kind: "ClusterRoleBinding", obj: &rbacv1.ClusterRoleBinding{Subjects: sa, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole"}}})
			return out
		}
		return append(out, object{kind: "Role", ns: ns, obj: &rbacv1.Role{Rules: rules}},
			object{kind: "RoleBinding", ns: ns, obj: &rbacv1.RoleBinding{Subjects: sa, RoleRef: rbacv1.RoleRef{Kind: "Role"}}})
	}
	events := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}
	for _, tc := range []struct {
		what string
		objs []object
		want []string
	}{
		{"a Role in default", role("default", events), []string{"create /events in default"}},
		{"a ClusterRole", role("", events), []string{"create /events in "}},
		{"a Role in the agent's namespace", role("accel-doctor", events), []string{"create /events in accel-doctor"}},
		{"patch too", role("default", rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}),
			[]string{"create /events in default", "create events.k8s.io/events in default", "patch /events in default", "patch events.k8s.io/events in default"}},
		{"another subject", append(role("default", events)[:1], object{kind: "RoleBinding", ns: "default", obj: &rbacv1.RoleBinding{
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: "accel-doctor"}}, RoleRef: rbacv1.RoleRef{Kind: "Role"}}}), []string{}},
	} {
		if got := grants(t, tc.objs, agentSA); !slices.Equal(got, tc.want) {
			t.Errorf("%s: grants %q, want %q", tc.what, got, tc.want)
		}
	}
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/api/v1/nodes/n", "get /nodes in "},
		{"GET", "/api/v1/nodes", "list /nodes in "},
		{"PATCH", "/api/v1/nodes/n/status", "patch /nodes/status in "},
		{"POST", "/api/v1/namespaces/default/events", "create /events in default"},
		{"DELETE", "/api/v1/namespaces/default/events/e", "delete /events in default"},
	} {
		if got, err := authzAttributes(tc.method, tc.path); err != nil || got != tc.want {
			t.Errorf("%s %s: %q, %v; want %q", tc.method, tc.path, got, err, tc.want)
		}
	}
	if _, err := authzAttributes("GET", "/apis/events.k8s.io/v1/events"); err == nil {
		t.Error("a request outside core/v1 was named")
	}
}
