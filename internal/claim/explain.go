// Package claim explains a DRA ResourceClaim (resource.k8s.io/v1): whether
// it is allocated, and when it is not, why not. It evaluates each request's
// DeviceClass and request selectors with the CEL evaluator the scheduler
// uses (k8s.io/dynamic-resource-allocation/cel) against every device of
// every ResourceSlice, counts what is left per node against what the
// request asks for, and then runs the scheduler's own allocator
// (k8s.io/dynamic-resource-allocation/structured) offline on the same
// objects to confirm the answer.
package claim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Input is what the explanation is decided from: the objects as the API
// server lists them.
type Input struct {
	Claim   *resourceapi.ResourceClaim
	Classes []*resourceapi.DeviceClass
	Slices  []*resourceapi.ResourceSlice
	// Claims are the cluster's claims (the explained one among them or
	// not): the devices of the allocated ones are in use.
	Claims []*resourceapi.ResourceClaim
	// Nodes are the cluster's nodes: the allocator tries each. Without
	// them the allocator does not run (Allocator.Ran false).
	Nodes []*corev1.Node
	// NodesErr says why Nodes could not be listed: the allocator does
	// not run, with this reason. NodesError is the LIST's error, whose
	// class the fix follows from (cluster.APIWhy).
	NodesErr   string
	NodesError error
}

// Exclusion is why one device cannot serve one request.
type Exclusion struct {
	Node, Driver, Pool, Device string
	// By is "class" or "request" (a selector, Index and Expression set),
	// "allocated" (the device is another claim's), or "error" (the
	// selector failed on this device: the scheduler aborts on that).
	By         string
	Index      int
	Expression string
	// Capacity is true when the excluding selector reads device.capacity:
	// the device lacks the capacity asked for.
	Capacity bool
	Error    string
}

// Request is one request (or one subrequest of a firstAvailable list,
// named REQUEST/SUB) and what the devices made of it.
type Request struct {
	Name         string
	Class        string
	ClassMissing bool
	Mode         resourceapi.DeviceAllocationMode
	Count        int64
	// Selectors are the class's then the request's, as "class #i: EXPR".
	Selectors []string
	// CompileErrors are selectors that do not compile.
	CompileErrors []string
	// Devices is every device of every pool looked at; Matching those
	// that pass every selector; Free those of them not in use.
	Devices, Matching, Free int
	// BestNode is the node with the most free matching devices, and
	// BestFree that number (pools of all nodes count for every node).
	BestNode string
	BestFree int
	// Exclusions are the devices that cannot serve the request, in
	// node, driver, pool, device order.
	Exclusions []Exclusion
	// Problem is the code of what keeps the request from being
	// satisfied on any node; "" when some node satisfies it.
	Problem string
}

// Allocator is what the scheduler's allocator, run offline, made of the claim.
type Allocator struct {
	Ran bool
	// Reason is why it did not run; Why the same with its fix.
	Reason string
	Why    report.Why `json:"-"`
	// Node is the first node (by name) where it allocated the claim; ""
	// when it could allocate it nowhere.
	Node    string
	Devices []string
	// Tried is how many nodes the allocator ran on; the others have
	// fewer devices in their slices than the claim needs.
	Tried, Nodes int
	// Error is the allocator's fatal error (a missing class, a CEL
	// runtime error), as the scheduler reports it.
	Error string
}

// Explanation is the claim's state and, when it is not allocated, why.
type Explanation struct {
	Namespace, Name string
	Allocated       bool
	// AllocatedNode is the node the allocation's node selector names
	// (metadata.name or kubernetes.io/hostname); "" for a claim usable on
	// several nodes.
	AllocatedNode string
	// AllocatedDevices are "REQUEST: DRIVER/POOL/DEVICE".
	AllocatedDevices []string
	ReservedFor      []string
	Requests         []Request
	Allocator        Allocator
}

