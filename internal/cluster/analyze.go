package cluster

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/resname"
)

// Analyzer accumulates what the findings need from Nodes, Pods and
// FailedScheduling Events, one object at a time (a LIST page is
// discarded once it has been fed), and turns it into findings. Objects
// can come in any order. It is not safe for concurrent use.
type Analyzer struct {
	nodes    map[string]*nodeState
	plugins  map[string][]pluginPod // by node name
	pending  map[types.UID]*pendingPod
	events   map[types.UID]scheduleEvent
	listErrs []listErr
	// Now is when the agents' summaries are judged current or stale
	// (Summary.Stale); the zero time is the time of AddNode.
	Now time.Time
}

// NewAnalyzer returns an empty Analyzer.
func NewAnalyzer() *Analyzer {
	return &Analyzer{
		nodes:   map[string]*nodeState{},
		plugins: map[string][]pluginPod{},
		pending: map[types.UID]*pendingPod{},
		events:  map[types.UID]scheduleEvent{},
	}
}

type nodeState struct {
	name      string
	resources []resourceState // extended resources, sorted by name
	hardware  []hardwareLabel // NFD accelerator labels
	summary   *Summary
	summaryOK bool
	summaryEr string
	// stale: the summary is older than 3 of the agent's intervals
	// (staleWhy says by how much): not a verdict on the node now.
	stale    bool
	staleWhy string
}

type resourceState struct {
	name                  string
	capacity, allocatable resource.Quantity
}

type hardwareLabel struct {
	label, class, vendor string
}

type pluginPod struct {
	namespace, name, owner string
	ready                  bool
	why                    string
}

type pendingPod struct {
	namespace, name string
	message         string // PodScheduled=False's message, "" when none
}

type scheduleEvent struct {
	message string
	when    time.Time
}

type listErr struct {
	what string
	err  error
}

// nfdPrefix and nfdSuffix frame Node Feature Discovery's PCI labels,
// feature.node.kubernetes.io/pci-<class>_<vendor>.present=true with the
// default deviceLabelFields [class, vendor]
// (node-feature-discovery docs, "PCI features").
const (
	nfdPrefix = "feature.node.kubernetes.io/pci-"
	nfdSuffix = ".present"
)

// acceleratorClass reports whether NFD's label of a PCI class code (2 or
// 4 hex digits, as NFD writes it) and vendor names an accelerator: by
// pci.IsAccelerator, the node's own classifier (03 display controllers
// but BMC adapters, 0b40 co-processors, 12 processing accelerators, 0400
// and 0480 video; Xilinx FPGA cards and accelerator-only vendors), so that
// cluster and the agent's count agree. Rules that need the device id
// (BlueField DPUs, Neuron) cannot be told from a label. NFD's default
// deviceClassWhitelist labels 03, 0b40 and 12 only; the others appear when
// a cluster adds them.
func acceleratorClass(class, vendor string) bool {
	c, err := strconv.ParseUint(class, 16, 16)
	if err != nil || len(class) != 2 && len(class) != 4 {
		return false
	}
	if len(class) == 2 {
		c <<= 8 // a base class alone: subclass 00
	}
	d := &pci.Device{Class: uint32(c) << 8, Present: pci.HasClass}
	if v, err := strconv.ParseUint(vendor, 16, 16); err == nil && len(vendor) == 4 {
		d.Vendor, d.Present = uint16(v), d.Present|pci.HasVendor
	}
	_, ok := pci.IsAccelerator(d)
	return ok
}

// vendorDomains are the resource-name domains the vendors' device
// plugins advertise under, by PCI vendor ID: NVIDIA's k8s-device-plugin
// (nvidia.com/gpu, nvidia.com/mig-*), AMD's k8s-device-plugin (amd.com/gpu),
// Intel's device plugins for Kubernetes (gpu.intel.com/i915, gpu.intel.com/xe),
// Habana's (habana.ai/gaudi). Another vendor's hardware counts as advertised
// by any extended resource.
var vendorDomains = map[string][]string{
	"10de": {"nvidia.com/"},
	"1002": {"amd.com/"},
	"8086": {"gpu.intel.com/"},
	"1da3": {"habana.ai/"},
}

