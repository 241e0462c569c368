package deploy

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
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
// with the policy's message, the same patches of node-b, every other
// change of node-a that its RBAC (get, patch of nodes and nodes/status)
// would let through (policyCases: each mutable field of its metadata,
// spec and status, through the endpoint that keeps the change), and
// every Node change with a token bound to no pod; node-a is then as it
// was but for the agent's own two fields.
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
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
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
		if _, err := c.CreateNode(ctx, policyNode(name)); err != nil {
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

	type policyCase struct {
		what     string
		cs       kubernetes.Interface
		node     string
		sub      string
		pt       types.PatchType
		body     string
		denyWith string // "" for allowed
	}
	run := func(tc policyCase) {
		t.Helper()
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
	// The agent's own writes, as internal/agent makes them: allowed, a
	// first time and a change.
	for _, tc := range []policyCase{
		{"own node's summary annotation", agent, "node-a", "", types.MergePatchType, annotate, ""},
		{"own node's AcceleratorsReady condition", agent, "node-a", "status", types.StrategicMergePatchType, condition, ""},
		{"own node's summary annotation, changed", agent, "node-a", "", types.MergePatchType, `{"metadata":{"annotations":{"accel-doctor.io/summary":"{\"v\":1,\"status\":\"FAIL\"}"}}}`, ""},
		{"own node's AcceleratorsReady condition, changed", agent, "node-a", "status", types.StrategicMergePatchType, strings.ReplaceAll(condition, `"True"`, `"False"`), ""},
	} {
		run(tc)
	}
	before, err := c.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Everything else the token could change: each refused by the policy.
	covered := map[string]bool{}
	for _, pc := range policyCases() {
		covered[pc.field] = true
		run(policyCase{pc.what + " (" + pc.field + ")", agent, "node-a", pc.sub, pc.pt, pc.body, pc.denyWith})
	}
	for _, tc := range []policyCase{
		{"another node's annotation", agent, "node-b", "", types.MergePatchType, annotate, ownNode},
		{"another node's condition", agent, "node-b", "status", types.StrategicMergePatchType, condition, ownNode},
		{"a token bound to no pod", unbound, "node-a", "", types.MergePatchType, annotate, "its token names no node"},
		// Only the agent is judged: the cluster admin is not.
		{"the admin, another node", c.Client, "node-b", "", types.MergePatchType, annotate, ""},
	} {
		run(tc)
	}
	// The cases name every field of the Node that a PATCH of nodes or
	// nodes/status can change (k8s.io/api's NodeSpec and NodeStatus, and
	// ObjectMeta's mutable fields), but the ones the API server itself
	// never lets change (unchangeable).
	for _, f := range nodeFields() {
		if !covered[f] && unchangeable[f] == "" {
			t.Errorf("no case changes %s: add one to policyCases (or say in unchangeable why the API server keeps it)", f)
		}
	}
	// And none of them landed: node-a is as it was but for the agent's
	// annotation and condition.
	after, err := c.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(nodeState(before), nodeState(after)) {
		t.Errorf("node-a changed under the refused patches:\n%s", diff.Diff(nodeState(before), nodeState(after)))
	}
	found := false
	for _, cond := range after.Status.Conditions {
		found = found || cond.Type == "AcceleratorsReady" && cond.Status == corev1.ConditionFalse
	}
	if !strings.Contains(after.Annotations["accel-doctor.io/summary"], "FAIL") || !found {
		t.Errorf("node-a after the agent's patches: annotations %v, conditions %v", after.Annotations, after.Status.Conditions)
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
	// Its Event, in "default" (the Role there: deploy/base/agent-rbac.yaml).
	if _, err := apiserver.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=node-a,source=accel-doctor-agent"})
		return err == nil && len(evs.Items) > 0, nil
	}); err != nil {
		t.Errorf("the agent on node-a recorded no Event in default: %v", err)
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

// policyNode is a Node as a kubelet keeps it: every status field set (so
// that a change, not only an addition, is tried), a second condition,
// labels and an annotation of others.
func policyNode(name string) *corev1.Node {
	now := metav1.NewTime(time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC))
	gpus := resource.MustParse("8")
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"example.com/gpu": gpus, corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{"example.com/gpu": gpus, corev1.ResourcePods: resource.MustParse("110")},
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: "m", SystemUUID: "s", BootID: "b", KernelVersion: "6.18.0", OSImage: "Linux",
				ContainerRuntimeVersion: "containerd://2.1.0", KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
			Images:          []corev1.ContainerImage{{Names: []string{"registry.example/cuda:12"}, SizeBytes: 1 << 30}},
			VolumesInUse:    []corev1.UniqueVolumeName{"kubernetes.io/csi/example.com^vol-1"},
			VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/example.com^vol-1", DevicePath: "/dev/sdb"}},
			RuntimeHandlers: []corev1.NodeRuntimeHandler{{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: new(true), UserNamespaces: new(true)}}},
			Features:        &corev1.NodeFeatures{SupplementalGroupsPolicy: new(true)},
		},
	}
}