// Allocatable says whether the explanation finds a node that satisfies
// every request (a firstAvailable request: any of its subrequests).
func (e *Explanation) Allocatable() bool {
	if e.Allocated {
		return true
	}
	byParent := map[string]bool{}
	for _, r := range e.Requests {
		parent, _, _ := strings.Cut(r.Name, "/")
		if _, seen := byParent[parent]; !seen {
			byParent[parent] = false
		}
		if r.Problem == "" {
			byParent[parent] = true
		}
	}
	for _, ok := range byParent {
		if !ok {
			return false
		}
	}
	return true
}

// Agrees says whether the allocator came to the same answer; true when
// it did not run.
func (e *Explanation) Agrees() bool {
	if !e.Allocator.Ran || e.Allocated {
		return true
	}
	return e.Allocatable() == (e.Allocator.Node != "")
}

// features are the allocator features this explanation honours: the
// GA ones of resource.k8s.io/v1 that change which device a request gets
// (prioritized lists). Device taints, partitionable devices, consumable
// capacity and admin access are not evaluated by Explain, so the allocator
// runs without them too and the two answers stay comparable.
var features = structured.Features{PrioritizedList: true}

// Explain decides the claim's explanation. ctx bounds the CEL evaluation
// and the allocator.
func Explain(ctx context.Context, in Input) (*Explanation, error) {
	c := in.Claim
	if c == nil {
		return nil, fmt.Errorf("no claim")
	}
	e := &Explanation{Namespace: c.Namespace, Name: c.Name}
	for _, r := range c.Status.ReservedFor {
		e.ReservedFor = append(e.ReservedFor, strings.ToLower(r.Resource)+"/"+r.Name)
	}
	if a := c.Status.Allocation; a != nil {
		e.Allocated = true
		e.AllocatedNode = selectorNode(a.NodeSelector)
		for _, d := range a.Devices.Results {
			e.AllocatedDevices = append(e.AllocatedDevices, d.Request+": "+d.Driver+"/"+d.Pool+"/"+d.Device)
		}
		return e, nil
	}

	classes := map[string]*resourceapi.DeviceClass{}
	for _, dc := range in.Classes {
		classes[dc.Name] = dc
	}
	inUse := allocatedDevices(in.Claims, c)
	pools := currentPools(in.Slices)
	nodes := nodeNames(in.Nodes, pools)
	cache := cel.NewCache(64, cel.Features{})

	for _, req := range c.Spec.Devices.Requests {
		var subs []request
		switch {
		case req.Exactly != nil:
			x := req.Exactly
			subs = append(subs, request{name: req.Name, class: x.DeviceClassName, sel: x.Selectors, mode: x.AllocationMode, count: x.Count})
		default:
			for _, s := range req.FirstAvailable {
				subs = append(subs, request{name: req.Name + "/" + s.Name, class: s.DeviceClassName, sel: s.Selectors, mode: s.AllocationMode, count: s.Count})
			}
		}
		for _, s := range subs {
			r, err := s.evaluate(ctx, cache, classes, pools, nodes, inUse)
			if err != nil {
				return nil, err
			}
			e.Requests = append(e.Requests, r)
		}
	}
	e.Allocator = runAllocator(ctx, in, inUse)
	return e, nil
}

type request struct {
	name, class string
	sel         []resourceapi.DeviceSelector
	mode        resourceapi.DeviceAllocationMode
	count       int64
}

type compiled struct {
	by    string
	index int
	expr  string
	res   cel.CompilationResult
}

