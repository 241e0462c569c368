package catalog

// The codes `lint` reports (internal/lint), in the order the rules run.
const (
	LintClean                = "LINT_CLEAN"
	LintRequestWithoutLimit  = "LINT_EXTENDED_REQUEST_WITHOUT_LIMIT"
	LintRequestNotLimit      = "LINT_EXTENDED_REQUEST_NOT_LIMIT"
	LintNotInteger           = "LINT_EXTENDED_NOT_INTEGER"
	LintVisibleDevicesNoGPU  = "LINT_VISIBLE_DEVICES_WITHOUT_GPU"
	LintPrivilegedGPU        = "LINT_PRIVILEGED_GPU"
	LintRuntimeClassNoGPU    = "LINT_NVIDIA_RUNTIMECLASS_WITHOUT_GPU"
	LintNoToleration         = "LINT_GPU_WITHOUT_TOLERATION"
	LintPluginAndDRA         = "LINT_PLUGIN_AND_DRA_SAME_VENDOR"
	LintHostPathDevice       = "LINT_HOSTPATH_DEVICE_NODE"
	LintHostPathDeviceBeside = "LINT_HOSTPATH_DEVICE_NODE_BESIDE_RESOURCE"
	LintHostPathDevWritable  = "LINT_HOSTPATH_DEV_WRITABLE"
	LintVFIOWithoutIPCLock   = "LINT_VFIO_WITHOUT_IPC_LOCK"

	// The cluster rules (lint --cluster): they need the API server.
	LintClusterRuntimeClassMissing   = "LINT_CLUSTER_RUNTIMECLASS_MISSING"
	LintClusterDeviceClassMissing    = "LINT_CLUSTER_DEVICECLASS_MISSING"
	LintClusterNoNodeMatches         = "LINT_CLUSTER_NO_NODE_MATCHES"
	LintClusterResourceNotAdvertised = "LINT_CLUSTER_RESOURCE_NOT_ADVERTISED"
	LintClusterTaintNotTolerated     = "LINT_CLUSTER_TAINT_NOT_TOLERATED"

	LintKindSkipped       = "LINT_KIND_SKIPPED"
	LintNotAnObject       = "LINT_NOT_AN_OBJECT"
	LintDocumentMalformed = "LINT_DOCUMENT_MALFORMED"
	LintDocumentTooLarge  = "LINT_DOCUMENT_TOO_LARGE"
)