// fieldCase is a change of one field of node-a that the agent's RBAC
// allows and the policy must refuse: through the endpoint that keeps it
// (the main one resets the status, the status one the spec; both keep
// the metadata, so a metadata change is tried through each).
type fieldCase struct {
	field    string // the field: "metadata.labels", "spec.taints", "status.images"
	what     string
	sub      string // "" or "status"
	pt       types.PatchType
	body     string
	denyWith string
}

const (
	denySpec   = "may not change a node's spec"
	denyMeta   = "may not change a node's labels, finalizers, ownerReferences or other metadata"
	denyAnn    = "may change no annotation but accel-doctor.io/summary"
	denyCond   = "may change no node condition but AcceleratorsReady"
	denyStatus = "may change nothing of a node's status but its AcceleratorsReady condition"
)

func policyCases() []fieldCase {
	merge, smp := types.MergePatchType, types.StrategicMergePatchType
	var out []fieldCase
	for _, sub := range []string{"", "status"} {
		via := " through the " + map[string]string{"": "main", "status": "status"}[sub] + " endpoint"
		out = append(out,
			fieldCase{"metadata.labels", "a label added" + via, sub, merge, `{"metadata":{"labels":{"nvidia.com/gpu.present":"true"}}}`, denyMeta},
			fieldCase{"metadata.labels", "a label changed" + via, sub, merge, `{"metadata":{"labels":{"kubernetes.io/hostname":"node-b"}}}`, denyMeta},
			fieldCase{"metadata.labels", "a label removed" + via, sub, merge, `{"metadata":{"labels":{"kubernetes.io/hostname":null}}}`, denyMeta},
			fieldCase{"metadata.annotations", "another annotation added" + via, sub, merge, `{"metadata":{"annotations":{"other.io/x":"1"}}}`, denyAnn},
			fieldCase{"metadata.annotations", "another annotation changed" + via, sub, merge, `{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"30"}}}`, denyAnn},
			fieldCase{"metadata.annotations", "another annotation removed" + via, sub, merge, `{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":null}}}`, denyAnn},
			fieldCase{"metadata.finalizers", "a finalizer" + via, sub, merge, `{"metadata":{"finalizers":["example.com/keep"]}}`, denyMeta},
			fieldCase{"metadata.ownerReferences", "an owner" + via, sub, merge, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"6c1f0b7e-0000-4000-8000-000000000001"}]}}`, denyMeta},
			fieldCase{"metadata.generateName", "a generateName" + via, sub, merge, `{"metadata":{"generateName":"gpu-"}}`, denyMeta},
		)
	}
	return append(out,
		fieldCase{"spec.taints", "a taint", "", merge, `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`, denySpec},
		fieldCase{"spec.unschedulable", "cordoned", "", merge, `{"spec":{"unschedulable":true}}`, denySpec},
		fieldCase{"spec.podCIDR", "a pod CIDR", "", merge, `{"spec":{"podCIDR":"10.244.1.0/24"}}`, denySpec},
		fieldCase{"spec.podCIDRs", "pod CIDRs", "", merge, `{"spec":{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24"]}}`, denySpec},
		fieldCase{"spec.providerID", "a provider ID", "", merge, `{"spec":{"providerID":"example:///i-0123"}}`, denySpec},
		fieldCase{"status.capacity", "capacity", "status", merge, `{"status":{"capacity":{"example.com/gpu":"16"}}}`, denyStatus},
		fieldCase{"status.allocatable", "allocatable", "status", merge, `{"status":{"allocatable":{"example.com/gpu":"16"}}}`, denyStatus},
		fieldCase{"status.phase", "the phase", "status", merge, `{"status":{"phase":"Terminated"}}`, denyStatus},
		fieldCase{"status.conditions", "the Ready condition", "status", smp, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"X"}]}}`, denyCond},
		fieldCase{"status.conditions", "another condition removed", "status", smp, `{"status":{"conditions":[{"type":"MemoryPressure","$patch":"delete"}]}}`, denyCond},
		fieldCase{"status.conditions", "a new condition", "status", smp, `{"status":{"conditions":[{"type":"GPUDriverReady","status":"True","reason":"X"}]}}`, denyCond},
		fieldCase{"status.conditions", "the agent's condition and capacity at once", "status", smp,
			`{"status":{"conditions":[{"type":"AcceleratorsReady","status":"True","reason":"AcceleratorsReady"}],"capacity":{"example.com/gpu":"16"}}}`, denyStatus},
		fieldCase{"status.addresses", "an address", "status", merge, `{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.9"}]}}`, denyStatus},
		fieldCase{"status.daemonEndpoints", "the kubelet's port", "status", merge, `{"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":10999}}}}`, denyStatus},
		fieldCase{"status.nodeInfo", "the node's info", "status", merge, `{"status":{"nodeInfo":{"kernelVersion":"6.0.0"}}}`, denyStatus},
		fieldCase{"status.images", "the images", "status", merge, `{"status":{"images":[{"names":["registry.example/evil:1"],"sizeBytes":1}]}}`, denyStatus},
		fieldCase{"status.volumesInUse", "volumes in use", "status", merge, `{"status":{"volumesInUse":[]}}`, denyStatus},
		fieldCase{"status.volumesAttached", "attached volumes", "status", merge, `{"status":{"volumesAttached":[{"name":"kubernetes.io/csi/example.com^vol-2","devicePath":"/dev/sdc"}]}}`, denyStatus},
		fieldCase{"status.runtimeHandlers", "runtime handlers", "status", merge, `{"status":{"runtimeHandlers":[{"name":"kata","features":{"recursiveReadOnlyMounts":false,"userNamespaces":false}}]}}`, denyStatus},
		fieldCase{"status.features", "the node's features", "status", merge, `{"status":{"features":{"supplementalGroupsPolicy":false}}}`, denyStatus},
		fieldCase{"status.declaredFeatures", "declared features", "status", merge, `{"status":{"declaredFeatures":["GuaranteedQoSPodCPUResize"]}}`, denyStatus},
	)
}

