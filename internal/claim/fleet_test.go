package claim

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

func codes(fs []report.Finding) map[string][]report.Finding {
	m := map[string][]report.Finding{}
	for _, f := range fs {
		m[f.Code] = append(m[f.Code], f)
	}
	return m
}

func pendingPod(name string, claims ...corev1.PodResourceClaim) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	p.Spec.ResourceClaims = claims
	p.Status.Phase = corev1.PodPending
	return p
}

func TestFleet(t *testing.T) {
	f := NewFleet()
	gpuNode := node("gpu-no-slice")
	gpuNode.Labels["feature.node.kubernetes.io/pci-0302_10de.present"] = "true"
	f.AddNode(gpuNode)
	agentNode := node("agent-counted")
	agentNode.Annotations = map[string]string{"accel-doctor.io/summary": `{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z","accelerators":4}`}
	f.AddNode(agentNode)
	withSlice := node("node-a")
	withSlice.Labels["feature.node.kubernetes.io/pci-0300_1002.present"] = "true"
	f.AddNode(withSlice)
	f.AddNode(node("plain")) // no accelerator: nothing to say
	f.AddNode(func() *corev1.Node {
		n := node("nic-only")
		n.Labels["feature.node.kubernetes.io/pci-0200_15b3.present"] = "true" // a NIC
		return n
	}())

	f.AddSlice(slice("node-a", 2))
	// node-b's pool: a stale generation-1 slice beside generation 2,
	// which says it has 2 slices but only 1 is listed.
	f.AddSlice(slice("node-b", 2))
	cur := slice("node-b", 2)
	cur.Name, cur.Spec.Pool.Generation, cur.Spec.Pool.ResourceSliceCount = "node-b-2", 2, 2
	f.AddSlice(cur)

	f.AddClaim(claimOf("waits", "gpu", 1))
	f.AddClaim(allocated("done", "node-a", "dev-0"))
	name := "waits"
	f.AddPod(pendingPod("p1", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: &name}))
	f.AddPod(pendingPod("p2", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: &name}))
	tmpl := "t"
	f.AddPod(pendingPod("p3", corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: &tmpl}))
	bound := pendingPod("bound", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: &name})
	bound.Spec.NodeName = "node-a"
	f.AddPod(bound)

	got := codes(f.Findings())
	if n := got["DRA_FLEET_NODE_NO_SLICE"]; len(n) != 2 || n[0].Subject != "node/agent-counted" || n[1].Subject != "node/gpu-no-slice" {
		t.Errorf("nodes without slices: %+v", n)
	}
	if g := got["DRA_FLEET_POOL_GENERATIONS"]; len(g) != 1 || g[0].Subject != "pool "+driver+"/node-b" {
		t.Errorf("generations: %+v", g)
	}
	if g := got["DRA_FLEET_POOL_INCOMPLETE"]; len(g) != 1 || g[0].Subject != "pool "+driver+"/node-b" {
		t.Errorf("incomplete: %+v", g)
	}
	if r := got["DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN"]; len(r) != 1 || r[0].Status != report.NotRun || r[0].Reason == "" {
		t.Errorf("registration: %+v", r)
	}
	p := got["DRA_FLEET_PENDING_ON_CLAIM"]
	if len(p) != 2 || p[0].Subject != "resourceclaim/ns/waits" || len(p[0].Evidence) != 3 || p[1].Subject != "resourceclaimtemplates" {
		t.Errorf("pending: %+v", p)
	}
	if len(got["DRA_FLEET_OK"]) != 0 {
		t.Error("OK beside the warnings")
	}
}

func TestFleetOK(t *testing.T) {
	f := NewFleet()
	n := node("node-a")
	n.Labels["feature.node.kubernetes.io/pci-0302_10de.present"] = "true"
	f.AddNode(n)
	f.AddSlice(slice("node-a", 4))
	rep := f.Report(Meta{})
	got := codes(rep.Findings)
	if len(got["DRA_FLEET_OK"]) != 1 || rep.ExitCode() != 0 {
		t.Errorf("findings %+v exit %d", rep.Findings, rep.ExitCode())
	}
}

func TestFleetListFailed(t *testing.T) {
	f := NewFleet()
	f.ListFailed("resourceslices", errors.New("forbidden"))
	rep := f.Report(Meta{})
	got := codes(rep.Findings)
	if len(got["DRA_FLEET_LIST_FAILED"]) != 1 || len(got["DRA_FLEET_OK"]) != 0 || rep.ExitCode() != report.ExitUnknown {
		t.Errorf("findings %+v exit %d", rep.Findings, rep.ExitCode())
	}
}
