package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

const (
	saNamespace = "accel-doctor"
	saName      = "accel-doctor-agent"
	condType    = "AcceleratorsReady"
	annotation  = "accel-doctor.io/summary"
)

// summary is the annotation's schema (docs/cluster.md), decoded here
// without the product's types.
type summary struct {
	V            int      `json:"v"`
	Status       string   `json:"status"`
	Layer        int      `json:"layer"`
	Code         string   `json:"code"`
	Accelerators int      `json:"accelerators"`
	Resources    []string `json:"resources"`
	// DRA (v2): the node's DRA registrations, or why not judged.
	DRA *struct {
		Drivers []string `json:"drivers"`
		NotRun  string   `json:"not_run"`
	} `json:"dra"`
}

func repoFile(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// applyRBAC creates the ServiceAccount, ClusterRole and ClusterRoleBinding
// of internal/agent/testdata/rbac.yaml.
func applyRBAC(t *testing.T, ctx context.Context, c *apiserver.Cluster) {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "internal/agent/testdata/rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ServiceAccount":
			var o corev1.ServiceAccount
			must(t, yaml.Unmarshal([]byte(doc), &o))
			_, err = c.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRole":
			var o rbacv1.ClusterRole
			must(t, yaml.Unmarshal([]byte(doc), &o))
			_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			must(t, yaml.Unmarshal([]byte(doc), &o))
			_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			must(t, yaml.Unmarshal([]byte(doc), &o))
			_, err = c.Client.RbacV1().Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			must(t, yaml.Unmarshal([]byte(doc), &o))
			_, err = c.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		default:
			t.Fatalf("rbac.yaml: unexpected kind %q", meta.Kind)
		}
		if err != nil {
			t.Fatalf("create %s: %v", meta.Kind, err)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// saConfig is a client config with a token of the agent's ServiceAccount
// (TokenRequest), as the pod's projected token would be; server is the
// API server's address.
func saConfig(t *testing.T, ctx context.Context, c *apiserver.Cluster, server string) (*rest.Config, string) {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(saNamespace).CreateToken(ctx, saName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", saNamespace, saName, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.Config.TLSClientConfig.CAData, TLSServerName: c.Config.TLSClientConfig.ServerName}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["agent"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "agent"}
	kc.CurrentContext = "agent"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, clientcmd.WriteToFile(*kc, path))
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	must(t, err)
	return cfg, path
}

func gpuNode(name string) *corev1.Node {
	q := resource.MustParse("8")
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": q},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": q},
		},
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func scrape(addr, path string) (int, string, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// series are the lines of an exposition for metric name whose labels
// include every want="value".
func series(page, name string, want ...string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

func condition(n *corev1.Node) (corev1.NodeCondition, bool) {
	for _, c := range n.Status.Conditions {
		if c.Type == condType {
			return c, true
		}
	}
	return corev1.NodeCondition{}, false
}

// TestAgentPublishesToRealAPIServer runs the agent for a node with planted
// faults and one for a healthy node, as the ServiceAccount, and reads back
// what each published; then an agent whose API server is a dead port.
func TestAgentPublishesToRealAPIServer(t *testing.T) {
	harness.AccelDoctor(t)
	c := apiserver.StartWith(t, "--authorization-mode=RBAC")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	must(t, c.EnsureNamespace(ctx, saNamespace))
	applyRBAC(t, ctx, c)
	for _, n := range []string{"gpu-faults", "gpu-healthy", "bystander"} {
		if _, err := c.CreateNode(ctx, gpuNode(n)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := c.Client.CoreV1().Nodes().Get(ctx, "bystander", metav1.GetOptions{})
	must(t, err)
	saCfg, kubeconfig := saConfig(t, ctx, c, c.Config.Host)

	t.Run("rbac", func(t *testing.T) { checkRBAC(t, ctx, saCfg) })

	type want struct {
		node, fixture, status, reason string
		sumStatus                     string
	}
	cases := []want{
		// The faults fixture's first broken layer is the driver's (2):
		// DRIVER_LIBRARY_MISMATCH (check --root testdata/hosts/demo-h100x8-faults).
		{"gpu-faults", "testdata/hosts/demo-h100x8-faults", "False", "DRIVER_LIBRARY_MISMATCH", "FAIL"},
		{"gpu-healthy", "testdata/hosts/nvidia-h100x8-k8s-cgroupv1", "True", "AcceleratorsReady", "PASS"},
	}
	procs := map[string]*harness.Proc{}
	addrs := map[string]string{}
	for _, w := range cases {
		addrs[w.node] = freeAddr(t)
		procs[w.node] = harness.StartAccelDoctor(t, "--root", repoFile(t, w.fixture), "agent",
			"--node-name", w.node, "--interval", "1s", "--heartbeat", "2s", "--metrics-address", addrs[w.node], "--kubeconfig", kubeconfig)
	}
	for _, w := range cases {
		t.Run(w.node, func(t *testing.T) {
			var n *corev1.Node
			took, err := apiserver.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
				var err error
				n, err = c.Client.CoreV1().Nodes().Get(ctx, w.node, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				_, ok := condition(n)
				return ok && n.Annotations[annotation] != "", nil
			})
			if err != nil {
				t.Fatalf("no %s condition and annotation on %s: %v", condType, w.node, err)
			}
			t.Logf("%s: condition and annotation after %v", w.node, took.Round(time.Millisecond))
			cond, _ := condition(n)
			if string(cond.Status) != w.status || cond.Reason != w.reason || cond.Message == "" || len(cond.Message) > 256 {
				t.Errorf("condition %+v, want %s %s with a short message", cond, w.status, w.reason)
			}
			// The kubelet's (here the harness's) Ready condition is kept:
			// the strategic merge touched only the agent's type.
			ready := false
			for _, nc := range n.Status.Conditions {
				ready = ready || nc.Type == corev1.NodeReady
			}
			if !ready {
				t.Errorf("the Ready condition is gone: %+v", n.Status.Conditions)
			}
			var s summary
			if err := json.Unmarshal([]byte(n.Annotations[annotation]), &s); err != nil {
				t.Fatalf("annotation %q: %v", n.Annotations[annotation], err)
			}
			if s.V != 2 || s.Status != w.sumStatus || s.Accelerators != 8 || (w.sumStatus == "FAIL" && (s.Code != w.reason || s.Layer != 2)) {
				t.Errorf("summary %+v, want v2 %s with 8 accelerators (FAIL: layer 2, code %s)", s, w.sumStatus, w.reason)
			}
			// The fixture trees hold no plugins_registry: the
			// registrations are not judged, which the summary says
			// (never an empty list, which would read as "none").
			if s.DRA == nil || s.DRA.NotRun == "" || len(s.DRA.Drivers) != 0 {
				t.Errorf("summary dra %+v, want not judged with its reason", s.DRA)
			}

			// One Event about the node, reason the code.
			var evs *corev1.EventList
			_, err = apiserver.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				var err error
				evs, err = c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + w.node})
				return err == nil && len(evs.Items) > 0, err
			})
			if err != nil {
				t.Fatalf("no Event for node %s: %v", w.node, err)
			}
			e := evs.Items[0]
			if e.Reason != w.reason || e.InvolvedObject.UID != n.UID || e.Source.Component != "accel-doctor-agent" {
				t.Errorf("event reason %q involvedObject %+v source %+v: want %s about node %s (UID %s)", e.Reason, e.InvolvedObject, e.Source, w.reason, w.node, n.UID)
			}

			// Several runs later still one Event: the state did not change;
			// the condition is written again each --heartbeat (2s).
			last := cond.LastHeartbeatTime
			_, err = apiserver.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				n, err := c.Client.CoreV1().Nodes().Get(ctx, w.node, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				cc, _ := condition(n)
				return cc.LastHeartbeatTime.After(last.Add(1500 * time.Millisecond)), nil
			})
			if err != nil {
				t.Errorf("heartbeat not renewed: %v", err)
			}
			evs, err = c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + w.node})
			if err != nil || len(evs.Items) != 1 {
				t.Errorf("events after several runs of one state: %d (%v), want 1", len(evs.Items), err)
			}

			code, page, err := scrape(addrs[w.node], "/metrics")
			if err != nil || code != 200 {
				t.Fatalf("/metrics: %d %v", code, err)
			}
			fails := series(page, "accel_doctor_check_findings", `status="FAIL"`, `node="`+w.node+`"`)
			if w.sumStatus == "FAIL" && len(series(page, "accel_doctor_check_findings", `code="`+w.reason+`"`, `status="FAIL"`)) == 0 {
				t.Errorf("no FAIL series for %s in /metrics:\n%s", w.reason, page)
			}
			if w.sumStatus == "PASS" && len(fails) != 0 {
				t.Errorf("FAIL series on the healthy node: %v", fails)
			}
			if len(series(page, "accel_doctor_check_findings", `UUID="GPU-`, `gpu="7"`, `pci_bus_id="00000000:`, `modelName="NVIDIA H100`)) == 0 {
				t.Errorf("no series with the DCGM identity labels of GPU 7:\n%s", page)
			}
			if len(series(page, "accel_doctor_agent_api_last_success_timestamp_seconds")) != 1 || strings.Contains(series(page, "accel_doctor_agent_api_last_success_timestamp_seconds")[0], " 0") {
				t.Errorf("api_last_success: %v", series(page, "accel_doctor_agent_api_last_success_timestamp_seconds"))
			}
			if code, _, _ := scrape(addrs[w.node], "/healthz"); code != 200 {
				t.Errorf("/healthz %d", code)
			}
		})
	}

	// The agents wrote their own nodes only.
	after, err := c.Client.CoreV1().Nodes().Get(ctx, "bystander", metav1.GetOptions{})
	must(t, err)
	if _, ok := condition(after); ok || after.Annotations[annotation] != "" || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("node bystander changed (resourceVersion %s -> %s): %+v", before.ResourceVersion, after.ResourceVersion, after.Status.Conditions)
	}

	// Idle RSS of an agent after several runs (the target is 30 MiB).
	if rss, hwm, err := vmRSS(procs["gpu-faults"].Pid()); err == nil {
		t.Logf("agent (8-GPU faults fixture, 1s interval, API server up): VmRSS %d KiB, VmHWM %d KiB", rss, hwm)
	}

	// An agent whose API server is a dead port keeps checking and serving.
	t.Run("api-unreachable", func(t *testing.T) {
		_, deadKC := saConfig(t, ctx, c, "https://"+freeAddr(t))
		addr := freeAddr(t)
		p := harness.StartAccelDoctor(t, "--root", repoFile(t, "testdata/hosts/demo-h100x8-faults"), "agent",
			"--node-name", "gpu-faults", "--interval", "1s", "--metrics-address", addr, "--kubeconfig", deadKC)
		_, err := apiserver.WaitFor(ctx, 30*time.Second, func(context.Context) (bool, error) {
			code, page, err := scrape(addr, "/metrics")
			if err != nil || code != 200 {
				return false, nil
			}
			errs := series(page, "accel_doctor_agent_api_errors_total", `write="condition"`)
			return len(errs) == 1 && !strings.HasSuffix(errs[0], " 0") && !strings.HasSuffix(errs[0], " 1") &&
				len(series(page, "accel_doctor_check_findings", `status="FAIL"`)) > 0, nil
		})
		if err != nil {
			t.Fatalf("with the API server unreachable, /metrics did not show the check and at least 2 failed writes: %v", err)
		}
		if code, body, _ := scrape(addr, "/healthz"); code != 200 {
			t.Errorf("/healthz %d %s with the API server unreachable", code, body)
		}
		// SIGTERM is a normal stop, also while it backs off from an
		// unreachable API server: exit 0 (internal/kubecli's agent.go).
		if code := p.Stop(); code != 0 {
			t.Errorf("agent exit %d after SIGTERM, want 0", code)
		}
	})
}

