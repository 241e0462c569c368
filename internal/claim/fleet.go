package claim

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Fleet is `accel-doctor dra`'s analysis: it keeps of each listed object
// only what its findings need, so that a LIST of thousands of nodes is not
// held in memory.
type Fleet struct {
	nodes    map[string]*fleetNode
	pools    map[poolKey]*fleetPool
	sliceOn  map[string]int // slices per spec.nodeName
	claims   map[string]bool
	waiting  map[string][]string // claim NS/NAME -> pending pods NS/NAME
	unnamed  []string            // pending pods whose template claim has no name yet
	listErrs []string
	slices   int
}

type fleetNode struct {
	labels       []string
	accelerators int // the agent's count; 0 without a summary
}

type poolKey struct{ driver, pool string }

type fleetPool struct {
	generations map[int64]int // slices per generation
	// want is resourceSliceCount of the newest generation's slices.
	want  int64
	nodes map[string]bool
}

// NewFleet returns an empty Fleet.
func NewFleet() *Fleet {
	return &Fleet{nodes: map[string]*fleetNode{}, pools: map[poolKey]*fleetPool{}, sliceOn: map[string]int{}, claims: map[string]bool{}, waiting: map[string][]string{}}
}

// AddNode records a Node's accelerator hardware: NFD's labels and the
// agent's summary (internal/cluster's schema).
func (f *Fleet) AddNode(n *corev1.Node) {
	fn := &fleetNode{labels: cluster.AcceleratorLabels(n.Labels)}
	if v, ok := n.Annotations[cluster.SummaryAnnotation]; ok {
		if s, err := cluster.ParseSummary(v); err == nil {
			fn.accelerators = s.Accelerators
		}
	}
	f.nodes[n.Name] = fn
}

// AddSlice records a ResourceSlice's pool, generation and node.
func (f *Fleet) AddSlice(s *resourceapi.ResourceSlice) {
	f.slices++
	node := deref(s.Spec.NodeName)
	if node != "" {
		f.sliceOn[node]++
	}
	k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
	p := f.pools[k]
	if p == nil {
		p = &fleetPool{generations: map[int64]int{}, nodes: map[string]bool{}}
		f.pools[k] = p
	}
	newest := int64(-1 << 63)
	for g := range p.generations {
		newest = max(newest, g)
	}
	p.generations[s.Spec.Pool.Generation]++
	if s.Spec.Pool.Generation >= newest {
		p.want = s.Spec.Pool.ResourceSliceCount
	}
	if node != "" {
		p.nodes[node] = true
	}
}

// AddClaim records whether a claim is allocated.
func (f *Fleet) AddClaim(c *resourceapi.ResourceClaim) {
	f.claims[c.Namespace+"/"+c.Name] = c.Status.Allocation != nil
}

// AddPod records a pending pod (not bound to a node) by the claims it waits on.
func (f *Fleet) AddPod(p *corev1.Pod) {
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending || len(p.Spec.ResourceClaims) == 0 {
		return
	}
	generated := map[string]string{}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			generated[s.Name] = *s.ResourceClaimName
		}
	}
	pod := p.Namespace + "/" + p.Name
	for _, rc := range p.Spec.ResourceClaims {
		name := deref(rc.ResourceClaimName)
		if name == "" {
			name = generated[rc.Name]
		}
		if name == "" {
			// The resourceclaim controller has not created the
			// claim from its template yet.
			f.unnamed = append(f.unnamed, pod+" ("+rc.Name+")")
			continue
		}
		k := p.Namespace + "/" + name
		f.waiting[k] = append(f.waiting[k], pod)
	}
}

// ListFailed records a LIST that failed.
func (f *Fleet) ListFailed(what string, err error) {
	f.listErrs = append(f.listErrs, fmt.Sprintf("LIST %s: %v", what, err))
}

