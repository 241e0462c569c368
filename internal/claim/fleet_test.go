package claim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
	f.Now = testNow
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
	// node-a has no summary; node-b is not a listed Node.
	if r := got["DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN"]; len(r) != 2 || r[0].Subject != "resourceslices (no agent summary)" || r[1].Subject != "resourceslices (node not listed)" ||
		r[0].Status != report.NotRun || !strings.Contains(r[0].Reason, "node-a") || !strings.Contains(r[1].Reason, "node-b") {
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
	f.Now = testNow
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
	f.Now = testNow
	f.ListFailed("resourceslices", errors.New("forbidden"))
	rep := f.Report(Meta{})
	got := codes(rep.Findings)
	if len(got["DRA_FLEET_LIST_FAILED"]) != 1 || len(got["DRA_FLEET_OK"]) != 0 || rep.ExitCode() != report.ExitUnknown {
		t.Errorf("findings %+v exit %d", rep.Findings, rep.ExitCode())
	}
}

func withSummary(n *corev1.Node, summary string) *corev1.Node {
	n.Annotations = map[string]string{"accel-doctor.io/summary": summary}
	return n
}

// The join of slices with their nodes' registrations: a slice whose
// driver the node's v2 summary does not list is a WARN naming the node,
// the driver and the summary's time; a registered one is counted in the
// OK; nodes whose registrations are not known (no summary, v1, the
// agent could not judge, a summary that does not read) are NOT_RUN by
// reason, never "not registered"; slices without a node are NOT_RUN.
func TestFleetDriverRegistration(t *testing.T) {
	const reg = `{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":["` + driver + `"]}}`
	const none = `{"v":2,"status":"PASS","time":"2026-12-01T13:00:30Z","dra":{"drivers":[]}}`
	f := NewFleet()
	f.Now = testNow
	f.AddNode(withSummary(node("ok"), reg))
	f.AddNode(withSummary(node("gone"), none))
	f.AddNode(withSummary(node("old"), `{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z"}`))
	f.AddNode(withSummary(node("unjudged"), `{"v":2,"status":"NOT_RUN","time":"2026-12-01T13:00:00Z","dra":{"drivers":[],"not_run":"/var/lib/kubelet/plugins_registry: permission denied"}}`))
	f.AddNode(withSummary(node("garbled"), `{"v":2`))
	f.AddNode(node("bare"))
	for _, n := range []string{"ok", "gone", "old", "unjudged", "garbled", "bare"} {
		f.AddSlice(slice(n, 1))
	}
	// A second driver on the healthy node, whose summary does not list it.
	other := slice("ok", 1)
	other.Name, other.Spec.Driver, other.Spec.Pool.Name = "ok-other", "other.example.com", "ok-other"
	f.AddSlice(other)
	net := slice("", 1)
	net.Name, net.Spec.NodeName, net.Spec.AllNodes, net.Spec.Pool.Name = "fabric", nil, new(bool), "fabric"
	*net.Spec.AllNodes = true
	f.AddSlice(net)

	got := codes(f.Findings())
	w := got["DRA_FLEET_DRIVER_NOT_REGISTERED"]
	if len(w) != 2 || w[0].Subject != "node/gone driver "+driver || w[1].Subject != "node/ok driver other.example.com" {
		t.Fatalf("not registered: %+v", w)
	}
	ev := fmt.Sprint(w[0].Evidence)
	if w[0].Status != report.Warn || !strings.Contains(ev, "2026-12-01T13:00:30Z") || !strings.Contains(ev, "gone-"+driver) || !strings.Contains(ev, ".dra.drivers none") || w[0].Remediation == "" {
		t.Errorf("finding %+v", w[0])
	}
	if !strings.Contains(fmt.Sprint(w[1].Evidence), driver) {
		t.Errorf("the registered drivers are not in the evidence: %+v", w[1].Evidence)
	}
	subjects := map[string]string{}
	for _, r := range got["DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN"] {
		if r.Status != report.NotRun || r.Reason == "" {
			t.Errorf("%+v", r)
		}
		subjects[r.Subject] = r.Reason
	}
	for subj, why := range map[string]string{
		"resourceslices (agent summary v1)":                      "old: the agent's summary is version 1",
		"resourceslices (registrations not judged by the agent)": "permission denied",
		"resourceslices (unreadable agent summary)":              "garbled: its accel-doctor.io/summary annotation does not read",
		"resourceslices (no agent summary)":                      "bare: the node has no",
		"resourceslices (no spec.nodeName)":                      "for all nodes",
	} {
		if !strings.Contains(subjects[subj], why) {
			t.Errorf("%s: reason %q, want %q (all: %v)", subj, subjects[subj], why, subjects)
		}
	}
	if len(subjects) != 5 || len(got["DRA_FLEET_OK"]) != 0 {
		t.Errorf("NOT_RUN %v, OK %v", subjects, got["DRA_FLEET_OK"])
	}

	// Every driver registered: the OK counts the slices.
	f = NewFleet()
	f.Now = testNow
	f.AddNode(withSummary(node("ok"), reg))
	f.AddSlice(slice("ok", 1))
	got = codes(f.Findings())
	if ok := got["DRA_FLEET_OK"]; len(ok) != 1 || !strings.Contains(ok[0].Summary, "1 of them of drivers registered on their nodes") || len(got) != 1 {
		t.Errorf("findings %+v", got)
	}
}

