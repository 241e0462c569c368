// Package deploy checks the manifests of the repository's deploy/ against a
// real API server (../apiserver): every object kustomize renders passes a
// server-side dry-run (dryRun=All: admission, defaulting and validation as
// for a real create, nothing stored), and the agent's RBAC allows what the
// agent does and nothing more, asked of the API server as the agent's
// ServiceAccount (impersonated).
package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
)

// repoDeploy is the product's deploy/ directory, from this package.
const repoDeploy = "../../deploy"

// render is `kubectl kustomize DIR`, with the kustomize library kubectl
// links (sigs.k8s.io/kustomize/api, krusty).
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatalf("kustomize %s: %v", dir, err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func TestManifestsServerDryRun(t *testing.T) {
	c := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))

	// deploy/ is the read-only install (the agent, its RBAC and policy);
	// deploy/plugin is it and the device plugin with its ConfigMap.
	base := render(t, repoDeploy)
	plugin := render(t, repoDeploy+"/plugin")
	examples := render(t, repoDeploy+"/examples")
	var kinds []string
	for _, o := range append(slices.Clone(plugin), examples...) {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(kinds)
	t.Logf("rendered: %s", strings.Join(kinds, ", "))
	if len(base) != 10 || len(plugin) != 12 || len(examples) != 2 {
		t.Errorf("rendered %d objects of deploy/, %d of deploy/plugin and %d of deploy/examples, want 10, 12 and 2: %v", len(base), len(plugin), len(examples), kinds)
	}
	// The agent's NetworkPolicy is among them (it is dry-run below with
	// the rest: networking.k8s.io/v1, strict field validation).
	np := 0
	for _, o := range base {
		if o.GetKind() == "NetworkPolicy" && o.GetName() == "accel-doctor-agent" && o.GetNamespace() == "accel-doctor" {
			np++
		}
	}
	if np != 1 {
		t.Errorf("deploy/ renders %d NetworkPolicy accel-doctor-agent in namespace accel-doctor, want 1", np)
	}
	for _, o := range base {
		if o.GetKind() == "ConfigMap" || o.GetKind() == "DaemonSet" && o.GetName() != "accel-doctor-agent" {
			t.Errorf("deploy/ renders %s %s: the read-only install runs the agent only", o.GetKind(), o.GetName())
		}
	}

	dryRun := func(o *unstructured.Unstructured) {
		t.Helper()
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: no such kind in the API server: %v", gvk, o.GetName(), err)
			return
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				t.Errorf("%s %s: namespaced, and kustomize gave it no namespace", gvk.Kind, o.GetName())
				return
			}
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		got, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			t.Errorf("dry-run create %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
			return
		}
		if got.GetName() != o.GetName() || got.GetKind() != gvk.Kind {
			t.Errorf("dry-run create %s %s answered %s %s", gvk.Kind, o.GetName(), got.GetKind(), got.GetName())
		}
	}
	// The Namespace first, while it does not exist (a dry-run stores
	// nothing); then it is created, with its default ServiceAccount (no
	// controller-manager runs here), so that the namespaced objects are
	// judged in it.
	for _, o := range base {
		if o.GetKind() == "Namespace" {
			dryRun(o)
			if err := c.EnsureNamespace(ctx, o.GetName()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, o := range append(slices.Clone(plugin), examples...) {
		if o.GetKind() != "Namespace" {
			dryRun(o)
		}
	}
	// The opt-in component components/dra-state over deploy/, as a user's
	// overlay applies it: the agent DaemonSet, patched, passes the dry-run
	// and mounts the kubelet's directory read-only.
	for _, o := range renderWithDRAState(t) {
		if o.GetKind() != "DaemonSet" || o.GetName() != "accel-doctor-agent" {
			continue
		}
		dryRun(o)
		// Read as typed: kustomize's maps hold Go ints, which
		// unstructured's Nested* helpers refuse to deep-copy.
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, m := range c.VolumeMounts {
				found = found || m.MountPath == "/host/var/lib/kubelet" && m.ReadOnly
			}
		}
		if !found {
			t.Errorf("with components/dra-state the agent does not mount /host/var/lib/kubelet read-only")
		}
	}
	// kustomize named the plugin's ConfigMap with its content's hash, in
	// the namespace, and rewrote the DaemonSet's reference to it.
	var cm, ref string
	for _, o := range plugin {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetNamespace() == "accel-doctor":
			cm = o.GetName()
		case o.GetKind() == "DaemonSet" && o.GetName() == "accel-doctor-plugin":
			vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if n, ok, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name"); ok {
					ref = n
				}
			}
		}
	}
	if !strings.HasPrefix(cm, "accel-doctor-plugin-") || ref != cm {
		t.Errorf("ConfigMap %q, the plugin DaemonSet mounts %q", cm, ref)
	}
}