// Lint is the catalog of `lint`'s rules, in rule order; docs/lint.md
// tabulates it.
//
// The statuses follow one policy. FAIL: the API server (or kubectl)
// rejects the object, which the manifest alone decides. WARN: the object
// runs, but isolation or scheduling is not what the manifest says, or the
// outcome depends on something an offline linter cannot see (a taint, the
// node's runtime and its hooks, the image's environment). PASS: no rule
// fired. NOT_RUN: the document was not a workload the rules read (an
// object of another kind, or no Kubernetes object at all).
var Lint = []Code{{
	Code:   LintClean,
	Status: "PASS",
	Title:  "no lint rule fired on this workload",
	Explain: `The workload (a Pod, or the pod template of a Deployment, StatefulSet,
DaemonSet, ReplicaSet, Job or CronJob) was decoded with the Kubernetes 1.37 types
and every container, init container and ephemeral container was read by every rule
of this catalog; none fired. Lint sees only the manifest: whether the cluster has
the RuntimeClass, the device class, the nodes and the taints it assumes is not
checked offline.`,
}, {
	Code:   LintRequestWithoutLimit,
	Status: "FAIL",
	Title:  "an extended resource is in requests but not in limits: the API server rejects the pod",
	Explain: `Extended resources (a name with a domain outside kubernetes.io, such as
nvidia.com/gpu) cannot be overcommitted. The API server's validation
(pkg/apis/core/validation, ValidateResourceRequirements) refuses a request with no
limit for them: "Limit must be set for non overcommitable resources". For a
Deployment or a Job the object is accepted but every pod its controller creates is
rejected, so no pod ever appears: the controller's events say why, the pod list
says nothing. A limit alone is enough: the request defaults to it.`,
	Remediation: "Move the quantity to limits (resources.limits, the request defaults to it), or set the same quantity in both; then `accel-doctor lint -f FILE` again.",
}, {
	Code:   LintRequestNotLimit,
	Status: "FAIL",
	Title:  "an extended resource's request differs from its limit: the API server rejects the pod",
	Explain: `For a resource that cannot be overcommitted (every extended resource), the
API server's validation (pkg/apis/core/validation, ValidateResourceRequirements)
requires the request to equal the limit: "must be equal to nvidia.com/gpu limit of
N". A device is given whole to one container; there is no burst above the request.
Pods that carry such a spec are rejected at creation.`,
	Remediation: "Set only resources.limits for the device resource (the request defaults to it), or make the two quantities equal.",
}, {
	Code:   LintNotInteger,
	Status: "FAIL",
	Title:  "an extended resource is given a fractional quantity: the API server rejects the pod",
	Explain: `Extended resources are counted in whole units: the API server's validation
(ValidateResourceQuantityValue, IsIntegerResourceName) rejects "0.5" or "500m" of
nvidia.com/gpu with "must be an integer". Sharing one GPU between containers is
done by the device plugin (time-slicing, MPS, MIG: it advertises more or smaller
units), or by DRA, never by a fractional request.`,
	Remediation: "Request a whole number of devices; for a share of a GPU, request the shared or MIG resource the device plugin advertises (`kubectl describe node NODE` lists them under Allocatable).",
}, {
	Code:   LintVisibleDevicesNoGPU,
	Status: "WARN",
	Title:  "NVIDIA_VISIBLE_DEVICES is set on a container that requests no GPU: it bypasses the scheduler",
	Explain: `The NVIDIA container runtime hook (legacy mode of nvidia-container-toolkit)
gives a container the GPUs that NVIDIA_VISIBLE_DEVICES names: "all", indices or
UUIDs. A container that sets it itself, without requesting nvidia.com/gpu or a DRA
claim, gets those GPUs on whatever node it lands on, and the scheduler counts
nothing: it shares, unaccounted, GPUs given to other pods. Whether it works depends
on the node, which lint cannot see: a toolkit configured with
accept-nvidia-visible-devices-envvar-when-unprivileged = false ignores the
variable for unprivileged containers, and a node whose runtime is plain runc
(devices injected through CDI only) ignores it altogether. Hence WARN. The values "void", "none" and "" ask for no GPU and are
not flagged. Agents that watch every GPU (exporters, validators) set it on
purpose; they are usually privileged and say so.`,
	Remediation: "Request the GPU instead (resources.limits nvidia.com/gpu: 1, or a DRA claim) and remove NVIDIA_VISIBLE_DEVICES: the device plugin sets it to the GPUs it allocated.",
}, {
	Code:   LintPrivilegedGPU,
	Status: "WARN",
	Title:  "a privileged container requests a GPU: it sees every device of the node, not the one it was given",
	Explain: `For a privileged container the CRI runtimes add every device node of the
host and allow all devices in the device cgroup (containerd: oci.WithHostDevices
and WithAllDevicesAllowed when the security context is privileged; CRI-O does the
same). The device plugin's allocation then decides nothing: a pod charged one GPU
can open all of them, including the GPUs the kubelet gave to other pods, and
CUDA_VISIBLE_DEVICES-style narrowing is advisory. The pod runs, so this is a WARN,
but the node's GPU accounting is no longer true.`,
	Remediation: "Drop privileged: true; the GPU request alone gives the container its device nodes. If the container needs one capability (for example SYS_ADMIN for a profiler), add that capability instead.",
}, {
	Code:   LintRuntimeClassNoGPU,
	Status: "WARN",
	Title:  "the pod uses an NVIDIA RuntimeClass but requests no GPU: an image that sets NVIDIA_VISIBLE_DEVICES gets every GPU",
	Explain: `runtimeClassName nvidia (or nvidia-cdi, nvidia-legacy: the names the NVIDIA
GPU operator creates) runs the pod with the NVIDIA container runtime. With no GPU
request nothing narrows NVIDIA_VISIBLE_DEVICES, and the CUDA base images set
NVIDIA_VISIBLE_DEVICES=all in their image config: such a container gets every GPU
of the node, unaccounted by the scheduler. Lint cannot read the image offline,
nor whether the RuntimeClass exists (that needs the API server), hence WARN. Not
flagged when every container sets NVIDIA_VISIBLE_DEVICES to void or none, or when
the pod has a DRA claim.`,
	Remediation: "Request the GPU the pod needs (resources.limits nvidia.com/gpu, or a DRA claim), or drop runtimeClassName when it needs none; to run with the NVIDIA runtime and no GPU, set NVIDIA_VISIBLE_DEVICES=void.",
}, {
	Code:   LintNoToleration,
	Status: "WARN",
	Title:  "the pod requests an NVIDIA GPU but tolerates no nvidia.com/gpu taint: it stays Pending where GPU nodes are tainted",
	Explain: `GPU node pools are often tainted nvidia.com/gpu (GKE taints every GPU node
pool nvidia.com/gpu=present:NoSchedule) so that pods without GPUs stay off them. A
pod that requests nvidia.com/ resources and tolerates no such taint fails the
scheduler's TaintToleration filter on those nodes ("had untolerated taint
{nvidia.com/gpu: present}") and stays Pending. Clusters that enable the
ExtendedResourceToleration admission plugin (GKE does) add the toleration
{key: <resource>, operator: Exists, effect: NoSchedule} at admission for each
extended resource requested, and clusters whose GPU nodes carry no such taint need
none. Lint cannot see the taints offline, hence WARN. With --cluster, once the
nodes are read, this guess is not made: LINT_CLUSTER_TAINT_NOT_TOLERATED judges
their real taints.`,
	Remediation: "Add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}] to the pod template; `kubectl describe node NODE` shows the taints the GPU nodes carry.",
}, {
	Code:   LintPluginAndDRA,
	Status: "WARN",
	Title:  "the pod asks for the same vendor's devices through a device-plugin resource and a DRA claim",
	Explain: `The device plugin (extended resources such as nvidia.com/gpu) and a DRA
driver (ResourceClaims of a DeviceClass such as gpu.nvidia.com) each allocate the
node's devices with their own bookkeeping; neither knows what the other gave out,
so a node where both manage the same GPUs can hand one GPU to two pods. A pod
asking through both needs a node that runs both for the same vendor: it gets two
allocations that may overlap there, and fits no node that runs only one of them. Lint matches the claim's DeviceClass to a vendor only
when its ResourceClaim or ResourceClaimTemplate (resource.k8s.io/v1) is in the
same input; whether both drivers run on a node needs the API server. Hence WARN.`,
	Remediation: "Ask through one mechanism: keep the DRA claim and remove the device-plugin resource from resources.limits, or the other way round.",
}, {
	Code:   LintHostPathDevice,
	Status: "WARN",
	Title:  "an unprivileged container mounts an accelerator device node by hostPath and requests no device: the node is visible, its open() is refused",
	Explain: `A hostPath volume bind-mounts the node's file; it adds no device to the
container. The device cgroup (cgroup v1 devices.allow, or the cgroup v2
BPF_CGROUP_DEVICE program runc attaches) allows the runtime's default devices
(null, zero, full, random, urandom, tty, ptmx, pts; runc's specconv
AllowedDevices) and those a device plugin, a DRA driver or CDI asked for; the
kernel refuses the open of any other char device with EPERM
(security/device_cgroup.c, devcgroup_check_permission). The container sees
/dev/nvidia0 (or /dev/dri/renderD128, /dev/kfd, /dev/vfio/N, /dev/accel/accel0,
/dev/neuron0) and cannot use it: the layer-4 failure this tool diagnoses on a
running container. It is a WARN, not a FAIL, because one thing lint cannot see
changes the outcome: a vendor runtime hook on the node (the NVIDIA container
runtime in legacy mode, when it is the node's default runtime and the image's
NVIDIA_VISIBLE_DEVICES asks for GPUs; the Habana and Neuron hooks likewise) adds
the cgroup rule itself. Then the open works, and the container uses devices the
scheduler never gave it. Either way the manifest does not say what it means.`,
	Remediation: "Remove the hostPath volume and request the device resource (resources.limits, or a DRA claim): the plugin or the driver adds the node and its cgroup rule. On a running pod, `accel-doctor container --pod NAMESPACE/NAME` on its node shows the device rule that is missing.",
}, {
	Code:   LintHostPathDeviceBeside,
	Status: "WARN",
	Title:  "a container mounts an accelerator device node by hostPath beside a device request: only the allocated devices open",
	Explain: `The container requests a device resource or a DRA claim, so the runtime
allows the devices that were allocated to it; the hostPath mount of a device node
works only if that node is one of them (the device cgroup matches by major:minor,
not by path), and fails with EPERM otherwise (security/device_cgroup.c). Which
device the plugin allocates is decided at admission on the node, so lint cannot
tell: WARN. The mount is redundant at best, since the plugin or the CDI spec
injects the nodes it allocated.`,
	Remediation: "Remove the hostPath volume: the device plugin or the DRA driver injects the nodes of the devices it allocated.",
}, {
	Code:   LintHostPathDevWritable,
	Status: "WARN",
	Title:  "the host's whole /dev is mounted writable by hostPath",
	Explain: `A writable hostPath mount of /dev is the node's devtmpfs itself: root in the
container can unlink, rename or create entries there (unlink needs only write
permission on the directory), removing /dev/nvidia0 or /dev/dri from the host for
every other pod and for the driver's tools. It does not give the container the
devices: those it was not allocated still fail to open with EPERM (the device
cgroup). Agents that only inspect device nodes mount /dev read-only (readOnly:
true on the volumeMount), which lint does not flag. WARN: the pod runs.`,
	Remediation: "Mount /dev with readOnly: true if the container only inspects device nodes, and request the devices it uses as resources.",
}, {
	Code:   LintVFIOWithoutIPCLock,
	Status: "WARN",
	Title:  "a container uses VFIO without CAP_IPC_LOCK: DMA mapping is limited by RLIMIT_MEMLOCK",
	Explain: `VFIO pins every page it maps for DMA. The type1 IOMMU driver
(drivers/vfio/vfio_iommu_type1.c, vfio_pin_pages_remote) counts pinned pages
against RLIMIT_MEMLOCK unless the task has CAP_IPC_LOCK, and fails the
VFIO_IOMMU_MAP_DMA ioctl with ENOMEM past it; iommufd accounts the same way
(drivers/iommu/iommufd/pages.c). CAP_IPC_LOCK is not in the runtimes' default
capability set, and capabilities.drop: [ALL] removes it in any case, so a DPDK or
guest-memory mapping of gigabytes fails unless the runtime raised the memlock limit,
which lint cannot see: WARN. VFIO use is recognised by a resource name containing
"vfio" or a hostPath mount of /dev/vfio. Dropping ALL capabilities is fine for
/dev/nvidia*, /dev/dri, /dev/kfd: opening and ioctl on them need no capability,
and the RuntimeDefault seccomp profile allows ioctl and mmap; neither is flagged.`,
	Remediation: "Add IPC_LOCK to securityContext.capabilities.add (it may stay beside drop: [ALL]; the runtime drops first, then adds).",
}, {
	Code:   LintClusterRuntimeClassMissing,
	Status: "FAIL",
	Title:  "runtimeClassName names a RuntimeClass the cluster does not have: admission rejects the pod",
	Explain: `With --cluster, lint lists the cluster's RuntimeClasses (node.k8s.io/v1) once.
The RuntimeClass admission plugin (plugin/pkg/admission/runtimeclass, on by
default) looks up the pod's runtimeClassName to set its overhead and scheduling,
and rejects a pod whose RuntimeClass does not exist ("pod rejected: RuntimeClass
... not found"). For a Deployment, a DaemonSet or a Job the object is accepted and
every pod its controller creates is rejected: no pod appears, only the
controller's events say why. A RuntimeClass created by the same input counts as
existing. Offline there is no such rule (lint cannot know the cluster's
RuntimeClasses); when the list cannot be read the rule is NOT_RUN with the API
server's error.`,
	Remediation: "Create the RuntimeClass (the NVIDIA GPU operator creates nvidia; `kubectl get runtimeclass` lists them), or set runtimeClassName to one that exists, or remove it to use the node's default runtime.",
}, {
	Code:   LintClusterDeviceClassMissing,
	Status: "FAIL",
	Title:  "a ResourceClaim or ResourceClaimTemplate asks for a DeviceClass the cluster does not have: its pods cannot be scheduled",
	Explain: `With --cluster, lint lists the cluster's DeviceClasses (resource.k8s.io/v1)
once and checks the deviceClassName of every request (exactly and firstAvailable)
of each ResourceClaim and ResourceClaimTemplate in the input. The API server
accepts a claim whose class does not exist (validation does not look it up), and
the scheduler's DynamicResources plugin cannot allocate it: every pod using the
claim stays Pending until the class is created. DRA drivers create their classes
when they are installed (gpu.nvidia.com by NVIDIA's DRA driver, for example), so
a missing class usually means a driver not installed, or a typo. A DeviceClass
created by the same input counts as existing. When the list cannot be read the
rule is NOT_RUN with the API server's error.`,
	Remediation: "Install the DRA driver that provides the class (`kubectl get deviceclass` lists those there are), or correct deviceClassName; `accel-doctor claim NS/NAME` explains a claim already created.",
}, {
	Code:   LintClusterNoNodeMatches,
	Status: "WARN",
	Title:  "no node of the cluster matches the pod's nodeSelector and required node affinity",
	Explain: `With --cluster, lint lists the Nodes once (paged) and matches the pod's
nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity
against their labels with the scheduler's own matcher (component-helpers'
nodeaffinity, what the NodeAffinity filter runs). When none matches, the pod stays
Pending ("didn't match Pod's node affinity/selector"); a DaemonSet runs no pod. A
WARN, not a FAIL: the set of nodes changes, and a cluster autoscaler scales node
groups up from zero for such a pod (it reads the group's template labels, which
the API server does not have). A pod with spec.nodeName is not judged: no
scheduler filter runs for it. When the nodes cannot be listed the rule is NOT_RUN.`,
	Remediation: "Compare the selector with the nodes' labels (`kubectl get nodes --show-labels`; Node Feature Discovery and the GPU operator label GPU nodes with nvidia.com/gpu.present=true); correct the selector or label the nodes.",
}, {
	Code:   LintClusterResourceNotAdvertised,
	Status: "WARN",
	Title:  "no node advertises the extended resource the pod asks for, or not as many",
	Explain: `With --cluster, lint computes what the pod needs of each extended resource as
the scheduler's NodeResourcesFit does (the sum over the containers and sidecars,
or the largest init container's if that is more) and compares it with every
node's status.allocatable. When no node advertises the resource (no device plugin
registered it, or every device is unhealthy: allocatable 0), or none has as many,
or only nodes that the pod's nodeSelector or node affinity excludes do, the pod
stays Pending ("Insufficient nvidia.com/gpu"). What other pods hold already is not
subtracted: the question is whether any node could ever fit the pod. A WARN: a
cluster autoscaler may add a node that has it. When the nodes cannot be listed the
rule is NOT_RUN.`,
	Remediation: "`accel-doctor cluster` shows per node which resources are advertised and why not (plugin pods not Ready, hardware present but not advertised); `accel-doctor check` on a GPU node finds the broken layer. Or correct the resource name in the manifest.",
}, {
	Code:   LintClusterTaintNotTolerated,
	Status: "WARN",
	Title:  "every node that could fit the pod carries a taint it does not tolerate",
	Explain: `With --cluster, the nodes that match the pod's selector and advertise enough
of its extended resources are checked against its tolerations with the
scheduler's own matcher (component-helpers' FindMatchingUntoleratedTaint over the
NoSchedule and NoExecute taints, what the TaintToleration filter runs). The
tolerations the pod gets without asking are counted: not-ready and unreachable
NoExecute for every pod (the DefaultTolerationSeconds admission plugin), and for a
DaemonSet the ones its controller adds. When every such node has a taint the pod
does not tolerate, it stays Pending ("had untolerated taint"). This replaces the
offline LINT_GPU_WITHOUT_TOLERATION guess when the nodes were read. Not counted:
tolerations an admission webhook or the ExtendedResourceToleration plugin (off by
default) would add. A WARN, as the node set changes. When the nodes cannot be
listed the rule is NOT_RUN (and the offline guess is made).`,
	Remediation: "Add a toleration for the taint named (tolerations: [{key: KEY, operator: Exists, effect: NoSchedule}]), or remove the taint from the nodes if no pod should be kept off them (`kubectl taint nodes NODE KEY-`).",
}, {
	Code:   LintKindSkipped,
	Status: "NOT_RUN",
	Title:  "objects of kinds the rules do not read: counted, not judged",
	Explain: `Lint reads Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and
CronJob (core/v1, apps/v1, batch/v1), the items of a List, and the ResourceClaims
and ResourceClaimTemplates of resource.k8s.io/v1 (to know a claim's device class).
Any other kind or apiVersion (a Service, a ConfigMap, RBAC, a custom resource, an
old apps/v1beta1 Deployment) is not judged. All of them are reported together, in
one NOT_RUN finding that counts them by kind and names their files and documents,
so that a verdict never covers a document that was not read and a directory of
RBAC and Namespaces does not bury the workloads' findings. A Kustomization or a
Component (kustomize.config.k8s.io) has an apiVersion and a kind, so it is counted
here like any object: it is kustomize's input, and the API server gets what
kustomize renders from it (patches, components and transformers applied), which is
what to lint.`,
	Remediation: "Nothing to do for objects that hold no pod template. For a kustomization, lint what it renders: `kubectl kustomize DIR | accel-doctor lint -f -`. A custom resource that embeds a pod template (an operator's job kind) is not read: lint the Pod it creates.",
}, {
	Code:   LintNotAnObject,
	Status: "NOT_RUN",
	Title:  "a document has no apiVersion and no kind: it is not a Kubernetes object, and is skipped",
	Explain: `A YAML or JSON mapping with neither an apiVersion nor a kind key (in any
spelling of case) is a file for some other tool that sits beside the manifests: a
device plugin's config that a kustomization turns into a ConfigMap, a Helm values
file. Lint skips it and says so in one NOT_RUN finding that counts such documents
and names them; it is not a FAIL, since nothing claims it is a manifest. A document
that has one of the two keys, or a misspelt one (Kind, apiversion), claims to be a
Kubernetes object and is LINT_DOCUMENT_MALFORMED when it is not a valid one, as
is a document that is not a mapping at all (a scalar, a list).`,
	Remediation: "Nothing to do if the file is for another tool. `kubectl apply -f` refuses it (\"Object 'Kind' is missing\"), so keep it out of what you apply: give it to kustomize (configMapGenerator) or Helm, or move it out of the manifests' directory. If it is meant as a manifest, add its apiVersion and kind.",
}, {
	Code:   LintDocumentMalformed,
	Status: "FAIL",
	Title:  "a document is not valid YAML or JSON, or does not decode as its kind",
	Explain: `The document could not be parsed (a syntax error, a tab in indentation, a
truncated file, an alias bomb that the YAML parser refuses), is not a mapping, has
an apiVersion but no kind or a kind but no apiVersion, or has a field of the wrong
type for its kind (a string where an integer is expected, a quantity that is not
one). kubectl and the API server refuse it in
the same way, so it is a FAIL. The finding names the document's index (from 1, in
its file) and the line where the parser stopped, when the parser said.`,
	Remediation: "Fix the document at the line named, then `accel-doctor lint -f FILE` again.",
}, {
	Code:   LintDocumentTooLarge,
	Status: "FAIL",
	Title:  "a document is larger than the API server accepts",
	Explain: `The API server refuses request bodies larger than 3 MiB by default
(--max-request-body-bytes, MaxRequestBodyBytes in kube-apiserver's
ServerRunOptions), and etcd's recommended request size is 1.5 MiB. Lint does not parse a document above
3 MiB (MaxDocumentBytes): that bounds its own memory and time, and no such object
could be created anyway. A whole input is read up to 64 MiB (MaxInputBytes).`,
	Remediation: "Split the document: large embedded data (scripts, configuration) belongs in a ConfigMap mounted by the pod.",
}}
