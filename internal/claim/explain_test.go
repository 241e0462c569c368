package claim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

const driver = "gpu.example.com"

func class(name string, exprs ...string) *resourceapi.DeviceClass {
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range exprs {
		dc.Spec.Selectors = append(dc.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return dc
}

// slice is node's pool of n devices, dev-0..dev-(n-1), model "A100" with
// 40Gi of memory for the even ones and "H100" with 80Gi for the odd ones.
func slice(node string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver}}
	s.Spec.Driver = driver
	s.Spec.NodeName = &node
	s.Spec.Pool = resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}
	for i := range n {
		model, mem := "A100", "40Gi"
		if i%2 == 1 {
			model, mem = "H100", "80Gi"
		}
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name:       fmt.Sprintf("dev-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: &model}},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(mem)}},
		})
	}
	return s
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
}

func claimOf(name, className string, count int64, exprs ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	x := &resourceapi.ExactDeviceRequest{DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, e := range exprs {
		x.Selectors = append(x.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: x}}
	return c
}

func allocated(name, nodeName string, devices ...string) *resourceapi.ResourceClaim {
	c := claimOf(name, "gpu", int64(len(devices)))
	c.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
	}}}}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: nodeName, Device: d})
	}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "user-" + name}}
	return c
}

// world is two nodes of 4 devices and the class gpu (the driver's devices).
func world(c *resourceapi.ResourceClaim, others ...*resourceapi.ResourceClaim) Input {
	return Input{
		Claim:   c,
		Classes: []*resourceapi.DeviceClass{class("gpu", `device.driver == "`+driver+`"`)},
		Slices:  []*resourceapi.ResourceSlice{slice("node-a", 4), slice("node-b", 4)},
		Claims:  append([]*resourceapi.ResourceClaim{c}, others...),
		Nodes:   []*corev1.Node{node("node-a"), node("node-b")},
	}
}

func explain(t *testing.T, in Input) (*Explanation, *report.Report) {
	t.Helper()
	e, err := Explain(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	rep := e.Report(Meta{Tool: "test", Source: "https://127.0.0.1", Now: time.Unix(0, 0)})
	// The report must stay JSON (what -o json prints).
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	return e, rep
}

func TestExplain(t *testing.T) {
	capSel := `device.capacity["` + driver + `"].memory.compareTo(quantity("200Gi")) >= 0`
	for _, tc := range []struct {
		name       string
		in         Input
		problem    string // the request's
		exit       int
		allocNode  string // the offline allocator's node; "" none
		excludedBy string // every device's exclusion, when set
		capacity   bool
	}{{
		name: "allocatable", in: world(claimOf("c", "gpu", 2, `device.attributes["`+driver+`"].model == "H100"`)),
		exit: 0, allocNode: "node-a",
	}, {
		name: "no device matches", in: world(claimOf("c", "gpu", 1, `device.attributes["`+driver+`"].model == "B200"`)),
		problem: "CLAIM_NO_MATCHING_DEVICE", exit: 1, excludedBy: "request",
	}, {
		name: "capacity no device has", in: world(claimOf("c", "gpu", 1, capSel)),
		problem: "CLAIM_NO_MATCHING_DEVICE", exit: 1, excludedBy: "request", capacity: true,
	}, {
		name: "too many devices", in: world(claimOf("c", "gpu", 5)),
		problem: "CLAIM_TOO_MANY_DEVICES", exit: 1,
	}, {
		name: "class missing", in: world(claimOf("c", "nope", 1)),
		problem: "CLAIM_CLASS_MISSING", exit: 1,
	}, {
		name: "devices in use",
		in: world(claimOf("c", "gpu", 3),
			allocated("x", "node-a", "dev-0", "dev-1"), allocated("y", "node-b", "dev-2", "dev-3")),
		problem: "CLAIM_DEVICES_IN_USE", exit: 1,
	}, {
		name: "selector fails on the devices", in: world(claimOf("c", "gpu", 1, `device.attributes["`+driver+`"].vendor == "x"`)),
		problem: "CLAIM_SELECTOR_ERROR", exit: 1, excludedBy: "error",
	}, {
		name: "selector does not compile", in: world(claimOf("c", "gpu", 1, `device.attributes[`)),
		problem: "CLAIM_SELECTOR_ERROR", exit: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e, rep := explain(t, tc.in)
			if len(e.Requests) != 1 {
				t.Fatalf("%d requests, want 1", len(e.Requests))
			}
			r := e.Requests[0]
			t.Logf("allocator: %+v; first finding: %s", e.Allocator, rep.Findings[0].Summary)
			if r.Problem != tc.problem {
				t.Errorf("problem %q, want %q (request %+v)", r.Problem, tc.problem, r)
			}
			if got := rep.ExitCode(); got != tc.exit {
				t.Errorf("exit %d, want %d; findings %+v", got, tc.exit, rep.Findings)
			}
			if e.Allocator.Node != tc.allocNode {
				t.Errorf("allocator node %q, want %q (error %q)", e.Allocator.Node, tc.allocNode, e.Allocator.Error)
			}
			if !e.Agrees() {
				t.Errorf("allocator disagrees: %+v", e.Allocator)
			}
			if tc.excludedBy != "" {
				if len(r.Exclusions) != 8 {
					t.Fatalf("%d exclusions, want all 8 devices: %+v", len(r.Exclusions), r.Exclusions)
				}
				for _, x := range r.Exclusions {
					if x.By != tc.excludedBy || x.Index != 0 || x.Capacity != tc.capacity {
						t.Errorf("device %s/%s excluded %+v, want by %s selector #0 (capacity %v)", x.Node, x.Device, x, tc.excludedBy, tc.capacity)
					}
				}
			}
			if tc.problem != "" && rep.Findings[0].Code != tc.problem {
				t.Errorf("first finding %s, want %s", rep.Findings[0].Code, tc.problem)
			}
		})
	}
}

