package claim

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

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
	listErrs []listErr
	failed   map[string]bool // the LISTs that failed, by resource
	slices   int
	// onNode are the slices of each driver on each node, for the join
	// with the node's registrations; noNode the slices without
	// spec.nodeName.
	onNode map[nodeDriver]*sliceGroup
	// Now is when the agents' summaries are judged current or stale
	// (cluster.Summary.Stale); the zero time is the time of AddNode.
	Now    time.Time
	noNode sliceGroup
}

type fleetNode struct {
	labels       []string
	accelerators int // the agent's count; 0 without a summary
	// The node's DRA registrations per its agent's summary: drivers
	// when draKnown, else why not (draGap is the kind of reason, to
	// group nodes by).
	drivers     []string
	draKnown    bool
	draGap      string
	draKind     gapKind
	draWhy      string
	summaryTime string
}

// gapKind is why a node's DRA registrations are not known from its
// agent's summary, typed: the fix follows from it (gapKind.fix).
type gapKind int

const (
	gapNodeNotListed gapKind = iota + 1
	gapNoSummary
	gapBadSummary
	gapStaleSummary
	gapOldSummary
	gapNotJudged
)

func (k gapKind) fix() string {
	switch k {
	case gapNodeNotListed:
		return "The slices name a node that is not among the Nodes listed: a node deleted since (`kubectl get node NODE`; its kubelet's slices go about 30 s after it), or a node LIST that failed (its finding says why)."
	case gapNoSummary:
		return "Deploy accel-doctor's agent to the nodes (its DaemonSet: `kubectl -n accel-doctor get daemonset`), or run `accel-doctor check --layer kube` on each node: its summary carries the DRA registrations."
	case gapBadSummary:
		return "Run the same accel-doctor release in the agent as here: `kubectl get node NODE -o jsonpath='{.metadata.annotations.accel-doctor\\.io/summary}'` shows what it wrote."
	case gapStaleSummary:
		return "The agent on those nodes is not checking: look at its pod (`kubectl -n accel-doctor get pods -o wide --field-selector spec.nodeName=NODE`, then `kubectl -n accel-doctor logs POD`)."
	case gapOldSummary:
		return "Upgrade the agent on those nodes: its summary is of a version before 2, which carries no DRA registrations."
	case gapNotJudged:
		return "The agent's check could not read the kubelet's plugins_registry (its summary's dra.not_run says why): give the agent's pod the kubelet's directory (deploy/components/dra-state), or run `accel-doctor check --layer kube` on the node."
	}
	return "Run `accel-doctor check --layer kube` on the node: it reads the registrations there."
}

type nodeDriver struct{ node, driver string }

// sliceGroup counts slices and keeps the first few names as evidence.
type sliceGroup struct {
	n     int
	names []string
}

const maxEvidence = 20

func (g *sliceGroup) add(name string) {
	g.n++
	if len(g.names) < maxEvidence {
		g.names = append(g.names, name)
	}
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
	return &Fleet{nodes: map[string]*fleetNode{}, pools: map[poolKey]*fleetPool{}, sliceOn: map[string]int{}, claims: map[string]bool{}, waiting: map[string][]string{},
		onNode: map[nodeDriver]*sliceGroup{}}
}