// unchangeable are the Node's fields a PATCH of nodes or nodes/status
// cannot change whoever sends it, and why (k8s.io/kubernetes
// pkg/registry/core/node/strategy.go, pkg/apis/core/validation
// ValidateNodeUpdate, apimachinery ValidateObjectMetaAccessorUpdate and
// rest.BeforeUpdate).
var unchangeable = map[string]string{
	"metadata.name":                       "immutable",
	"metadata.namespace":                  "a Node has none",
	"metadata.uid":                        "immutable",
	"metadata.creationTimestamp":          "immutable",
	"metadata.deletionTimestamp":          "immutable",
	"metadata.deletionGracePeriodSeconds": "immutable",
	"metadata.generation":                 "rest.BeforeUpdate keeps the old one",
	"metadata.resourceVersion":            "the server's",
	"metadata.managedFields":              "the server's record of who wrote what (it changes with the agent's own patches)",
	"metadata.selfLink":                   "no longer set",
	"spec.configSource":                   "dropped unless already set (dropDisabledFields), and dropped on create",
	"spec.externalID":                     "ValidateNodeUpdate: may not be updated",
	"spec.podPreemptionPolicy":            "dropped unless its feature gate is on or it is set (dropDisabledFields)",
	"status.config":                       "dropped unless already set (nodeStatusStrategy), and dropped on create",
}

// nodeFields are the Node's fields of k8s.io/api: ObjectMeta's, NodeSpec's
// and NodeStatus's, by their JSON names.
func nodeFields() []string {
	var out []string
	for prefix, v := range map[string]any{"metadata": metav1.ObjectMeta{}, "spec": corev1.NodeSpec{}, "status": corev1.NodeStatus{}} {
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, prefix+"."+name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// nodeState is what of a Node the refused patches must leave as it was:
// all of it but what the server rewrites on each write.
func nodeState(n *corev1.Node) *corev1.Node {
	c := n.DeepCopy()
	c.ResourceVersion, c.ManagedFields = "", nil
	return c
}
