package catalog

// Fleet is the catalog of `dra` (internal/claim's Fleet), in report
// order.
var Fleet = []Code{{
	Code:   "DRA_FLEET_OK",
	Status: "PASS",
	Title:  "every accelerator node has a ResourceSlice, every pool is whole and of one generation, no slice's driver is known to be unregistered, no pod waits on a claim",
	Explain: `No finding below applies: the nodes that NFD's labels or accel-doctor's agent say have
accelerators are named by a ResourceSlice, each pool's slices are of one generation and as many as
its resourceSliceCount, and no Pending pod references a ResourceClaim.`,
	Facts: "Node labels and annotations, ResourceSlice.spec, Pod.spec.resourceClaims",
}, {
	Code:   "DRA_FLEET_NODE_NO_SLICE",
	Status: "WARN",
	Title:  "a node has accelerator hardware but no ResourceSlice names it",
	Explain: `Node Feature Discovery labelled the node feature.node.kubernetes.io/pci-<class>_<vendor>.present
for an accelerator class, or accel-doctor's agent counted accelerators on it, and no ResourceSlice
has spec.nodeName set to it: no DRA driver publishes its devices, and a claim cannot get them. A
WARN: the node's devices may be served by a device plugin instead (accel-doctor cluster
reports those), and a driver may publish through a node selector.`,
	Remediation: "Check the DRA driver's DaemonSet has a pod on the node (`kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`) and run `accel-doctor check --layer kube` there.",
	Facts:       "Node.metadata.labels, Node.metadata.annotations[accel-doctor.io/summary], ResourceSlice.spec.nodeName",
}, {
	Code:   "DRA_FLEET_POOL_GENERATIONS",
	Status: "WARN",
	Title:  "a pool's slices are of different generations",
	Explain: `A driver bumps spec.pool.generation when it republishes a pool; the allocator uses only the
slices of the newest generation (structured's pool gathering) and ignores the rest. Slices of an
older generation that stay are left from a driver that stopped in the middle of an update (a
DaemonSet rollout): their devices are invisible to the scheduler.`,
	Remediation: "`kubectl get resourceslices -o yaml` for the pool; restart the driver's pod on the node, or delete the stale slices.",
	Facts:       "ResourceSlice.spec.pool.name, .generation",
}, {
	Code:   "DRA_FLEET_POOL_INCOMPLETE",
	Status: "WARN",
	Title:  "a pool's newest generation has not as many slices as its resourceSliceCount",
	Explain: `Each slice of a pool says how many slices the pool's generation has (resourceSliceCount). Fewer
listed means the pool is incomplete: the allocator cannot allocate "All" requests from it and may
place claims on a partial view; more means two publishers write the same pool.`,
	Remediation: "Look at the driver's logs on the pool's node; `kubectl get resourceslices --field-selector spec.driver=DRIVER`.",
	Facts:       "ResourceSlice.spec.pool.resourceSliceCount",
}, {
	Code:   "DRA_FLEET_DRIVER_NOT_REGISTERED",
	Status: "WARN",
	Title:  "a node's ResourceSlices are of a DRA driver that is not registered with its kubelet",
	Explain: `The kubelet's plugin registration is node-local and not in the API; accel-doctor's agent
publishes, in its summary annotation (v2 on), the DRA drivers its last check found registered (a
registration socket answering GetInfo as a DRAPlugin of a supported version, whose endpoint accepts
connections). A slice with spec.nodeName naming the node and spec.driver not among them advertises
devices that the scheduler can allocate and that no driver on the node will prepare: the pods stay
in ContainerCreating with "DRA driver NAME is not registered". A WARN, not a FAIL: the summary is of
the agent's last check and the LIST is of now, and the kubelet deletes a driver's slices only about
30 s after it goes away (a restarting driver, or one registered after the check, looks the same for
a while). The evidence gives the summary's time and the drivers it lists.`,
	Remediation: "Find the driver's pod on the node (`kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`) and run `accel-doctor check --layer kube` there, which says why it is not registered (DRA_DRIVER_NOT_REGISTERED, DRA_REGISTRATION_DEAD, DRA_UNSUPPORTED_VERSION); a slice left by a driver removed for good: `kubectl delete resourceslice NAME`.",
	Facts:       "ResourceSlice.spec.nodeName, .driver; Node.metadata.annotations[accel-doctor.io/summary].dra.drivers",
}, {
	Code:   "DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN",
	Status: "NOT_RUN",
	Title:  "whether a slice's driver is registered with its node's kubelet is not known",
	Explain: `The join of a slice with its node's DRA registrations needs the node's accel-doctor agent
summary of version 2 or later, whose check could read the kubelet's plugins_registry. Nodes without a
summary, with a version-1 summary (an older agent), with one that does not read, or whose check could
not judge the registrations are NOT_RUN for their slices, one finding per reason with the nodes.
Slices without spec.nodeName (a nodeSelector, allNodes: network-attached devices a controller
publishes) have no one node whose registration would say.`,
	Remediation: "Run accel-doctor's agent (v2 summary) on the nodes (`kubectl -n accel-doctor get daemonset`), or `accel-doctor check --layer kube` on the node.",
	Facts:       "Node.metadata.annotations[accel-doctor.io/summary] (absent, v1, unreadable, dra.not_run), ResourceSlice.spec.nodeName unset",
}, {
	Code:   "DRA_FLEET_PENDING_ON_CLAIM",
	Status: "WARN",
	Title:  "pending pods wait on a ResourceClaim",
	Explain: `Pods that are not bound to a node and reference a ResourceClaim (by name, or the claim the
resourceclaim controller generated from a template), grouped by that claim. Whether the claim is
allocated, or exists, says where to look next.`,
	Remediation: "`accel-doctor claim NAMESPACE/NAME` explains why the claim is not allocated.",
	Facts:       "Pod.spec.resourceClaims, Pod.status.resourceClaimStatuses, ResourceClaim.status.allocation",
}, {
	Code:   "DRA_FLEET_LIST_FAILED",
	Status: "NOT_RUN",
	Title:  "a LIST failed",
	Explain: `A LIST of nodes, pending pods, resourceslices or resourceclaims failed (permission; the
resource.k8s.io/v1 API is served from Kubernetes 1.34). What the others show stands.`,
	Remediation: "The finding's fix follows from the LIST's error: not reached (the kubeconfig's server and context), 401 (the credentials), 403 (list on nodes, pods, resourceslices and resourceclaims), a timeout (the API server's health).",
	Facts:       "the API server's answers",
}}
