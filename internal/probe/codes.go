package probe

// Code is a proposed catalog entry of the functional layer (layer 8): what
// `accel-doctor explain CODE` would print. internal/diagnose owns the
// catalog; these live here, and internal/cli's probe command emits
// them.
type Code struct {
	Code        string
	Title       string
	Explain     string
	Remediation string
}

// The codes of the functional probe.
const (
	CodeNodeOpened       = "PROBE_NODE_OPENED"
	CodeNodeCgroupDenied = "PROBE_NODE_CGROUP_DENIED"
	CodeNodePermission   = "PROBE_NODE_PERMISSION_DENIED"
	CodeNodeNoDriver     = "PROBE_NODE_NO_DRIVER"
	CodeNodeBusy         = "PROBE_NODE_BUSY"
	CodeNodeOpenFailed   = "PROBE_NODE_OPEN_FAILED"
	CodeNodeNotChar      = "PROBE_NODE_NOT_CHAR"
	CodeDriverAnswered   = "PROBE_DRIVER_ANSWERED"
	CodeNotThatDriver    = "PROBE_DRIVER_NOT_THAT_KIND"
	CodeIoctlFailed      = "PROBE_IOCTL_FAILED"
	CodeIoctlNotRun      = "PROBE_IOCTL_NOT_RUN"
	CodeVFIONoIOMMU      = "PROBE_VFIO_NO_IOMMU_MODEL"
	CodeVFIOAPI          = "PROBE_VFIO_API_UNKNOWN"
	CodeVFIONotViable    = "PROBE_VFIO_GROUP_NOT_VIABLE"
	CodeKFDVersion       = "PROBE_KFD_VERSION_UNSUPPORTED"
	CodeNoNodes          = "PROBE_NO_NODES"
	CodeDevUnreadable    = "PROBE_DEV_UNREADABLE"
	CodeNVMLOK           = "PROBE_NVML_OK"
	CodeNVMLFailed       = "PROBE_NVML_FAILED"
	CodeNVMLNotRun       = "PROBE_NVML_NOT_RUN"
	CodeCUDAOK           = "PROBE_CUDA_OK"
	CodeCUDAFailed       = "PROBE_CUDA_FAILED"
	CodeCUDAMismatch     = "PROBE_CUDA_COPY_MISMATCH"
	CodeCUDANotRun       = "PROBE_CUDA_NOT_RUN"
	CodeLibIncomplete    = "PROBE_LIBRARY_INCOMPLETE"
)

