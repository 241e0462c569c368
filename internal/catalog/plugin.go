package catalog

// The codes `plugin test` reports.
const (
	PluginRegistered            = "PLUGIN_REGISTERED"
	PluginNotRegistered         = "PLUGIN_NOT_REGISTERED"
	PluginAPIVersion            = "PLUGIN_API_VERSION_UNSUPPORTED"
	PluginResourceNameInvalid   = "PLUGIN_RESOURCE_NAME_INVALID"
	PluginEndpointUnreachable   = "PLUGIN_ENDPOINT_UNREACHABLE"
	PluginRegisterBeforeServe   = "PLUGIN_REGISTER_BEFORE_SERVE"
	PluginDuplicateRegistration = "PLUGIN_DUPLICATE_REGISTRATION"
	PluginRegisteredTwice       = "PLUGIN_REGISTERED_TWICE"
	PluginOptionsOK             = "PLUGIN_OPTIONS_OK"
	PluginOptionsFailed         = "PLUGIN_OPTIONS_FAILED"
	PluginOptionsMismatch       = "PLUGIN_OPTIONS_MISMATCH"
	PluginListed                = "PLUGIN_DEVICES_LISTED"
	PluginListAndWatchFailed    = "PLUGIN_LISTANDWATCH_FAILED"
	PluginListAndWatchEnded     = "PLUGIN_LISTANDWATCH_ENDED"
	PluginNoDevices             = "PLUGIN_NO_DEVICES"
	PluginDeviceIDDuplicate     = "PLUGIN_DEVICE_ID_DUPLICATE"
	PluginDeviceIDInvalid       = "PLUGIN_DEVICE_ID_INVALID"
	PluginDeviceIDLong          = "PLUGIN_DEVICE_ID_LONG"
	PluginHealthInvalid         = "PLUGIN_HEALTH_INVALID"
	PluginDevicesUnhealthy      = "PLUGIN_DEVICES_UNHEALTHY"
	PluginNoHealthyDevices      = "PLUGIN_NO_HEALTHY_DEVICES"
	PluginNUMAUnknown           = "PLUGIN_NUMA_UNKNOWN"
	PluginNUMAPartial           = "PLUGIN_NUMA_PARTIAL"
	PluginHealthFlapping        = "PLUGIN_HEALTH_FLAPPING"
	PluginDeviceRemoved         = "PLUGIN_DEVICE_REMOVED"
	PluginHealthUpdate          = "PLUGIN_HEALTH_UPDATE"
	PluginHealthNotReported     = "PLUGIN_HEALTH_NOT_REPORTED"
	PluginPreferredOK           = "PLUGIN_PREFERRED_OK"
	PluginPreferredWrong        = "PLUGIN_PREFERRED_WRONG"
	PluginPreferredFailed       = "PLUGIN_PREFERRED_FAILED"
	PluginAllocateOK            = "PLUGIN_ALLOCATE_OK"
	PluginAllocateFailed        = "PLUGIN_ALLOCATE_FAILED"
	PluginAllocateSlow          = "PLUGIN_ALLOCATE_SLOW"
	PluginCrashed               = "PLUGIN_CRASHED"
	PluginAllocateInvalid       = "PLUGIN_ALLOCATE_RESPONSE_INVALID"
	PluginAllocateExtra         = "PLUGIN_ALLOCATE_RESPONSES_EXTRA"
	PluginAllocatePathConflict  = "PLUGIN_ALLOCATE_PATH_CONFLICT"
	PluginAllocateHostMissing   = "PLUGIN_ALLOCATE_HOST_PATH_MISSING"
	PluginAllocateCDIResolved   = "PLUGIN_ALLOCATE_CDI_RESOLVED"
	PluginAllocateCDIUnresolved = "PLUGIN_ALLOCATE_CDI_UNRESOLVABLE"
	PluginAllocateEnvInvalid    = "PLUGIN_ALLOCATE_ENV_INVALID"
	PluginAllocateEnvUnusual    = "PLUGIN_ALLOCATE_ENV_NAME_UNUSUAL"
	PluginUnknownIDAccepted     = "PLUGIN_ALLOCATE_UNKNOWN_ACCEPTED"
	PluginPreStartOK            = "PLUGIN_PRESTART_OK"
	PluginPreStartFailed        = "PLUGIN_PRESTART_FAILED"
	PluginReregistered          = "PLUGIN_REREGISTERED"
	PluginNoReregister          = "PLUGIN_NO_REREGISTER"
	PluginReregisterRefused     = "PLUGIN_REREGISTER_REFUSED"
	PluginReregisterSlow        = "PLUGIN_REREGISTER_SLOW"
	PluginNotRun                = "PLUGIN_CHECK_NOT_RUN"
)

