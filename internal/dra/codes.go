package dra

import "github.com/accel-doctor/accel-doctor/internal/kubelet"

// Codes are the proposed layer-6 DRA (node side) codes, in report order,
// in the shape of kubelet.Codes. Remediations name only commands that
// exist: kubectl, systemctl, journalctl, crictl, ls, rm, nvidia-smi,
// accel-doctor.
var Codes = []kubelet.ProposedCode{{
	Code:   "DRA_STATE_NOT_READ",
	Status: "NOT_RUN",
	Title:  "the kubelet's DRA state could not be read: prepared claims are not known",
	Explain: `/var/lib/kubelet/dra_manager_state is there but could not be read (permissions, a
FIFO, socket or directory where the file should be, which is never opened, a symlink loop, a
file larger than any state the kubelet writes), or a snapshot did not capture it. Nothing is
said of the claims it holds. The file is absent on a node whose kubelet never ran with DRA
on (the DynamicResourceAllocation feature, on by default since 1.34): that is no finding.`,
	Remediation: "Run `accel-doctor check` as root on the node, or take the snapshot again with `accel-doctor snapshot`.",
	Facts:       "StateState == NotCaptured || StateState in (Unreadable, Denied) && State == nil && !StateMalformed",
}, {
	Code:   "DRA_STATE_CHECKSUM",
	Status: "FAIL",
	Title:  "the kubelet's DRA state does not verify: the kubelet will not start",
	Explain: `dra_manager_state is the JSON {"Data": TEXT, "Checksum": N}, where N is the CRC-32
(IEEE) of TEXT (pkg/kubelet/cm/dra/state/checkpoint.go). The kubelet verifies it when its DRA
manager is created; a mismatch, a file that is not that JSON, or a Data that does not decode
is an error there, which fails the container manager: the kubelet exits at start ("could not
initialize checkpoint manager, please drain node and remove DRA state file", or "GetOrCreate()
on checkpoint state"). The evidence gives the stored and the computed checksums.`,
	Remediation: "Drain the node (`kubectl drain NODE --ignore-daemonsets`), stop the kubelet (`systemctl stop kubelet`), remove the file (`rm /var/lib/kubelet/dra_manager_state`), start the kubelet (`systemctl start kubelet`), read `journalctl -u kubelet`, and uncordon (`kubectl uncordon NODE`).",
	Facts:       "StateMalformed || !State.ChecksumOK || State.DataErr != \"\"",
}, {
	Code:   "DRA_CLAIM_CDI_UNRESOLVED",
	Status: "FAIL",
	Title:  "a prepared claim's CDI device is declared by no CDI spec on the node",
	Explain: `The kubelet's DRA state lists the claim as prepared, with the CDI device IDs its
driver answered in NodePrepareResources; the kubelet hands those IDs to the runtime for every
container of the claim. No valid spec in /etc/cdi or /var/run/cdi declares the ID, so the
runtime fails to create the container: "unresolvable CDI devices ID" (containerd and CRI-O,
from the CDI library), and the pod stays in ContainerCreating or CrashLoopBackOff. The usual
cause is a reboot: drivers write per-claim specs into /var/run/cdi, a tmpfs, while the state
survives in /var/lib/kubelet. A kubelet that restarts marks restored claims unprepared and
calls NodePrepareResources again (newClaimInfoFromState, claiminfo.go), which helps only when
the driver rewrites the spec then; a running kubelet does not ask again. The evidence says
whether the state was written before the current boot.`,
	Remediation: "Restart the DRA driver's pod on this node so that it regenerates its specs (`kubectl -n NAMESPACE delete pod DRIVER-POD`), then delete the stuck pod so the claim is prepared again (`kubectl -n NAMESPACE delete pod POD`); check with `ls /var/run/cdi` and `accel-doctor cdi validate`.",
	Facts:       "CDI[i].Resolve == Unresolved (Invalid: a driver answered a name that is not a qualified CDI name)",
}, {
	Code:   "DRA_CLAIM_NO_DEVICE",
	Status: "WARN",
	Title:  "a claim in the kubelet's DRA state holds no prepared device of its driver",
	Explain: `The kubelet's DRA state lists the claim, allocated devices of this driver, and no
device the driver prepared. The kubelet writes a claim to its state before it calls the
driver's NodePrepareResources and adds the devices the driver answers after, so this is one
of two things. The prepare has not succeeded yet: the pod stays in ContainerCreating and its
events give the kubelet's error. Or the driver answered with no device and no error: the
kubelet counts the claim prepared and starts the containers, which then get nothing from the
claim (no device node, no CDI edit), and the workload finds no device (CUDA_ERROR_NO_DEVICE,
an empty /dev/dri). The API allows an empty answer, for devices that need nothing in the
container, so this is not a FAIL by itself.`,
	Remediation: "Look at the pod: `kubectl -n NAMESPACE describe pod POD` (a FailedPrepareDynamicResources event means the prepare failed; a Running pod means the driver answered with no device); then read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`) for the claim's UID.",
	Facts:       "State.Claims[i].Drivers[j].Devices empty, SkipNodeOperations without NodePrepareResources or \"*\" (Node.NoDeviceClaims)",
}, {
	Code:   "DRA_CLAIM_CDI_NOT_CHECKED",
	Status: "NOT_RUN",
	Title:  "whether a prepared claim's CDI device resolves could not be checked",
	Explain: `A CDI spec directory (/etc/cdi, /var/run/cdi) could not be listed, or a snapshot
did not capture it: a spec there may or may not declare the claim's CDI device, so nothing is
said of it. The reason names the directory.`,
	Remediation: "Run `accel-doctor check` as root on the node itself, or take the snapshot again with `accel-doctor snapshot`.",
	Facts:       "CDI[i].Resolve == ResolveUnknown",
}, {
	Code:   "DRA_STATE_FROM_EARLIER_BOOT",
	Status: "PASS",
	Title:  "the DRA state was last written before the current boot",
	Explain: `The state has no boot ID; its mtime is before the kernel's boot time (btime in
/proc/stat). Its claims were prepared in an earlier boot; any per-claim CDI spec their drivers
wrote into /var/run/cdi (a tmpfs) is gone unless the driver rewrote it. Evidence for
DRA_CLAIM_CDI_UNRESOLVED.`,
	Facts: "WrittenBeforeBoot",
}, {
	Code:   "DRA_REGISTRATION_DEAD",
	Status: "FAIL",
	Title:  "a DRA registration socket is left behind by a driver that no longer runs",
	Explain: `Connecting to the socket in /var/lib/kubelet/plugins_registry gave ECONNREFUSED:
no process listens. The driver's pod exited without removing it. The kubelet dropped the
driver when the socket stopped answering; claims of that driver are not prepared ("DRA driver
NAME is not registered") and its ResourceSlices are deleted about 30 s later, after which the
scheduler sees none of its devices.`,
	Remediation: "Find the driver's pod and why it stopped: `kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`, `kubectl -n NAMESPACE logs --previous DRIVER-POD`, or `crictl ps -a` on the node.",
	Facts:       "Registrations[i].Dial.Answer == Refused",
}, {
	Code:   "DRA_REGISTRATION_NOT_ANSWERING",
	Status: "FAIL",
	Title:  "a registration socket accepts connections but does not answer GetInfo with its PluginInfo",
	Explain: `The kubelet's plugin watcher calls GetInfo on every socket in plugins_registry
(GenerateRegisterPluginFunc, pkg/kubelet/pluginmanager/operationexecutor) and registers
nothing when it fails ("failed to get plugin info using RPC GetInfo"). The socket timed out,
did not speak gRPC, answered the Registration service as Unimplemented, or answered GetInfo
with an error status.`,
	Remediation: "Read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`) and restart it (`kubectl -n NAMESPACE delete pod DRIVER-POD`).",
	Facts:       "Registrations[i].Dial.Answer in (TimedOut, Failed, Unimplemented), or Answered with an error status (Info == nil)",
}, {
	Code:   "DRA_REGISTRATION_WRONG_TYPE",
	Status: "WARN",
	Title:  "a registration of another plugin type names a DRA driver's socket",
	Explain: `GetInfo answered a type other than DRAPlugin (CSIPlugin, DevicePlugin) with an
endpoint named dra.sock, the service socket kubeletplugin (the DRA drivers' helper library)
makes. The kubelet's plugin watcher hands a registration to the handler of its type, so a DRA
driver that says CSIPlugin is never registered with the DRA manager and its claims wait as for a
driver that is not registered. A WARN, not a FAIL: a plugin of that type may name its socket so.`,
	Remediation: "Check how the driver registers (its type must be DRAPlugin): read its log, `kubectl -n NAMESPACE logs DRIVER-POD`.",
	Facts:       "Registrations[i].Info.Type != DRAPlugin && base(Info.Endpoint) == dra.sock",
}, {
	Code:   "DRA_UNSUPPORTED_VERSION",
	Status: "FAIL",
	Title:  "a DRA driver registers only gRPC services this kubelet does not speak",
	Explain: `GetInfo's supported_versions lists the DRA gRPC services the driver serves. A
1.37 kubelet speaks v1.DRAPlugin and v1beta1.DRAPlugin and rejects a registration naming
neither ("none of services supported by the plugin ... are supported by the kubelet"): the
driver is not registered. Drivers built for 1.31 and earlier registered version strings such
as "1.0.0" or v1alpha4.`,
	Remediation: "Upgrade the DRA driver to a release built for this Kubernetes version (check the driver's Helm chart or DaemonSet image with `kubectl -n NAMESPACE get daemonset -o wide`).",
	Facts:       "Registrations[i].Unsupported",
}, {
	Code:   "DRA_ENDPOINT_MISSING",
	Status: "FAIL",
	Title:  "a DRA driver's registration names an endpoint that does not accept connections",
	Explain: `GetInfo answered with the driver's name and the path of its DRA service socket,
and that path does not exist, is not a socket, refuses connections or is not absolute. The
kubelet dials the endpoint for NodePrepareResources; every claim of the driver fails to
prepare and its pods stay in ContainerCreating. A driver whose data directory is not mounted
at the same host path in its pod and in the kubelet (hostPath /var/lib/kubelet/plugins/NAME)
answers such an endpoint.`,
	Remediation: "Compare the endpoint with the driver DaemonSet's hostPath mounts (`kubectl -n NAMESPACE get daemonset DRIVER -o yaml`), check `ls -l` of the path, and restart the driver pod.",
	Facts:       "Registrations[i].Endpoint.Dial.Answer != Connected",
}, {
	Code:   "DRA_REGISTRATION_OK",
	Status: "PASS",
	Title:  "a DRA driver's registration answers GetInfo and its endpoint accepts connections",
	Explain: `The socket in /var/lib/kubelet/plugins_registry answered GetInfo as a DRAPlugin
with a gRPC service the kubelet speaks (v1.DRAPlugin or v1beta1.DRAPlugin), and the endpoint
it names accepts a connection: what the kubelet's plugin watcher needs to register the driver
(ValidatePlugin, RegisterPlugin in pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go) and its
DRA manager to reach it. Whether the running kubelet did register it is not read (only
NotifyRegistrationStatus, which is never called here, would say), and a connection proves a
listener, not that NodePrepareResources works.`,
	Facts: "Registrations[i].Live() && Info.Type == DRAPlugin && !Unsupported",
}, {
	Code:   "DRA_DRIVER_NOT_REGISTERED",
	Status: "FAIL",
	Title:  "a DRA driver serves on the node but is not registered with the kubelet",
	Explain: `/var/lib/kubelet/plugins/NAME holds a socket that accepts connections (a driver
runs), and no live registration in plugins_registry names the driver or an endpoint in that
directory: its registration socket is missing, dead, silent or rejected. Pods whose claims
the driver must prepare stay in ContainerCreating with "DRA driver NAME is not registered".
A registration socket made before the kubelet started is not the cause by itself: the
kubelet's plugin watcher registers every socket already in the directory when it starts.`,
	Remediation: "Restart the driver's pod so that it registers again (`kubectl -n NAMESPACE delete pod DRIVER-POD`); check that its DaemonSet mounts /var/lib/kubelet/plugins_registry (`kubectl -n NAMESPACE get daemonset DRIVER -o yaml`).",
	Facts:       "DriverDirs[i].NotRegistered() (never when RegistryUnknown)",
}, {
	Code:   "DRA_DRIVER_NOT_RUNNING",
	Status: "FAIL",
	Title:  "a DRA driver is installed on the node but its kubelet plugin is not running",
	Explain: `/var/lib/kubelet/plugins/NAME is a DRA driver's directory (it holds the driver's
service socket dra.sock, or is named for a vendor's DRA driver), every socket in it refuses
connections, and no registration in plugins_registry names the driver: the driver's
DaemonSet ran here (it made the directory and bound the socket) and its kubelet plugin has
exited, crashes at start, or was removed without its directory. The kubelet does not know
the driver: pods whose claims it must prepare stay in ContainerCreating with the kubelet's
"DRA driver NAME is not registered", and the node's devices of that driver are not
published (its ResourceSlices are deleted a while after the driver is gone). Devices of the
driver's vendor that no device plugin serves follow from this finding.`,
	Remediation: "Find the driver's kubelet-plugin pod on this node and why it is not running: `kubectl get pods -A -o wide --field-selector spec.nodeName=NODE | grep -i NAME`, then `kubectl -n NAMESPACE describe pod POD` and `kubectl -n NAMESPACE logs POD --previous`; check its DaemonSet's node selector and tolerations (`kubectl get daemonsets -A | grep -i kubelet-plugin`). If the driver was removed for good, delete the directory.",
	Facts:       "DriverDirs[i].NotRunning() (never when RegistryUnknown or a socket could not be tried)",
}, {
	Code:   "DRA_CLAIM_DRIVER_NOT_REGISTERED",
	Status: "WARN",
	Title:  "the kubelet holds prepared claims of a driver that is not registered",
	Explain: `The DRA state lists claims prepared by a driver with no live registration on the
node. Running containers keep their devices; when their pods end, the kubelet cannot call
NodeUnprepareResources and the pods stay Terminating, and new pods with claims of that driver
stay in ContainerCreating.`,
	Remediation: "Start the driver on the node again (`kubectl -n NAMESPACE rollout status daemonset/DRIVER`); if it was removed on purpose, delete the pods that use its claims first (`kubectl -n NAMESPACE delete pod POD`).",
	Facts:       "State.Claims[i].Drivers[j].Driver not in Registered()",
}, {
	Code:   "DRA_RUNTIME_NO_CDI",
	Status: "FAIL",
	Title:  "the container runtime does not resolve CDI devices, and a DRA driver hands it CDI devices",
	Explain: `The node has a DRA driver (a live registration, or claims it prepared in the
kubelet's DRA state). A DRA driver answers NodePrepareResources with CDI device names, which
the kubelet passes to the runtime in CreateContainer (ContainerConfig.CDIDevices and the
cdi.k8s.io annotations); only the runtime resolves them against the driver's spec files. This
runtime has CDI turned off in its configuration (containerd 1.7: enable_cdi is false unless
set, internal/cri/config; Docker Engine 25.0-28.1: "features": {"cdi": true} is needed) or no
CDI support at all (containerd before 1.7, CRI-O before 1.24, Docker Engine before 25): the
claim is prepared and the container has none of its devices (no /dev/nvidia* in the pod), or
fails to start. It is a WARN instead of a FAIL when another CRI runtime on the node can serve
the driver: which one the kubelet's --container-runtime-endpoint names is not read. The same
runtime facts are layer 5's CDI_DISABLED and CDI_RUNTIME_NO_CDI for one container; this code
is the join with the node's DRA driver, which holds whether or not a container runs.`,
	Remediation: "containerd: set enable_cdi = true (and cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]) in the CRI plugin's table of /etc/containerd/config.toml, then `systemctl restart containerd` and check with `crictl info`; Docker Engine: add \"features\": {\"cdi\": true} to /etc/docker/daemon.json and `systemctl restart docker`; a runtime without CDI support: upgrade it (containerd >= 1.7, CRI-O >= 1.24). Then delete the pods of the claims (`kubectl -n NAMESPACE delete pod POD`) and run `accel-doctor check --layer kube` again.",
	Facts:       "RuntimeCDI.Serve(rt, driver).Answer == NoCDI",
}, {
	Code:   "DRA_RUNTIME_CDI_TOO_OLD",
	Status: "FAIL",
	Title:  "the container runtime's CDI library refuses the cdiVersion of a DRA driver's specs",
	Explain: `Every CDI library release refuses a spec whose cdiVersion it does not know ("invalid
version") and skips the file: none of its devices resolves, and the runtime fails the
containers of the driver's claims with "unresolvable CDI devices". The driver's spec (one it
wrote for a prepared claim, or one whose vendor is the driver's name, as k8s.gpu.nvidia.com
is gpu.nvidia.com's) declares a cdiVersion newer than the runtime's library loads, read from
the runtime binary's build information or inferred from its release (internal/cdi's table of
the runtimes' go.mod). It is a WARN when another CRI runtime on the node can load it.`,
	Remediation: "Upgrade the runtime to a release the finding names (containerd, CRI-O), then `systemctl restart containerd` (or crio); or configure the DRA driver to write an older cdiVersion if it has such an option. Check with `accel-doctor cdi validate`.",
	Facts:       "RuntimeCDI.Serve(rt, driver).Answer == TooOld",
}, {
	Code:   "DRA_RUNTIME_CDI_OK",
	Status: "PASS",
	Title:  "the container runtime resolves the CDI devices of the node's DRA driver",
	Explain: `CDI is on in the runtime's configuration (or by its release's default, which the
evidence names) and its CDI library loads the cdiVersion of every spec of the driver on the
node. A driver that has written no spec yet is judged only on CDI being on.`,
	Facts: "RuntimeCDI.Serve(rt, driver).Answer == Serves",
}, {
	Code:   "DRA_RUNTIME_CDI_NOT_CHECKED",
	Status: "NOT_RUN",
	Title:  "whether the container runtime serves the DRA driver's CDI devices is not known",
	Explain: `No CRI runtime binary (containerd, crio, dockerd with cri-dockerd) was found under
the PATH directories, its configuration could not be read (it may turn CDI off), the default
of its release is not known, or which CDI library it is built with is not known.`,
	Remediation: "Run `accel-doctor check --layer kube` as root on the node itself (not in a container without the host's /usr and /etc), or read `crictl info` for enableCDI.",
	Facts:       "RuntimeCDI.NotFound != \"\" || RuntimeCDI.Serve(rt, driver).Answer == AnswerUnknown",
}, {
	Code:   "DRA_DOUBLE_ADVERTISED",
	Status: "WARN",
	Title:  "a device is advertised both by a device plugin and by a DRA driver",
	Explain: `The device manager's checkpoint registers the device for a device plugin's
resource (RegisteredDevices), and a CDI spec of a DRA driver names the same device (the same
GPU UUID, PCI address or device node). The scheduler counts it twice, as extended-resource
capacity and as a ResourceSlice device, so a pod asking nvidia.com/gpu and another with a
claim can be given the same GPU. The evidence names both sides and what they share.`,
	Remediation: "Run one of the two on this node: remove the device plugin (`kubectl -n NAMESPACE delete daemonset PLUGIN`, or label the node so its DaemonSet's nodeSelector excludes it with `kubectl label node NODE KEY=VALUE`), or disable the DRA driver there.",
	Facts:       "Double[i]",
}, {
	Code:   "DRA_DOUBLE_NOT_CHECKED",
	Status: "NOT_RUN",
	Title:  "whether a device is advertised twice could not be checked",
	Explain: `The device manager's checkpoint could not be read (or a snapshot does not hold it:
it is never archived, as its AllocateResponses may carry secrets).`,
	Remediation: "Run `accel-doctor check` on the node itself.",
	Facts:       "DoubleNotRun != \"\"",
}}
