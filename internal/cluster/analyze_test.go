package cluster

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

func node(name string, capAlloc map[string][2]string, labels, annotations map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), "hugepages-2Mi": resource.MustParse("0")}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}
	for r, ca := range capAlloc {
		if ca[0] != "" {
			n.Status.Capacity[corev1.ResourceName(r)] = resource.MustParse(ca[0])
		}
		if ca[1] != "" {
			n.Status.Allocatable[corev1.ResourceName(r)] = resource.MustParse(ca[1])
		}
	}
	return n
}

// line is a finding as the tests compare it.
func lines(fs []report.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Status)+" "+f.Code+" "+f.Subject)
	}
	sort.Strings(out)
	return out
}

func wantLines(t *testing.T, a *Analyzer, want ...string) []report.Finding {
	t.Helper()
	fs := a.Findings()
	sort.Strings(want)
	if got := lines(fs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return fs
}

func TestNodeResources(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow
	a.AddNode(node("ok", map[string][2]string{"nvidia.com/gpu": {"8", "8"}}, nil, nil))
	a.AddNode(node("none", map[string][2]string{"nvidia.com/gpu": {"2", "0"}}, nil, nil))
	a.AddNode(node("some", map[string][2]string{"nvidia.com/gpu": {"8", "6"}}, nil, nil))
	// Listed in capacity only: allocatable is absent, so 0.
	a.AddNode(node("capacity-only", map[string][2]string{"amd.com/gpu": {"1", ""}}, nil, nil))
	// cpu, hugepages and kubernetes.io/ names are not extended resources.
	a.AddNode(node("plain", map[string][2]string{"kubernetes.io/batch": {"1", "0"}}, nil, nil))
	fs := wantLines(t, a,
		"PASS CLUSTER_NODE_OK node/ok",
		"FAIL CLUSTER_RESOURCE_UNALLOCATABLE node/none",
		"WARN CLUSTER_RESOURCE_UNALLOCATABLE node/some",
		"FAIL CLUSTER_RESOURCE_UNALLOCATABLE node/capacity-only",
		// plain: nothing of an accelerator to judge, so no OK either.
	)
	for _, f := range fs {
		if f.Subject == "node/some" && !strings.Contains(f.Summary, "capacity 8, allocatable 6") {
			t.Errorf("summary %q", f.Summary)
		}
	}
	tab := a.ResourceTable()
	if tab == nil || len(tab.Rows) != 4 {
		t.Fatalf("table %+v, want 4 rows (the nodes with extended resources)", tab)
	}
	if got := strings.Join(tab.Rows[3], " "); got != "some nvidia.com/gpu 8 6 WARN: 2 not allocatable" {
		t.Errorf("row %q", got)
	}
}

func TestHardwareNotAdvertised(t *testing.T) {
	nv := map[string]string{"feature.node.kubernetes.io/pci-0302_10de.present": "true"}
	a := NewAnalyzer()
	a.Now = testNow
	a.AddNode(node("nv-none", nil, nv, nil))
	a.AddNode(node("nv-ok", map[string][2]string{"nvidia.com/gpu": {"1", "1"}}, nv, nil))
	// A resource of another vendor does not count for NVIDIA's hardware.
	a.AddNode(node("nv-other", map[string][2]string{"example.com/dev": {"1", "1"}}, nv, nil))
	// Capacity 0 is not advertised.
	a.AddNode(node("nv-zero", map[string][2]string{"nvidia.com/gpu": {"0", "0"}}, nv, nil))
	// A vendor without a known domain: any extended resource counts.
	a.AddNode(node("unknown-vendor", map[string][2]string{"example.com/npu": {"1", "1"}}, map[string]string{"feature.node.kubernetes.io/pci-1200_1e52.present": "true"}, nil))
	// Not an accelerator class (a NIC), or not "true".
	a.AddNode(node("nic", nil, map[string]string{"feature.node.kubernetes.io/pci-0200_15b3.present": "true", "feature.node.kubernetes.io/pci-0300_1002.present": "false"}, nil))
	// The agent counts accelerators and names the resource it expects.
	a.AddNode(node("agent-missing", map[string][2]string{"example.com/other": {"1", "1"}}, nil, map[string]string{SummaryAnnotation: `{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z","accelerators":2,"resources":["nvidia.com/gpu"]}`}))
	a.AddNode(node("agent-ok", map[string][2]string{"nvidia.com/gpu": {"2", "2"}}, nil, map[string]string{SummaryAnnotation: `{"v":1,"status":"WARN","time":"2026-12-01T13:00:00Z","accelerators":2,"resources":["nvidia.com/gpu"]}`}))
	a.AddNode(node("agent-any", nil, nil, map[string]string{SummaryAnnotation: `{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z","accelerators":1}`}))
	wantLines(t, a,
		"WARN CLUSTER_HARDWARE_NOT_ADVERTISED node/nv-none",
		"PASS CLUSTER_NODE_OK node/nv-ok",
		"WARN CLUSTER_HARDWARE_NOT_ADVERTISED node/nv-other",
		"WARN CLUSTER_HARDWARE_NOT_ADVERTISED node/nv-zero",
		"PASS CLUSTER_NODE_OK node/unknown-vendor",
		// nic: no accelerator label, no resource: not judged, no OK.
		"WARN CLUSTER_HARDWARE_NOT_ADVERTISED node/agent-missing",
		"PASS CLUSTER_NODE_OK node/agent-ok",
		"WARN CLUSTER_HARDWARE_NOT_ADVERTISED node/agent-any",
	)
}

func TestAgentSummary(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow
	a.AddNode(node("fail", nil, nil, map[string]string{SummaryAnnotation: `{"v":1,"status":"FAIL","layer":2,"code":"DRIVER_NOT_BOUND","message":"no driver","time":"2026-12-01T13:00:00Z"}`}))
	a.AddNode(node("bad", nil, nil, map[string]string{SummaryAnnotation: `{"v":7}`}))
	a.AddNode(node("pass", nil, nil, map[string]string{SummaryAnnotation: `{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z"}`}))
	fs := wantLines(t, a,
		"FAIL CLUSTER_AGENT_FAIL node/fail",
		"WARN CLUSTER_AGENT_SUMMARY_INVALID node/bad",
		"PASS CLUSTER_NODE_OK node/pass",
	)
	for _, f := range fs {
		if f.Code == "CLUSTER_AGENT_FAIL" && !strings.Contains(f.Summary, "layer 2 (driver): DRIVER_NOT_BOUND: no driver") {
			t.Errorf("summary %q", f.Summary)
		}
	}
}

func dsPod(name, node, owner string, ready bool, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}},
			Volumes: []corev1.Volume{{Name: "dp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/device-plugins/"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: owner}}
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, Reason: "ContainersNotReady"}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestPluginPods(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow
	for _, n := range []string{"n1", "n2", "n3"} {
		a.AddNode(node(n, nil, nil, nil))
	}
	a.AddPod(dsPod("plugin-down", "n1", "gpu-plugin", false, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}}}
	}))
	a.AddPod(dsPod("plugin-up", "n2", "gpu-plugin", true, nil))
	// The DRA registration directory counts; a known name counts
	// without any mount.
	a.AddPod(dsPod("dra-down", "n2", "some-driver", false, func(p *corev1.Pod) {
		p.Spec.Volumes[0].HostPath.Path = "/var/lib/kubelet/plugins_registry"
	}))
	a.AddPod(dsPod("known-down", "n3", "nvidia-device-plugin-daemonset", false, func(p *corev1.Pod) { p.Spec.Volumes = nil }))
	// Not plugins: a pod that is not a DaemonSet's; a DaemonSet pod
	// that asks for the resource (a workload); one without the mounts;
	// a finished one.
	a.AddPod(dsPod("bare", "n3", "", false, nil))
	a.AddPod(dsPod("workload", "n3", "monitor", false, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	}))
	a.AddPod(dsPod("no-mount", "n3", "logs", false, func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = "/var/log" }))
	a.AddPod(dsPod("finished", "n3", "gpu-plugin", false, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }))
	// A plugin pod on a node the node LIST did not return is judged too.
	a.AddPod(dsPod("orphan", "gone", "gpu-plugin", false, nil))
	fs := wantLines(t, a,
		"FAIL CLUSTER_PLUGIN_POD_NOT_READY node/n1",
		"FAIL CLUSTER_PLUGIN_POD_NOT_READY node/n2",
		"FAIL CLUSTER_PLUGIN_POD_NOT_READY node/n3",
		"FAIL CLUSTER_PLUGIN_POD_NOT_READY node/gone",
	)
	for _, f := range fs {
		if f.Subject == "node/n1" && !strings.Contains(f.Summary, "container c terminated: Error (exit 2)") {
			t.Errorf("summary %q", f.Summary)
		}
	}
}

