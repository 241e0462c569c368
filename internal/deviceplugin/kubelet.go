package deviceplugin

// KubeletFunc is a function of the kubelet's device manager, named as Go
// names it ("(*ManagerImpl).PluginConnected", "dial"), with the file of
// kubernetes/kubernetes (v1.37, the k8s.io/kubernetes module) it is in.
type KubeletFunc struct {
	Func string
	File string
}

// KubeletMirror is one behaviour of the kubelet's device manager and the
// `plugin test` check that judges a plugin as it does: the table
// "What the kubelet does" of docs/device-plugin.md is generated from
// KubeletMirrors, and every code of Codes is in it.
type KubeletMirror struct {
	// Does is what the kubelet does with the plugin, in its terms.
	Does string
	// Kubelet are the functions that do it.
	Kubelet []KubeletFunc
	// Check is what `plugin test` does to judge it.
	Check string
	// Codes are the findings the check reports.
	Codes []string
}

// The files of pkg/kubelet/cm/devicemanager (and the one helper) that
// KubeletMirrors cites.
const (
	kubeletManager  = "pkg/kubelet/cm/devicemanager/manager.go"
	kubeletEndpoint = "pkg/kubelet/cm/devicemanager/endpoint.go"
	kubeletPodDevs  = "pkg/kubelet/cm/devicemanager/pod_devices.go"
	kubeletTopology = "pkg/kubelet/cm/devicemanager/topology_hints.go"
	kubeletServer   = "pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go"
	kubeletHandler  = "pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go"
	kubeletClient   = "pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go"
	kubeletHelpers  = "pkg/apis/core/v1/helper/helpers.go"
)

