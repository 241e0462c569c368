package cluster

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// jsonReport is the part of accel-doctor's JSON report (docs/report-schema.md)
// these tests read, decoded here independently of the product's types.
type jsonReport struct {
	SchemaVersion int    `json:"schema_version"`
	Command       string `json:"command"`
	Findings      []struct {
		Code     string `json:"code"`
		Layer    int    `json:"layer"`
		Status   string `json:"status"`
		Subject  string `json:"subject"`
		Summary  string `json:"summary"`
		Evidence []struct {
			Path  string `json:"path"`
			Value string `json:"value"`
		} `json:"evidence"`
	} `json:"findings"`
	Verdict struct {
		Status string `json:"status"`
		Layer  int    `json:"layer"`
	} `json:"verdict"`
}

// TestClusterReportsPlantedProblems plants one of each problem `cluster`
// looks for in a real API server, lets the real scheduler reject the
// Pending pods, and checks that `accel-doctor cluster -o json` reports
// each, on the right subject with the right status, and nothing else.
func TestClusterReportsPlantedProblems(t *testing.T) {
	bin := harness.AccelDoctor(t)
	c := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "gpu"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dev := map[corev1.ResourceName]string{devResource: "1"}

	// A healthy node: its resource all allocatable, its agent says PASS.
	good := testNode("node-good", dev, dev)
	good.Annotations = map[string]string{"accel-doctor.io/summary": `{"v":1,"status":"PASS","time":"` + harness.SummaryTime() + `","accelerators":1,"resources":["example.com/dev"]}`}
	// Capacity 2, allocatable 0: both devices unhealthy.
	unalloc := testNode("node-unalloc", map[corev1.ResourceName]string{devResource: "2"}, map[corev1.ResourceName]string{devResource: "0"})
	// NFD found an NVIDIA 3D controller (class 0302, vendor 10de); no
	// nvidia.com resource.
	nfd := testNode("node-nfd", nil, nil)
	nfd.Labels["feature.node.kubernetes.io/pci-0302_10de.present"] = "true"
	// The agent reports a FAIL at layer 4.
	agent := testNode("node-agent", dev, dev)
	agent.Annotations = map[string]string{"accel-doctor.io/summary": `{"v":1,"status":"FAIL","layer":4,"layer_name":"cgroup devices","code":"CGROUP_DEVICE_DENIED","message":"/dev/nvidia0 is denied by the container's device policy","time":"` + harness.SummaryTime() + `","accelerators":1,"resources":["example.com/dev"]}`}
	// Its plugin pod is not Ready.
	plugin := testNode("node-plugin", dev, dev)
	for _, n := range []*corev1.Node{good, unalloc, nfd, agent, plugin} {
		if _, err := c.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	plantPluginPod(t, ctx, c, ns, plugin.Name)

	// Two pods the scheduler rejects: one asks for more example.com/dev
	// than any node has, one selects a label no node has.
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, testPod("wants-5", devResource, 5), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := testPod("selects-nothing", devResource, 1)
	sel.Spec.NodeSelector = map[string]string{"example.com/pool": "none"}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, sel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wants-5", "selects-nothing"} {
		waitUnschedulable(t, ctx, c, ns, name)
	}

	rep, stdout, code := runCluster(t, ctx, bin, c.Kubeconfig, "-o", "json")
	if code != 1 {
		t.Errorf("exit %d, want 1 (a node has a FAIL)\n%s", code, stdout)
	}
	if rep.Command != "cluster" || rep.Verdict.Status != "FAIL" || rep.Verdict.Layer != 6 {
		t.Errorf("command %q, verdict %s at layer %d; want cluster, FAIL at layer 6", rep.Command, rep.Verdict.Status, rep.Verdict.Layer)
	}
	want := []string{
		"FAIL CLUSTER_AGENT_FAIL node/node-agent",
		"FAIL CLUSTER_PLUGIN_POD_NOT_READY node/node-plugin",
		"FAIL CLUSTER_RESOURCE_UNALLOCATABLE node/node-unalloc",
		"PASS CLUSTER_NODE_OK node/node-good",
		"WARN CLUSTER_HARDWARE_NOT_ADVERTISED node/node-nfd",
		"WARN CLUSTER_PENDING_INSUFFICIENT Insufficient example.com/dev",
		"WARN CLUSTER_PENDING_OTHER node(s) didn't match Pod's node affinity/selector",
	}
	var got []string
	for _, f := range rep.Findings {
		if f.Layer != 6 {
			t.Errorf("finding %s on layer %d, want 6", f.Code, f.Layer)
		}
		got = append(got, f.Status+" "+f.Code+" "+f.Subject)
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s\nreport:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stdout)
	}
	// What each finding says, in its own words.
	for _, f := range rep.Findings {
		var evidence []string
		for _, e := range f.Evidence {
			evidence = append(evidence, e.Path+"="+e.Value)
		}
		ev := strings.Join(evidence, "; ")
		var wantIn []string
		switch f.Code {
		case "CLUSTER_AGENT_FAIL":
			wantIn = []string{"layer 4 (cgroup devices)", "CGROUP_DEVICE_DENIED"}
		case "CLUSTER_PLUGIN_POD_NOT_READY":
			wantIn = []string{"gpu/example-device-plugin-x", "DaemonSet example-device-plugin", "CrashLoopBackOff"}
		case "CLUSTER_RESOURCE_UNALLOCATABLE":
			wantIn = []string{"example.com/dev: capacity 2, allocatable 0"}
		case "CLUSTER_HARDWARE_NOT_ADVERTISED":
			wantIn = []string{"class 0302 vendor 10de", "nvidia.com/"}
		case "CLUSTER_PENDING_INSUFFICIENT":
			wantIn = []string{"1 pod(s)", "pod gpu/wants-5=Pending", "scheduler=5 of 5 node(s) gave this reason"}
		case "CLUSTER_PENDING_OTHER":
			wantIn = []string{"1 pod(s)", "pod gpu/selects-nothing=Pending"}
		}
		for _, w := range wantIn {
			if !strings.Contains(f.Summary+" | "+ev, w) {
				t.Errorf("%s %s: %q not in %q | %q", f.Code, f.Subject, w, f.Summary, ev)
			}
		}
	}

	if testing.Verbose() {
		_, text, _ := runCluster(t, ctx, bin, c.Kubeconfig, "-v")
		t.Logf("accel-doctor cluster -v:\n%s", text)
	}
	// The other formats: the same exit status.
	for _, o := range []string{"text", "markdown"} {
		_, out, code := runCluster(t, ctx, bin, c.Kubeconfig, "-o", o)
		if code != 1 || !strings.Contains(out, "CLUSTER_AGENT_FAIL") || !strings.Contains(out, "node-unalloc") {
			t.Errorf("-o %s: exit %d, output:\n%s", o, code, out)
		}
	}
	// -n: the pods of another namespace are not read.
	rep, stdout, _ = runCluster(t, ctx, bin, c.Kubeconfig, "-o", "json", "-n", "default")
	for _, f := range rep.Findings {
		if strings.HasPrefix(f.Code, "CLUSTER_PENDING_") || f.Code == "CLUSTER_PLUGIN_POD_NOT_READY" {
			t.Errorf("-n default reports %s %s\n%s", f.Code, f.Subject, stdout)
		}
	}
	// A usage error: exit 2.
	if _, out, code := runCluster(t, ctx, bin, c.Kubeconfig, "--context", "no-such-context"); code != 2 {
		t.Errorf("--context no-such-context: exit %d, want 2\n%s", code, out)
	}
}