func pending(name string, msg string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name)}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if msg != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
	}
	return p
}

func event(pod, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{
		Reason: "FailedScheduling", Message: msg, LastTimestamp: metav1.NewTime(at),
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ml", Name: pod, UID: types.UID(pod)},
	}
}

func TestPendingGroups(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow
	a.AddPod(pending("a", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."))
	a.AddPod(pending("b", "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s). preemption: x"))
	a.AddPod(pending("c", "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, preemption: x"))
	// No condition: the newest event's message is used.
	a.AddPod(pending("d", ""))
	now := time.Now()
	a.AddEvent(event("d", "0/3 nodes are available: 3 Insufficient amd.com/gpu.", now))
	a.AddEvent(event("d", "0/3 nodes are available: 3 Insufficient cpu.", now.Add(-time.Hour)))
	// Neither: no verdict.
	a.AddPod(pending("e", ""))
	a.AddPod(pending("f", "pod has unbound immediate PersistentVolumeClaims"))
	// Bound, or being deleted: not Pending for the scheduler.
	bound := pending("g", "")
	bound.Spec.NodeName = "n1"
	a.AddPod(bound)
	fs := wantLines(t, a,
		"WARN CLUSTER_PENDING_INSUFFICIENT Insufficient nvidia.com/gpu",
		"WARN CLUSTER_PENDING_INSUFFICIENT Insufficient amd.com/gpu",
		"WARN CLUSTER_PENDING_TAINT node(s) had untolerated taint(s)",
		"WARN CLUSTER_PENDING_CLAIMS cannot allocate all claims",
		"WARN CLUSTER_PENDING_NO_VERDICT no scheduler verdict",
		"WARN CLUSTER_PENDING_OTHER pod has unbound immediate PersistentVolumeClaims",
	)
	for _, f := range fs {
		if f.Subject == "Insufficient nvidia.com/gpu" {
			if !strings.HasPrefix(f.Summary, "2 pod(s) Pending") || len(f.Evidence) != 3 || f.Evidence[0].Value != "3 of 3 node(s) gave this reason" || f.Evidence[1].Path != "pod ml/a" || f.Evidence[2].Path != "pod ml/b" {
				t.Errorf("group %q: %+v", f.Summary, f.Evidence)
			}
		}
	}
}

func TestPendingEvidenceBounded(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow
	for i := range 25 {
		a.AddPod(pending(string(rune('a'+i)), "0/1 nodes are available: 1 Insufficient example.com/dev."))
	}
	fs := a.Findings()
	if len(fs) != 1 || len(fs[0].Evidence) != maxPodsShown+2 || fs[0].Evidence[maxPodsShown+1].Value != "and 5 more" || !strings.HasPrefix(fs[0].Summary, "25 pod(s)") {
		t.Errorf("findings %+v", fs)
	}
}

func TestListFailedIsNotRun(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow
	a.ListFailed("nodes", errors.New(`nodes is forbidden: User "u" cannot list resource "nodes"`))
	r := a.Report(Meta{Tool: "t", Source: "https://x", Now: time.Unix(0, 0)})
	if r.Verdict.Status != report.NotRun || r.ExitCode() != report.ExitUnknown {
		t.Errorf("verdict %s exit %d, want NOT_RUN and %d", r.Verdict.Status, r.ExitCode(), report.ExitUnknown)
	}
	if len(r.Findings) != 1 || r.Findings[0].Code != "CLUSTER_LIST_FAILED" || !strings.Contains(r.Findings[0].Reason, "forbidden") {
		t.Errorf("findings %+v", r.Findings)
	}
	// An empty cluster: nothing was checked, never PASS.
	if r := NewAnalyzer().Report(Meta{}); r.Verdict.Status != report.NotRun {
		t.Errorf("empty cluster: verdict %s", r.Verdict.Status)
	}
}

func TestCodesCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if seen[c.Code] || !strings.HasPrefix(c.Code, "CLUSTER_") || c.Title == "" || c.Explain == "" {
			t.Errorf("code %+v: duplicate, unprefixed or undocumented", c)
		}
		seen[c.Code] = true
	}
	// Every code the analysis emits is in the catalog.
	for _, code := range []string{"CLUSTER_PENDING_NO_VERDICT", "CLUSTER_PENDING_INSUFFICIENT", "CLUSTER_PENDING_CLAIMS", "CLUSTER_PENDING_TAINT", "CLUSTER_PENDING_OTHER"} {
		if !seen[code] {
			t.Errorf("%s is not in Codes", code)
		}
	}
}

