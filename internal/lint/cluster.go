package lint

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Cluster is what `lint --cluster` read from the API server, each LIST
// with its error: a LIST that failed leaves the rules that need it
// NOT_RUN with that error as the reason, never a silent pass.
type Cluster struct {
	Server string // for the evidence

	RuntimeClasses    []string // node.k8s.io/v1 RuntimeClass names
	RuntimeClassesErr error
	DeviceClasses     []string // resource.k8s.io/v1 DeviceClass names
	DeviceClassesErr  error
	Nodes             []corev1.Node
	NodesErr          error
	// Why is the why of a LIST's error (the reason given), whose fix
	// follows from the error's class: the reader of the API server
	// knows the classes (internal/cluster's APIWhy); nil: the reason
	// alone, with a fix that says how to see the error.
	Why func(reason string, err error) report.Why
}

// claimDoc is a ResourceClaim or ResourceClaimTemplate of the input.
type claimDoc struct {
	source   string
	subject  string
	requests []classRequest
}

// classRequest is one device request's DeviceClass and its field path.
type classRequest struct{ path, class string }

func classRequests(s resourcev1.ResourceClaimSpec, base string) []classRequest {
	var out []classRequest
	for i, r := range s.Devices.Requests {
		if r.Exactly != nil && r.Exactly.DeviceClassName != "" {
			out = append(out, classRequest{fmt.Sprintf("%s.devices.requests[%d].exactly.deviceClassName", base, i), r.Exactly.DeviceClassName})
		}
		for j, sub := range r.FirstAvailable {
			if sub.DeviceClassName != "" {
				out = append(out, classRequest{fmt.Sprintf("%s.devices.requests[%d].firstAvailable[%d].deviceClassName", base, i, j), sub.DeviceClassName})
			}
		}
	}
	return out
}

// anyVerdict: a finding among fs that is a verdict (a NOT_RUN cluster rule
// is not one: the workload is still LINT_CLEAN for what was read).
func anyVerdict(fs []report.Finding) bool {
	for _, f := range fs {
		if f.Status != report.NotRun {
			return true
		}
	}
	return false
}

// notRun records that a cluster rule could not look at w: the LIST it
// needs failed.
func (l *linter) notRun(subject, source, code, what string, err error) {
	f := finding(code, subject, fmt.Sprintf("not checked: %s could not be listed", what),
		[]report.Evidence{{Path: "source", Value: source}, {Path: "cluster", Value: l.cluster.Server}})
	reason := fmt.Sprintf("list %s: %v", what, err)
	why := report.Explain(reason, "Run `kubectl get "+what+"` with the same kubeconfig and context: the API server's answer says what is wrong.")
	if l.cluster.Why != nil {
		why = l.cluster.Why(reason, err)
	}
	f.CouldNotLook(why)
	l.res.Findings = append(l.res.Findings, f)
}

// exists: name is in the cluster's list, or the input creates it.
func (l *linter) exists(kind string, inCluster []string, name string) (bool, string) {
	for _, n := range inCluster {
		if n == name {
			return true, ""
		}
	}
	if l.defined[kind][name] {
		return true, ""
	}
	return false, fmt.Sprintf("%d in the cluster%s", len(inCluster), listSome(inCluster))
}

func listSome(names []string) string {
	if len(names) == 0 {
		return ""
	}
	s := append([]string(nil), names...)
	sort.Strings(s)
	if len(s) > 8 {
		return ": " + strings.Join(s[:8], ", ") + fmt.Sprintf(", ... (%d more)", len(s)-8)
	}
	return ": " + strings.Join(s, ", ")
}

// clusterRules runs the rules that need the API server on one workload.
func (l *linter) clusterRules(w workload) {
	l.runtimeClassMissing(w)
	l.nodeRules(w)
}