func TestExplainExclusionsNamePerDevice(t *testing.T) {
	// model == "H100" excludes the even devices only, by the request's
	// selector #1 (the class's #0 passes them all).
	in := world(claimOf("c", "gpu", 1, `true`, `device.attributes["`+driver+`"].model == "H100"`))
	e, _ := explain(t, in)
	r := e.Requests[0]
	if r.Matching != 4 || r.Free != 4 || r.Devices != 8 || r.Problem != "" {
		t.Fatalf("request %+v", r)
	}
	var names []string
	for _, x := range r.Exclusions {
		if x.By != "request" || x.Index != 1 {
			t.Errorf("exclusion %+v, want request #1", x)
		}
		names = append(names, x.Node+"/"+x.Device)
	}
	if got, want := strings.Join(names, " "), "node-a/dev-0 node-a/dev-2 node-b/dev-0 node-b/dev-2"; got != want {
		t.Errorf("excluded %s, want %s", got, want)
	}
}

func TestExplainClassSelectorExcludes(t *testing.T) {
	in := world(claimOf("c", "big", 1))
	in.Classes = append(in.Classes, class("big", `device.capacity["`+driver+`"].memory.compareTo(quantity("80Gi")) >= 0`))
	in.Slices = in.Slices[:1]
	e, _ := explain(t, in)
	r := e.Requests[0]
	if r.Problem != "" || r.Matching != 2 || len(r.Exclusions) != 2 {
		t.Fatalf("request %+v", r)
	}
	for _, x := range r.Exclusions {
		if x.By != "class" || !x.Capacity {
			t.Errorf("exclusion %+v, want by the class's capacity selector", x)
		}
	}
}

func TestExplainAllocated(t *testing.T) {
	c := allocated("c", "node-b", "dev-1")
	e, rep := explain(t, world(c))
	if !e.Allocated || e.AllocatedNode != "node-b" || len(e.AllocatedDevices) != 1 || e.AllocatedDevices[0] != "gpu: gpu.example.com/node-b/dev-1" {
		t.Fatalf("explanation %+v", e)
	}
	if rep.ExitCode() != 0 || rep.Findings[0].Code != "CLAIM_ALLOCATED" || len(e.ReservedFor) != 1 || e.ReservedFor[0] != "pods/user-c" {
		t.Errorf("report %+v", rep.Findings)
	}
}