// checkRBAC asks the API server, as the agent's ServiceAccount
// (SelfSubjectAccessReview: `kubectl auth can-i`), what it may do, and
// tries what it may not.
func checkRBAC(t *testing.T, ctx context.Context, cfg *rest.Config) {
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	for _, tc := range []struct {
		verb, resource, sub, ns, name string
		allowed                       bool
	}{
		{"patch", "nodes", "status", "", "gpu-faults", true},
		{"patch", "nodes", "", "", "gpu-faults", true},
		{"get", "nodes", "", "", "gpu-faults", true},
		{"create", "events", "", "default", "", true},
		{"create", "events", "", "kube-system", "", false},
		{"patch", "events", "", "default", "", false},
		{"delete", "nodes", "", "", "gpu-faults", false},
		{"update", "nodes", "", "", "gpu-faults", false},
		{"list", "secrets", "", "", "", false},
		{"get", "secrets", "", "kube-system", "", false},
		{"patch", "pods", "", "default", "", false},
		{"list", "nodes", "", "", "", false},
		{"create", "pods", "", "default", "", false},
	} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: tc.verb, Resource: tc.resource, Subresource: tc.sub, Namespace: tc.ns, Name: tc.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview %s %s: %v", tc.verb, tc.resource, err)
		}
		if r.Status.Allowed != tc.allowed {
			t.Errorf("can-i %s %s/%s (ns %q): %v, want %v (%s)", tc.verb, tc.resource, tc.sub, tc.ns, r.Status.Allowed, tc.allowed, r.Status.Reason)
		}
	}
	// And the API server refuses the writes themselves.
	if err := cs.CoreV1().Nodes().Delete(ctx, "bystander", metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("delete node as the agent: %v, want forbidden", err)
	}
	if _, err := cs.CoreV1().Pods("default").Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("patch pod as the agent: %v, want forbidden", err)
	}
	if _, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("list secrets as the agent: %v, want forbidden", err)
	}
}

func vmRSS(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		var v int64
		if n, _ := fmt.Sscanf(string(l), "VmRSS: %d kB", &v); n == 1 {
			rss = v
		}
		if n, _ := fmt.Sscanf(string(l), "VmHWM: %d kB", &v); n == 1 {
			hwm = v
		}
	}
	return rss, hwm, nil
}