// The agent's ServiceAccount may get and patch Nodes, patch their status
// and create Events in "default" (the calls internal/agent makes:
// internal/deploytest TestAgentRBACIsWhatTheAgentCalls), and nothing
// else: asked of the API server's
// authorizer (RBAC) by the ServiceAccount itself (impersonated), as
// `kubectl auth can-i --as system:serviceaccount:accel-doctor:accel-doctor-agent`
// asks.
func TestAgentRBACImpersonated(t *testing.T) {
	// RBAC judges (the test server's default authorizes every request).
	c := apiserver.StartWith(t, "--authorization-mode=Node,RBAC")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	var sa string
	for _, o := range render(t, repoDeploy) {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if o.GetKind() == "ServiceAccount" {
			sa = "system:serviceaccount:" + o.GetNamespace() + ":" + o.GetName()
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", gvk.Kind, o.GetName(), err)
		}
	}
	if sa != "system:serviceaccount:accel-doctor:accel-doctor-agent" {
		t.Fatalf("the agent's ServiceAccount is %q", sa)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer reads the roles through an informer: wait until
	// the binding just created is in its cache (the first allowed query
	// turns true), then ask everything.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "get"}},
		}, metav1.CreateOptions{})
		if err == nil && r.Status.Allowed || time.Now().After(deadline) {
			break
		}
	}
	for _, q := range []struct {
		group, resource, sub, verb, ns string
		want                           bool
	}{
		{"", "nodes", "", "get", "", true},
		{"", "nodes", "", "patch", "", true},
		{"", "nodes", "status", "patch", "", true},
		{"", "events", "", "create", "default", true},
		// Nothing more: no read of the status subresource (the agent
		// reads the Node), Events created only in "default" and never
		// patched, no events.k8s.io, no list or watch of nodes, no update
		// or delete, no pods, no secrets, no events read back, no RBAC.
		{"", "nodes", "status", "get", "", false},
		{"", "events", "", "patch", "default", false},
		{"", "events", "", "create", "accel-doctor", false},
		{"", "events", "", "create", "kube-system", false},
		{"events.k8s.io", "events", "", "create", "default", false},
		{"events.k8s.io", "events", "", "patch", "default", false},
		{"", "nodes", "", "list", "", false},
		{"", "nodes", "", "watch", "", false},
		{"", "nodes", "", "update", "", false},
		{"", "nodes", "", "delete", "", false},
		{"", "nodes", "status", "update", "", false},
		{"", "pods", "", "get", "default", false},
		{"", "pods", "", "patch", "default", false},
		{"", "secrets", "", "get", "accel-doctor", false},
		{"", "events", "", "list", "default", false},
		{"", "configmaps", "", "get", "accel-doctor", false},
		{"rbac.authorization.k8s.io", "clusterroles", "", "create", "", false},
	} {
		r, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: q.group, Resource: q.resource, Subresource: q.sub, Verb: q.verb, Namespace: q.ns,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview as %s: %v", sa, err)
		}
		if r.Status.Allowed != q.want {
			t.Errorf("as %s: %s %s/%s%s in %q: allowed %v, want %v (%s)", sa, q.verb, q.group, q.resource, "/"+q.sub, q.ns, r.Status.Allowed, q.want, r.Status.Reason)
		}
	}
	// And a real patch of a Node, as the agent: allowed.
	n, err := c.CreateNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1"}})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"annotations":{"accel-doctor.io/test":"1"}}}`)
	if _, err := as.CoreV1().Nodes().Patch(ctx, n.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("patch node as the agent: %v", err)
	}
	if err := as.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err == nil {
		t.Error("the agent deleted a Node")
	}
}

// renderWithDRAState renders an overlay of deploy/ with the
// components/dra-state component, as a user's kustomization would.
func renderWithDRAState(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, a)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + abs(repoDeploy) + "]\ncomponents: [" + abs(repoDeploy+"/components/dra-state") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}
