package catalog

// Claim is the catalog of `claim` (internal/claim), in report order.
// Status is the outcome a code is reported with; Facts names the API
// fields it is decided from.
var Claim = []Code{{
	Code:   "CLAIM_ALLOCATED",
	Status: "PASS",
	Title:  "the claim is allocated",
	Explain: `The claim's status.allocation is set: the scheduler chose its devices (and, for
node-local devices, its node). The evidence names each request's device and the pods the
claim is reserved for.`,
	Facts: "ResourceClaim.status.allocation, status.reservedFor",
}, {
	Code:   "CLAIM_ALLOCATABLE",
	Status: "PASS",
	Title:  "the claim is not allocated yet, and a node has the devices it asks for",
	Explain: `Every request has, on some node, enough free devices that pass its DeviceClass's and
its own selectors. The scheduler allocates a claim when it schedules the first pod that uses
it: a claim no pod uses stays unallocated.`,
	Remediation: "Look at the pod that should use it: `kubectl describe pod POD` (its resourceClaims and events).",
	Facts:       "DeviceClass.spec.selectors, ResourceClaim.spec.devices.requests, ResourceSlice.spec.devices",
}, {
	Code:   "CLAIM_CLASS_MISSING",
	Status: "FAIL",
	Title:  "a request names a DeviceClass that does not exist",
	Explain: `The scheduler cannot allocate a request whose deviceClassName is not a DeviceClass:
it says "request R: device class C does not exist" and the pod stays Pending. The class is
usually created by the DRA driver's Helm chart; a typo or a driver that is not installed
leaves it missing.`,
	Remediation: "`kubectl get deviceclasses`; install the driver's classes or fix deviceClassName in the claim (or its ResourceClaimTemplate).",
	Facts:       "ResourceClaim.spec.devices.requests[].exactly.deviceClassName, DeviceClass",
}, {
	Code:   "CLAIM_SELECTOR_ERROR",
	Status: "FAIL",
	Title:  "a selector does not compile or fails at run time on a device",
	Explain: `A CEL selector of the class or the request does not compile, or evaluating it on a
device fails (most often a missing attribute or capacity: "no such key"). The scheduler's
allocator stops at such an error and places the pod nowhere, even when other devices would match.`,
	Remediation: "Guard lookups of attributes and capacities that not every device has (`'memory' in device.capacity['DRIVER']`) and fix the expression.",
	Facts:       "DeviceClass.spec.selectors[].cel.expression, ResourceClaim.spec.devices.requests[].exactly.selectors[].cel.expression",
}, {
	Code:   "CLAIM_NO_MATCHING_DEVICE",
	Status: "FAIL",
	Title:  "no device of any ResourceSlice passes the request's selectors",
	Explain: `Every device of every ResourceSlice (the current generation of each pool) is excluded
by a selector of the DeviceClass or of the request; the evidence names, per device, the first
selector (class or request, by index and expression) that is false, and marks selectors that
read device.capacity. The scheduler says "cannot allocate all claims". No ResourceSlice at all
(no driver publishes devices) is this case too.`,
	Remediation: "Compare the selector with the devices' attributes and capacities: `kubectl get resourceslices -o yaml`; fix the selector or the class.",
	Facts:       "ResourceSlice.spec.devices[].attributes, .capacity; DeviceClass and request selectors",
}, {
	Code:   "CLAIM_TOO_MANY_DEVICES",
	Status: "FAIL",
	Title:  "the request asks for more devices than any one node has that match",
	Explain: `Devices match, but no node sees as many of them as the request's count (allocationMode
ExactCount): a claim's devices come from the pools of one node (plus pools available on all
nodes). The scheduler says "cannot allocate all claims".`,
	Remediation: "Lower the count, or split the workload; `kubectl get resourceslices --field-selector spec.nodeName=NODE` shows what a node has.",
	Facts:       "ResourceClaim.spec.devices.requests[].exactly.count, allocationMode; ResourceSlice.spec.nodeName",
}, {
	Code:   "CLAIM_DEVICES_IN_USE",
	Status: "FAIL",
	Title:  "enough devices match, but other claims hold them",
	Explain: `Some node has enough matching devices, but the allocated devices of other claims
(status.allocation) leave fewer free than the request asks for (for allocationMode All: any
matching device in use). The claim is allocated when those claims are deallocated.`,
	Remediation: "`kubectl get resourceclaims -A` shows which claims hold the devices; delete pods or claims that no longer need them.",
	Facts:       "ResourceClaim.status.allocation.devices.results of the other claims",
}, {
	Code:   "CLAIM_ALLOCATOR_DISAGREES",
	Status: "WARN",
	Title:  "the scheduler's allocator, run offline on the same objects, came to another answer",
	Explain: `accel-doctor ran k8s.io/dynamic-resource-allocation/structured, the allocator the
scheduler uses, on the listed slices, classes and claims, node by node. Its answer differs from
the per-selector explanation: something the explanation does not evaluate decides (constraints
such as matchAttribute, the node selector of a slice, which the explanation counts for every node).
Trust the allocator's answer. Neither evaluates device taints, partitionable devices' counters or
consumable capacity: a scheduler with those features may still disagree with both.`,
	Remediation: "Look at the claim's constraints and the slices' taints and counters: `kubectl get resourceslices -o yaml`.",
	Facts:       "the structured allocator's result per node",
}, {
	Code:   "CLAIM_ALLOCATOR_NOT_RUN",
	Status: "NOT_RUN",
	Title:  "the allocator could not be run offline",
	Explain: `The allocator places claims on nodes; without the Node objects (no permission to list
them, or none listed) it did not run and the explanation is not confirmed.`,
	Remediation: "The finding's fix follows from why: the LIST of nodes's error (an API server not reached, 401 credentials, 403 the list verb on nodes), or none listed.",
	Facts:       "Node objects",
}, {
	Code:   "CLAIM_NOT_READ",
	Status: "NOT_RUN",
	Title:  "the claim or the objects to explain it could not be read",
	Explain: `GET of the claim, or a LIST of DeviceClasses, ResourceSlices or ResourceClaims, failed
(permission, the resource.k8s.io/v1 API not served before Kubernetes 1.34, or the claim does
not exist). Nothing is concluded.`,
	Remediation: "The finding's fix follows from the API server's answer: not reached (its address and context in the kubeconfig), 401 (the credentials), 403 (the get or list verb named), 404 (the claim's name and namespace, or an API server before Kubernetes 1.34).",
	Facts:       "the API server's answers",
}}