// AddNode records what the findings need of a Node.
func (a *Analyzer) AddNode(n *corev1.Node) {
	ns := &nodeState{name: n.Name}
	seen := map[corev1.ResourceName]bool{}
	for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		for name := range l {
			if resname.IsExtended(string(name)) && !seen[name] {
				seen[name] = true
				ns.resources = append(ns.resources, resourceState{
					name: string(name), capacity: n.Status.Capacity[name], allocatable: n.Status.Allocatable[name],
				})
			}
		}
	}
	sort.Slice(ns.resources, func(i, j int) bool { return ns.resources[i].name < ns.resources[j].name })
	for k, v := range n.Labels {
		if !strings.HasPrefix(k, nfdPrefix) || !strings.HasSuffix(k, nfdSuffix) || v != "true" {
			continue
		}
		class, vendor, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(k, nfdPrefix), nfdSuffix), "_")
		if ok && acceleratorClass(class, vendor) {
			ns.hardware = append(ns.hardware, hardwareLabel{label: k, class: class, vendor: strings.ToLower(vendor)})
		}
	}
	sort.Slice(ns.hardware, func(i, j int) bool { return ns.hardware[i].label < ns.hardware[j].label })
	if v, ok := n.Annotations[SummaryAnnotation]; ok {
		s, err := ParseSummary(v)
		if err != nil {
			ns.summaryEr = err.Error()
		} else {
			ns.summary, ns.summaryOK = &s, true
			ns.stale, ns.staleWhy = s.Stale(a.Now)
		}
	}
	a.nodes[n.Name] = ns
}

// pluginDirs are the kubelet directories a device plugin or a DRA driver
// mounts: the device-plugin sockets (pkg/kubelet/apis/deviceplugin
// DevicePluginPath), the plugin-registration sockets (pluginwatcher's
// plugins_registry) and the DRA drivers' own sockets (plugins/<driver>).
var pluginDirs = []string{
	"/var/lib/kubelet/device-plugins",
	"/var/lib/kubelet/plugins_registry",
	"/var/lib/kubelet/plugins",
}

// knownPluginNames are name fragments of the DaemonSets of device plugins
// and DRA drivers whose pods are recognised even without the mounts.
var knownPluginNames = []string{
	"device-plugin", "dra-driver", "intel-gpu-plugin", "gpu-feature-discovery",
}

// isPluginPod reports whether p is a device-plugin or DRA-driver pod: a
// DaemonSet's pod whose containers ask for no extended resource and which
// mounts one of pluginDirs, or whose DaemonSet has a known plugin's name.
func isPluginPod(p *corev1.Pod) (owner string, ok bool) {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			owner = o.Name
		}
	}
	if owner == "" {
		return "", false
	}
	for _, frag := range knownPluginNames {
		if strings.Contains(owner, frag) {
			return owner, true
		}
	}
	for _, c := range append(slices.Clip(p.Spec.InitContainers), p.Spec.Containers...) {
		for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name := range l {
				if resname.IsExtended(string(name)) {
					return "", false
				}
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		path := strings.TrimRight(v.HostPath.Path, "/")
		for _, d := range pluginDirs {
			if path == d || strings.HasPrefix(path, d+"/") {
				return owner, true
			}
		}
	}
	return "", false
}

// AddPod records a Pending pod the scheduler has not placed, and a
// device-plugin or DRA-driver pod on a node.
func (a *Analyzer) AddPod(p *corev1.Pod) {
	if p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
		pp := &pendingPod{namespace: p.Namespace, name: p.Name}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				pp.message = c.Message
			}
		}
		a.pending[p.UID] = pp
		return
	}
	owner, ok := isPluginPod(p)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		// A finished pod is not the node's plugin; the DaemonSet
		// replaces it, and the replacement is judged.
		return
	}
	pl := pluginPod{namespace: p.Namespace, name: p.Name, owner: owner}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			pl.ready = c.Status == corev1.ConditionTrue
			if !pl.ready {
				pl.why = strings.TrimSpace(c.Reason + " " + c.Message)
			}
		}
	}
	if !pl.ready {
		pl.why = notReadyWhy(p, pl.why)
	}
	a.plugins[p.Spec.NodeName] = append(a.plugins[p.Spec.NodeName], pl)
}