// runtimeClassMissing: the RuntimeClass admission plugin
// (plugin/pkg/admission/runtimeclass) looks the pod's runtimeClassName
// up and rejects the pod when there is no such RuntimeClass; for a
// Deployment or a Job the controller's pods are rejected, so none
// appears. (Offline there is no rule for this: lint reads a RuntimeClass
// document of the input only to count it as existing here.)
func (l *linter) runtimeClassMissing(w workload) {
	rc := w.spec.RuntimeClassName
	if rc == nil || *rc == "" {
		return
	}
	c := l.cluster
	if c.RuntimeClassesErr != nil {
		l.notRun(w.subject, w.source, CodeClusterRuntimeClassMissing, "runtimeclasses.node.k8s.io", c.RuntimeClassesErr)
		return
	}
	ok, have := l.exists("RuntimeClass", c.RuntimeClasses, *rc)
	if ok {
		return
	}
	l.add(w, CodeClusterRuntimeClassMissing,
		fmt.Sprintf("runtimeClassName %s: the cluster has no RuntimeClass %s, so admission rejects the pod (\"pod rejected: RuntimeClass %q not found\")", *rc, *rc, *rc),
		[]report.Evidence{{Path: w.specPath + ".runtimeClassName", Value: *rc}, {Path: "runtimeclasses.node.k8s.io", Value: have}})
}

// deviceClassMissing: a claim's request names a DeviceClass the cluster
// does not have. The API server accepts the claim (validation does not
// look the class up); the scheduler's DynamicResources plugin cannot
// allocate it, so every pod that uses the claim stays Pending.
func (l *linter) deviceClassMissing(d claimDoc) {
	c := l.cluster
	if c == nil || len(d.requests) == 0 {
		return
	}
	if c.DeviceClassesErr != nil {
		l.notRun(d.subject, d.source, CodeClusterDeviceClassMissing, "deviceclasses.resource.k8s.io", c.DeviceClassesErr)
		return
	}
	for _, r := range d.requests {
		ok, have := l.exists("DeviceClass", c.DeviceClasses, r.class)
		if ok {
			continue
		}
		l.res.Findings = append(l.res.Findings, finding(CodeClusterDeviceClassMissing, d.subject,
			fmt.Sprintf("%s asks for device class %s, which the cluster does not have: a pod using this claim cannot be scheduled", r.path, r.class),
			[]report.Evidence{{Path: "source", Value: d.source}, {Path: r.path, Value: r.class}, {Path: "deviceclasses.resource.k8s.io", Value: have}}))
	}
}

// podOf is a Pod with w's spec, for the scheduler's helpers.
func podOf(w workload) *corev1.Pod {
	p := &corev1.Pod{Spec: *w.spec}
	p.Spec.Tolerations = append(append([]corev1.Toleration(nil), w.spec.Tolerations...), impliedTolerations(w)...)
	return p
}