// Findings are the fleet's findings, in a fixed order.
func (f *Fleet) Findings() []report.Finding {
	var out []report.Finding
	add := func(check, code string, st report.Status, subject, summary string, ev []report.Evidence) *report.Finding {
		c, _ := fleetCodeOf(code)
		out = append(out, report.Finding{Check: check, Code: code, Layer: report.LayerKube, Status: st, Subject: subject, Summary: summary, Evidence: ev, Remediation: c.Remediation})
		return &out[len(out)-1]
	}
	names := make([]string, 0, len(f.nodes))
	for n := range f.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	accelNodes := 0
	for _, n := range names {
		fn := f.nodes[n]
		if len(fn.labels) == 0 && fn.accelerators == 0 {
			continue
		}
		accelNodes++
		if f.sliceOn[n] > 0 {
			continue
		}
		var ev []report.Evidence
		for _, l := range fn.labels {
			ev = append(ev, report.Evidence{Path: "metadata.labels", Value: l})
		}
		if fn.accelerators > 0 {
			ev = append(ev, report.Evidence{Path: "metadata.annotations[" + cluster.SummaryAnnotation + "].accelerators", Value: fmt.Sprint(fn.accelerators)})
		}
		add("dra.node", "DRA_FLEET_NODE_NO_SLICE", report.Warn, "node/"+n, "the node has accelerator hardware but no ResourceSlice names it", ev)
	}

	keys := make([]poolKey, 0, len(f.pools))
	for k := range f.pools {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].driver != keys[j].driver {
			return keys[i].driver < keys[j].driver
		}
		return keys[i].pool < keys[j].pool
	})
	for _, k := range keys {
		p := f.pools[k]
		subject := "pool " + k.driver + "/" + k.pool
		gens := make([]int64, 0, len(p.generations))
		for g := range p.generations {
			gens = append(gens, g)
		}
		sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
		newest := gens[len(gens)-1]
		if len(gens) > 1 {
			var ev []report.Evidence
			for _, g := range gens {
				ev = append(ev, report.Evidence{Path: fmt.Sprintf("spec.pool.generation %d", g), Value: fmt.Sprintf("%d slice(s)", p.generations[g])})
			}
			add("dra.pool", "DRA_FLEET_POOL_GENERATIONS", report.Warn, subject,
				fmt.Sprintf("slices of %d generations; the allocator uses only generation %d's", len(gens), newest), ev)
		}
		if have := int64(p.generations[newest]); have != p.want {
			add("dra.pool", "DRA_FLEET_POOL_INCOMPLETE", report.Warn, subject,
				fmt.Sprintf("generation %d has %d slice(s), its resourceSliceCount says %d", newest, have, p.want),
				[]report.Evidence{{Path: "spec.pool.resourceSliceCount", Value: fmt.Sprint(p.want)}, {Path: "slices listed", Value: fmt.Sprint(have)}})
		}
	}
	if f.slices > 0 {
		// The agent's summary (schema version cluster.SummaryVersion)
		// carries no list of the DRA drivers registered with the
		// kubelet: which slice's driver is not registered on its node
		// cannot be told from the API server.
		fd := add("dra.driver", "DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN", report.NotRun, "resourceslices",
			fmt.Sprintf("%d slice(s) of %d pool(s): whether each driver is registered on its node is not known here", f.slices, len(f.pools)), nil)
		fd.Reason = fmt.Sprintf("the agent's %s annotation (v%d) does not list the node's registered DRA drivers; run `accel-doctor check --layer kube` on the node", cluster.SummaryAnnotation, cluster.SummaryVersion)
	}

	claims := make([]string, 0, len(f.waiting))
	for c := range f.waiting {
		claims = append(claims, c)
	}
	sort.Strings(claims)
	for _, c := range claims {
		pods := f.waiting[c]
		sort.Strings(pods)
		allocated, exists := f.claims[c]
		state := "not allocated"
		switch {
		case !exists:
			state = "does not exist"
		case allocated:
			state = "allocated"
		}
		ev := []report.Evidence{{Path: "claim", Value: state}}
		for i, p := range pods {
			if i == 20 {
				ev = append(ev, report.Evidence{Path: "pod", Value: fmt.Sprintf("... and %d more", len(pods)-i)})
				break
			}
			ev = append(ev, report.Evidence{Path: "pod", Value: p})
		}
		add("dra.pending", "DRA_FLEET_PENDING_ON_CLAIM", report.Warn, "resourceclaim/"+c,
			fmt.Sprintf("%d pending pod(s) wait on this claim (%s): `accel-doctor claim %s` says why", len(pods), state, c), ev)
	}
	if len(f.unnamed) > 0 {
		sort.Strings(f.unnamed)
		var ev []report.Evidence
		for _, p := range f.unnamed {
			ev = append(ev, report.Evidence{Path: "pod", Value: p})
		}
		add("dra.pending", "DRA_FLEET_PENDING_ON_CLAIM", report.Warn, "resourceclaimtemplates",
			fmt.Sprintf("%d pending pod claim(s) whose claim the resourceclaim controller has not created from its template", len(f.unnamed)), ev)
	}
	for _, e := range f.listErrs {
		fd := add("dra.list", "DRA_FLEET_LIST_FAILED", report.NotRun, "API server", e, nil)
		fd.Reason = e
	}
	judged := false
	for _, x := range out {
		judged = judged || x.Status != report.NotRun
	}
	if !judged && len(f.listErrs) == 0 {
		add("dra.fleet", "DRA_FLEET_OK", report.Pass, "cluster",
			fmt.Sprintf("%d node(s) (%d with accelerators), %d slice(s) in %d pool(s), no pod pending on a claim", len(f.nodes), accelNodes, f.slices, len(f.pools)), nil)
	}
	return out
}