func (s request) evaluate(ctx context.Context, cache *cel.Cache, classes map[string]*resourceapi.DeviceClass, pools []pool, nodes []string, inUse sets.Set[structured.DeviceID]) (Request, error) {
	r := Request{Name: s.name, Class: s.class, Mode: s.mode, Count: s.count}
	if r.Mode == "" {
		// The API server defaults it (ExactCount, count 1).
		r.Mode = resourceapi.DeviceAllocationModeExactCount
	}
	if r.Mode == resourceapi.DeviceAllocationModeExactCount && r.Count == 0 {
		r.Count = 1
	}
	dc, ok := classes[s.class]
	if !ok {
		r.ClassMissing = true
		r.Problem = "CLAIM_CLASS_MISSING"
		return r, nil
	}
	var sels []compiled
	add := func(by string, list []resourceapi.DeviceSelector) {
		for i, sel := range list {
			if sel.CEL == nil {
				continue
			}
			r.Selectors = append(r.Selectors, fmt.Sprintf("%s #%d: %s", by, i, sel.CEL.Expression))
			res := cache.GetOrCompile(sel.CEL.Expression)
			if res.Error != nil {
				r.CompileErrors = append(r.CompileErrors, fmt.Sprintf("%s selector #%d %q: %v", by, i, sel.CEL.Expression, res.Error))
			}
			sels = append(sels, compiled{by: by, index: i, expr: sel.CEL.Expression, res: res})
		}
	}
	add("class", dc.Spec.Selectors)
	add("request", s.sel)
	if len(r.CompileErrors) > 0 {
		r.Problem = "CLAIM_SELECTOR_ERROR"
		return r, nil
	}

	// Free matching devices per node: a node-local pool's for its node,
	// an all-nodes (or node-selector) pool's for every node.
	freeOn := map[string]int{}
	everywhere := 0
	matchingOn := map[string]int{}
	matchingEverywhere := 0
	runtimeErr := false
	for _, p := range pools {
		for _, d := range p.devices {
			r.Devices++
			x := Exclusion{Node: p.nodeLabel(), Driver: p.driver, Pool: p.name, Device: d.Name}
			excluded := false
			for _, cs := range sels {
				ok, _, err := cs.res.DeviceMatches(ctx, cel.Device{Driver: p.driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
				if err != nil {
					if ctx.Err() != nil {
						return r, ctx.Err()
					}
					x.By, x.Index, x.Expression, x.Error = "error", cs.index, cs.expr, cs.by+" selector: "+err.Error()
					runtimeErr = true
					excluded = true
					break
				}
				if !ok {
					x.By, x.Index, x.Expression = cs.by, cs.index, cs.expr
					x.Capacity = strings.Contains(cs.expr, "device.capacity")
					excluded = true
					break
				}
			}
			if !excluded {
				r.Matching++
				if p.node == "" {
					matchingEverywhere++
				} else {
					matchingOn[p.node]++
				}
				if inUse.Has(structured.MakeDeviceID(p.driver, p.name, d.Name)) {
					x.By = "allocated"
					excluded = true
				} else {
					r.Free++
					if p.node == "" {
						everywhere++
					} else {
						freeOn[p.node]++
					}
				}
			}
			if excluded {
				r.Exclusions = append(r.Exclusions, x)
			}
		}
	}
	r.BestFree = everywhere
	for _, n := range nodes {
		if f := freeOn[n] + everywhere; f > r.BestFree || r.BestNode == "" && f == r.BestFree {
			r.BestNode, r.BestFree = n, f
		}
	}
	switch {
	case runtimeErr:
		// The allocator stops at the first CEL runtime error: the
		// scheduler reports it and places the pod nowhere.
		r.Problem = "CLAIM_SELECTOR_ERROR"
	case r.Matching == 0:
		r.Problem = "CLAIM_NO_MATCHING_DEVICE"
	case r.Mode == resourceapi.DeviceAllocationModeAll:
		// All: every matching device the node sees, and none of them
		// in use (structured allocator, allocationMode All).
		ok := false
		for _, n := range nodes {
			if matchingOn[n]+matchingEverywhere > 0 && freeOn[n]+everywhere == matchingOn[n]+matchingEverywhere {
				ok = true
			}
		}
		if !ok {
			r.Problem = "CLAIM_DEVICES_IN_USE"
		}
	case int64(r.BestFree) >= r.Count:
	case int64(r.Matching) >= r.Count && bestMatching(nodes, matchingOn, matchingEverywhere) >= r.Count:
		r.Problem = "CLAIM_DEVICES_IN_USE"
	default:
		r.Problem = "CLAIM_TOO_MANY_DEVICES"
	}
	return r, nil
}

func bestMatching(nodes []string, on map[string]int, everywhere int) int64 {
	best := everywhere
	for _, n := range nodes {
		best = max(best, on[n]+everywhere)
	}
	return int64(best)
}

// pool is the current generation of one pool: the slices of the highest
// generation, as the allocator uses them (structured: GatherPools keeps
// only a pool's newest generation).
type pool struct {
	driver, name string
	// node is the pool's spec.nodeName; "" for allNodes or a node
	// selector, which the explanation counts for every node.
	node       string
	allNodes   bool
	generation int64
	devices    []resourceapi.Device
}

func (p pool) nodeLabel() string {
	if p.node != "" {
		return p.node
	}
	if p.allNodes {
		return "(all nodes)"
	}
	return "(node selector)"
}

func currentPools(slices []*resourceapi.ResourceSlice) []pool {
	type key struct{ driver, name, node string }
	m := map[key]*pool{}
	for _, s := range slices {
		k := key{s.Spec.Driver, s.Spec.Pool.Name, deref(s.Spec.NodeName)}
		p := m[k]
		if p == nil || s.Spec.Pool.Generation > p.generation {
			p = &pool{driver: k.driver, name: k.name, node: k.node, allNodes: s.Spec.AllNodes != nil && *s.Spec.AllNodes, generation: s.Spec.Pool.Generation}
			m[k] = p
		} else if s.Spec.Pool.Generation < p.generation {
			continue
		}
		p.devices = append(p.devices, s.Spec.Devices...)
	}
	out := make([]pool, 0, len(m))
	for _, p := range m {
		sort.Slice(p.devices, func(i, j int) bool { return p.devices[i].Name < p.devices[j].Name })
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.node != b.node {
			return a.node < b.node
		}
		if a.driver != b.driver {
			return a.driver < b.driver
		}
		return a.name < b.name
	})
	return out
}

func nodeNames(nodes []*corev1.Node, pools []pool) []string {
	s := sets.New[string]()
	for _, n := range nodes {
		s.Insert(n.Name)
	}
	if len(nodes) == 0 {
		for _, p := range pools {
			if p.node != "" {
				s.Insert(p.node)
			}
		}
	}
	return sets.List(s)
}

// allocatedDevices are the devices of every allocated claim but self.
func allocatedDevices(claims []*resourceapi.ResourceClaim, self *resourceapi.ResourceClaim) sets.Set[structured.DeviceID] {
	s := sets.New[structured.DeviceID]()
	for _, c := range claims {
		if c.Status.Allocation == nil || (c.Namespace == self.Namespace && c.Name == self.Name) {
			continue
		}
		for _, d := range c.Status.Allocation.Devices.Results {
			s.Insert(structured.MakeDeviceID(d.Driver, d.Pool, d.Device))
		}
	}
	return s
}

// selectorNode is the node an allocation's node selector names, when it
// names exactly one (the allocator writes metadata.name In [NODE] for a
// node-local pool).
func selectorNode(ns *corev1.NodeSelector) string {
	if ns == nil || len(ns.NodeSelectorTerms) != 1 {
		return ""
	}
	t := ns.NodeSelectorTerms[0]
	for _, f := range t.MatchFields {
		if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
			return f.Values[0]
		}
	}
	for _, m := range t.MatchExpressions {
		if m.Key == corev1.LabelHostname && m.Operator == corev1.NodeSelectorOpIn && len(m.Values) == 1 {
			return m.Values[0]
		}
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	// The scheduler's lister answers a NotFound; the allocator turns
	// any error into its own "device class ... does not exist"-style
	// failure.
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

// AllocatorBudget bounds the offline allocator's run over all nodes.
var AllocatorBudget = 10 * time.Second

// minDevices is the fewest devices the claim can be allocated with: each
// request's count (its smallest alternative's for a firstAvailable list;
// 1 for allocationMode All).
func minDevices(c *resourceapi.ResourceClaim) int64 {
	var n int64
	one := func(mode resourceapi.DeviceAllocationMode, count int64) int64 {
		if mode == resourceapi.DeviceAllocationModeAll || count < 1 {
			return 1
		}
		return count
	}
	for _, r := range c.Spec.Devices.Requests {
		switch {
		case r.Exactly != nil:
			n += one(r.Exactly.AllocationMode, r.Exactly.Count)
		case len(r.FirstAvailable) > 0:
			least := int64(-1)
			for _, s := range r.FirstAvailable {
				if c := one(s.AllocationMode, s.Count); least < 0 || c < least {
					least = c
				}
			}
			n += least
		}
	}
	return n
}

// runAllocator runs the structured allocator on every node, in name
// order, and stops at the first that takes the claim.
func runAllocator(ctx context.Context, in Input, inUse sets.Set[structured.DeviceID]) Allocator {
	if in.NodesErr != "" {
		why := cluster.APIWhy(in.NodesErr, in.NodesError)
		if in.NodesError == nil {
			why = report.Explain(in.NodesErr, "The allocator needs the Node objects: `kubectl get nodes` with the same kubeconfig says why they are not listed.")
		}
		return Allocator{Reason: in.NodesErr, Why: why}
	}
	if len(in.Nodes) == 0 {
		const r = "no Node objects: the allocator places claims on nodes"
		return Allocator{Reason: r, Why: report.Explain(r, "Nothing to allocate on: `kubectl get nodes` lists none. Once nodes have joined, run again.")}
	}
	classes := classLister{}
	for _, dc := range in.Classes {
		classes[dc.Name] = dc
	}
	state := structured.AllocatedState{AllocatedDevices: inUse, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	// A node-local slice (spec.nodeName) serves its node only
	// (structured.NodeMatches): each node's allocator gets that node's
	// slices and the others (all nodes, node selectors), so that trying
	// N nodes does not walk every node's slices N times.
	byNode := map[string][]*resourceapi.ResourceSlice{}
	var shared []*resourceapi.ResourceSlice
	for _, s := range in.Slices {
		if n := deref(s.Spec.NodeName); n != "" {
			byNode[n] = append(byNode[n], s)
		} else {
			shared = append(shared, s)
		}
	}
	cache := cel.NewCache(64, cel.Features{})
	nodes := append([]*corev1.Node(nil), in.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	claim := in.Claim.DeepCopy()
	need := minDevices(claim)
	sharedDevices := 0
	for _, s := range shared {
		sharedDevices += len(s.Spec.Devices)
	}
	// The allocator searches combinations with backtracking: asked for
	// more devices than a node has, it tries them all before it gives up
	// (the scheduler bounds that with its filter timeout). A node whose
	// slices hold fewer devices than the claim needs at least cannot take
	// it whatever the selectors say (a device goes to one request: the
	// consumable-capacity feature that shares one is not enabled here),
	// so it is not tried; and the whole run is bounded by AllocatorBudget.
	ctx, cancel := context.WithTimeout(ctx, AllocatorBudget)
	defer cancel()
	tried := 0
	for _, n := range nodes {
		visible := sharedDevices
		for _, s := range byNode[n.Name] {
			visible += len(s.Spec.Devices)
		}
		if int64(visible) < need {
			continue
		}
		tried++
		slices := append(byNode[n.Name][:len(byNode[n.Name]):len(byNode[n.Name])], shared...)
		al, err := structured.NewAllocator(ctx, features, state, classes, slices, cache)
		if err != nil {
			return Allocator{Ran: true, Error: err.Error()}
		}
		res, err := al.Allocate(ctx, n, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			if ctx.Err() != nil {
				r := fmt.Sprintf("the allocator did not finish within %v (%d of %d nodes tried)", AllocatorBudget, tried, len(nodes))
				return Allocator{Reason: r, Why: report.NotOffered(r, "an answer within the allocator's time budget",
					"The selectors' findings above stand without it; the scheduler's own answer is in the pod's events (`kubectl describe pod POD`).")}
			}
			return Allocator{Ran: true, Error: err.Error()}
		}
		if len(res) == 1 {
			a := Allocator{Ran: true, Node: n.Name, Tried: tried, Nodes: len(nodes)}
			for _, d := range res[0].Devices.Results {
				a.Devices = append(a.Devices, d.Request+": "+d.Driver+"/"+d.Pool+"/"+d.Device)
			}
			return a
		}
	}
	return Allocator{Ran: true, Tried: tried, Nodes: len(nodes)}
}
