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
	PluginOptionsOK             = "PLUGIN_OPTIONS_OK"
	PluginOptionsFailed         = "PLUGIN_OPTIONS_FAILED"
	PluginListed                = "PLUGIN_DEVICES_LISTED"
	PluginListAndWatchFailed    = "PLUGIN_LISTANDWATCH_FAILED"
	PluginNoDevices             = "PLUGIN_NO_DEVICES"
	PluginDeviceIDDuplicate     = "PLUGIN_DEVICE_ID_DUPLICATE"
	PluginDeviceIDInvalid       = "PLUGIN_DEVICE_ID_INVALID"
	PluginDeviceIDLong          = "PLUGIN_DEVICE_ID_LONG"
	PluginHealthInvalid         = "PLUGIN_HEALTH_INVALID"
	PluginDevicesUnhealthy      = "PLUGIN_DEVICES_UNHEALTHY"
	PluginNoHealthyDevices      = "PLUGIN_NO_HEALTHY_DEVICES"
	PluginNUMAUnknown           = "PLUGIN_NUMA_UNKNOWN"
	PluginHealthFlapping        = "PLUGIN_HEALTH_FLAPPING"
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
could not be dialled, or did not answer GetDevicePluginOptions, within the
timeout, not even after the registration. The kubelet's Register handler dials
the endpoint back before it answers (plugin/v1beta1/server.go connectClient)
and fails the registration with "failed to dial device plugin: ..." when it
cannot.`,
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
		Code:   PluginListed,
		Status: "PASS",
		Title:  "ListAndWatch listed the devices",
		Explain: `The first ListAndWatch response came, with unique IDs of at most 63 characters,
valid health values and NUMA nodes this host has. The evidence gives the count by
health and the time from registration (or connection) to the list.`,
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
		Code:   PluginNoDevices,
		Status: "FAIL",
		Title:  "the plugin lists no device",
		Explain: `ListAndWatch sent an empty list. The resource appears on the node with capacity
0; pods that request it stay Pending with "Insufficient RESOURCE". The plugin's
selector matches nothing on this host, or its discovery failed.`,
		Remediation: "Check what the plugin selects (for `accel-doctor plugin serve`, the config's selector against `accel-doctor pci`), and its log.",
	},
	{
		Code:   PluginDeviceIDDuplicate,
		Status: "FAIL",
		Title:  "two devices share one ID",
		Explain: `The kubelet keys devices by ID (manager.go genericDeviceUpdateCallback), so the
duplicates collapse into one: capacity is lower than the number of devices the
plugin lists, and the kubelet may hand one device to two containers.`,
		Remediation: "Give every device a unique ID (a PCI address, a UUID, a node name).",
	},
	{
		Code:   PluginDeviceIDInvalid,
		Status: "FAIL",
		Title:  "a device has an empty ID",
		Explain: `A device with an empty ID cannot be allocated by name, and the kubelet's
checkpoint records it as "".`,
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
		Explain: `The kubelet does not allocate them: allocatable is lower than capacity by their
number (manager.go GetCapacity). The evidence gives which. The plugin may be right
(a device lost its driver or node); check the host.`,
		Remediation: "Look at the devices on the host (`accel-doctor check`); the plugin's log says why it marked them.",
	},
	{
		Code:   PluginNoHealthyDevices,
		Status: "FAIL",
		Title:  "every device is Unhealthy",
		Explain: `The node shows capacity N and allocatable 0 for the resource (manager.go
GetCapacity): pods requesting it stay Pending with "Insufficient RESOURCE", and a
pod bound before the change fails admission with UnexpectedAdmissionError "no
healthy devices present; cannot allocate unhealthy devices".`,
		Remediation: "Look at the devices on the host (`accel-doctor check`); the plugin's log says why it marked them.",
	},
	{
		Code:   PluginNUMAUnknown,
		Status: "FAIL",
		Title:  "a device names a NUMA node this host does not have",
		Explain: `A device's TopologyInfo names a NUMA node that is not online on this host
(/sys/devices/system/node/online). The topology manager builds its hints from
these IDs (devicemanager topology_hints.go): with the single-numa-node or
restricted policy no hint aligns and pods fail admission with
TopologyAffinityError.`,
		Remediation: "Report the NUMA node the kernel gives (the PCI function's numa_node in sysfs), and no TopologyInfo when it is -1.",
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
		Status: "FAIL",
		Title:  "GetPreferredAllocation answered a wrong set",
		Explain: `The answer has the wrong size, leaves out a must-include device, names a device
that was not available, names one twice, or answers another number of containers.
The kubelet intersects the answer with what it can give (manager.go
devicesToAllocate) and fills the rest itself, so the preference is lost, and a
must-include device (one a restarted container already holds) may be dropped.`,
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
		Title:  "Allocate answered the wrong number of container responses",
		Explain: `The kubelet sends one container request and uses the first response
(manager.go allocateContainerResources: "no containers return in allocation
response" when there is none).`,
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
		Explain: `accel-doctor removed and recreated kubelet.sock, as a restarting kubelet does,
and the plugin registered again. The evidence gives how long it took.`,
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
		Code:   PluginNotRun,
		Status: "NOT_RUN",
		Title:  "a check could not run",
		Explain: `The reason says why: an earlier step failed (no registration, the plugin died),
the plugin does not advertise the call, or there was no healthy device to use.`,
	},
}