// Report is the fleet's findings as a report of layer 6.
func (f *Fleet) Report(m Meta) *report.Report {
	r := &report.Report{
		SchemaVersion: report.SchemaVersion, Tool: m.Tool, Command: "dra", Source: "API server " + m.Source,
		Generated: m.Now.UTC(), Layers: []report.Layer{report.LayerKube}, Devices: []report.Device{}, Findings: f.Findings(),
	}
	if r.Findings == nil {
		r.Findings = []report.Finding{}
	}
	r.Decide()
	return r
}

// CollectFleet lists Nodes, ResourceSlices, ResourceClaims and the Pending
// Pods (the API server filters them on status.phase) into f, the four
// LISTs at once, a page at a time; a failed LIST is recorded and the
// others stand.
func CollectFleet(ctx context.Context, c *Client, f *Fleet) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(what string, page func(context.Context, metav1.ListOptions) (string, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pages(ctx, page); err != nil {
				mu.Lock()
				f.ListFailed(what, err)
				mu.Unlock()
			}
		}()
	}
	run("nodes", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.core.Nodes(ctx, o)
		if err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range l.Items {
			f.AddNode(&l.Items[i])
		}
		return l.Continue, nil
	})
	run("pods (status.phase=Pending)", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.FieldSelector = fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)).String()
		l, err := c.core.Pods(ctx, "", o)
		if err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range l.Items {
			f.AddPod(&l.Items[i])
		}
		return l.Continue, nil
	})
	run("resourceslices", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l := &resourceapi.ResourceSliceList{}
		if err := c.list(ctx, "resourceslices", o, l); err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range l.Items {
			f.AddSlice(&l.Items[i])
		}
		return l.Continue, nil
	})
	run("resourceclaims", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l := &resourceapi.ResourceClaimList{}
		if err := c.list(ctx, "resourceclaims", o, l); err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range l.Items {
			f.AddClaim(&l.Items[i])
		}
		return l.Continue, nil
	})
	wg.Wait()
	sort.Strings(f.listErrs)
	return ctx.Err()
}