// KubeletMirrors lists, in the order `plugin test` runs its checks, what
// the kubelet's device manager does with a plugin and the check that
// mirrors it. A plugin every check passes is one the kubelet keeps.
var KubeletMirrors = []KubeletMirror{
	{
		Does:    "Serves kubelet.sock and takes Register calls; a plugin that never calls it is not known: the node has no such resource.",
		Kubelet: []KubeletFunc{{"(*server).Start", kubeletServer}, {"(*server).Register", kubeletServer}, {"(*ManagerImpl).GetCapacity", kubeletManager}},
		Check:   "serves DIR/kubelet.sock and waits --timeout for a Register, then 0.7 s for more",
		Codes:   []string{CodeRegistered, CodeNotRegistered},
	},
	{
		Does:    "Refuses a Register whose version is not among the supported ones (v1beta1): \"requested API version %q is not supported by kubelet\".",
		Kubelet: []KubeletFunc{{"(*server).Register", kubeletServer}, {"(*server).isVersionCompatibleWithPlugin", kubeletServer}},
		Check:   "the same comparison with the API's SupportedVersions",
		Codes:   []string{CodeAPIVersion},
	},
	{
		Does:    "Refuses a resource name that is not an extended resource name: \"the ResourceName %q is invalid\".",
		Kubelet: []KubeletFunc{{"(*server).Register", kubeletServer}, {"IsExtendedResourceName", kubeletHelpers}},
		Check:   "the same rule (internal/resname)",
		Codes:   []string{CodeResourceNameInvalid},
	},
	{
		Does:    "Dials the endpoint back before it answers, waiting up to 10 s for a ready gRPC connection (WithBlock); fails the registration with \"failed to dial device plugin: ...\".",
		Kubelet: []KubeletFunc{{"(*server).connectClient", kubeletHandler}, {"(*client).Connect", kubeletClient}, {"dial", kubeletClient}},
		Check:   "dials back the same way during Register (the socket accepting, then the gRPC connection ready), then waits again to tell a socket that came up late from one that never answers gRPC",
		Codes:   []string{CodeEndpointUnreachable, CodeRegisterBeforeServe},
	},
	{
		Does:    "Calls GetDevicePluginOptions and keeps its answer (PreStartRequired, GetPreferredAllocationAvailable); a failure fails the registration. Register's own options are not read.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).PluginConnected", kubeletManager}, {"(*server).Register", kubeletServer}},
		Check:   "calls it at Register and again on its own; compares Register's options with the answer",
		Codes:   []string{CodeOptionsOK, CodeOptionsFailed, CodeOptionsMismatch},
	},
	{
		Does:    "Keeps one endpoint per socket of a resource and sends calls to the one registered last; when one goes, promotes another.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).PluginConnected", kubeletManager}, {"(*ManagerImpl).PluginDisconnected", kubeletManager}},
		Check:   "collects every Register in the window and counts the sockets of each resource",
		Codes:   []string{CodeDuplicateRegistration},
	},
	{
		Does:    "Refuses a Register from a socket it is connected to (\"device plugin already connected\") and, refusing it, drops its client of that socket: the first connection's end is never noticed.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).PluginConnected", kubeletManager}, {"(*server).connectClient", kubeletHandler}, {"(*server).deregisterClient", kubeletHandler}, {"(*server).runClient", kubeletHandler}},
		Check:   "keeps the kubelet's endpoint store (an accepted registration until its stream ends), refuses such a Register with the kubelet's words and, as the kubelet, forgets the first connection",
		Codes:   []string{CodeRegisteredTwice},
	},
	{
		Does:    "Opens one ListAndWatch stream per registration and takes every response as the resource's whole set of devices, keyed by ID; Healthy only when exactly \"Healthy\"; capacity counts all, allocatable the Healthy.",
		Kubelet: []KubeletFunc{{"(*client).Run", kubeletClient}, {"(*ManagerImpl).PluginListAndWatchReceiver", kubeletManager}, {"(*ManagerImpl).genericDeviceUpdateCallback", kubeletManager}, {"(*ManagerImpl).GetCapacity", kubeletManager}},
		Check:   "reads the kubelet's own stream of the registration for --watch; judges every list's IDs and health values, and the last list's counts",
		Codes:   []string{CodeListed, CodeListAndWatchFailed, CodeNoDevices, CodeDeviceIDDuplicate, CodeDeviceIDInvalid, CodeDeviceIDLong, CodeHealthInvalid, CodeDevicesUnhealthy, CodeNoHealthyDevices},
	},
	{
		Does:    "Moves capacity and allocatable with each list: a device that changes health or leaves the list changes them at once.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).genericDeviceUpdateCallback", kubeletManager}, {"(*ManagerImpl).GetCapacity", kubeletManager}},
		Check:   "counts health changes and devices left out during --watch, when nothing was done",
		Codes:   []string{CodeHealthFlapping, CodeDeviceRemoved},
	},
	{
		Does:    "Learns a health change only from a new ListAndWatch response.",
		Kubelet: []KubeletFunc{{"(*client).Run", kubeletClient}, {"(*ManagerImpl).PluginListAndWatchReceiver", kubeletManager}},
		Check:   "flips a device of accel-doctor's mock (SIGUSR1) six times and times each change's arrival",
		Codes:   []string{CodeHealthUpdate, CodeHealthNotReported},
	},
	{
		Does:    "When the stream ends, disconnects the plugin: the endpoint is stopped, every device unhealthy (allocatable 0), and the resource dropped after endpointStopGracePeriod (5 min).",
		Kubelet: []KubeletFunc{{"(*server).runClient", kubeletHandler}, {"(*client).Disconnect", kubeletClient}, {"(*ManagerImpl).PluginDisconnected", kubeletManager}, {"(*ManagerImpl).markResourceUnhealthy", kubeletManager}, {"(*endpointImpl).stopGracePeriodExpired", kubeletEndpoint}},
		Check:   "watches the stream to the end of the test; a call whose connection breaks while the socket goes silent is a crash",
		Codes:   []string{CodeListAndWatchEnded, CodeCrashed},
	},
	{
		Does:    "Builds topology hints from the devices' NUMA nodes, dropping nodes its machine information lacks; once one device has a node, one without fits no hint.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).deviceHasTopologyAlignment", kubeletTopology}, {"(*ManagerImpl).deviceNUMANodes", kubeletTopology}, {"(*ManagerImpl).generateDeviceTopologyHints", kubeletTopology}, {"(*ManagerImpl).filterByAffinity", kubeletManager}},
		Check:   "every device's nodes against the host's online NUMA nodes (--root), and devices with and without one",
		Codes:   []string{CodeNUMAUnknown, CodeNUMAPartial},
	},
	{
		Does:    "For a plugin that advertises it, calls GetPreferredAllocation before Allocate and takes from the first response only the devices it can give, filling the rest itself; an error fails the pod's admission.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).devicesToAllocate", kubeletManager}, {"(*ManagerImpl).callGetPreferredAllocationIfAvailable", kubeletManager}, {"(*endpointImpl).getPreferredAllocation", kubeletEndpoint}},
		Check:   "asks for 2 of the Healthy devices with the last one must-include, when advertised",
		Codes:   []string{CodePreferredOK, CodePreferredWrong, CodePreferredFailed},
	},
	{
		Does:    "Sends Allocate with one container request holding every device of the container, with no deadline of its own; fails the admission on an error or no container response, and uses the first response.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).allocateContainerResources", kubeletManager}, {"(*endpointImpl).allocate", kubeletEndpoint}},
		Check:   "Allocate of one Healthy device up to --samples times (p50, p99), then of two",
		Codes:   []string{CodeAllocateOK, CodeAllocateFailed, CodeAllocateSlow, CodeAllocateInvalid, CodeAllocateExtra},
	},
	{
		Does:    "Passes the answer's device specs, mounts, envs and CDI names to the runtime unchecked, keeping the first host path of a container path.",
		Kubelet: []KubeletFunc{{"(*podDevices).deviceRunContainerOptions", kubeletPodDevs}, {"getCDIDeviceInfo", kubeletPodDevs}},
		Check:   "host paths against the host (--root), container paths given twice, env names, CDI names against the host's specs",
		Codes:   []string{CodeAllocateHostMissing, CodeAllocatePathConflict, CodeAllocateEnvInvalid, CodeAllocateEnvUnusual, CodeAllocateCDIResolved, CodeAllocateCDIUnresolved},
	},
	{
		Does:    "Asks only for Healthy IDs of the list it holds; an ID the plugin no longer knows reaches it after its list changed under a pod.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).devicesToAllocate", kubeletManager}},
		Check:   "Allocate of an ID never listed",
		Codes:   []string{CodeUnknownIDAccepted},
	},
	{
		Does:    "For a plugin that requires it, calls PreStartContainer before each container start, with a 30 s deadline; an error fails the start.",
		Kubelet: []KubeletFunc{{"(*ManagerImpl).callPreStartContainerIfNeeded", kubeletManager}, {"(*endpointImpl).preStartContainer", kubeletEndpoint}},
		Check:   "PreStartContainer of the allocated devices, when required",
		Codes:   []string{CodePreStartOK, CodePreStartFailed},
	},
	{
		Does:    "A restart: removes every socket of its directory, serves a new kubelet.sock, and restores each resource from its checkpoint under a stopped endpoint with no device until the plugin registers again.",
		Kubelet: []KubeletFunc{{"(*server).Start", kubeletServer}, {"(*ManagerImpl).CleanupPluginDirectory", kubeletManager}, {"(*ManagerImpl).readCheckpoint", kubeletManager}, {"newStoppedEndpointImpl", kubeletEndpoint}},
		Check:   "ends its connections, removes kubelet.sock and the registered plugins' sockets, serves kubelet.sock again, and waits for an accepted Register and a list",
		Codes:   []string{CodeReregistered, CodeReregisterSlow, CodeNoReregister, CodeReregisterRefused},
	},
	{
		Does:  "(nothing of the kubelet's: a check that could not look)",
		Check: "says why, and what to do about it",
		Codes: []string{CodeNotRun},
	},
}