// notReadyWhy is the most telling reason a pod gives for not being Ready:
// a container's waiting or terminated reason, else the condition's.
func notReadyWhy(p *corev1.Pod, cond string) string {
	var parts []string
	for _, cs := range append(slices.Clip(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("container %s waiting: %s", cs.Name, cs.State.Waiting.Reason))
		case cs.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("container %s terminated: %s (exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
		case !cs.Ready:
			parts = append(parts, fmt.Sprintf("container %s not ready (%d restarts)", cs.Name, cs.RestartCount))
		}
	}
	if len(parts) == 0 {
		if cond != "" {
			return cond
		}
		return fmt.Sprintf("phase %s, no Ready condition", p.Status.Phase)
	}
	return strings.Join(parts, "; ")
}

// AddEvent records a FailedScheduling event's message for the pod it is
// about; the newest one of a pod wins.
func (a *Analyzer) AddEvent(e *corev1.Event) {
	if e.Reason != "FailedScheduling" || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.UID == "" {
		return
	}
	when := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(when) {
		when = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(when) {
		when = e.EventTime.Time
	}
	if old, ok := a.events[e.InvolvedObject.UID]; ok && old.when.After(when) {
		return
	}
	a.events[e.InvolvedObject.UID] = scheduleEvent{message: e.Message, when: when}
}

// ListFailed records that a LIST could not be read; the findings say what
// was not judged, and their fix follows from the error's class (APIWhy:
// wrap it in a RequestError to name the verb and resource).
func (a *Analyzer) ListFailed(what string, err error) {
	a.listErrs = append(a.listErrs, listErr{what: what, err: err})
}

// maxPodsShown bounds the pods a Pending group's evidence names; the
// summary gives the count.
const maxPodsShown = 20

// Findings turns what was fed into findings: per node (sorted by name)
// its resources, hardware, plugin pods and agent summary; then the
// Pending groups; then the LISTs that failed.
func (a *Analyzer) Findings() []report.Finding {
	var out []report.Finding
	names := a.nodeNames()
	// Plugin pods on nodes that were not listed (a node deleted between
	// the LISTs, or the node LIST failed) are judged too.
	for n := range a.plugins {
		if _, ok := a.nodes[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		out = append(out, a.nodeFindings(name)...)
	}
	out = append(out, a.pendingFindings()...)
	for _, le := range a.listErrs {
		f := report.Finding{
			Check: "cluster.list", Code: "CLUSTER_LIST_FAILED", Layer: report.LayerKube,
			Subject: le.what, Summary: fmt.Sprintf("LIST %s failed: %v", le.what, le.err),
		}
		f.CouldNotLook(APIWhy(fmt.Sprintf("LIST %s: %v", le.what, le.err), le.err))
		out = append(out, f)
	}
	return out
}

func remediation(code string) string {
	c, _ := CodeOf(code)
	return c.Remediation
}

func nodeSubject(name string) string { return "node/" + name }

func (a *Analyzer) nodeFindings(name string) []report.Finding {
	var out []report.Finding
	add := func(check, code string, st report.Status, summary string, ev []report.Evidence) {
		f := report.Finding{
			Check: check, Code: code, Layer: report.LayerKube, Status: st, Subject: nodeSubject(name),
			Summary: summary, Evidence: ev,
		}
		if st == report.Warn || st == report.Fail {
			f.Remediation = remediation(code) // a NOT_RUN's is its why's (CouldNotLook)
		}
		out = append(out, f)
	}
	ns := a.nodes[name]
	var okEvidence []report.Evidence
	if ns != nil {
		for _, r := range ns.resources {
			ev := []report.Evidence{{Path: "status.capacity[" + r.name + "]", Value: r.capacity.String()}, {Path: "status.allocatable[" + r.name + "]", Value: r.allocatable.String()}}
			switch {
			case r.allocatable.Cmp(r.capacity) >= 0:
				okEvidence = append(okEvidence, ev...)
			case r.allocatable.IsZero():
				add("cluster.resources", "CLUSTER_RESOURCE_UNALLOCATABLE", report.Fail,
					fmt.Sprintf("%s: capacity %s, allocatable 0: none of the node's devices can be given to a pod", r.name, r.capacity.String()), ev)
			default:
				add("cluster.resources", "CLUSTER_RESOURCE_UNALLOCATABLE", report.Warn,
					fmt.Sprintf("%s: capacity %s, allocatable %s: some of the node's devices cannot be given to a pod", r.name, r.capacity.String(), r.allocatable.String()), ev)
			}
		}
		ns.hardwareFindings(add)
		switch {
		case ns.summaryEr != "":
			add("cluster.agent", "CLUSTER_AGENT_SUMMARY_INVALID", report.Warn,
				fmt.Sprintf("annotation %s: %s", SummaryAnnotation, ns.summaryEr),
				[]report.Evidence{{Path: "metadata.annotations[" + SummaryAnnotation + "]", Value: "unreadable: " + ns.summaryEr}})
		case ns.summaryOK && ns.stale:
			s := ns.summary
			was := s.Status
			if s.Code != "" {
				was += " " + s.Code
			}
			add("cluster.agent", "CLUSTER_AGENT_SUMMARY_STALE", report.Warn,
				fmt.Sprintf("the agent's last check (%s, %s) is %s: it says nothing of the node now", s.Time, was, ns.staleWhy),
				[]report.Evidence{
					{Path: "metadata.annotations[" + SummaryAnnotation + "].time", Value: s.Time},
					{Path: "metadata.annotations[" + SummaryAnnotation + "].status", Value: was + " (not used)"},
				})
		case ns.summaryOK && ns.summary.Status == "FAIL":
			s := ns.summary
			add("cluster.agent", "CLUSTER_AGENT_FAIL", report.Fail,
				fmt.Sprintf("the agent's last check (%s) failed at layer %d (%s): %s: %s", s.Time, s.Layer, report.Layer(s.Layer).Name(), s.Code, s.Message),
				[]report.Evidence{
					{Path: "metadata.annotations[" + SummaryAnnotation + "].layer", Value: fmt.Sprint(s.Layer)},
					{Path: "metadata.annotations[" + SummaryAnnotation + "].code", Value: s.Code},
					{Path: "metadata.annotations[" + SummaryAnnotation + "].time", Value: s.Time},
				})
		case ns.summaryOK:
			okEvidence = append(okEvidence, report.Evidence{Path: "metadata.annotations[" + SummaryAnnotation + "].status", Value: ns.summary.Status})
		}
	}
	for _, p := range a.plugins[name] {
		ev := []report.Evidence{{Path: "pod " + p.namespace + "/" + p.name, Value: "DaemonSet " + p.owner}}
		if p.ready {
			okEvidence = append(okEvidence, report.Evidence{Path: "pod " + p.namespace + "/" + p.name + " (DaemonSet " + p.owner + ")", Value: "Ready"})
			continue
		}
		ev = append(ev, report.Evidence{Path: "pod " + p.namespace + "/" + p.name + " status", Value: p.why})
		add("cluster.plugins", "CLUSTER_PLUGIN_POD_NOT_READY", report.Fail,
			fmt.Sprintf("plugin pod %s/%s (DaemonSet %s) is not Ready: %s", p.namespace, p.name, p.owner, p.why), ev)
	}
	// A node with nothing of an accelerator (no extended resource, no
	// hardware label, no agent summary, no plugin pod) was looked at but
	// nothing on it was judged: no OK, so that a cluster of such nodes
	// ends NOT_RUN ("nothing was checked"), never PASS.
	if len(out) == 0 && ns != nil && len(okEvidence) > 0 {
		var rs []string
		for _, r := range ns.resources {
			rs = append(rs, r.name+" "+r.allocatable.String()+"/"+r.capacity.String())
		}
		summary := "allocatable/capacity: " + strings.Join(rs, ", ")
		if len(rs) == 0 {
			summary = "no extended resource; nothing wrong"
		}
		add("cluster.node", "CLUSTER_NODE_OK", report.Pass, summary, okEvidence)
	}
	return out
}

// hardwareFindings: accelerator hardware the node has (NFD labels, the
// agent's count) with no extended resource of its vendor advertised.
func (ns *nodeState) hardwareFindings(add func(check, code string, st report.Status, summary string, ev []report.Evidence)) {
	advertised := func(prefixes []string) bool {
		for _, r := range ns.resources {
			if r.capacity.Sign() <= 0 {
				continue
			}
			if len(prefixes) == 0 {
				return true
			}
			for _, p := range prefixes {
				if strings.HasPrefix(r.name, p) {
					return true
				}
			}
		}
		return false
	}
	for _, h := range ns.hardware {
		if advertised(vendorDomains[h.vendor]) {
			continue
		}
		want := "any extended resource"
		if d := vendorDomains[h.vendor]; len(d) > 0 {
			want = "a resource under " + strings.Join(d, " or ")
		}
		add("cluster.hardware", "CLUSTER_HARDWARE_NOT_ADVERTISED", report.Warn,
			fmt.Sprintf("NFD labels PCI class %s vendor %s present, and the node advertises no %s", h.class, h.vendor, strings.TrimPrefix(want, "a ")),
			[]report.Evidence{{Path: "metadata.labels[" + h.label + "]", Value: "true"}, {Path: "status.capacity", Value: ns.resourceList()}})
	}
	if s := ns.summary; ns.summaryOK && !ns.stale && s.Accelerators > 0 && len(ns.hardware) == 0 {
		var missing []string
		if len(s.Resources) == 0 {
			if !advertised(nil) {
				missing = append(missing, "any extended resource")
			}
		} else {
			for _, r := range s.Resources {
				if !ns.hasExact(r) {
					missing = append(missing, r)
				}
			}
		}
		if len(missing) > 0 {
			add("cluster.hardware", "CLUSTER_HARDWARE_NOT_ADVERTISED", report.Warn,
				fmt.Sprintf("the agent counts %d accelerator(s), and the node does not advertise %s", s.Accelerators, strings.Join(missing, ", ")),
				[]report.Evidence{{Path: "metadata.annotations[" + SummaryAnnotation + "].accelerators", Value: fmt.Sprint(s.Accelerators)}, {Path: "status.capacity", Value: ns.resourceList()}})
		}
	}
}

func (ns *nodeState) hasExact(name string) bool {
	for _, r := range ns.resources {
		if r.name == name && r.capacity.Sign() > 0 {
			return true
		}
	}
	return false
}

// resourceList is the node's extended resources as "name=capacity, ...".
func (ns *nodeState) resourceList() string {
	if len(ns.resources) == 0 {
		return "no extended resource"
	}
	var s []string
	for _, r := range ns.resources {
		s = append(s, r.name+"="+r.capacity.String())
	}
	return strings.Join(s, ", ")
}

// pendingGroup is the Pending pods one reason of the scheduler's holds.
type pendingGroup struct {
	code, reason string
	pods         []string
	// nodes and of are, for the pod with the most, how many of the
	// nodes the scheduler considered gave this reason (-1: unknown).
	nodes, of int
}

func (a *Analyzer) pendingFindings() []report.Finding {
	groups := map[string]*pendingGroup{}
	var keys []string
	uids := make([]types.UID, 0, len(a.pending))
	for uid := range a.pending {
		uids = append(uids, uid)
	}
	// Pods in namespace/name order, so that the evidence is stable.
	sort.Slice(uids, func(i, j int) bool {
		pi, pj := a.pending[uids[i]], a.pending[uids[j]]
		return pi.namespace+"/"+pi.name < pj.namespace+"/"+pj.name
	})
	for _, uid := range uids {
		p := a.pending[uid]
		msg := p.message
		if msg == "" {
			msg = a.events[uid].message
		}
		parsed := SchedulerMessage{Nodes: -1, Reasons: []Reason{{Nodes: -1}}}
		if msg != "" {
			parsed = ParseSchedulerMessage(msg)
		}
		for _, r := range parsed.Reasons {
			code := reasonCode(r.Text)
			key := code + "\x00" + r.Text
			g, ok := groups[key]
			if !ok {
				g = &pendingGroup{code: code, reason: r.Text, nodes: -1, of: -1}
				groups[key] = g
				keys = append(keys, key)
			}
			g.pods = append(g.pods, p.namespace+"/"+p.name)
			n := r.Nodes
			if n < 0 {
				n = parsed.Nodes // a PreFilter's reason holds for all
			}
			if n > g.nodes {
				g.nodes, g.of = n, parsed.Nodes
			}
		}
	}
	sort.Strings(keys)
	var out []report.Finding
	for _, k := range keys {
		g := groups[k]
		subject, summary := g.reason, fmt.Sprintf("%d pod(s) Pending: %s", len(g.pods), g.reason)
		if g.code == "CLUSTER_PENDING_NO_VERDICT" {
			subject, summary = "no scheduler verdict", fmt.Sprintf("%d pod(s) Pending with no node and no word from the scheduler", len(g.pods))
		}
		var ev []report.Evidence
		if g.nodes >= 0 && g.of >= 0 {
			ev = append(ev, report.Evidence{Path: "scheduler", Value: fmt.Sprintf("%d of %d node(s) gave this reason", g.nodes, g.of)})
		}
		for i, p := range g.pods {
			if i == maxPodsShown {
				ev = append(ev, report.Evidence{Path: "pods", Value: fmt.Sprintf("and %d more", len(g.pods)-maxPodsShown)})
				break
			}
			ev = append(ev, report.Evidence{Path: "pod " + p, Value: "Pending"})
		}
		out = append(out, report.Finding{
			Check: "cluster.pending", Code: g.code, Layer: report.LayerKube, Status: report.Warn, Subject: subject,
			Summary: summary, Evidence: ev, Remediation: remediation(g.code),
		})
	}
	return out
}

// reasonCode classifies one of the scheduler's reasons by the words its
// plugins use: NodeResourcesFit's "Insufficient %v"
// (plugins/noderesources/fit.go), DynamicResources' "cannot allocate all
// claims" (plugins/dynamicresources), TaintToleration's "node(s) had
// untolerated taint(s)" (plugins/tainttoleration).
func reasonCode(reason string) string {
	switch {
	case reason == "":
		return "CLUSTER_PENDING_NO_VERDICT"
	case strings.HasPrefix(reason, "Insufficient "):
		return "CLUSTER_PENDING_INSUFFICIENT"
	case strings.Contains(reason, "cannot allocate all claims"):
		return "CLUSTER_PENDING_CLAIMS"
	case strings.Contains(reason, "untolerated taint"):
		return "CLUSTER_PENDING_TAINT"
	}
	return "CLUSTER_PENDING_OTHER"
}

// AcceleratorLabels are the node's Node Feature Discovery labels of
// accelerator hardware (feature.node.kubernetes.io/pci-<class>_<vendor>.present=true
// with an accelerator class), sorted; the dra command reads them too.
func AcceleratorLabels(labels map[string]string) []string {
	var out []string
	for k, v := range labels {
		if !strings.HasPrefix(k, nfdPrefix) || !strings.HasSuffix(k, nfdSuffix) || v != "true" {
			continue
		}
		class, vendor, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(k, nfdPrefix), nfdSuffix), "_")
		if ok && acceleratorClass(class, vendor) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