// AddNode records a Node's accelerator hardware: NFD's labels and the
// agent's summary (internal/cluster's schema).
func (f *Fleet) AddNode(n *corev1.Node) {
	fn := &fleetNode{labels: cluster.AcceleratorLabels(n.Labels)}
	v, ok := n.Annotations[cluster.SummaryAnnotation]
	switch s, err := cluster.ParseSummary(v); {
	case !ok:
		fn.draGap, fn.draKind, fn.draWhy = "no agent summary", gapNoSummary, "the node has no "+cluster.SummaryAnnotation+" annotation: accel-doctor's agent does not run there"
	case err != nil:
		fn.draGap, fn.draKind, fn.draWhy = "unreadable agent summary", gapBadSummary, "its "+cluster.SummaryAnnotation+" annotation does not read: "+err.Error()
	default:
		fn.summaryTime = s.Time
		if stale, why := s.Stale(f.Now); stale {
			// Neither the registrations nor the accelerator count then
			// are the node's now (cluster does not use them either).
			fn.draGap, fn.draKind = "stale agent summary", gapStaleSummary
			fn.draWhy = "the agent's summary of " + s.Time + " is " + why + ": its agent is not checking the node"
			break
		}
		fn.accelerators = s.Accelerators
		fn.drivers, fn.draKnown, fn.draWhy = s.DRARegistrations()
		switch {
		case fn.draKnown:
		case s.Version < 2:
			fn.draGap, fn.draKind = fmt.Sprintf("agent summary v%d", s.Version), gapOldSummary
		default:
			fn.draGap, fn.draKind = "registrations not judged by the agent", gapNotJudged
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
		k := nodeDriver{node, s.Spec.Driver}
		g := f.onNode[k]
		if g == nil {
			g = &sliceGroup{}
			f.onNode[k] = g
		}
		g.add(s.Name)
	} else {
		f.noNode.add(s.Name + " (" + sliceScope(s) + ")")
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

// listErr is a LIST that failed: its words, and its error, whose class
// its finding's fix follows from (cluster.APIWhy).
type listErr struct {
	text string
	err  error
}

// ListFailed records a LIST that failed.
// What depends on that list is then not judged (its objects may be only
// the pages read before the failure): its finding is the LIST's NOT_RUN.
func (f *Fleet) ListFailed(what string, err error) {
	f.listErrs = append(f.listErrs, listErr{fmt.Sprintf("LIST %s: %v", what, err), err})
	if f.failed == nil {
		f.failed = map[string]bool{}
	}
	f.failed[what] = true
}

// Findings are the fleet's findings, in a fixed order.
func (f *Fleet) Findings() []report.Finding {
	var out []report.Finding
	add := func(check, code string, st report.Status, subject, summary string, ev []report.Evidence) *report.Finding {
		c, _ := fleetCodeOf(code)
		fd := report.Finding{Check: check, Code: code, Layer: report.LayerKube, Status: st, Subject: subject, Summary: summary, Evidence: ev}
		if st == report.Warn || st == report.Fail {
			fd.Remediation = c.Remediation // a NOT_RUN's fix is its why's (CouldNotLook)
		}
		out = append(out, fd)
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
		if f.sliceOn[n] > 0 || f.failed["resourceslices"] {
			continue // a slice list that failed may lack this node's
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
	if f.failed["resourceslices"] {
		keys = nil // generations and counts of a partial list say nothing
	}
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
	registered := 0
	if !f.failed["resourceslices"] {
		registered = f.driverRegistrations(add)
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
		case !exists && f.failed["resourceclaims"]:
			state = "unknown: the LIST of ResourceClaims failed"
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
		fd := add("dra.list", "DRA_FLEET_LIST_FAILED", report.NotRun, "API server", e.text, nil)
		fd.CouldNotLook(cluster.APIWhy(e.text, e.err))
	}
	judged := false
	for _, x := range out {
		judged = judged || x.Status != report.NotRun
	}
	// The OK needs something to have been judged: a fleet with no
	// accelerator node and no slice examined nothing (the report then
	// has no finding, which is NOT_RUN, exit 2).
	if !judged && len(f.listErrs) == 0 && (accelNodes > 0 || f.slices > 0) {
		add("dra.fleet", "DRA_FLEET_OK", report.Pass, "cluster",
			fmt.Sprintf("%d node(s) (%d with accelerators), %d slice(s) in %d pool(s), %d of them of drivers registered on their nodes per the agents' summaries, no pod pending on a claim",
				len(f.nodes), accelNodes, f.slices, len(f.pools), registered), nil)
	}
	return out
}

// sliceScope says where a slice without spec.nodeName makes its devices
// available (resource.k8s.io/v1 ResourceSliceSpec: exactly one of
// nodeName, nodeSelector, allNodes, perDeviceNodeSelection is set).
func sliceScope(s *resourceapi.ResourceSlice) string {
	switch {
	case s.Spec.NodeSelector != nil:
		return "nodeSelector"
	case s.Spec.AllNodes != nil && *s.Spec.AllNodes:
		return "allNodes"
	case s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection:
		return "perDeviceNodeSelection"
	}
	return "no node set"
}

// driverRegistrations joins each node's slices with the DRA drivers its
// agent's summary says are registered with its kubelet, and returns how
// many slices' drivers are. A slice whose driver is not registered is a
// WARN, not a FAIL: the two observations are of different times (the
// agent's last check, this LIST), and the kubelet deletes a driver's
// slices only about 30 s after it goes away, so a driver that is
// restarting, or that registered after the agent's check, gives the same
// picture for a while. Nodes whose registrations are not known (no
// summary, an older agent's, a check that could not judge them) are
// NOT_RUN for their slices, grouped by why; slices without a node are
// published for a node selector or all nodes, where registration is no
// one node's: NOT_RUN too.
func (f *Fleet) driverRegistrations(add func(check, code string, st report.Status, subject, summary string, ev []report.Evidence) *report.Finding) int {
	keys := make([]nodeDriver, 0, len(f.onNode))
	for k := range f.onNode {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].node != keys[j].node {
			return keys[i].node < keys[j].node
		}
		return keys[i].driver < keys[j].driver
	})
	ann := "metadata.annotations[" + cluster.SummaryAnnotation + "]"
	type gap struct {
		kind   gapKind
		slices int
		nodes  []string // "NODE: why", the first maxEvidence
		count  int
	}
	gaps := map[string]*gap{}
	lastGapNode := map[string]string{}
	registered := 0
	for _, k := range keys {
		g := f.onNode[k]
		fn := f.nodes[k.node]
		kind, why, gk := "", "", gapKind(0)
		switch {
		case fn == nil:
			kind, why, gk = "node not listed", "no Node of that name was listed", gapNodeNotListed
		case !fn.draKnown:
			kind, why, gk = fn.draGap, fn.draWhy, fn.draKind
		}
		if kind != "" {
			gp := gaps[kind]
			if gp == nil {
				gp = &gap{kind: gk}
				gaps[kind] = gp
			}
			gp.slices += g.n
			if lastGapNode[kind] != k.node {
				lastGapNode[kind] = k.node
				gp.count++
				if len(gp.nodes) < maxEvidence {
					gp.nodes = append(gp.nodes, k.node+": "+why)
				}
			}
			continue
		}
		if slices.Contains(fn.drivers, k.driver) {
			registered += g.n
			continue
		}
		regs := strings.Join(fn.drivers, ", ")
		if regs == "" {
			regs = "none"
		}
		ev := []report.Evidence{{Path: ann + ".dra.drivers", Value: regs}, {Path: ann + ".time", Value: fn.summaryTime}}
		for _, n := range g.names {
			ev = append(ev, report.Evidence{Path: "resourceslice", Value: n})
		}
		if g.n > len(g.names) {
			ev = append(ev, report.Evidence{Path: "resourceslice", Value: fmt.Sprintf("... and %d more", g.n-len(g.names))})
		}
		add("dra.driver", "DRA_FLEET_DRIVER_NOT_REGISTERED", report.Warn, "node/"+k.node+" driver "+k.driver,
			fmt.Sprintf("%d ResourceSlice(s) of driver %s name node %s, where the agent's check (%s) found %s not registered with the kubelet: claims allocated from them stay unprepared (\"DRA driver %s is not registered\")",
				g.n, k.driver, k.node, fn.summaryTime, k.driver, k.driver), ev)
	}
	kinds := make([]string, 0, len(gaps))
	for k := range gaps {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		gp := gaps[kind]
		var ev []report.Evidence
		for _, n := range gp.nodes {
			ev = append(ev, report.Evidence{Path: "node", Value: n})
		}
		if gp.count > len(gp.nodes) {
			ev = append(ev, report.Evidence{Path: "node", Value: fmt.Sprintf("... and %d more", gp.count-len(gp.nodes))})
		}
		fd := add("dra.driver", "DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN", report.NotRun, "resourceslices ("+kind+")",
			fmt.Sprintf("%d slice(s) on %d node(s): whether their drivers are registered there is not known (%s)", gp.slices, gp.count, kind), ev)
		reason := gp.nodes[0]
		if gp.count > 1 {
			reason += fmt.Sprintf(" (and %d more node(s))", gp.count-1)
		}
		fd.CouldNotLook(report.Explain(reason, gp.kind.fix()))
	}
	if f.noNode.n > 0 {
		var ev []report.Evidence
		for _, n := range f.noNode.names {
			ev = append(ev, report.Evidence{Path: "resourceslice", Value: n})
		}
		if f.noNode.n > len(f.noNode.names) {
			ev = append(ev, report.Evidence{Path: "resourceslice", Value: fmt.Sprintf("... and %d more", f.noNode.n-len(f.noNode.names))})
		}
		fd := add("dra.driver", "DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN", report.NotRun, "resourceslices (no spec.nodeName)",
			fmt.Sprintf("%d slice(s) without spec.nodeName: their devices are not one node's, and neither is the driver's registration", f.noNode.n), ev)
		fd.CouldNotLook(report.Explain("a slice for a node selector or for all nodes (network-attached devices) is published by a controller, not by one node's kubelet plugin",
			"Nothing to judge on a node: the driver's controller publishes these slices; its pods are where to look (`kubectl get pods -A -o wide | grep DRIVER`)."))
	}
	return registered
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
	run := func(what, resource, api string, all bool, page func(context.Context, metav1.ListOptions) (string, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cluster.ListPages(ctx, what, page); err != nil {
				mu.Lock()
				f.ListFailed(what, cluster.Listing(resource, api, "", all, err))
				mu.Unlock()
			}
		}()
	}
	run("nodes", "nodes", "v1", false, func(ctx context.Context, o metav1.ListOptions) (string, error) {
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
	run("pods (status.phase=Pending)", "pods", "v1", true, func(ctx context.Context, o metav1.ListOptions) (string, error) {
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
	run("resourceslices", "resourceslices.resource.k8s.io", "resource.k8s.io/v1", false, func(ctx context.Context, o metav1.ListOptions) (string, error) {
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
	run("resourceclaims", "resourceclaims.resource.k8s.io", "resource.k8s.io/v1", true, func(ctx context.Context, o metav1.ListOptions) (string, error) {
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
	sort.Slice(f.listErrs, func(i, j int) bool { return f.listErrs[i].text < f.listErrs[j].text })
	return ctx.Err()
}