// plantPluginPod creates a device-plugin DaemonSet and a pod of it on node
// whose container is in CrashLoopBackOff, as a kubelet would report it.
// No controller-manager runs, so the DaemonSet makes no pod itself: the
// pod is created as its own, with its owner reference.
func plantPluginPod(t *testing.T, ctx context.Context, c *apiserver.Cluster, ns, node string) {
	t.Helper()
	labels := map[string]string{"app": "example-device-plugin"}
	hostPath := corev1.Volume{Name: "dp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/device-plugins"}}}
	container := corev1.Container{Name: "plugin", Image: "registry.invalid/plugin", VolumeMounts: []corev1.VolumeMount{{Name: "dp", MountPath: "/var/lib/kubelet/device-plugins"}}}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "example-device-plugin"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{container}, Volumes: []corev1.Volume{hostPath}},
			},
		},
	}
	ds, err := c.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "example-device-plugin-x", Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &ctrl,
		}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{container}, Volumes: []corev1.Volume{hostPath}},
	}
	pod, err = c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [plugin]", LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [plugin]", LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "plugin", Image: container.Image, RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s restarting failed container"}},
		}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitUnschedulable waits for the scheduler's PodScheduled=False verdict
// on a pod.
func waitUnschedulable(t *testing.T, ctx context.Context, c *apiserver.Cluster, ns, name string) {
	t.Helper()
	var msg string
	took, err := apiserver.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cond := podCondition(p, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionFalse {
			msg = cond.Message
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: no scheduler verdict after %v: %v", ns, name, took, err)
	}
	t.Logf("pod %s/%s: %s", ns, name, msg)
}

// runCluster runs `accel-doctor cluster --kubeconfig K ARGS...` and
// decodes its JSON output when it is JSON.
func runCluster(t *testing.T, ctx context.Context, bin, kubeconfig string, args ...string) (jsonReport, string, int) {
	t.Helper()
	stdout, stderr, code := harness.Run(t, ctx, bin, append([]string{"cluster", "--kubeconfig", kubeconfig}, args...)...)
	out := stdout + stderr
	var rep jsonReport
	if len(args) >= 2 && args[0] == "-o" && args[1] == "json" {
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("cluster %v: not JSON (%v), exit %d:\n%s", args, err, code, out)
		}
	}
	return rep, out, code
}
