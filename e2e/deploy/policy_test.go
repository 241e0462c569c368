package deploy

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// The agent's ValidatingAdmissionPolicy (deploy/policy/agent-node-policy.yaml)
// holds each agent to its own Node, which RBAC cannot: with a token the
// API server binds to a pod on node-a (TokenRequest, boundObjectRef kind
// Pod, as the kubelet asks for a projected service-account token), the
// agent's ServiceAccount patches node-a's summary annotation and its
// AcceleratorsReady condition, as internal/agent does, and is denied,
// with the policy's message, the same patches of node-b, any other change
// of node-a (a label, another annotation, another condition, a taint),
// and every Node change with a token bound to no pod.
func TestAgentOwnNodePolicy(t *testing.T) {
	c := apiserver.StartWith(t, "--authorization-mode=Node,RBAC")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	policies := 0
	for _, o := range render(t, repoDeploy) {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			policies++
		default:
			continue
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
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Fatalf("create %s %s: %v", gvk.Kind, o.GetName(), err)
		}
	}
	if policies != 2 {
		t.Fatalf("deploy/ renders %d of the ValidatingAdmissionPolicy and its binding, want both", policies)
	}
	for _, name := range []string{"node-a", "node-b"} {
		if _, err := c.CreateNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The agent's pod, bound to node-a (no kubelet runs it: the token
	// binding needs the Pod object and its spec.nodeName only).
	pod, err := c.Client.CoreV1().Pods("accel-doctor").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a"},
		Spec: corev1.PodSpec{ServiceAccountName: "accel-doctor-agent", NodeName: "node-a",
			Containers: []corev1.Container{{Name: "agent", Image: "accel-doctor"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var agentToken string
	token := func(bound *authenticationv1.BoundObjectReference) kubernetes.Interface {
		t.Helper()
		tr, err := c.Client.CoreV1().ServiceAccounts("accel-doctor").CreateToken(ctx, "accel-doctor-agent", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: bound, ExpirationSeconds: new(int64(600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if bound != nil {
			agentToken = tr.Status.Token
		}
		cfg := rest.AnonymousClientConfig(c.Config)
		cfg.BearerToken = tr.Status.Token
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	agent := token(&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
	unbound := token(nil)

	// Who the API server says the token is: the node claim made it into
	// the user's extra.
	ssr, err := agent.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ssr.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != "node-a" {
		t.Fatalf("the pod-bound token's user %s has extra %v: no node-name node-a", ssr.Status.UserInfo.Username, ssr.Status.UserInfo.Extra)
	}

	const (
		annotate  = `{"metadata":{"annotations":{"accel-doctor.io/summary":"{\"v\":1}"}}}`
		condition = `{"status":{"conditions":[{"type":"AcceleratorsReady","status":"True","reason":"AcceleratorsReady","message":"ok","lastHeartbeatTime":"2026-12-01T16:00:00Z","lastTransitionTime":"2026-12-01T16:00:00Z"}]}}`
	)
	patch := func(cs kubernetes.Interface, node, sub string, pt types.PatchType, body string, dryRun bool) error {
		o := metav1.PatchOptions{}
		if dryRun {
			o.DryRun = []string{metav1.DryRunAll}
		}
		var subs []string
		if sub != "" {
			subs = []string{sub}
		}
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, pt, []byte(body), o, subs...)
		return err
	}
	// The RBAC authorizer and the policy plugin read their objects through
	// informers: wait (dry-run, nothing stored) until node-a's patch is
	// allowed and node-b's denied by the policy.
	ownNode := "accel-doctor-agent may change only the node its pod runs on (node-a), not node-b"
	if _, err := apiserver.WaitFor(ctx, 30*time.Second, func(context.Context) (bool, error) {
		errA := patch(agent, "node-a", "", types.MergePatchType, annotate, true)
		errB := patch(agent, "node-b", "", types.MergePatchType, annotate, true)
		return errA == nil && errB != nil && strings.Contains(errB.Error(), ownNode), nil
	}); err != nil {
		t.Fatalf("the policy did not come into effect: %v", err)
	}

	for _, tc := range []struct {
		what     string
		cs       kubernetes.Interface
		node     string
		sub      string
		pt       types.PatchType
		body     string
		denyWith string // "" for allowed
	}{
		{"own node's summary annotation", agent, "node-a", "", types.MergePatchType, annotate, ""},
		{"own node's AcceleratorsReady condition", agent, "node-a", "status", types.StrategicMergePatchType, condition, ""},
		{"another node's annotation", agent, "node-b", "", types.MergePatchType, annotate, ownNode},
		{"another node's condition", agent, "node-b", "status", types.StrategicMergePatchType, condition, ownNode},
		{"a label of its own node", agent, "node-a", "", types.MergePatchType, `{"metadata":{"labels":{"nvidia.com/gpu.present":"true"}}}`, "may not change a node's spec (taints, unschedulable) or labels"},
		{"a label through the status", agent, "node-a", "status", types.MergePatchType, `{"metadata":{"labels":{"x":"y"}}}`, "may not change a node's spec (taints, unschedulable) or labels"},
		{"a taint of its own node", agent, "node-a", "", types.MergePatchType, `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`, "may not change a node's spec"},
		{"another annotation", agent, "node-a", "", types.MergePatchType, `{"metadata":{"annotations":{"other.io/x":"1"}}}`, "may change no annotation but accel-doctor.io/summary"},
		{"the Ready condition", agent, "node-a", "status", types.StrategicMergePatchType, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"X"}]}}`, "may change no node condition but AcceleratorsReady"},
		{"allocatable", agent, "node-a", "status", types.MergePatchType, `{"status":{"allocatable":{"example.com/gpu":"8"}}}`, "nor capacity, allocatable"},
		{"a token bound to no pod", unbound, "node-a", "", types.MergePatchType, annotate, "its token names no node"},
		// Only the agent is judged: the cluster admin is not.
		{"the admin, another node", c.Client, "node-b", "", types.MergePatchType, annotate, ""},
	} {
		err := patch(tc.cs, tc.node, tc.sub, tc.pt, tc.body, false)
		switch {
		case tc.denyWith == "" && err != nil:
			t.Errorf("%s: %v, want allowed", tc.what, err)
		case tc.denyWith != "" && err == nil:
			t.Errorf("%s: allowed, want denied with %q", tc.what, tc.denyWith)
		case tc.denyWith != "" && (!apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.denyWith)):
			t.Errorf("%s: %v, want denied with %q", tc.what, err, tc.denyWith)
		case err != nil:
			t.Logf("%s: denied: %v", tc.what, err)
		}
	}
	// What was allowed landed.
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cond := range n.Status.Conditions {
		found = found || cond.Type == "AcceleratorsReady" && cond.Status == corev1.ConditionTrue
	}
	if n.Annotations["accel-doctor.io/summary"] == "" || !found || len(n.Spec.Taints) != 0 || n.Labels["x"] != "" {
		t.Errorf("node-a after the patches: annotations %v, conditions %v, taints %v, labels %v", n.Annotations, n.Status.Conditions, n.Spec.Taints, n.Labels)
	}

	// The agent itself, with the pod-bound token: told it runs on node-a,
	// its condition, annotation and Event land; told node-b (a wrong
	// --node-name), every write is denied and counted in its metrics.
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.TLSClientConfig.CAData, TLSServerName: c.Config.TLSClientConfig.ServerName}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: agentToken}
	kc.Contexts["agent"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "agent"}
	kc.CurrentContext = "agent"
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcPath); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../../testdata/hosts/demo-h100x8-faults")
	if err != nil {
		t.Fatal(err)
	}
	addrB := freeAddr(t)
	harness.StartAccelDoctor(t, "--root", root, "agent", "--node-name", "node-a", "--interval", "1s", "--metrics-address", freeAddr(t), "--kubeconfig", kcPath)
	harness.StartAccelDoctor(t, "--root", root, "agent", "--node-name", "node-b", "--interval", "1s", "--metrics-address", addrB, "--kubeconfig", kcPath)
	if _, err := apiserver.WaitFor(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == "AcceleratorsReady" && cond.Status == corev1.ConditionFalse {
				return n.Annotations["accel-doctor.io/summary"] != `{"v":1}`, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("the agent on node-a did not publish its FAIL condition and summary: %v", err)
	}
	if _, err := apiserver.WaitFor(ctx, 60*time.Second, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + addrB + "/metrics")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "accel_doctor_agent_api_errors_total{") && strings.Contains(l, `write="condition"`) && !strings.HasSuffix(l, " 0") && !strings.HasSuffix(l, " 1") {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("the agent told node-b did not count its denied writes: %v", err)
	}
	nb, err := c.Client.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range nb.Status.Conditions {
		if cond.Type == "AcceleratorsReady" {
			t.Errorf("node-b got the condition %+v from an agent of node-a", cond)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