// PluginAllocateSlowThreshold is where an Allocate's p99 becomes a WARN. A
// plugin answers Allocate from memory in well under a millisecond; the
// kubelet admits pods one after another and waits for each Allocate
// (devicemanager endpoint.go allocate has no deadline of its own).
const PluginAllocateSlowThreshold = 100 // ms

// Plugin is the catalog of `plugin test`'s findings (internal/deviceplugin
// reports them).
var Plugin = []Code{
	{
		Code:   PluginRegistered,
		Status: "PASS",
		Title:  "the plugin registered with the kubelet",
		Explain: `Acting as the kubelet, accel-doctor served kubelet.sock in the directory and the
plugin called Register with an API version the kubelet supports (v1beta1) and a
valid extended resource name. The evidence gives the endpoint and options it
sent and how long after the start it came.`,
	},
	{
		Code:   PluginNotRegistered,
		Status: "FAIL",
		Title:  "no plugin registered within the timeout",
		Explain: `Nothing called Register on kubelet.sock before --timeout ran out. The kubelet
then never learns of the resource: the node has no capacity for it and pods that
request it stay Pending with "Insufficient RESOURCE". A plugin that started before
kubelet.sock existed and does not watch for it, one that registers with a
different directory (the kubelet's is /var/lib/kubelet/device-plugins), or one
that exited all look like this.`,
		Remediation: "Start the plugin against the same directory (`accel-doctor plugin test --device-plugin-dir DIR` serves DIR/kubelet.sock), and read its log; in a cluster, `journalctl -u kubelet` shows \"Got registration request from device plugin\" when one registers.",
	},
	{
		Code:   PluginAPIVersion,
		Status: "FAIL",
		Title:  "the plugin registers with an API version the kubelet does not support",
		Explain: `The Register request named a version other than v1beta1, the only one the
kubelet supports (k8s.io/kubelet deviceplugin/v1beta1 SupportedVersions). The
kubelet refuses it with "requested API version %q is not supported by kubelet.
Supported version is %q" (pkg/kubelet/cm/devicemanager/plugin/v1beta1/api.go,
errUnsupportedVersion) and never uses the plugin: the resource does not appear
on the node. The evidence gives the version sent.`,
		Remediation: "Build the plugin against k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1 and send its Version constant; then `accel-doctor plugin test --device-plugin-dir DIR` again.",
	},
	{
		Code:   PluginResourceNameInvalid,
		Status: "FAIL",
		Title:  "the plugin registers an invalid extended resource name",
		Explain: `The kubelet accepts only extended resource names (v1helper.IsExtendedResourceName,
called from Register in plugin/v1beta1/server.go): a domain prefix that is not
kubernetes.io, no "requests." prefix, and "requests."+name a qualified name (a
DNS-1123 subdomain, "/", and a name of at most 63 characters of [A-Za-z0-9._-]
beginning and ending alphanumeric). Otherwise it answers "the ResourceName %q is
invalid" and ignores the plugin. The evidence gives the rule that failed.`,
		Remediation: "Register a name such as vendor.example.com/gpu; pods must request the same name.",
	},
	{
		Code:   PluginEndpointUnreachable,
		Status: "FAIL",
		Title:  "the plugin's endpoint does not answer",
		Explain: `The socket the plugin registered (or the one given with --device-plugin-socket)
could not be dialled within the timeout, not even after the registration, or
it accepts connections and never completes gRPC's HTTP/2 handshake (another
kind of server, a process that accepts and never answers). The kubelet's
Register handler dials the endpoint back before it answers
(plugin/v1beta1/handler.go connectClient) and waits, up to 10 s, for the gRPC
connection to be ready (client.go dial: grpc.WithBlock), not merely for the
socket to accept; then it fails the registration with "failed to dial device
plugin: context deadline exceeded". The evidence says which of the two it was.`,
		Remediation: "Check that the plugin listens on the socket it registers, in the same directory (`ls -l` the directory the evidence names), and that it is still running.",
	},
	{
		Code:   PluginRegisterBeforeServe,
		Status: "FAIL",
		Title:  "the plugin registered before it served",
		Explain: `At Register time the plugin's socket did not answer (the kubelet waits 10 s,
plugin/v1beta1/client.go dial, then fails the registration with "failed to dial
device plugin: context deadline exceeded"), yet it answered later. The plugin
calls Register before its gRPC server listens; the kubelet has refused it by the
time it does, and unless it registers again the resource never appears.`,
		Remediation: "Start the gRPC server on the socket, check that it answers, and only then call Register (`accel-doctor plugin serve` does so); then `accel-doctor plugin test --device-plugin-dir DIR`.",
	},
	{
		Code:   PluginDuplicateRegistration,
		Status: "FAIL",
		Title:  "two endpoints registered the same resource",
		Explain: `Two Register calls named the same resource with different sockets: two
instances of a plugin (a rolling update, a DaemonSet and a static pod). The
kubelet of 1.37 keeps both (pkg/kubelet/cm/devicemanager/manager.go
PluginConnected, endpointStore), sends Allocate to the one that registered last,
and takes the device list from whichever sent last: when their lists differ, pods
are allocated IDs the other instance does not know, and fail with
UnexpectedAdmissionError. The evidence gives both endpoints.`,
		Remediation: "Run one instance per node (a DaemonSet with maxSurge 0), and have the plugin refuse to start while another serves its socket (`accel-doctor plugin serve` does).",
	},
	{
		Code:   PluginRegisteredTwice,
		Status: "FAIL",
		Title:  "the plugin registered twice from one socket while the kubelet was connected to it",
		Explain: `A second Register named the same resource and the same socket while the
kubelet's ListAndWatch stream from the first was still open. The kubelet of 1.37
refuses it with "device plugin already connected: SOCKET" (manager.go
PluginConnected: its endpointStore holds that socket already) and, refusing it,
forgets its connection to the first one too (plugin/v1beta1/handler.go
connectClient calls deregisterClient, which removes every client of that
socket). When that stream ends, nothing marks the devices unhealthy (runClient
finds no client and returns before PluginDisconnected): the node keeps
advertising them with no plugin behind them, and every later Register from that
socket is refused the same way, until the kubelet restarts. A plugin that
retries a Register the kubelet had already accepted (a timeout of its own), or
registers again on a timer, does this. The evidence gives both Register calls
and the kubelet's answer.`,
		Remediation: "Register once for each kubelet.sock, and again only when kubelet.sock is recreated; take \"device plugin already connected\" as registered and never retry it (`accel-doctor plugin serve` does). On a node where it happened, restart the kubelet.",
	},
	{
		Code:   PluginOptionsOK,
		Status: "PASS",
		Title:  "GetDevicePluginOptions answered",
		Explain: `The kubelet calls GetDevicePluginOptions when a plugin registers
(manager.go PluginConnected) and keeps the answer: whether it must call
PreStartContainer and whether GetPreferredAllocation is available. The evidence
gives both.`,
	},
	{
		Code:   PluginOptionsFailed,
		Status: "FAIL",
		Title:  "GetDevicePluginOptions failed",
		Explain: `The call returned an error. The kubelet fails the registration with "failed to
get device plugin options: ..." (manager.go PluginConnected) and does not use the
plugin.`,
		Remediation: "Implement GetDevicePluginOptions (return the options even when both are false).",
	},
	{
		Code:   PluginOptionsMismatch,
		Status: "WARN",
		Title:  "Register's options differ from GetDevicePluginOptions'",
		Explain: `The options sent in the Register request are not the ones GetDevicePluginOptions
answers. The kubelet ignores Register's options (plugin/v1beta1/server.go
Register reads the version, the resource name and the endpoint only) and keeps
GetDevicePluginOptions' answer (manager.go PluginConnected): it calls
PreStartContainer and GetPreferredAllocation by that answer alone, so a plugin
that asks for them in Register only is never called. The evidence gives both.`,
		Remediation: "Send in Register the same DevicePluginOptions that GetDevicePluginOptions returns.",
	},
	{
		Code:   PluginListed,
		Status: "PASS",
		Title:  "ListAndWatch listed the devices",
		Explain: `ListAndWatch sent its list, and every list during the watch had unique IDs of at
most 63 characters, valid health values and NUMA nodes this host has. The
kubelet takes each list as the resource's whole set of devices (manager.go
genericDeviceUpdateCallback); the evidence gives the last one's count by health
(what the node advertises) and the time from registration (or connection) to
the first.`,
	},
	{
		Code:   PluginListAndWatchFailed,
		Status: "FAIL",
		Title:  "ListAndWatch failed or sent nothing",
		Explain: `The stream returned an error, or sent no response within the timeout. The
kubelet learns devices only from this stream (plugin/v1beta1/client.go Run); when
it ends, the kubelet disconnects the plugin and marks every device of the
resource unhealthy.`,
		Remediation: "Send the device list as the first message of ListAndWatch, at once, then keep the stream open and send the list again on every change.",
	},
	{
		Code:   PluginListAndWatchEnded,
		Status: "FAIL",
		Title:  "ListAndWatch ended while the plugin was still registered",
		Explain: `The plugin's ListAndWatch stream ended after it had sent its list, while the
kubelet would still be watching it (the stream's status, or OK for a plugin
that returned, is in the evidence). The kubelet then disconnects the plugin
(plugin/v1beta1/client.go Run returns; handler.go runClient; manager.go
PluginDisconnected): its endpoint is stopped and every device of the resource
is marked unhealthy (markResourceUnhealthy): capacity N, allocatable 0, pods
fail admission with "no healthy devices present; cannot allocate unhealthy
devices RESOURCE", and after the 5-minute endpointStopGracePeriod (types.go)
the resource is dropped from the node, until the plugin registers again.`,
		Remediation: "Keep ListAndWatch open for as long as the plugin serves: send the list, then wait, sending the list again on every change, until the stream's context ends.",
	},
	{
		Code:   PluginNoDevices,
		Status: "FAIL",
		Title:  "the plugin lists no device",
		Explain: `The list the kubelet holds at the end of the watch (each list replaces the last)
is empty. The resource appears on the node with capacity 0; pods that request it
stay Pending with "Insufficient RESOURCE". The plugin's selector matches nothing
on this host, or its discovery failed.`,
		Remediation: "Check what the plugin selects (for `accel-doctor plugin serve`, the config's selector against `accel-doctor pci`), and its log.",
	},
	{
		Code:   PluginDeviceIDDuplicate,
		Status: "FAIL",
		Title:  "two devices share one ID",
		Explain: `The kubelet keys devices by ID (manager.go genericDeviceUpdateCallback), so the
duplicates collapse into one: capacity is lower than the number of devices the
plugin lists, and an Allocate of that ID names one device where the plugin has
several.`,
		Remediation: "Give every device a unique ID (a PCI address, a UUID, a node name).",
	},
	{
		Code:   PluginDeviceIDInvalid,
		Status: "WARN",
		Title:  "a device has an empty ID",
		Explain: `The kubelet accepts a device whose ID is "" (genericDeviceUpdateCallback keys
the devices by ID, the empty one included) and may allocate it: the plugin's Allocate is then
asked for device "", the checkpoint records "", and two devices with empty IDs are one.`,
		Remediation: "Give every device a non-empty ID.",
	},
	{
		Code:   PluginDeviceIDLong,
		Status: "WARN",
		Title:  "a device ID is longer than the 63 characters the API documents",
		Explain: `The device-plugin API documents "Max length of this field is 63 characters"
(message Device, k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto). The
kubelet of 1.37 does not enforce it, so the device works today; tools that rely on
the documented limit (labels, CDI names, DRA device names, which are DNS labels
of at most 63 characters) may not.`,
		Remediation: "Use IDs of at most 63 characters.",
	},
	{
		Code:   PluginHealthInvalid,
		Status: "FAIL",
		Title:  "a device's health is neither Healthy nor Unhealthy",
		Explain: `The API has two health values, "Healthy" and "Unhealthy" (v1beta1 constants.go);
the kubelet counts anything but exactly "Healthy" as unhealthy (manager.go
genericDeviceUpdateCallback), so a device reported "healthy" or "OK" is never
allocatable.`,
		Remediation: "Send the v1beta1 Healthy and Unhealthy constants.",
	},
	{
		Code:   PluginDevicesUnhealthy,
		Status: "WARN",
		Title:  "some devices are Unhealthy",
		Explain: `In the list the kubelet holds at the end of the watch, some devices are
Unhealthy. The kubelet does not allocate them: allocatable is lower than capacity
by their number (manager.go GetCapacity). The evidence gives which. The plugin
may be right (a device lost its driver or node); check the host.`,
		Remediation: "Look at the devices on the host (`accel-doctor check`); the plugin's log says why it marked them.",
	},
	{
		Code:   PluginNoHealthyDevices,
		Status: "FAIL",
		Title:  "every device is Unhealthy",
		Explain: `In the list the kubelet holds at the end of the watch, no device is Healthy.
The node shows capacity N and allocatable 0 for the resource (manager.go
GetCapacity): pods requesting it stay Pending with "Insufficient RESOURCE", and a
pod bound before the change fails admission with UnexpectedAdmissionError "no
healthy devices present; cannot allocate unhealthy devices".`,
		Remediation: "Look at the devices on the host (`accel-doctor check`); the plugin's log says why it marked them.",
	},
	{
		Code:   PluginNUMAUnknown,
		Status: "WARN",
		Title:  "a device names a NUMA node this host does not have",
		Explain: `A device's TopologyInfo names a NUMA node that is not online on this host
(/sys/devices/system/node/online). The kubelet of 1.37 drops NUMA IDs its
machine information does not know ("Ignoring NUMA node IDs reported by device
plugin that are unknown to cadvisor", devicemanager topology_hints.go
deviceNUMANodes), so a device whose only node is unknown fits no topology hint:
under the topology manager's restricted or single-numa-node policy a pod that
needs it fails admission with TopologyAffinityError; under none (the default)
and best-effort it is allocated as a device without topology (manager.go
filterByAffinity).`,
		Remediation: "Report the NUMA node the kernel gives (the PCI function's numa_node in sysfs), and no TopologyInfo when it is -1.",
	},
	{
		Code:   PluginNUMAPartial,
		Status: "WARN",
		Title:  "some devices give a NUMA node and others none",
		Explain: `Once any device of a resource has a NUMA node in its TopologyInfo, the kubelet
treats the whole resource as topology-aligned (devicemanager topology_hints.go
deviceHasTopologyAlignment), and a device without one fits no NUMA mask: it is
counted in no topology hint (generateDeviceTopologyHints) and allocated only
after every aligned device (manager.go filterByAffinity). Under the topology
manager's restricted or single-numa-node policy a pod that needs those devices
finds no hint and fails admission with TopologyAffinityError; under none and
best-effort it is admitted. The evidence gives the devices without a node.`,
		Remediation: "Give every device its NUMA node (the PCI function's numa_node in sysfs); on a host where the kernel knows none for some (-1), expect those devices to be left out of aligned allocations.",
	},
	{
		Code:   PluginHealthFlapping,
		Status: "WARN",
		Title:  "device health changed repeatedly while nobody touched it",
		Explain: `During the watch window (--watch) devices went Unhealthy and Healthy again
several times. Each change moves the node's allocatable; a pod scheduled in a
Healthy moment and admitted in an Unhealthy one fails with
UnexpectedAdmissionError. A health check that reacts to one transient error (one
XID, one missed poll) does this.`,
		Remediation: "Make the health check debounce transient errors; the plugin's log says what changed.",
	},
	{
		Code:   PluginDeviceRemoved,
		Status: "WARN",
		Title:  "a device was left out of a later list",
		Explain: `A device the plugin listed was missing from a later ListAndWatch response during
the watch, while nothing was done to the host. The kubelet takes each list as
the resource's whole set (manager.go genericDeviceUpdateCallback): the device
leaves capacity and allocatable, and a pod that holds it is refused when the
kubelet admits it again with "previously allocated devices are no longer
healthy; cannot allocate unhealthy devices RESOURCE" (devicesToAllocate).
A device that went bad is better listed Unhealthy: capacity keeps it and
allocatable drops. The evidence gives which devices.`,
		Remediation: "List every device in every response; mark one that went away Unhealthy instead of leaving it out (`accel-doctor plugin serve` does).",
	},
	{
		Code:   PluginHealthUpdate,
		Status: "PASS",
		Title:  "a health change reached ListAndWatch",
		Explain: `accel-doctor changed a device's health through the mock's trigger and measured
the time until ListAndWatch sent the change. The evidence gives each sample.`,
	},
	{
		Code:   PluginHealthNotReported,
		Status: "FAIL",
		Title:  "a health change never reached ListAndWatch",
		Explain: `A device's health was changed and ListAndWatch sent no update within the
timeout: the kubelet keeps allocating a device that is gone.`,
		Remediation: "Send the list again on every health change.",
	},
	{
		Code:   PluginPreferredOK,
		Status: "PASS",
		Title:  "GetPreferredAllocation honours size and must-include devices",
		Explain: `The plugin advertises GetPreferredAllocation; asked for a set of the given size
that includes a must-include device, it answered one of that size, from the
available devices, with the must-include device in it.`,
	},
	{
		Code:   PluginPreferredWrong,
		Status: "WARN",
		Title:  "GetPreferredAllocation answered a wrong set",
		Explain: `The answer has the wrong size, leaves out a must-include device, names a device
that was not available, names one twice, or answers another number of containers.
The kubelet does not fail the pod for it: it takes the first container response,
keeps of it only the devices it can give, and fills the rest itself (manager.go
callGetPreferredAllocationIfAvailable, devicesToAllocate: the preferred set
intersected with the available one, then the aligned and the other available
devices; the must-include devices are allocated before the call), so the
plugin's choice (NVLink, PCIe or NUMA locality) is partly or wholly lost.`,
		Remediation: "Return exactly allocation_size IDs from available_deviceIDs, every must_include_deviceIDs among them, one response per container request.",
	},
	{
		Code:   PluginPreferredFailed,
		Status: "FAIL",
		Title:  "GetPreferredAllocation failed",
		Explain: `The plugin advertises GetPreferredAllocation and the call failed. The kubelet
fails the pod's admission with "device plugin GetPreferredAllocation rpc failed
with err: ..." (manager.go callGetPreferredAllocationIfAvailable):
UnexpectedAdmissionError.`,
		Remediation: "Fix the call, or stop advertising get_preferred_allocation_available.",
	},
	{
		Code:   PluginAllocateOK,
		Status: "PASS",
		Title:  "Allocate answered",
		Explain: `Allocate of healthy devices answered with one container response per request.
The evidence gives what it injects and the latency percentiles over the samples.`,
	},
	{
		Code:   PluginAllocateFailed,
		Status: "FAIL",
		Title:  "Allocate failed",
		Explain: `Allocate of listed, healthy devices returned an error or no answer within the
timeout. The kubelet fails the pod's admission: reason UnexpectedAdmissionError,
message "Allocate failed due to ERROR, which is unexpected"
(pkg/kubelet/cm/admission/errors.go). The evidence gives the error.`,
		Remediation: "Read the plugin's log for the request; Allocate of a listed healthy device must succeed.",
	},
	{
		Code:   PluginAllocateSlow,
		Status: "WARN",
		Title:  "Allocate is slow",
		Explain: `The 99th percentile of Allocate exceeded 100 ms. The kubelet sets no deadline of
its own on Allocate (devicemanager endpoint.go allocate) and admits pods one at
a time, so every pod of the node that asks for any device plugin resource waits.`,
		Remediation: "Answer Allocate from memory; do slow device work at discovery or in PreStartContainer.",
	},
	{
		Code:   PluginCrashed,
		Status: "FAIL",
		Title:  "the plugin died during a call",
		Explain: `The call ended with the connection lost (Unavailable) and the socket no longer
answers: the plugin exited or crashed. The pod fails with UnexpectedAdmissionError
and the kubelet, whose ListAndWatch stream ends, marks every device unhealthy
(manager.go PluginDisconnected): allocatable 0 until the plugin registers again.`,
		Remediation: "Read the plugin's log and exit status (`kubectl logs --previous` for a plugin pod).",
	},
	{
		Code:   PluginAllocateInvalid,
		Status: "FAIL",
		Title:  "Allocate answered no container response",
		Explain: `The kubelet sends one container request per Allocate (devicemanager endpoint.go
allocate) and fails the pod's admission when the answer has no container
response: "no containers return in allocation response" (manager.go
allocateContainerResources).`,
		Remediation: "Answer one ContainerAllocateResponse per ContainerAllocateRequest, in order.",
	},
	{
		Code:   PluginAllocateExtra,
		Status: "WARN",
		Title:  "Allocate answered more container responses than requests",
		Explain: `The answer to one container request has several container responses. The
kubelet uses the first and ignores the rest (manager.go
allocateContainerResources: resp.ContainerResponses[0]); the API asks for one
response per request, in order, so whatever the plugin meant by the others
never reaches a container.`,
		Remediation: "Answer one ContainerAllocateResponse per ContainerAllocateRequest, in order.",
	},
	{
		Code:   PluginAllocateHostMissing,
		Status: "FAIL",
		Title:  "Allocate names a host path this host lacks",
		Explain: `A DeviceSpec's host_path or a mount's host_path does not exist on this host. The
kubelet passes them to the runtime, which fails to create the container (runc:
"error gathering device information while adding custom device").`,
		Remediation: "Give paths that exist; for device nodes, check the driver is loaded (`accel-doctor check`).",
	},
	{
		Code:   PluginAllocatePathConflict,
		Status: "WARN",
		Title:  "Allocate gives one container path two host paths",
		Explain: `Two device specs (or two mounts) of the answer name the same container path with
different host paths. The kubelet keeps the first and drops the other, logging
"Container device has conflicting mapping host devices" (or "Container mount
has conflicting mapping host mounts") (devicemanager pod_devices.go
deviceRunContainerOptions): the container lacks what the second one named.`,
		Remediation: "Give every device node and mount a container path of its own.",
	},
	{
		Code:   PluginAllocateCDIResolved,
		Status: "PASS",
		Title:  "the CDI devices Allocate names resolve on this host",
		Explain: `Each CDI device name in the answer resolves against the host's CDI specs, as the
runtime will resolve it.`,
	},
	{
		Code:   PluginAllocateCDIUnresolved,
		Status: "FAIL",
		Title:  "a CDI device Allocate names does not resolve on this host",
		Explain: `The runtime fails the container with "unresolvable CDI devices NAME" (the
kubelet passes the names in the CRI CDIDevices field). The evidence gives the
name; ` + "`accel-doctor cdi check NAME`" + ` says what the specs declare.`,
		Remediation: "Write the CDI spec before answering with its names (`accel-doctor plugin serve` does), and check it with `accel-doctor cdi check NAME`.",
	},
	{
		Code:   PluginAllocateEnvInvalid,
		Status: "FAIL",
		Title:  "Allocate gives an environment variable whose name cannot be set",
		Explain: `A name is empty or contains '=' or NUL: the runtime builds NAME=VALUE strings and
splits at the first '=', so the container gets a different variable than meant.`,
		Remediation: "Use names of letters, digits and underscores.",
	},
	{
		Code:   PluginAllocateEnvUnusual,
		Status: "WARN",
		Title:  "Allocate gives an environment variable name no pod could set",
		Explain: `The name fails the API server's rule for a pod's env names
([-._a-zA-Z][-._a-zA-Z0-9]*); the runtime sets it, but shells and tools that
read the environment may not see it.`,
		Remediation: "Use names of letters, digits and underscores.",
	},
	{
		Code:   PluginUnknownIDAccepted,
		Status: "WARN",
		Title:  "Allocate accepts a device ID it never listed",
		Explain: `Asked to allocate an ID it never listed, the plugin answered. The kubelet does
not send such IDs on its own, but after a plugin's list changed under a pod (a
replaced GPU, a second instance), answering them injects nothing or the wrong
device instead of failing the pod with a reason.`,
		Remediation: "Answer InvalidArgument for unknown IDs.",
	},
	{
		Code:   PluginPreStartOK,
		Status: "PASS",
		Title:  "PreStartContainer answered",
		Explain: `The plugin requires PreStartContainer and the call for allocated devices
succeeded.`,
	},
	{
		Code:   PluginPreStartFailed,
		Status: "FAIL",
		Title:  "PreStartContainer failed",
		Explain: `The plugin requires PreStartContainer (the kubelet calls it before each
container start, with a 30 s deadline, KubeletPreStartContainerRPCTimeoutInSecs)
and the call for allocated healthy devices failed: containers fail to start with
"device plugin PreStartContainer rpc failed with err".`,
		Remediation: "Read the plugin's log for the call.",
	},
	{
		Code:   PluginReregistered,
		Status: "PASS",
		Title:  "the plugin registered again after kubelet.sock was recreated",
		Explain: `accel-doctor removed kubelet.sock and the plugin's socket and made kubelet.sock
again, as a restarting kubelet does (it removes every socket of its directory
first, manager.go CleanupPluginDirectory), and the plugin registered again, the
kubelet accepted it, and its new ListAndWatch sent the list. The evidence gives
how long it took. A plugin that learns of the restart by its own socket
disappearing, and serves a new one before it registers, does what the kubelet
expects: the kubelet removes every socket, so that signal never fails.`,
	},
	{
		Code:   PluginReregisterSlow,
		Status: "WARN",
		Title:  "the plugin registered again after kubelet.sock was recreated, slowly",
		Explain: `The plugin came back after the restart, later than --timeout: the kubelet
accepts it (it keeps the resource under a stopped endpoint for its 5-minute
endpointStopGracePeriod, types.go), but until the plugin registers the restarted
kubelet has no healthy device of the resource (capacity from its checkpoint,
allocatable 0), and a pod admitted in that window fails with "no healthy devices
present". A plugin that polls kubelet.sock finds it up to one polling period late.
The summary gives how long it took.`,
		Remediation: "Watch the device-plugin directory with inotify (kubelet.sock created, or the plugin's own socket removed) instead of polling, so that the plugin registers within milliseconds of the kubelet's restart.",
	},
	{
		Code:   PluginNoReregister,
		Status: "FAIL",
		Title:  "the plugin did not register again after kubelet.sock was recreated",
		Explain: `The kubelet removes every socket in its directory when it starts and serves a
new kubelet.sock; a plugin that does not watch for it stays unregistered: after
a kubelet restart the node shows the resource with capacity and allocatable 0
(restored from the checkpoint with no device under a stopped endpoint,
manager.go readCheckpoint) for 5 minutes, then not at all.`,
		Remediation: "Watch the directory (inotify) and register again when kubelet.sock is created (`accel-doctor plugin serve` does); restarting the plugin pod is the workaround.",
	},
	{
		Code:   PluginReregisterRefused,
		Status: "FAIL",
		Title:  "the plugin registered again after kubelet.sock was recreated, and the kubelet refused it",
		Explain: `After kubelet.sock and the plugin's socket were removed and kubelet.sock made
again, as a restarting kubelet does (manager.go CleanupPluginDirectory), the
plugin called Register, and the kubelet refused it: most often the plugin did
not make its socket again, so the kubelet's dial back failed ("failed to dial
device plugin: ..."). The resource then stays as the restarted kubelet restored
it from its checkpoint (manager.go readCheckpoint): capacity and allocatable 0
under a stopped endpoint, dropped after 5 minutes. The evidence gives the
kubelet's answer.`,
		Remediation: "When kubelet.sock is created, make the plugin's socket again if it is gone, serve on it, and only then Register (`accel-doctor plugin serve` does).",
	},
	{
		Code:   PluginNotRun,
		Status: "NOT_RUN",
		Title:  "a check could not run",
		Explain: `The reason says why: an earlier step failed (no registration, the plugin died),
the plugin does not advertise the call, or there was no healthy device to use.`,
	},
}