// A fleet with nothing to judge (no accelerator node, no slice) has no
// finding: the report is NOT_RUN, exit 2, never an OK.
func TestFleetNothingExamined(t *testing.T) {
	f := NewFleet()
	f.Now = testNow
	f.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-only"}})
	rep := f.Report(Meta{})
	if len(rep.Findings) != 0 || rep.ExitCode() != report.ExitUnknown {
		t.Errorf("findings %+v exit %d: want none, exit %d", rep.Findings, rep.ExitCode(), report.ExitUnknown)
	}
}

// A failed ResourceSlice LIST leaves what depends on it unjudged: no
// "node without a slice" for an accelerator node, no pool finding, no
// registration join; a failed ResourceClaim LIST makes a waited-on claim
// unknown, not "does not exist".
func TestFleetPartialLists(t *testing.T) {
	f := NewFleet()
	f.Now = testNow
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"feature.node.kubernetes.io/pci-0302_10de.present": "true"}}}
	f.AddNode(n)
	f.AddSlice(slice("node-b", 4)) // a page read before the failure
	f.ListFailed("resourceslices", errors.New("etcdserver: request timed out"))
	f.ListFailed("resourceclaims", errors.New("forbidden"))
	c := "c"
	f.AddPod(pendingPod("p", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: &c}))
	rep := f.Report(Meta{})
	got := codes(rep.Findings)
	for _, c := range []string{"DRA_FLEET_NODE_NO_SLICE", "DRA_FLEET_POOL_INCOMPLETE", "DRA_FLEET_POOL_GENERATIONS", "DRA_FLEET_DRIVER_NOT_REGISTERED", "DRA_FLEET_OK"} {
		if len(got[c]) != 0 {
			t.Errorf("%s from a failed slice LIST: %+v", c, rep.Findings)
		}
	}
	if len(got["DRA_FLEET_LIST_FAILED"]) != 2 {
		t.Errorf("want both LISTs' NOT_RUN: %+v", rep.Findings)
	}
	for _, fd := range rep.Findings {
		if fd.Code == "DRA_FLEET_PENDING_ON_CLAIM" && !strings.Contains(fd.Summary, "unknown") {
			t.Errorf("claim state from a failed claim LIST: %s", fd.Summary)
		}
	}
}

// testNow is when the tests' summaries (2026-12-01T13:00:00Z) are judged:
// a minute later, current.
var testNow = time.Date(2026, 12, 1, 13, 1, 0, 0, time.UTC)

// A node whose agent's summary is stale has unknown registrations: its
// slices are NOT_RUN for that reason, never "not registered".
func TestFleetStaleSummary(t *testing.T) {
	f := NewFleet()
	f.Now = testNow.Add(time.Hour)
	f.AddNode(withSummary(node("stale"), `{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","interval_s":60,"dra":{"drivers":[]}}`))
	f.AddSlice(slice("stale", 1))
	got := codes(f.Findings())
	if n := len(got["DRA_FLEET_DRIVER_NOT_REGISTERED"]); n != 0 {
		t.Errorf("a stale summary's empty driver list was used: %+v", got["DRA_FLEET_DRIVER_NOT_REGISTERED"])
	}
	nr := got["DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN"]
	if len(nr) != 1 || nr[0].Subject != "resourceslices (stale agent summary)" || !strings.Contains(nr[0].Reason, "1h1m0s old") {
		t.Errorf("not run: %+v", nr)
	}
}

// A stale summary's accelerator count is not the node's now either: an
// accelerator node without a slice is not judged from it.
func TestFleetStaleSummaryCountsNoAccelerator(t *testing.T) {
	f := NewFleet()
	f.Now = testNow.Add(time.Hour)
	f.AddNode(withSummary(node("stale"), `{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","interval_s":60,"accelerators":8,"dra":{"drivers":[]}}`))
	f.AddNode(withSummary(node("fresh"), `{"v":2,"status":"PASS","time":"2026-12-01T14:00:30Z","interval_s":60,"accelerators":8,"dra":{"drivers":[]}}`))
	got := codes(f.Findings())
	var subjects []string
	for _, fs := range got {
		for _, x := range fs {
			if x.Status == report.Warn || x.Status == report.Fail {
				subjects = append(subjects, x.Code+" "+x.Subject)
			}
		}
	}
	if slices.ContainsFunc(subjects, func(s string) bool { return strings.Contains(s, "stale") }) || !slices.ContainsFunc(subjects, func(s string) bool { return strings.Contains(s, "fresh") }) {
		t.Errorf("findings %q: want the fresh node judged and the stale one not", subjects)
	}
}
