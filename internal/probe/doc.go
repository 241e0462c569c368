// Package probe holds functional probes: small, controlled requests made to
// the live kernel whose outcome is the evidence.
//
// OpenNode opens a device node with a given access (read, write or both) and
// closes it at once: it never reads, writes or issues an ioctl. MknodNode
// creates a node of a given type and number in a private temporary
// directory, which is what the device cgroup's 'm' access governs, and
// removes it again. Both classify the errno by the layer that produced it:
//
//   - EPERM: the device cgroup refused (security/device_cgroup.c,
//     devcgroup_check_permission, for v1 and for a v2 BPF program alike);
//   - EACCES: file mode, a nodev mount or an LSM (fs/namei.c may_open);
//   - ENXIO or ENODEV: no driver behind the major (fs/char_dev.c
//     chrdev_open, block/bdev.c);
//   - ENOENT: the node is not there.
//
// The kernel consults the device cgroup after the nodev and mode checks and
// before the driver's open (fs/namei.c may_open → inode_permission →
// devcgroup_inode_permission; then do_dentry_open → chrdev_open), so ENXIO
// proves the cgroup allowed the access while EACCES says nothing about it.
// Compare uses a baseline taken outside the cgroup under test to keep a
// host-wide policy (an LSM, the caller's own cgroup) from being blamed on
// that cgroup.
//
// Run is the functional layer's probe (`accel-doctor probe`, and
// internal/enter's `container --probe`): ScanNodes finds the accelerator
// nodes of a /dev by name (Patterns), ProbeNode opens each with its kind's
// access and makes the kind's read-only identification ioctl (ioctl.go:
// DRM_IOCTL_VERSION, VIDIOC_QUERYCAP, VFIO_GET_API_VERSION and
// VFIO_CHECK_EXTENSION, VFIO_GROUP_GET_STATUS, AMDKFD_IOC_GET_VERSION;
// ENOTTY says the driver is not of that kind). Then, where FindLibrary
// finds libnvidia-ml.so.1 or libcuda.so.1 as the dynamic loader would,
// RunHelper hands the NVML and CUDA steps to cmd/accel-doctor-cuda, the
// dynamically linked companion that can load them (helper.go says why a
// static binary cannot), and reads its JSON lines; CUDAResults and
// NVMLResults map its result codes to causes. Codes are the catalog
// entries proposed for these findings.
//
// Everything runs on the calling goroutine (the helper is forked from its
// OS thread), so a caller that locked the thread and changed its identity
// probes with that identity. The probes act on the live kernel and the
// calling process's own view of the file system, and take no hostfs root:
// a snapshot cannot be opened. Besides opening nodes, they read
// /etc/ld.so.cache and /proc/thread-self/cgroup; they write nothing.
package probe
