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
// The probes act on the live host's kernel and take no hostfs root: a
// snapshot cannot be opened.
package probe