// Codes is the functional layer's catalog, in the order a report shows it.
var Codes = []Code{
	{CodeNodeOpened, "the node opened with the access its users ask for",
		`The probe opened the accelerator node from this process, with the access the
kind's user space asks for (read-write; read-only for NVIDIA capability nodes),
and closed it. The kernel checked, in order: the mount's nodev flag and the
file's mode and owner as this process's credentials see them (fs/namei.c
may_open), the device cgroup (v1 list and v2 BPF programs), and the driver's
open. All passed. An open says nothing about compute: the ioctl and the
library steps do.`, ""},
	{CodeNodeCgroupDenied, "the device cgroup refused the open (EPERM)",
		`open() gave EPERM. For a device node that comes from the device cgroup
(security/device_cgroup.c devcgroup_check_permission: a v1 devices.list
without the node, or a cgroup2 BPF_CGROUP_DEVICE program returning 0), after
the mode and nodev checks passed. The node is visible in the container but its
cgroup does not allow it: the runtime was not told about it
(linux.resources.devices), or the policy was replaced after start, as a
systemd daemon-reload does to a unit's DeviceAllow. A seccomp filter that
returns EPERM for openat would look the same; the process's Seccomp mode is
in the evidence.`,
		"On the node, read the container's policy with `accel-doctor cgroup eval` (--pid set to the container's init PID) and compare it with its OCI spec with `accel-doctor check --layer cgroup`; give the device through the device plugin, CDI or --device so that the runtime allows it, and restart the container if the policy drifted."},
	{CodeNodePermission, "the node's mode, owner, a nodev mount or an LSM refused the open (EACCES)",
		`open() gave EACCES, which the kernel returns before it asks the device
cgroup: the node is on a mount with nodev (a bind of a host directory, an
emptyDir), its mode does not grant this process's uid/gid the access, its
owner is not mapped in the container's user namespace (it shows as nobody
65534 and no capability overrides that), or an LSM (AppArmor, SELinux)
denied it. The cgroup layer is not to blame.`,
		"Inject the node as a device (OCI linux.devices, CDI deviceNodes) instead of a bind mount, with a mode and group the container's user has; for a user-namespaced container, give the node an owner mapped into it. `accel-doctor check --layer devnode` shows the host side."},
	{CodeNodeNoDriver, "the node has no driver behind it (ENXIO/ENODEV)",
		`open() gave ENXIO or ENODEV: the mode, nodev and cgroup checks passed, and
the kernel found no driver registered for the node's major:minor
(fs/char_dev.c chrdev_open). The node was created or injected (a c 195:0 on
a host without the NVIDIA module, a node left over from a driver that was
unloaded, the wrong minor) but nothing serves it. This is the host's driver
layer, not the container's.`,
		"Load the driver on the host, or inject the node numbers the host's driver registered (/proc/devices); `accel-doctor check --layer driver` and `accel-doctor check --layer devnode` show the host side."},
	{CodeNodeBusy, "the node allows one opener and another holds it (EBUSY)",
		`open() gave EBUSY. A VFIO group can be opened by one process at a time
(drivers/vfio/group.c): a VM's QEMU or another container holds it. The node is
reachable; it is in use.`,
		"Find the holder on the host (fuser on the node) and stop it, or give this container another device."},
	{CodeNodeOpenFailed, "the open failed with another errno",
		`open() failed with an errno the probe does not attribute to a layer (the
evidence names it). ENOENT here means the name is a dangling symbolic link or
vanished between the listing and the open.`,
		"Check the node on the host with `accel-doctor check --layer devnode`."},
	{CodeNodeNotChar, "a device's name holds something that is not a character device",
		`The open succeeded, but on a regular file, a directory or a block device
under an accelerator's name: an empty file bind-mounted over /dev/nvidia0, a
directory mount of /dev/dri. Nothing behind it is a driver.`,
		"Inject the node as a device (OCI linux.devices or a CDI deviceNode), not as a file mount."},
	{CodeDriverAnswered, "the driver behind the node answered its kind's ioctl",
		`The probe made the kind's read-only identification ioctl on the open node
(DRM_IOCTL_VERSION for DRM and accel nodes, VIDIOC_QUERYCAP for V4L2,
VFIO_GET_API_VERSION and VFIO_CHECK_EXTENSION for the VFIO container,
VFIO_GROUP_GET_STATUS for a group, AMDKFD_IOC_GET_VERSION for /dev/kfd) and
the driver answered; the evidence holds its name and version. Nothing was
set up on the device.`, ""},
	{CodeNotThatDriver, "the driver behind the node is not of the kind its name says (ENOTTY)",
		`The node opened, but its driver does not know the ioctl every driver of its
kind implements: ENOTTY (fs/ioctl.c). The name belongs to one kind and the
major:minor to another driver — a render node injected with the numbers of
another device, a node made by hand with the wrong major.`,
		"Inject the node with the major:minor the host's driver uses for it (`accel-doctor check --layer devnode` on the host lists them)."},
	{CodeIoctlFailed, "the driver refused its kind's identification ioctl",
		`The node opened and the driver is of the right kind, but the
identification ioctl failed: EINVAL (an ABI mismatch), ENODEV (the device
went away: unplugged, fell off the bus), EIO (the hardware failed), EPERM or
EACCES (the driver or an LSM refused this caller). The evidence names the
errno.`,
		"Look at the host's kernel log for the device, and at the driver layer with `accel-doctor check --layer driver`."},
	{CodeIoctlNotRun, "the node's ioctl could not be made",
		`The kind's identification ioctl was not made: the open before it failed, the
file is not a character device, or this architecture's ioctl encoding is not
carried by the probe. The reason says which.`, ""},
	{CodeVFIONoIOMMU, "the VFIO container offers no IOMMU model",
		`/dev/vfio/vfio answered VFIO_GET_API_VERSION, but VFIO_CHECK_EXTENSION
supports none of type1, type1v2 or the sPAPR models (at most no-IOMMU mode):
VFIO_SET_IOMMU cannot succeed and no device can be mapped for DMA. The host
has no IOMMU driver enabled (intel_iommu=on / amd_iommu), or the
vfio_iommu_type1 module is not loaded.`,
		"Enable the IOMMU on the host (kernel command line) and load vfio_iommu_type1."},
	{CodeVFIOAPI, "the VFIO container reports an unknown API version",
		`VFIO_GET_API_VERSION returned something other than VFIO_API_VERSION (0),
the only version the kernel has ever had: the node is not a VFIO container.`,
		"Inject the host's /dev/vfio/vfio (10:196)."},
	{CodeVFIONotViable, "the VFIO group is not viable",
		`VFIO_GROUP_GET_STATUS says the group is not viable: some device of the IOMMU
group is bound to a host driver instead of vfio-pci (or no driver), so no
device of the group can be opened through VFIO.`,
		"Bind every device of the IOMMU group to vfio-pci (or leave it driverless) on the host."},
	{CodeKFDVersion, "the AMD KFD interface is of an unsupported major version",
		`AMDKFD_IOC_GET_VERSION answered a major version other than
KFD_IOCTL_MAJOR_VERSION (1), which user space requires (include/uapi/linux/kfd_ioctl.h).
ROCm's thunk (libhsakmt) refuses such a kernel driver, so no GPU is usable
through /dev/kfd even though the node opened.`,
		"Use a ROCm user space that matches the host's amdgpu/amdkfd driver."},
	{CodeNoNodes, "no accelerator node in this process's /dev",
		`No name under /dev matched an accelerator pattern (nvidia*, nvidia-caps/*,
dri/card*, dri/renderD*, accel/accel*, kfd, video*, vfio/*). Nothing could be
probed: the container was given no device (no device plugin allocation, no
CDI device, no --device).`,
		"Request the device in the pod (resources.limits or a ResourceClaim) or give it with --device or CDI; on the node, see what the runtime applied."},
	{CodeDevUnreadable, "a device directory could not be read",
		`The probe could not list a directory of /dev (the evidence has the error),
so nodes in it were not probed.`, ""},
	{CodeNVMLOK, "NVML initialized and counted the GPUs",
		`libnvidia-ml.so.1 loaded, nvmlInit_v2 succeeded and nvmlDeviceGetCount_v2
counted GPUs; the evidence has the driver version and the count.`, ""},
	{CodeNVMLFailed, "an NVML call failed",
		`An NVML call returned an error (nvml.h nvmlReturn_t), or NVML counted no
GPU. The evidence names the call, the code and what it means here:
NVML_ERROR_OPERATING_SYSTEM is the device cgroup or the OS refusing
/dev/nvidiactl or a GPU node, NVML_ERROR_LIB_RM_VERSION_MISMATCH a library of
another driver release than the kernel module, NVML_ERROR_DRIVER_NOT_LOADED
no module, NVML_ERROR_UNKNOWN after a daemon-reload the classic lost access.`,
		"Follow the cause given with the code; for access, `accel-doctor cgroup eval` on the node."},
	{CodeNVMLNotRun, "the NVML step could not run",
		`NVML was not exercised: libnvidia-ml.so.1 is not in any place the loader
searches (the reason lists them), the helper that loads it
(accel-doctor-cuda) is not installed, or this file system has no glibc loader
for it.`, ""},
	{CodeCUDAOK, "CUDA made a context and copied 1 MiB there and back on every GPU",
		`libcuda.so.1 loaded, cuInit succeeded, and for every device counted the
probe made a context, allocated 1 MiB, copied a pattern to the device and
back, and found every byte equal, on one locked OS thread. This is the small
controlled request: the GPU works for this process.`, ""},
	{CodeCUDAFailed, "a CUDA driver API call failed",
		`A CUDA driver API call returned an error (cuda.h CUresult); the evidence
names the call, the code and its usual cause: CUDA_ERROR_NO_DEVICE while
/dev/nvidia* nodes exist is access or CUDA_VISIBLE_DEVICES,
CUDA_ERROR_STUB_LIBRARY the toolkit's stub found instead of the driver's
library, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH or CUDA_ERROR_INSUFFICIENT_DRIVER a
library of another driver release, CUDA_ERROR_OPERATING_SYSTEM a node refused.`,
		"Follow the cause given with the code; the node findings of this report show which node was refused."},
	{CodeCUDAMismatch, "the 1 MiB copy came back different",
		`Every CUDA call succeeded, but the bytes read back from the device differ
from those written: the evidence gives how many and the first offset. That is
a hardware or driver fault (memory errors, a bad PCIe link), not a
configuration problem.`,
		"Check the GPU's ECC and Xid errors on the host (nvidia-smi -q, the kernel log) and the link with `accel-doctor pci`."},
	{CodeCUDANotRun, "the CUDA step could not run",
		`CUDA was not exercised: libcuda.so.1 is not in any place the loader searches
(the reason lists them), the helper that loads it (accel-doctor-cuda) is not
installed, or this file system has no glibc loader for it.`, ""},
	{CodeLibIncomplete, "the library helper did not finish",
		`The helper that drives NVML or CUDA was killed at the timeout or died in a
call (the evidence names the call that never returned and the signal): a
CUDA application would hang or crash in the same place. A hung cuInit is
typical of a driver in a bad state or of an NVSwitch system whose fabric
manager is not up.`,
		"Look at the host's kernel log (Xid) and the driver's state; rerun with a longer --cuda-timeout to tell slow from hung."},
}

// LookupCode finds a code's entry.
func LookupCode(code string) (Code, bool) {
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