// impliedTolerations are the tolerations the pod gets without asking:
// the DefaultTolerationSeconds admission plugin (on by default) adds
// not-ready and unreachable NoExecute ones to every pod
// (plugin/pkg/admission/defaulttolerationseconds), and the DaemonSet
// controller adds those of a node's conditions to its pods
// (pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations), so a
// DaemonSet runs on a cordoned or pressured node.
func impliedTolerations(w workload) []corev1.Toleration {
	out := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	}
	if w.kind != "DaemonSet" {
		return out
	}
	for _, k := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		out = append(out, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	for _, k := range []string{corev1.TaintNodeDiskPressure, corev1.TaintNodeMemoryPressure, corev1.TaintNodePIDPressure, corev1.TaintNodeUnschedulable} {
		out = append(out, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	if w.spec.HostNetwork {
		out = append(out, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// need is one extended resource the pod asks for, as the scheduler's
// NodeResourcesFit counts it: the sum over the containers, or the largest
// init container's if that is more (a restartable init container, a
// sidecar, runs beside the containers and adds to the sum; the sidecars
// started before a regular init container also add to that one's, which
// is not counted here: the need can come out lower, never higher). An extended
// resource's request equals its limit (the API server's validation), so a
// limit alone is the request.
type need struct {
	name corev1.ResourceName
	q    resource.Quantity
	path string // a field path that asks for it
}

func needs(w workload) []need {
	quantity := func(r corev1.ResourceRequirements, n corev1.ResourceName) (resource.Quantity, bool) {
		if q, ok := r.Requests[n]; ok {
			return q, true
		}
		q, ok := r.Limits[n]
		return q, ok
	}
	sum := map[corev1.ResourceName]*resource.Quantity{}
	initMax := map[corev1.ResourceName]resource.Quantity{}
	paths := map[corev1.ResourceName]string{}
	names := func(r corev1.ResourceRequirements) []corev1.ResourceName {
		seen := map[corev1.ResourceName]bool{}
		var out []corev1.ResourceName
		for _, l := range []corev1.ResourceList{r.Limits, r.Requests} {
			for _, n := range sortedNames(l) {
				if isExtended(n) && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
		return out
	}
	add := func(n corev1.ResourceName, q resource.Quantity, path string) {
		if sum[n] == nil {
			sum[n] = &resource.Quantity{}
		}
		sum[n].Add(q)
		if paths[n] == "" {
			paths[n] = path
		}
	}
	for i, c := range w.spec.Containers {
		for _, n := range names(c.Resources) {
			q, _ := quantity(c.Resources, n)
			add(n, q, fmt.Sprintf("%s.containers[%d].resources", w.specPath, i))
		}
	}
	for i, c := range w.spec.InitContainers {
		for _, n := range names(c.Resources) {
			q, ok := quantity(c.Resources, n)
			if !ok {
				continue
			}
			p := fmt.Sprintf("%s.initContainers[%d].resources", w.specPath, i)
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				add(n, q, p)
				continue
			}
			if m, ok := initMax[n]; !ok || q.Cmp(m) > 0 {
				initMax[n] = q
				if paths[n] == "" {
					paths[n] = p
				}
			}
		}
	}
	var out []need
	for n, q := range initMax {
		if sum[n] == nil || q.Cmp(*sum[n]) > 0 {
			sum[n] = &q
		}
	}
	for n, q := range sum {
		if q.Sign() > 0 {
			out = append(out, need{name: n, q: *q, path: paths[n]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// nodeRules: which nodes the scheduler could put the pod on, as its
// filters decide from the pod and the Node objects alone: NodeAffinity
// (nodeSelector and required node affinity, with the scheduler's own
// matcher, component-helpers' nodeaffinity), NodeResourcesFit (the
// extended resources against status.allocatable; what other pods hold
// already is not counted here: the question is whether any node could
// ever fit it), TaintToleration (NoSchedule and NoExecute taints).
func (l *linter) nodeRules(w workload) {
	ns := needs(w)
	selects := len(w.spec.NodeSelector) > 0 ||
		w.spec.Affinity != nil && w.spec.Affinity.NodeAffinity != nil && w.spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
	if !selects && len(ns) == 0 {
		return
	}
	if w.spec.NodeName != "" {
		// Bound to a node by name: no scheduler filter runs (the
		// kubelet's admission judges it on that node).
		return
	}
	c := l.cluster
	if c.NodesErr != nil {
		if selects {
			l.notRun(w.subject, w.source, CodeClusterNoNodeMatches, "nodes", c.NodesErr)
		}
		if len(ns) > 0 {
			l.notRun(w.subject, w.source, CodeClusterResourceNotAdvertised, "nodes", c.NodesErr)
			l.notRun(w.subject, w.source, CodeClusterTaintNotTolerated, "nodes", c.NodesErr)
		}
		return
	}
	pod := podOf(w)
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	var matching []*corev1.Node
	var affErr error
	for i := range c.Nodes {
		ok, err := aff.Match(&c.Nodes[i])
		if err != nil && affErr == nil {
			affErr = err
		}
		if ok {
			matching = append(matching, &c.Nodes[i])
		}
	}
	if selects && len(matching) == 0 {
		ev := []report.Evidence{{Path: "nodes", Value: fmt.Sprintf("%d in the cluster, none matches", len(c.Nodes))}}
		if len(w.spec.NodeSelector) > 0 {
			ev = append(ev, report.Evidence{Path: w.specPath + ".nodeSelector", Value: selectorString(w.spec.NodeSelector)})
		}
		if w.spec.Affinity != nil && w.spec.Affinity.NodeAffinity != nil && w.spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			ev = append(ev, report.Evidence{Path: w.specPath + ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
				Value: fmt.Sprintf("%d term(s)", len(w.spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms))})
		}
		if affErr != nil {
			ev = append(ev, report.Evidence{Path: "node affinity", Value: affErr.Error()})
		}
		l.add(w, CodeClusterNoNodeMatches,
			fmt.Sprintf("no node of the %d in the cluster matches the pod's nodeSelector and required node affinity: the scheduler reports \"didn't match Pod's node affinity/selector\"", len(c.Nodes)), ev)
		return
	}
	if len(ns) == 0 {
		return
	}
	// Nodes that fit every extended resource, among those the selector
	// admits.
	fits := matching
	for _, n := range ns {
		var advertise, enough, enoughHere int
		var most resource.Quantity
		next := fits[:0:0]
		for i := range c.Nodes {
			a, ok := c.Nodes[i].Status.Allocatable[n.name]
			if ok && a.Sign() > 0 {
				advertise++
			}
			if ok && a.Cmp(most) > 0 {
				most = a
			}
			if ok && a.Cmp(n.q) >= 0 {
				enough++
			}
		}
		for _, node := range fits {
			if a, ok := node.Status.Allocatable[n.name]; ok && a.Cmp(n.q) >= 0 {
				next = append(next, node)
				enoughHere++
			}
		}
		fits = next
		var summary string
		switch {
		case advertise == 0:
			summary = fmt.Sprintf("the pod needs %s %s and no node of the %d advertises it (status.allocatable): the scheduler reports \"Insufficient %s\"", n.q.String(), n.name, len(c.Nodes), n.name)
		case enough == 0:
			summary = fmt.Sprintf("the pod needs %s %s and no node has that many allocatable (the most is %s, on %d node(s) advertising it)", n.q.String(), n.name, most.String(), advertise)
		case enoughHere == 0:
			summary = fmt.Sprintf("the pod needs %s %s: %d node(s) have it allocatable, none of them one that the pod's nodeSelector or node affinity admits", n.q.String(), n.name, enough)
		default:
			continue
		}
		l.add(w, CodeClusterResourceNotAdvertised, summary,
			[]report.Evidence{{Path: n.path, Value: fmt.Sprintf("%s: %s for the pod", n.name, n.q.String())},
				{Path: "nodes", Value: fmt.Sprintf("%d in the cluster, %d advertise %s, %d with at least %s", len(c.Nodes), advertise, n.name, enough, n.q.String())}})
		return
	}
	if len(fits) == 0 {
		return
	}
	// TaintToleration, with the scheduler's own matcher: a NoSchedule or
	// NoExecute taint no toleration matches keeps the pod off the node.
	// Lt/Gt tolerations are matched as if the comparison-operator
	// feature were on: where it is off they tolerate nothing, and this
	// rule then misses a taint rather than invent one.
	blocking := map[string]int{}
	for _, node := range fits {
		t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, true)
		if !untolerated {
			return
		}
		blocking[taintString(t)]++
	}
	var ts []string
	for t, n := range blocking {
		ts = append(ts, fmt.Sprintf("%s (%d node(s))", t, n))
	}
	sort.Strings(ts)
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = string(n.name)
	}
	l.add(w, CodeClusterTaintNotTolerated,
		fmt.Sprintf("each of the %d node(s) that could fit the pod's %s carries a taint it does not tolerate: %s; the scheduler reports \"had untolerated taint\"", len(fits), strings.Join(names, ", "), strings.Join(ts, ", ")),
		[]report.Evidence{{Path: w.specPath + ".tolerations", Value: fmt.Sprintf("%d", len(w.spec.Tolerations))}, {Path: "nodes", Value: strings.Join(ts, ", ")}})
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

func selectorString(m map[string]string) string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
