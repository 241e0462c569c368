package catalog

// Cluster is the catalog of `cluster` (internal/cluster), in report
// order; docs/cluster.md shows it. Status is the outcome a code is
// reported with; Facts names the API fields it is decided from.
var Cluster = []Code{{
	Code:   "CLUSTER_NODE_OK",
	Status: "PASS",
	Title:  "the node's extended resources are all allocatable and nothing else on the node is wrong",
	Explain: `Every extended resource of the node (a name with a domain outside kubernetes.io,
as the API server's IsExtendedResourceName defines it) has allocatable equal to capacity,
its device-plugin and DRA-driver pods are Ready, its hardware labels have a resource, and
its agent's summary reports no FAIL. The evidence lists each resource's capacity and
allocatable.`,
	Facts: "Node.status.capacity, Node.status.allocatable",
}, {
	Code:   "CLUSTER_RESOURCE_UNALLOCATABLE",
	Status: "FAIL when allocatable is 0, WARN when only some are allocatable",
	Title:  "an extended resource's allocatable is below its capacity: devices the kubelet counts are not usable",
	Explain: `The kubelet's device manager sets capacity to the devices a plugin registered
and allocatable to the Healthy ones (GetCapacity in pkg/kubelet/cm/devicemanager). A gap
is devices the plugin reports Unhealthy, or a plugin whose connection the kubelet lost
(its devices become unhealthy at once, and are removed after 5 minutes). With
allocatable 0 no pod asking for the resource can be placed on the node: the scheduler
says "Insufficient RESOURCE".`,
	Remediation: "Look at the node's plugin: `kubectl -n NAMESPACE logs PLUGIN-POD`, and on the node `accel-doctor check --layer kube`; then the devices themselves (`accel-doctor check`).",
	Facts:       "Node.status.capacity[r] > Node.status.allocatable[r]",
}, {
	Code:   "CLUSTER_HARDWARE_NOT_ADVERTISED",
	Status: "WARN",
	Title:  "the node has accelerator hardware but advertises no resource for it",
	Explain: `Node Feature Discovery labelled the node feature.node.kubernetes.io/pci-<class>_<vendor>.present
for an accelerator PCI class (03xx display, 0b40 co-processor, 12xx processing accelerator),
or accel-doctor's agent counted accelerators in its summary annotation, and the node has no
extended resource of that vendor's device plugin (nvidia.com/, amd.com/, gpu.intel.com/, habana.ai/;
any extended resource for another vendor) with a capacity above 0. Pods asking for it cannot
be placed there. The usual causes: no device-plugin pod on the node (the DaemonSet's node selector
or tolerations leave it out), a plugin that failed to register, or a driver that is not loaded.
A WARN, not a FAIL: a DRA driver may publish the devices as ResourceSlices instead, which this
command does not read (` + "`accel-doctor dra`" + ` does: it names accelerator nodes without a slice).`,
	Remediation: "Check that the device-plugin DaemonSet has a pod on the node (`kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`) and run `accel-doctor check` on the node.",
	Facts:       "Node.metadata.labels[feature.node.kubernetes.io/pci-*.present], Node.metadata.annotations[accel-doctor.io/summary].accelerators, Node.status.capacity",
}, {
	Code:   "CLUSTER_PLUGIN_POD_NOT_READY",
	Status: "FAIL",
	Title:  "a device-plugin or DRA-driver pod on the node is not Ready",
	Explain: `A pod of a DaemonSet that mounts the kubelet's device-plugin directory
(/var/lib/kubelet/device-plugins), its plugin-registration directory
(/var/lib/kubelet/plugins_registry) or the DRA plugins directory (/var/lib/kubelet/plugins),
and whose containers ask for no extended resource (or a DaemonSet of a known plugin's name),
has a Ready condition that is not True. While it is not Ready the node's resource is not
being served: registration, health updates and Allocate all go through it.`,
	Remediation: "`kubectl -n NAMESPACE describe pod POD` and `kubectl -n NAMESPACE logs POD` (add --previous after a restart).",
	Facts:       "Pod.metadata.ownerReferences[kind=DaemonSet], Pod.spec.volumes[].hostPath, Pod.status.conditions[Ready]",
}, {
	Code:   "CLUSTER_PENDING_INSUFFICIENT",
	Status: "WARN",
	Title:  "pods are Pending because no node has enough of a resource",
	Explain: `The scheduler's NodeResourcesFit filter rejected every node for these pods with
"Insufficient RESOURCE" (the PodScheduled condition and the FailedScheduling event say
"0/N nodes are available: M Insufficient RESOURCE"): no node has that much allocatable left.
For an extended resource, see CLUSTER_RESOURCE_UNALLOCATABLE and CLUSTER_HARDWARE_NOT_ADVERTISED
on the nodes meant to have it.`,
	Remediation: "Compare the pods' requests with the nodes' allocatable (`kubectl describe node`), and fix the nodes this report names.",
	Facts:       "Pod.status.conditions[PodScheduled].message, Event[reason=FailedScheduling].message",
}, {
	Code:   "CLUSTER_PENDING_CLAIMS",
	Status: "WARN",
	Title:  "pods are Pending because their ResourceClaims cannot be allocated",
	Explain: `The scheduler's DynamicResources plugin found, on every node it tried, that the
pod's ResourceClaims cannot all be allocated from the node's ResourceSlices ("cannot allocate
all claims"): no device matches the claim's DeviceClass and selectors, or the matching ones are
taken.`,
	Remediation: "`kubectl get resourceslices`, `kubectl describe resourceclaim CLAIM`; compare the claim's selectors with the devices' attributes.",
	Facts:       "Pod.status.conditions[PodScheduled].message, Event[reason=FailedScheduling].message",
}, {
	Code:   "CLUSTER_PENDING_TAINT",
	Status: "WARN",
	Title:  "pods are Pending because nodes have taints the pods do not tolerate",
	Explain: `The scheduler's TaintToleration filter rejected nodes: "node(s) had untolerated taint(s)".
Accelerator nodes are often tainted (nvidia.com/gpu:NoSchedule) so that only pods asking for
the device land there; a pod that asks for it must tolerate the taint.`,
	Remediation: "Add the toleration to the pod (`kubectl describe node NODE` shows the taints), or remove the taint: `kubectl taint nodes NODE KEY-`.",
	Facts:       "Pod.status.conditions[PodScheduled].message, Event[reason=FailedScheduling].message",
}, {
	Code:        "CLUSTER_PENDING_OTHER",
	Status:      "WARN",
	Title:       "pods are Pending for another reason the scheduler gave",
	Explain:     `The scheduler rejected the pods for a reason that is not about a resource, a claim or a taint (node affinity, volumes, ports, a PreFilter plugin). The subject is its own words.`,
	Remediation: "`kubectl describe pod POD` shows the scheduler's message in full.",
	Facts:       "Pod.status.conditions[PodScheduled].message, Event[reason=FailedScheduling].message",
}, {
	Code:   "CLUSTER_PENDING_NO_VERDICT",
	Status: "WARN",
	Title:  "pods are Pending with no node and no word from the scheduler",
	Explain: `The pods have no node, no PodScheduled condition that says why, and no
FailedScheduling event: the scheduler has not tried them yet, the events expired (the API
server keeps events an hour by default, --event-ttl), or they name a scheduler that is not
running (spec.schedulerName).`,
	Remediation: "Check that the scheduler runs (`kubectl -n kube-system get pods`) and the pods' spec.schedulerName.",
	Facts:       "Pod.status.phase == Pending, Pod.spec.nodeName == \"\"",
}, {
	Code:   "CLUSTER_AGENT_FAIL",
	Status: "FAIL",
	Title:  "accel-doctor's agent on the node reports a FAIL",
	Explain: `The node's accel-doctor.io/summary annotation, written by accel-doctor's agent after its
last check of the node, has status FAIL; the finding names the first failing layer and the
code, and the time of the check.`,
	Remediation: "`accel-doctor explain CODE`; on the node, `accel-doctor check` shows the evidence.",
	Facts:       "Node.metadata.annotations[accel-doctor.io/summary]",
}, {
	Code:        "CLUSTER_AGENT_SUMMARY_INVALID",
	Status:      "WARN",
	Title:       "the node's accel-doctor.io/summary annotation cannot be read",
	Explain:     `The annotation is not a summary this accel-doctor understands (not JSON, another schema version, a FAIL without its layer and code). Its verdict is not used.`,
	Remediation: "Run the same accel-doctor version as the agent; `kubectl get node NODE -o jsonpath='{.metadata.annotations.accel-doctor\\.io/summary}'` shows the value.",
	Facts:       "Node.metadata.annotations[accel-doctor.io/summary]",
}, {
	Code:        "CLUSTER_AGENT_SUMMARY_STALE",
	Status:      "WARN",
	Title:       "the agent's last check of the node is too old to say what the node is now",
	Explain:     `The summary's time is more than 3 of its interval_s ago (the agent's --heartbeat: a running agent writes its summary at least once a heartbeat, even when nothing changed; 60 s when an older agent does not say). So the agent's pod is gone, crash-looping, or cannot reach the API server. The summary's verdict, PASS or FAIL, is of a node as it was then: it is shown, and not used.`,
	Remediation: "Look at the agent's pod on the node: `kubectl -n accel-doctor get pods -o wide --field-selector spec.nodeName=NODE`, then `kubectl -n accel-doctor logs POD`.",
	Facts:       "Node.metadata.annotations[accel-doctor.io/summary].time older than 3 x interval_s",
}, {
	Code:   "CLUSTER_LIST_FAILED",
	Status: "NOT_RUN",
	Title:  "a LIST could not be read: what depends on it was not judged",
	Explain: `The API server refused or failed a LIST (RBAC: the command needs list on nodes,
pods and events; a timeout; an expired continue token on a very large list). The findings
that need those objects are missing; the others stand.`,
	Remediation: "The finding's fix follows from the LIST's error: an API server not reached (refused, no route, TLS): its address and the context in the kubeconfig; 401: the credentials; 403: the RBAC verbs (list on nodes, pods and events); a timeout: its health, then again.",
	Facts:       "the LIST's error",
}}