func TestExplainOldGenerationIgnored(t *testing.T) {
	// The allocator uses a pool's newest generation only: an old slice's
	// H100s do not count.
	old := slice("node-a", 4)
	old.Name = "old"
	cur := slice("node-a", 1)
	cur.Spec.Pool.Generation = 2
	in := world(claimOf("c", "gpu", 1, `device.attributes["`+driver+`"].model == "H100"`))
	in.Slices = []*resourceapi.ResourceSlice{old, cur}
	in.Nodes = in.Nodes[:1]
	e, _ := explain(t, in)
	if r := e.Requests[0]; r.Devices != 1 || r.Problem != "CLAIM_NO_MATCHING_DEVICE" {
		t.Errorf("request %+v, want the 1 device of generation 2, not matching", r)
	}
	if !e.Agrees() {
		t.Errorf("allocator disagrees: %+v", e.Allocator)
	}
}

func TestExplainWithoutNodesIsNotRun(t *testing.T) {
	in := world(claimOf("c", "gpu", 1))
	in.Nodes = nil
	e, rep := explain(t, in)
	if e.Allocator.Ran {
		t.Fatal("allocator ran without nodes")
	}
	last := rep.Findings[len(rep.Findings)-1]
	if last.Code != "CLAIM_ALLOCATOR_NOT_RUN" || last.Status != report.NotRun || last.Reason == "" {
		t.Errorf("allocator finding %+v", last)
	}
}

func TestExplainFirstAvailable(t *testing.T) {
	c := claimOf("c", "gpu", 1)
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 9},
		{Name: "small", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}}
	e, rep := explain(t, world(c))
	if !e.Allocatable() || rep.ExitCode() != 0 {
		t.Errorf("allocatable %v exit %d, want the second alternative to do", e.Allocatable(), rep.ExitCode())
	}
	if e.Requests[0].Problem != "CLAIM_TOO_MANY_DEVICES" || rep.Findings[0].Status != report.Warn {
		t.Errorf("first alternative: %+v / %+v", e.Requests[0], rep.Findings[0])
	}
	if e.Allocator.Node == "" || !e.Agrees() {
		t.Errorf("allocator %+v", e.Allocator)
	}
}

func TestCodesCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if !strings.HasPrefix(c.Code, "CLAIM_") || seen[c.Code] || c.Title == "" || c.Explain == "" {
			t.Errorf("catalog entry %+v", c)
		}
		seen[c.Code] = true
	}
	for _, code := range []string{"CLAIM_CLASS_MISSING", "CLAIM_NO_MATCHING_DEVICE", "CLAIM_TOO_MANY_DEVICES", "CLAIM_DEVICES_IN_USE", "CLAIM_SELECTOR_ERROR", "CLAIM_ALLOCATOR_DISAGREES"} {
		if !seen[code] {
			t.Errorf("code %s not in the catalog", code)
		}
	}
}

// BenchmarkExplain1000Slices is Explain (selectors on 8,000 devices and
// the allocator on 1,000 nodes) for a claim of 9 devices no node has.
func BenchmarkExplain1000Slices(b *testing.B) {
	in := world(claimOf("c", "gpu", 9))
	in.Slices, in.Nodes = nil, nil
	for i := range 1000 {
		n := fmt.Sprintf("node-%04d", i)
		in.Slices = append(in.Slices, slice(n, 8))
		in.Nodes = append(in.Nodes, node(n))
	}
	for b.Loop() {
		e, err := Explain(context.Background(), in)
		if err != nil || e.Allocatable() || !e.Agrees() {
			b.Fatalf("explanation %+v, %v", e, err)
		}
	}
}

// Nodes that could not be listed: the allocator does not run, and says
// why (the LIST's error), rather than trying the pages read before it.
func TestExplainNodesNotListed(t *testing.T) {
	in := world(claimOf("big", "gpu", 8))
	in.Nodes, in.NodesErr = nil, "list nodes: forbidden"
	e, rep := explain(t, in)
	if e.Allocator.Ran || e.Allocator.Reason != "list nodes: forbidden" {
		t.Errorf("allocator %+v: want not run, with the LIST's error", e.Allocator)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Code == "CLAIM_ALLOCATOR_NOT_RUN" && strings.Contains(f.Reason, "forbidden") {
			found = true
		}
	}
	if !found {
		t.Errorf("no CLAIM_ALLOCATOR_NOT_RUN naming the error: %+v", rep.Findings)
	}
}
