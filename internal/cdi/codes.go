package cdi

// Code is a proposed catalog entry: the finding code a fact kind
// becomes, its status, and what `accel-doctor explain` would print. The
// diagnose layer owns the catalog; these entries are written here so
// that the facts can be turned into findings mechanically (cli/cdi.go
// does, for `accel-doctor cdi`).
type Code struct {
	Code   string
	Status string // PASS, WARN, FAIL or NOT_RUN: a function of the kind alone
	Kinds  []Kind
	Title  string
	// Explain: what it means, how it was decided, why it matters.
	Explain string
	// Remediation: what to do (non-PASS codes).
	Remediation string
}

// Codes is the proposed catalog of layer 5's CDI and injection findings.
var Codes = []Code{
	{Code: "CDI_SPEC_VALID", Status: "PASS", Kinds: []Kind{KindSpecLoaded},
		Title: "a CDI spec file parses and validates",
		Explain: `The file in a CDI spec directory was read and handed to the CDI library's own
parser and validation (tags.cncf.io/container-device-interface pkg/cdi), in the
order the library applies them when a runtime loads its spec directories: YAML
or JSON with no unknown field, a known cdiVersion at least as new as its fields
need, valid vendor, class and device names, valid edits, and at least one
device. The evidence gives its cdiVersion, the minimum its fields need and its
device names. A valid spec says nothing yet about the host: the node, mount and
hook findings do.`},
	{Code: "CDI_SPEC_INVALID", Status: "FAIL", Kinds: []Kind{KindSpecInvalid},
		Title: "the CDI library rejects a spec file: none of its devices resolves",
		Explain: `The CDI library refuses the file, and the evidence gives its words and the path.
A runtime that loads its spec directories records the error and skips the whole
file, so every device it declares is "unresolvable" for containers that ask for
it; other files still load. Typical causes: a YAML error, an unknown field (the
library decodes with unknown fields forbidden, so a field of a newer CDI spec
version fails on an older library), a cdiVersion lower than the fields used
need ("the spec version must be at least"), an unknown cdiVersion, or a device
without edits. A cdiVersion newer than the library accel-doctor is built with
knows is reported here too: the runtime's own library may be newer (see
CDI_VERSION_*).`,
		Remediation: "Regenerate the spec with the tool that wrote it (for NVIDIA GPUs, `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`, which writes the lowest cdiVersion its fields need), or fix the line the error names; then run `accel-doctor cdi validate` again."},
	{Code: "CDI_SPEC_UNREADABLE", Status: "NOT_RUN", Kinds: []Kind{KindSpecUnreadable, KindSpecDirUnread, KindSpecDirNotCaught},
		Title: "a CDI spec file or directory could not be read",
		Explain: `A file or directory of the CDI spec directories could not be read by
accel-doctor (permission, a FIFO or a file over 4 MiB where a spec should be), or
the capture being replayed does not show it. The runtime, which reads them as
root, may well load it, so nothing is concluded about its devices.`,
		Remediation: "Run as root on the host, or snapshot there: `accel-doctor snapshot snap.tar.gz`."},
	{Code: "CDI_NO_SPECS", Status: "NOT_RUN", Kinds: []Kind{KindSpecNone},
		Title: "there is no CDI spec file in the spec directories",
		Explain: `None of the CDI spec directories holds a .json or .yaml file, so there is
nothing to validate, and every CDI device name resolves to nothing. That is
normal on a host whose devices reach containers through a device plugin's
DeviceSpecs or the legacy NVIDIA runtime; on a host expected to use CDI it means
the spec was never generated, or was generated into /var/run/cdi (a tmpfs) and
lost at the last reboot.`,
		Remediation: "Generate the spec (NVIDIA: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`; the GPU operator and DRA drivers write theirs when they start), then `accel-doctor cdi validate`."},
	{Code: "CDI_SPEC_DIR_INVALID", Status: "FAIL", Kinds: []Kind{KindSpecDirNotDir},
		Title: "a CDI spec directory is not a directory: the library's scan stops there",
		Explain: `A path configured as a CDI spec directory exists but is not a directory. The
CDI library lists its spec directories in order and ends the scan at the first
one it cannot list (other than a missing one), so no spec of that directory or
of any later one is loaded: their devices do not resolve.`,
		Remediation: "Move the file away and create the directory (`ls -l` the path the evidence names), or remove the path from the runtime's cdi_spec_dirs."},
	{Code: "CDI_SPEC_DIR_UNUSED", Status: "WARN", Kinds: []Kind{KindSpecDirUnused},
		Title: "spec files sit in a directory the runtime does not read",
		Explain: `/run/cdi holds CDI spec files but is neither one of the spec directories the
runtime is configured with nor the same directory as one of them. On most hosts
/var/run is a link to /run and the two are one; where it is not, a driver that
writes to /run/cdi writes where the runtime never looks, and its devices do not
resolve.`,
		Remediation: "Write the specs to /var/run/cdi, or add /run/cdi to the runtime's cdi_spec_dirs (containerd: [plugins.'io.containerd.cri.v1.runtime'] in config.toml; CRI-O: [crio.runtime] in crio.conf) and restart it."},

	{Code: "CDI_DEVICE_RESOLVED", Status: "PASS", Kinds: []Kind{KindDeviceResolved},
		Title: "a CDI device name resolves to a spec",
		Explain: `The qualified name (vendor/class=name) is declared by a valid spec in the spec
directories, with no conflict, so the runtime would inject it. The evidence
lists what it injects, the spec's global edits first and then the device's own,
as the library applies them: device nodes, mounts, hooks, environment variables,
network devices and additional GIDs. Whether each piece exists on the host is
the subject of the CDI_NODE_*, CDI_MOUNT_* and CDI_HOOK_* findings; whether the
container got it is checkpoint 3's.`},
	{Code: "CDI_DEVICE_UNRESOLVABLE", Status: "FAIL", Kinds: []Kind{KindDeviceUnresolved},
		Title: "unresolvable CDI devices: no valid spec declares the name",
		Explain: `The container (or the command line) asks for a CDI device that no valid spec in
the spec directories declares. The runtime fails the container's creation with
"unresolvable CDI devices NAME". The evidence says what the specs of that
vendor/class declare instead: a spec that declares only "all" does not resolve
"nvidia.com/gpu=0"; a spec generated before a GPU was added, or by another tool
with other names (indices, UUIDs), does not resolve the names a device plugin or
DRA driver passes.`,
		Remediation: "Compare the requested name with what the specs declare (`accel-doctor cdi validate` lists them; NVIDIA: `nvidia-ctk cdi list`), and regenerate the spec so that it declares the names the plugin or driver uses (NVIDIA: `nvidia-ctk cdi generate --device-name-strategy=index --output=/var/run/cdi/nvidia.yaml` for index names)."},
	{Code: "CDI_DEVICE_NAME_INVALID", Status: "FAIL", Kinds: []Kind{KindDeviceNameInvalid},
		Title: "a CDI device name is not qualified",
		Explain: `A CDI device name must be vendor/class=name (for example nvidia.com/gpu=0); the
CDI library's parser rejects this one and the evidence gives its words. A runtime
cannot resolve it.`,
		Remediation: "Ask for the fully qualified name (`accel-doctor cdi validate` lists the names the specs declare)."},
	{Code: "CDI_DEVICE_CONFLICT", Status: "FAIL", Kinds: []Kind{KindDeviceConflict},
		Title: "one CDI device name in two specs of one directory: neither resolves",
		Explain: `Two spec files of the same spec directory declare the same qualified name. The
CDI library records an error for both files and removes the name from its cache,
even when a later directory declares it again, so the device does not resolve at
all. It usually comes from two generators (the GPU operator and a manual
nvidia-ctk run) writing the same kind into one directory.`,
		Remediation: "Keep one of the two files the evidence names (remove or rename the other to a name not ending in .json or .yaml), then `accel-doctor cdi validate`."},
	{Code: "CDI_DEVICE_OVERRIDDEN", Status: "WARN", Kinds: []Kind{KindDeviceOverridden},
		Title: "a later spec directory's device replaces an earlier one's",
		Explain: `The same qualified name is declared in two spec directories. By the CDI
library's priority rule the later directory (/var/run/cdi after /etc/cdi) wins,
and the earlier spec's device is ignored: editing or regenerating the earlier
file changes nothing for that name.`,
		Remediation: "Keep one spec per kind: remove the stale file the evidence names as ignored, or regenerate the one in use."},

	{Code: "CDI_NODE_PRESENT", Status: "PASS", Kinds: []Kind{KindNodeOK},
		Title: "the host has the device node a CDI spec names",
		Explain: `The device node's host path exists on the host and is a device of the spec's
type and major:minor (or, where the spec leaves them out, the host's node
supplies them, as the CDI library does when it fills them in). The evidence
gives the host node's type, numbers, mode and owner.`},
	{Code: "CDI_NODE_MISSING", Status: "FAIL", Kinds: []Kind{KindNodeMissing},
		Title: "a CDI spec names a device node the host does not have",
		Explain: `The spec's device node has no host path on the host. When the spec leaves the
type or major out, the CDI library fills them from the host node and fails
("failed to stat CDI host device"): the runtime refuses the container. When the
spec gives them, the runtime creates the node in the container anyway, and
opening it gives ENXIO unless a driver serves that major: the spec describes a
device the host does not have now (a GPU that fell off the bus, a driver not
loaded, a spec generated on another machine or before a reboot renumbered the
devices).`,
		Remediation: "Check the device and its driver on the host (`accel-doctor check --layer devnode`), then regenerate the spec on this host (NVIDIA: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`)."},
	{Code: "CDI_NODE_MISMATCH", Status: "FAIL", Kinds: []Kind{KindNodeMismatch, KindNodeNotDevice},
		Title: "a CDI spec's device node does not match the host's node",
		Explain: `The host path exists but is not the device the spec describes: another type
(block for char), other major:minor numbers (the container's node would reach a
different device than the host path), or no device node at all (a regular file
or a symlink: the CDI library lstat's the host path, so a link such as
/dev/dri/by-path/... is "not a device node" and the runtime refuses the
container unless the spec gives type and numbers itself).`,
		Remediation: "Regenerate the spec on this host so that it names the host's real nodes (NVIDIA: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`); compare with `ls -l` of the path the evidence names."},
	{Code: "CDI_EDIT_NOT_CHECKED", Status: "NOT_RUN", Kinds: []Kind{KindNodeUnreadable, KindMountUnreadable, KindHookUnreadable, KindNetDeviceUnread},
		Title: "a host path a CDI spec names could not be examined",
		Explain: `A device node, mount source, hook program or network interface named by a CDI
spec could not be examined: a permission error, or a capture that does not show
the path (a snapshot keeps no mode bits for a hook program it did not record).
Nothing is concluded about it.`,
		Remediation: "Run as root on the host, or snapshot there with `accel-doctor snapshot snap.tar.gz`."},
	{Code: "CDI_MOUNT_PRESENT", Status: "PASS", Kinds: []Kind{KindMountOK},
		Title: "the host has the source of a CDI spec's mount",
		Explain: `The bind mount's host path exists on the host (followed through links, as the
bind mount does). Whether the container holds the mount is checkpoint 3's
question.`},
	{Code: "CDI_MOUNT_MISSING", Status: "FAIL", Kinds: []Kind{KindMountMissing},
		Title: "a CDI spec mounts a host path that does not exist",
		Explain: `A bind mount of the spec has no source on the host. The OCI runtime fails the
container's creation when it performs the mount ("error mounting PATH to rootfs
at ...: stat PATH: no such file or directory", runc 1.1). NVIDIA specs list the driver's
user-space libraries by their full versioned names (libcuda.so.550.54.15): after
a driver upgrade a spec generated for the old driver names files that are gone.`,
		Remediation: "Regenerate the spec after every driver change (NVIDIA: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`; the GPU operator does it when its driver pod restarts)."},
	{Code: "CDI_HOOK_PRESENT", Status: "PASS", Kinds: []Kind{KindHookOK},
		Title: "a hook program is present and executable",
		Explain: `The hook's path is a regular file with an execute bit, which is what runc needs
to exec it as root (it runs the path as given, with no PATH search).`},
	{Code: "CDI_HOOK_MISSING", Status: "FAIL", Kinds: []Kind{KindHookMissing},
		Title: "a hook program does not exist on the host",
		Explain: `A hook of a CDI spec (nvidia-cdi-hook, which creates the libraries' symlinks and
updates the container's ld.so.cache) or the legacy NVIDIA hook named in the
container's spec does not exist at the path given. runc runs hooks by path, so
the container's creation fails ("error running hook #0: fork/exec PATH: no such
file or directory", runc 1.1). A spec generated with the toolkit installed
elsewhere, or a toolkit removed or upgraded to another path, leaves this.`,
		Remediation: "Install the program at that path, or regenerate the spec so that it names the installed one (NVIDIA: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`)."},
	{Code: "CDI_HOOK_NOT_EXECUTABLE", Status: "FAIL", Kinds: []Kind{KindHookNotExec},
		Title: "a hook program is not executable",
		Explain: `The hook's path exists but is not a regular file with an execute bit; runc's
exec of it fails and so does the container's creation ("error running hook #0:
fork/exec PATH: permission denied", runc 1.1).`,
		Remediation: "`chmod 0755` the program the evidence names, or reinstall the package that ships it."},
	{Code: "CDI_NETDEV_PRESENT", Status: "PASS", Kinds: []Kind{KindNetDeviceOK},
		Title: "the host has the network interface a CDI spec moves",
		Explain: `The host interface named by the spec's netDevices (CDI 1.1.0) is present under
/sys/class/net, so the runtime can move it into the container's network
namespace under the name the spec gives.`},
	{Code: "CDI_NETDEV_MISSING", Status: "FAIL", Kinds: []Kind{KindNetDeviceMissing},
		Title: "a CDI spec moves a network interface the host does not have",
		Explain: `The spec's netDevices names a host interface that is not under
/sys/class/net: the runtime cannot move it into the container's network
namespace.`,
		Remediation: "Check the interface on the host (`ip link`), and regenerate the spec."},

	{Code: "CDI_RUNTIME", Status: "PASS", Kinds: []Kind{KindRuntimeFound},
		Title: "a container runtime and the CDI library it is built with",
		Explain: `A runtime binary found under the host's PATH directories, and its version and
CDI library, read without running it: Go binaries carry their module list
(debug/buildinfo, read from a read-only mapping of the binary), which names the
exact container-device-interface version compiled in. A binary built outside
module mode (distributions' own packages) carries none; then the runtime's
release comes from the dpkg database and its CDI library is inferred from the
upstream release's go.mod, which a distribution's build may not follow (the
evidence says which it was).`},
	{Code: "CDI_RUNTIME_UNKNOWN", Status: "NOT_RUN", Kinds: []Kind{KindRuntimeNone, KindRuntimeUnknown},
		Title: "which CDI spec versions the node's runtime loads is not known",
		Explain: `No runtime binary (containerd, crio, podman, dockerd) was found under the
host's PATH directories, or its build information names no CDI library and its
release could not be read or is not in accel-doctor's table (an RPM database is
not read: it needs SQLite or Berkeley DB). Spec versions are then not judged
against the runtime.`,
		Remediation: "Give the runtime's version: `containerd --version`, `crio version`, `rpm -q containerd.io cri-o`, and compare with the CDI_VERSION_UNSUPPORTED explanation."},
	{Code: "CDI_RUNTIME_NO_CDI", Status: "FAIL", Kinds: []Kind{KindRuntimeNoCDI},
		Title: "the container runtime has no CDI support",
		Explain: `The runtime's release predates CDI (containerd before 1.7.0, CRI-O before
1.24.0, Docker Engine before 25.0.0), or its module list lacks the CDI library:
it does not resolve CDI device names, and a container that asks for them gets
no device from CDI.`,
		Remediation: "Upgrade the runtime (containerd 2.x enables CDI by default), or inject the devices another way (the device plugin's DeviceSpecs)."},
	{Code: "CDI_ENABLED", Status: "PASS", Kinds: []Kind{KindCDIEnabled},
		Title: "CDI is enabled in the runtime's configuration",
		Explain: `The runtime resolves CDI names: containerd's enable_cdi is true in its
config.toml or by default (containerd 2.0 and later: enable_cdi = true,
cdi_spec_dirs = /etc/cdi, /var/run/cdi), CRI-O always does from 1.24.0,
Docker Engine does from 28.2.0 unless "features": {"cdi": false}, podman always
does. The evidence names the file and key, or the default.`},
	{Code: "CDI_DISABLED", Status: "FAIL", Kinds: []Kind{KindCDIDisabled},
		Title: "CDI is disabled in the runtime's configuration",
		Explain: `The runtime does not resolve CDI names: containerd 1.7 with enable_cdi unset
(its default is false) or set to false, Docker Engine 25.0-28.1 without
"features": {"cdi": true}, or a configuration that turns it off. CDI device names
from a device plugin or DRA driver are then ignored (containerd) or refused, and
the container gets no device from them.`,
		Remediation: "containerd: set enable_cdi = true under [plugins.\"io.containerd.grpc.v1.cri\"] (config version 2) or [plugins.'io.containerd.cri.v1.runtime'] (version 3) in /etc/containerd/config.toml and `systemctl restart containerd`; Docker: \"features\": {\"cdi\": true} in /etc/docker/daemon.json and `systemctl restart docker`."},
	{Code: "CDI_CONFIG_UNKNOWN", Status: "NOT_RUN", Kinds: []Kind{KindCDIConfigUnknown},
		Title: "whether the runtime has CDI enabled is not known",
		Explain: `The runtime's configuration could not be read or parsed, or it does not set
the switch and the default depends on a release that is not known.`,
		Remediation: "Read the effective configuration: `containerd config dump | grep -i cdi`, `crio config | grep -i cdi`."},
	{Code: "CDI_VERSION_SUPPORTED", Status: "PASS", Kinds: []Kind{KindVersionOK},
		Title: "the runtime's CDI library loads the spec's cdiVersion",
		Explain: `Every CDI library release refuses a cdiVersion it does not know ("invalid
version"). The runtime's library (exact from its build information, or inferred
from its release) knows the spec's cdiVersion. Up to v0.8.x the list of known
versions is in the library's pkg/cdi, from v1.0.0 in its specs-go module, whose
version then decides.`},
	{Code: "CDI_VERSION_UNSUPPORTED", Status: "FAIL", Kinds: []Kind{KindVersionTooNew},
		Title: "the spec's cdiVersion is newer than the runtime's CDI library loads",
		Explain: `The spec declares a cdiVersion the runtime's CDI library does not know: the
runtime skips the whole file ("invalid version") and none of its devices
resolves. The finding names the first library release that loads it and the
runtime releases that carry one (read from the runtimes' go.mod at each release
tag): cdiVersion 0.6.0 needs container-device-interface >= v0.6.0 (containerd >=
1.7.12, CRI-O >= 1.28.0, Docker Engine >= 25.0.0), 0.7.0 needs >= v0.7.0
(containerd >= 1.7.16, CRI-O >= 1.30.0), 0.8.0 >= v0.8.0 (containerd >= 1.7.27
or 2.0.0, CRI-O >= 1.31.0), 1.0.0 >= v1.0.0 (containerd >= 2.0.5, CRI-O >=
1.33.0, Docker Engine >= 28.1.0), 1.1.0 >= v1.1.0 (containerd >= 2.2.1, CRI-O
>= 1.35.0, Docker Engine >= 29.2.0). When the spec's fields need only an older
version, the finding says so: a spec written with the lowest version its fields
need loads.`,
		Remediation: "Regenerate the spec with the lowest cdiVersion its fields need (`nvidia-ctk cdi generate` does so), or upgrade the runtime to a release the finding names."},
	{Code: "CDI_VERSION_UNKNOWN", Status: "NOT_RUN", Kinds: []Kind{KindVersionUnknown},
		Title: "whether the runtime loads the spec's cdiVersion is not known",
		Explain: `The runtime's CDI library version is not known, or the runtime is newer than
the releases accel-doctor knows and the spec is newer than what those load.`,
		Remediation: "Find the runtime's release (`containerd --version`, `crio version`) and compare with the CDI_VERSION_UNSUPPORTED explanation."},

	{Code: "INJECTION_MECHANISM", Status: "PASS", Kinds: []Kind{KindMechanism},
		Title: "how devices reach the container",
		Explain: `One of the ways the container's OCI spec asks for devices, and what it asks
for: linux.devices (nodes the OCI runtime creates: a device plugin's
DeviceSpecs, --device, and every runtime's rendering of CDI edits), CDI device
names (cdi.k8s.io/* annotations, which every CDI-aware runtime resolves, CRI-O's
copy of them, and qualified names elsewhere that only the component that wrote
them resolves; containerd and Docker resolve the names before writing
config.json and keep none of them, so the hooks a CDI spec adds are the trace
left), the legacy NVIDIA hook (nvidia-container-runtime-hook in
hooks.prestart or createRuntime, with NVIDIA_VISIBLE_DEVICES: it adds devices
and cgroup rules outside the OCI spec, which systemd drops on daemon-reload),
or privileged (every device allowed).`},
	{Code: "INJECTION_NONE", Status: "WARN", Kinds: []Kind{KindNoMechanism},
		Title: "the container's spec asks for no device",
		Explain: `The OCI spec has no linux.devices entry, no CDI device name, no NVIDIA hook or
NVIDIA_VISIBLE_DEVICES, and is not privileged: no device was asked for. A pod
without a resource request (nvidia.com/gpu, a ResourceClaim) gets none.`,
		Remediation: "Request the device in the pod (resources.limits or a resourceClaim) and check the plugin's or DRA driver's allocation."},
	{Code: "CDI_ANNOTATION_INVALID", Status: "FAIL", Kinds: []Kind{KindAnnotationInvalid},
		Title: "a CDI annotation does not parse",
		Explain: `A cdi.k8s.io/* annotation's value is not a comma-separated list of qualified CDI
device names (the CDI library's ParseAnnotations rejects it, and the evidence
gives its words), or CRI-O's copy of the annotations is not JSON. Runtimes
parse all CDI annotations together and refuse the container on any error
("failed to parse CDI device annotations").`,
		Remediation: "Fix the annotation (vendor/class=name[,...]); it is written by the device plugin, the DRA driver or the pod spec."},
	{Code: "NVIDIA_VISIBLE_DEVICES_INVALID", Status: "WARN", Kinds: []Kind{KindNvidiaEnvInvalid},
		Title: "NVIDIA_VISIBLE_DEVICES is not a device list",
		Explain: `The variable is set to a value that is neither all, none, void, empty, nor a
comma-separated list of GPU indices, MIG indices (GPU:MIG), GPU-/MIG- UUIDs or
CDI names, which is what the NVIDIA container toolkit reads. The value is not
shown.`,
		Remediation: "Set it to a device list, or leave it to the device plugin."},
	{Code: "INJECTION_NVIDIA_ENV_WITH_CDI", Status: "WARN", Kinds: []Kind{KindConflictEnvCDI},
		Title: "NVIDIA_VISIBLE_DEVICES is set together with CDI devices",
		Explain: `The container asks for GPUs twice: CDI names (or the edits of a CDI spec) and
NVIDIA_VISIBLE_DEVICES. Under nvidia-container-runtime in legacy mode its hook
injects whatever the variable asks (CUDA images set NVIDIA_VISIBLE_DEVICES=all
in their own environment, so all GPUs) on top of the CDI devices; with runc the
variable does nothing. Which GPUs the container sees then depends on the runtime
handler, not on the allocation.`,
		Remediation: "Use one mechanism: with CDI devices, run the container under runc (or the NVIDIA runtime in cdi mode), or set NVIDIA_VISIBLE_DEVICES=void in the container's environment so that the legacy hook injects nothing."},
	{Code: "INJECTION_PRIVILEGED", Status: "WARN", Kinds: []Kind{KindConflictPriv},
		Title: "a privileged container sees every device",
		Explain: `The container's device rules allow every device (a *:* rwm with no deny after
it), and usually the host's /dev is bind-mounted: every GPU of the host is
visible and usable, whatever the device plugin or DRA driver allocated to it.
Another pod's GPU is reachable, and a device count seen inside says nothing about
the allocation.`,
		Remediation: "Drop privileged: true and request the devices (resources.limits or a resourceClaim); grant only the capabilities needed."},
	{Code: "INJECTION_REQUESTED_TWICE", Status: "WARN", Kinds: []Kind{KindConflictTwice},
		Title: "a device is requested twice",
		Explain: `The same CDI name appears twice among the names the runtime resolves, the same
node path twice in linux.devices, or the same GPU twice in
NVIDIA_VISIBLE_DEVICES. containerd drops a duplicate CDI name (its CRI WithCDI
keeps the first); a duplicate node path is handed to the OCI runtime twice. Two
allocators (a device
plugin and a DRA driver, or a plugin and a hand-written annotation) asking for
the same device usually cause it.`,
		Remediation: "Keep one request per device: check the pod for both a resource limit and a claim for the same device."},
}

// CodeOf returns the code a kind becomes.
func CodeOf(k Kind) (Code, bool) {
	for _, c := range Codes {
		for _, ck := range c.Kinds {
			if ck == k {
				return c, true
			}
		}
	}
	return Code{}, false
}
