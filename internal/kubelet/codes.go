package kubelet

// ProposedCode is a finding code this package's facts support, for the
// layer-6 catalog that internal/diagnose keeps. Status is the outcome the
// code is meant for; internal/diagnose decides. Remediations name only commands
// that exist: kubectl, systemctl, journalctl, crictl, ls, rm, nvidia-smi.
type ProposedCode struct {
	Code        string
	Status      string // PASS, WARN, FAIL or NOT_RUN
	Title       string
	Explain     string
	Remediation string
	// Facts names the Node fields the code is decided from.
	Facts string
}

// Codes are the proposed layer-6 (node side) codes, in report order.
var Codes = []ProposedCode{{
	Code:   "KUBELET_NOT_READ",
	Status: "NOT_RUN",
	Title:  "the kubelet's directory could not be read: layer 6 could not look",
	Explain: `The device-plugin directory is there but listing it failed (permission, I/O), or a
snapshot was taken without it. Nothing is concluded about the node's plugins.`,
	Remediation: "Run as root, or take the snapshot on the node as root: `accel-doctor snapshot node.tgz`.",
	Facts:       "DirState in (Unreadable, Denied, NotCaptured)",
}, {
	Code:   "KUBELET_SOCKET_OK",
	Status: "PASS",
	Title:  "kubelet.sock is served: plugins can register",
	Explain: `A gRPC server answered on /var/lib/kubelet/device-plugins/kubelet.sock (the
kubelet answers the health call made Unimplemented, which proves it serves gRPC there).`,
	Facts: "Kubelet.Dial.OK()",
}, {
	Code:   "KUBELET_PLUGIN_OK",
	Status: "PASS",
	Title:  "a plugin socket answers and is newer than kubelet.sock",
	Explain: `The plugin answered GetDevicePluginOptions on its socket, and the socket was bound
after kubelet.sock, so it can belong to a registration with the running kubelet. When
the resource is known (from the socket's name), the checkpoint or PodResources confirms
the kubelet has it.`,
	Facts: "Plugins[i].Dial.OK() && !OlderThanKubelet",
}, {
	Code:   "KUBELET_PLUGIN_DUPLICATE",
	Status: "WARN",
	Title:  "two answering plugin sockets serve one resource: two plugin instances registered it",
	Explain: `The kubelet keeps one endpoint per resource; a second registration of the same
resource replaces the first in the kubelet's view while the first instance keeps
running and may keep sending device lists (devicemanager manager.go, PluginConnected).
During a rolling update of a plugin DaemonSet this lasts seconds; when it lasts, the
device list the kubelet holds and the instance that answers Allocate can disagree, and
pods fail admission with UnexpectedAdmissionError ("unknown device"). The socket names
say the resource by the plugins' naming conventions.`,
	Remediation: "List the plugin pods on the node (`kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`) and delete the older instance (`kubectl -n NAMESPACE delete pod POD`); give the DaemonSet an update strategy without surge (rollingUpdate.maxSurge 0).",
	Facts:       "two or more Plugins with the same Resource, Dial.OK(), not OlderThanKubelet",
}, {
	Code:   "KUBELET_PLUGIN_NOT_REGISTERED",
	Status: "FAIL",
	Title:  "a plugin serves its socket, but the kubelet has no record of its resource",
	Explain: `The plugin answers on its socket and the socket's name says which resource it
serves, yet the kubelet does not have that resource: PodResources' allocatable list and
the checkpoint, which the kubelet rewrote after the socket was bound, both lack it. A
registration the kubelet accepted is followed at once by the plugin's first device
list, which makes the kubelet write the checkpoint with the resource in
RegisteredDevices (manager.go genericDeviceUpdateCallback, writeCheckpoint), even an
empty one. So the Register call failed: an unsupported API version, a plugin that
registered before it served (the kubelet's dial back timed out: "context deadline
exceeded"), an invalid resource name. The plugin's log has the kubelet's answer.`,
	Remediation: "Read the plugin's log for the Register error (`kubectl -n NAMESPACE logs PLUGIN-POD`) and the kubelet's (`journalctl -u kubelet | grep -i 'device plugin'`); fix the plugin, then restart its pod (`kubectl -n NAMESPACE delete pod PLUGIN-POD`).",
	Facts:       "Plugins[i].Resource != \"\", answering, not in Checkpoint.Registered (checkpoint newer than the socket) nor in PodResources' allocatable",
}, {
	Code:   "KUBELET_PLUGIN_REGISTRATION_UNKNOWN",
	Status: "NOT_RUN",
	Title:  "whether the kubelet accepted this plugin's registration could not be told",
	Explain: `The socket answers, but nothing on the node can confirm the registration: the
resource is not known from the socket's name, or PodResources does not answer and the
checkpoint was not written since the socket was bound (or is unreadable).`,
	Remediation: "Check the node's allocatable resources: `kubectl get node NODE -o jsonpath='{.status.allocatable}'`.",
	Facts:       "answering plugin socket, resource unconfirmed",
}, {
	Code:   "KUBELET_RESOURCE_NO_PLUGIN",
	Status: "FAIL when the running kubelet wrote the checkpoint, WARN otherwise",
	Title:  "the kubelet holds a resource that no plugin socket serves",
	Explain: `The checkpoint's RegisteredDevices names the resource, and the device-plugin
directory has no socket for it, and PodResources does not list it allocatable. A socket
whose resource its name does not tell, if it answers, may be that plugin: then whether one
serves it is NOT_RUN, naming the socket, unless PodResources accounts for every such socket
(each live socket is one resource's, and each resource it lists allocatable with no socket
of its naming has one of them); a dead one serves nothing. A plugin
that did not register again after a kubelet restart leaves exactly this: the kubelet
wiped its socket, restored the resource from the checkpoint with no device, and counts
capacity 0 and allocatable 0 until it drops the resource 5 minutes later
(endpointStopGracePeriod); pods asking for it are Pending with "Insufficient RESOURCE",
or fail admission with "no healthy devices present". A plugin removed on purpose leaves
it too, until the kubelet next rewrites the checkpoint: hence WARN when the checkpoint
predates the running kubelet's kubelet.sock.`,
	Remediation: "Find the plugin's pod on the node (`kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`) and restart it (`kubectl -n NAMESPACE delete pod PLUGIN-POD`); a plugin that does not register again after a kubelet restart needs an upgrade.",
	Facts:       "Checkpoint.Registered has the resource; no Plugins[i] with that Resource, and none with an unknown one",
}, {
	Code:   "KUBELET_NOT_A_NODE",
	Status: "NOT_RUN",
	Title:  "no kubelet device-plugin directory: this host is not a Kubernetes node (or its kubelet uses another --root-dir)",
	Explain: `/var/lib/kubelet/device-plugins does not exist. The kubelet's device manager
creates it when it starts (plugin/v1beta1/server.go, os.MkdirAll), so a node whose
kubelet ever ran has it. Layer 6 has nothing to judge on this host. A kubelet
started with --root-dir keeps it under that directory instead.`,
	Remediation: "Nothing to do on a host that is not a node. On a node, find the kubelet's --root-dir with `systemctl cat kubelet`: layer 6 reads the directory it names.",
	Facts:       "DirState == Absent",
}, {
	Code:   "KUBELET_SOCKET_MISSING",
	Status: "FAIL when accelerators have a driver and nodes, WARN otherwise",
	Title:  "the device-plugin directory has no kubelet.sock: no plugin can register",
	Explain: `Plugins register by calling the kubelet's Registration service on
/var/lib/kubelet/device-plugins/kubelet.sock. The kubelet binds it when its device
manager starts and removes it when it stops cleanly (the listener is closed). Without
it the kubelet is stopped, or still starting, and every plugin's Register fails with
"connection refused" or "no such file"; the node advertises no extended resource.`,
	Remediation: "Start the kubelet: `systemctl start kubelet`, and read why it stopped: `journalctl -u kubelet`.",
	Facts:       "DirState == Present && Kubelet == nil",
}, {
	Code:   "KUBELET_SOCKET_NOT_ANSWERING",
	Status: "FAIL",
	Title:  "kubelet.sock is there but no gRPC server answers on it",
	Explain: `A connect to kubelet.sock was refused (no process listens: a kubelet that was
killed leaves the socket behind, a clean stop removes it), timed out, or the server did
not speak gRPC. The only call made is grpc.health.v1 Health/Check, which the kubelet
answers Unimplemented: Register, the one method of its Registration service, changes
the kubelet's state and is never called. Plugins cannot register until a kubelet
serves the socket again, and then each must register anew.`,
	Remediation: "Restart the kubelet (`systemctl restart kubelet`) and read its log (`journalctl -u kubelet`); then check that every plugin registered again (plugin sockets newer than kubelet.sock).",
	Facts:       "Kubelet.Dial.Answer in (Refused, TimedOut, Failed)",
}, {
	Code:   "KUBELET_PLUGIN_SOCKET_STALE",
	Status: "FAIL",
	Title:  "a plugin socket is older than kubelet.sock: the plugin did not register with the running kubelet",
	Explain: `When its device manager starts, the kubelet removes every socket in
/var/lib/kubelet/device-plugins (ManagerImpl.CleanupPluginDirectory, called from
server.Start) and then binds kubelet.sock. A plugin must notice that its socket is gone
(or that kubelet.sock was recreated), serve a new socket and register again; one that
does not keeps serving a socket the kubelet no longer knows. A socket whose mtime
(the time it was bound) is before kubelet.sock's survived the sweep or was made for an
earlier kubelet: the running kubelet has not had a registration for it. The usual
symptom: after a kubelet restart the node's capacity for the resource stays, and
allocatable is 0 (the kubelet marks an endpoint it lost unhealthy, then drops it after
endpointStopGracePeriod, 5 minutes).`,
	Remediation: "Restart the plugin's pod so that it registers again: `kubectl -n NAMESPACE delete pod PLUGIN-POD` (the DaemonSet makes a new one), or `kubectl -n NAMESPACE rollout restart daemonset/PLUGIN`; then upgrade to a plugin version that re-registers when kubelet.sock is recreated.",
	Facts:       "Plugins[i].OlderThanKubelet (with both mtimes as evidence)",
}, {
	Code:   "KUBELET_PLUGIN_SOCKET_DEAD",
	Status: "FAIL",
	Title:  "a plugin socket is left behind by a plugin that no longer runs",
	Explain: `Connecting to the socket gave ECONNREFUSED: the file is a socket and no process
listens on it. The plugin exited (crashed, OOM-killed, its pod deleted) without removing
it. The kubelet's stream to the plugin broke when it exited: its devices are unhealthy
at once and the resource is removed after 5 minutes, so pods asking for it are Pending
with "Insufficient RESOURCE".`,
	Remediation: "Find the plugin's pod and why it stopped: `kubectl -n NAMESPACE get pods -o wide`, `kubectl -n NAMESPACE logs --previous PLUGIN-POD`, or `crictl ps -a` on the node; once it runs again it replaces the socket.",
	Facts:       "Plugins[i].Dial.Answer == Refused",
}, {
	Code:   "KUBELET_PLUGIN_NOT_ANSWERING",
	Status: "FAIL",
	Title:  "a plugin socket accepts connections but its plugin does not answer GetDevicePluginOptions",
	Explain: `The connect succeeded, and then no gRPC answer came within the timeout, or the
server did not speak gRPC, or it answered the DevicePlugin service as Unimplemented (a
socket of something else, or a plugin built against another API version). The kubelet
calls GetDevicePluginOptions when a plugin registers (ManagerImpl.PluginConnected) and
refuses the registration when it fails ("failed to get device plugin options").`,
	Remediation: "Read the plugin's log: `kubectl -n NAMESPACE logs PLUGIN-POD`; restart it: `kubectl -n NAMESPACE delete pod PLUGIN-POD`.",
	Facts:       "Plugins[i].Dial.Answer in (TimedOut, Failed, Unimplemented)",
}, {
	Code:   "KUBELET_PLUGIN_SOCKET_NOT_SOCKET",
	Status: "WARN",
	Title:  "a regular file is named like a plugin socket",
	Explain: `A regular file (not a socket) stands in the device-plugin directory under a
socket's name. No plugin listens on it; a plugin that binds that path fails with
"address already in use" unless it removes the file first. Such files come from a
hostPath volume of type File or FileOrCreate pointing at a socket path, or from a copy
of the directory. The kubelet removes only sockets when it starts, so it stays.`,
	Remediation: "Remove it and restart the plugin: `rm /var/lib/kubelet/device-plugins/NAME`, then `kubectl -n NAMESPACE delete pod PLUGIN-POD`.",
	Facts:       "Plugins[i].Dial.Answer == NotSocket",
}, {
	Code:   "KUBELET_NO_PLUGIN_FOR_ACCELERATOR",
	Status: "FAIL",
	Title:  "accelerators have a driver and device nodes but neither a device plugin nor a DRA driver serves them",
	Explain: `Layers 1-3 found devices bound to a driver with their nodes, and the node shows
no trace of what hands them to pods: no socket named by the vendor device plugin's
convention, the resource it registers (nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915 or
xe, habana.ai/gaudi, aws.amazon.com/neuron...) neither in the checkpoint's
RegisteredDevices nor allocatable in PodResources, and none of the vendor's DRA drivers
(gpu.nvidia.com, gpu.amd.com, gpu.intel.com, gaudi.intel.com...) registered in
plugins_registry. Pods asking for the resource are Pending with "Insufficient RESOURCE";
pods with claims of the DRA driver stay Pending with no device to allocate. When the
kubelet does not serve kubelet.sock, or the vendor's DRA driver is installed and down
(DRA_DRIVER_NOT_RUNNING, DRA_REGISTRATION_DEAD...), this finding follows from that one. It
is NOT_RUN when the registrations could not be read, or a registered DRA driver of no
vendor known here may publish the devices (its ResourceSlices say). A generic plugin under
another resource name may serve them: the evidence lists every resource the node knows.`,
	Remediation: "Deploy one of the vendor's device plugin DaemonSet (or the GPU operator) or its DRA driver on this node, not both (both would advertise the same devices twice), and check that its pod runs here: `kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`. Where a finding above is its cause, fix that one first.",
	Facts:       "PluginFor(driver): Known && len(Seen) == 0 && no answering socket; and no VendorPlugin.DRADrivers entry Registered on the DRA side",
}, {
	Code:   "KUBELET_ACCELERATOR_SERVED_BY_DRA",
	Status: "PASS",
	Title:  "accelerators with no device plugin are served by their vendor's DRA driver",
	Explain: `The node runs no device plugin for these devices, and a DRA driver of their vendor
(gpu.nvidia.com for NVIDIA GPUs, gpu.amd.com for AMD, gpu.intel.com for Intel GPUs,
gaudi.intel.com for Gaudi) answers GetInfo on its registration socket with a version the
kubelet speaks, and its endpoint accepts connections: the node hands the devices out through
ResourceClaims and needs no device plugin. Whether the driver publishes every one of these
devices is in the node's ResourceSlices (` + "`kubectl get resourceslices --field-selector spec.nodeName=NODE`" + `), which this check does not read.`,
	Facts: "no device plugin for the driver, and dra.Node.Registered(name) for a name in VendorPlugin.DRADrivers",
}, {
	Code:   "KUBELET_CHECKPOINT_CORRUPT",
	Status: "FAIL",
	Title:  "the device manager's checkpoint does not verify: the kubelet starts without its allocations",
	Explain: `kubelet_internal_checkpoint holds which container has which device. On start the
kubelet reads it and verifies its checksum (FNV-1a of the go-spew printout of Data,
pkg/kubelet/checkpointmanager/checksum); a checkpoint that does not parse or whose
checksum differs is refused ("checkpoint is corrupted"), and the kubelet continues as if
no device were allocated: running containers keep their devices while the kubelet may
give the same devices to new pods. The evidence gives the stored and the computed
checksums.`,
	Remediation: "Drain the node (`kubectl drain NODE --ignore-daemonsets`), stop the kubelet (`systemctl stop kubelet`), remove the file (`rm /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`), start the kubelet (`systemctl start kubelet`) and uncordon (`kubectl uncordon NODE`).",
	Facts:       "CheckpointState in (Unreadable, Denied) || !Checkpoint.ChecksumOK",
}, {
	Code:   "KUBELET_CHECKPOINT_OLD_FORMAT",
	Status: "WARN",
	Title:  "the checkpoint is in the format of kubelets up to 1.19",
	Explain: `Device IDs are a plain list, not per NUMA node. Kubelets 1.20 and later read that
format once and rewrite it; kubelets that dropped the old reader (1.37 has none) fail to
read it and start without its allocations, as with a corrupt checkpoint.`,
	Remediation: "Drain the node before upgrading the kubelet across that boundary: `kubectl drain NODE --ignore-daemonsets`.",
	Facts:       "Checkpoint.Format == FormatV1",
}, {
	Code:   "KUBELET_CHECKPOINT_ABSENT_DEVICE",
	Status: "FAIL",
	Title:  "the checkpoint allocates a device this node no longer has",
	Explain: `A container holds, in the kubelet's checkpoint, a device ID the host does not
show: a GPU UUID no GPU in /proc/driver/nvidia/gpus has (a replaced or fallen-off-the-bus
GPU, a re-imaged node that kept /var/lib/kubelet), a PCI address or DRM card that is gone.
When that container restarts, or the kubelet restarts, the device manager finds the
device not healthy and admission fails: "previously allocated devices are no longer
healthy; cannot allocate unhealthy devices RESOURCE", shown as UnexpectedAdmissionError.
An ID of a plugin's own naming (an index, "fpga-3") is judged by what the plugin gave
the container for it alone: the device nodes of its AllocateResponse, which the kubelet
keeps in the checkpoint, or, from a plugin that gives files rather than nodes (Kubernetes'
sample device plugin mounts one file per device), the host paths it mounts; one of them
gone is the device gone (and a mount whose source is gone fails the container's creation
when it restarts). IDs the host cannot
show otherwise (a MIG UUID, an opaque ID allocated with others) are unknown, never absent.`,
	Remediation: "Delete the pods that hold the device (`kubectl -n NAMESPACE delete pod POD`), so the kubelet frees the allocation; check the hardware with `nvidia-smi -L` or `ls /sys/bus/pci/devices`.",
	Facts:       "Devices[i].Host == HostAbsent",
}, {
	Code:   "KUBELET_ALLOCATED_DEVICE_UNHEALTHY",
	Status: "WARN",
	Title:  "an allocated device is on the host but its plugin no longer reports it healthy",
	Explain: `The host has the device, and it is in neither the checkpoint's
RegisteredDevices (healthy devices at the kubelet's last write) nor PodResources'
allocatable devices (healthy now). The container that holds it keeps running; when it
restarts, admission fails with "previously allocated devices are no longer healthy".`,
	Remediation: "Read the plugin's log for the device's health (`kubectl -n NAMESPACE logs PLUGIN-POD`), and the device's state (`nvidia-smi -q`).",
	Facts:       "Devices[i].Host == HostPresent && !*Registered && (Allocatable == nil || !*Allocatable)",
}, {
	Code:   "KUBELET_ALLOCATABLE_DEVICE_ABSENT",
	Status: "FAIL",
	Title:  "a plugin advertises a device the host does not have",
	Explain: `PodResources lists as allocatable a device ID that the host does not show: the
plugin's own list is stale (it does not rescan, or keeps a device that fell off the bus).
The scheduler counts it, and a pod given it fails to start.`,
	Remediation: "Restart the plugin so that it rediscovers its devices: `kubectl -n NAMESPACE delete pod PLUGIN-POD`.",
	Facts:       "Allocatable[i].Host == HostAbsent",
}, {
	Code:   "KUBELET_NODE_REBOOTED",
	Status: "PASS",
	Title:  "the node rebooted since the kubelet last wrote its checkpoint",
	Explain: `The checkpoint's BootID (kubelets newer than 1.37 record it) differs from
/proc/sys/kernel/random/boot_id. Such a kubelet then does not trust the checkpoint's
allocations for containers that must be started again, and reallocates from the
devices its plugins report (detectNodeReboot in manager.go). The evidence says it for
the allocations that follow.`,
	Facts: "BootIDDiffers",
}, {
	Code:   "KUBELET_PODRESOURCES_UNAVAILABLE",
	Status: "NOT_RUN",
	Title:  "PodResources does not answer: which container holds which device is not known",
	Explain: `/var/lib/kubelet/pod-resources/kubelet.sock is missing, refused or did not answer
List. GetAllocatableResources may be answered with an error by kubelets before 1.28 where
the KubeletPodResourcesGetAllocatable feature gate is off.`,
	Remediation: "Check that the kubelet runs: `systemctl status kubelet`.",
	Facts:       "PodResources == nil || !PodResources.List.Succeeded()",
}}
