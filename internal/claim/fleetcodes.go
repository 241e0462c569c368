package claim

// FleetCodes is the catalog of `accel-doctor dra`, in report order.
var FleetCodes = []Code{{
	Code:   "DRA_FLEET_OK",
	Status: "PASS",
	Title:  "every accelerator node has a ResourceSlice, every pool is whole and of one generation, no pod waits on a claim",
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
	Code:   "DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN",
	Status: "NOT_RUN",
	Title:  "whether each slice's driver is registered with its node's kubelet could not be read",
	Explain: `A slice outlives its driver for a while; the kubelet's plugin registration is node-local and not
in the API. accel-doctor's agent summary (v1) does not yet carry the node's registered DRA drivers,
so this is not judged from the cluster.`,
	Remediation: "Run `accel-doctor check --layer kube` on the node.",
	Facts:       "Node.metadata.annotations[accel-doctor.io/summary]",
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
	Remediation: "Grant list on nodes, pods, resourceslices and resourceclaims.",
	Facts:       "the API server's answers",
}}

func fleetCodeOf(code string) (Code, bool) {
	for _, c := range FleetCodes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