// A cluster whose nodes have nothing of an accelerator (no extended
// resource, no accelerator label, no agent summary, no plugin pod) was
// listed but not judged: no finding, so the report is NOT_RUN (exit 2),
// never a PASS.
func TestCPUOnlyClusterIsNotJudged(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow
	a.AddNode(node("cpu-1", nil, nil, nil))
	a.AddNode(node("cpu-2", map[string][2]string{"kubernetes.io/batch": {"1", "1"}}, nil, nil))
	rep := a.Report(Meta{})
	if len(rep.Findings) != 0 || rep.ExitCode() != report.ExitUnknown {
		t.Errorf("findings %+v, exit %d: want none and exit %d", rep.Findings, rep.ExitCode(), report.ExitUnknown)
	}
}

// testNow is when the tests' summaries (2026-12-01T13:00:00Z) are judged:
// a minute later, current.
var testNow = time.Date(2026, 12, 1, 13, 1, 0, 0, time.UTC)

// A summary older than 3 of its agent's intervals is a WARN naming its
// age, and its verdict is not used: a stale FAIL is no FAIL, a stale PASS
// no OK. One within them (its own interval_s, or 60 s when it does not
// say) is used; one whose time does not read is INVALID, not current.
func TestAgentSummaryStale(t *testing.T) {
	a := NewAnalyzer()
	a.Now = testNow.Add(time.Hour) // 14:01
	a.AddNode(node("old-fail", nil, nil, map[string]string{SummaryAnnotation: `{"v":2,"status":"FAIL","layer":2,"code":"DRIVER_NOT_BOUND","message":"no driver","time":"2026-12-01T13:00:00Z","interval_s":60,"accelerators":8}`}))
	a.AddNode(node("old-pass", nil, nil, map[string]string{SummaryAnnotation: `{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z"}`}))
	a.AddNode(node("slow-agent", nil, nil, map[string]string{SummaryAnnotation: `{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","interval_s":1800}`}))
	a.AddNode(node("fresh", nil, nil, map[string]string{SummaryAnnotation: `{"v":2,"status":"FAIL","layer":4,"code":"CGROUP_DEVICE_DENIED","time":"2026-12-01T13:59:30Z"}`}))
	a.AddNode(node("ahead", nil, nil, map[string]string{SummaryAnnotation: `{"v":2,"status":"PASS","time":"2026-12-01T14:30:00Z"}`}))
	a.AddNode(node("no-time", nil, nil, map[string]string{SummaryAnnotation: `{"v":2,"status":"PASS","time":"yesterday"}`}))
	fs := wantLines(t, a,
		"WARN CLUSTER_AGENT_SUMMARY_STALE node/old-fail",
		"WARN CLUSTER_AGENT_SUMMARY_STALE node/old-pass",
		"PASS CLUSTER_NODE_OK node/slow-agent",
		"FAIL CLUSTER_AGENT_FAIL node/fresh",
		"PASS CLUSTER_NODE_OK node/ahead",
		"WARN CLUSTER_AGENT_SUMMARY_INVALID node/no-time",
	)
	for _, f := range fs {
		if f.Subject == "node/old-fail" && (!strings.Contains(f.Summary, "1h1m0s old") || !strings.Contains(f.Summary, "FAIL DRIVER_NOT_BOUND") || !strings.Contains(f.Summary, "(3m0s)")) {
			t.Errorf("stale summary's finding: %q", f.Summary)
		}
	}
}

// NFD's class labels are judged by the node's own classifier: video
// controllers (0400, 0480) and Xilinx FPGA cards (0580 of vendor 10ee)
// are accelerators as the agent counts them; a BMC's display adapter
// (ASPEED 1a03), network and audio functions are not.
func TestAcceleratorClassIsTheNodes(t *testing.T) {
	for _, c := range []struct {
		class, vendor string
		want          bool
	}{
		{"0300", "10de", true}, {"03", "1002", true}, {"0302", "10de", true}, {"0b40", "8086", true}, {"1200", "1da3", true},
		{"0400", "1e7b", true}, {"0480", "1d82", true}, {"0580", "10ee", true},
		{"0300", "1a03", false}, {"0200", "15b3", false}, {"0403", "10de", false}, {"0580", "8086", false},
		{"zz", "10de", false}, {"030", "10de", false}, {"0300", "", true},
	} {
		if got := acceleratorClass(c.class, c.vendor); got != c.want {
			t.Errorf("class %q vendor %q: %v, want %v", c.class, c.vendor, got, c.want)
		}
	}
}
