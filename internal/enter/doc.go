// Package enter runs the functional probe (internal/probe) from the host
// as a container's own process would run it: `accel-doctor container ID
// --probe`. It is the second place in accel-doctor that changes state on
// the host (internal/sandbox is the first); only internal/cli and
// cmd/accel-doctor may import it.
//
// What it changes, exactly, and for how long:
//
//   - the host's cgroup tree, for the life of the probe: its child process
//     (accel-doctor itself, re-executed) joins each of the target's cgroups.
//     cgroup2: the child is started in the target's cgroup2 directory
//     (clone3 with CLONE_INTO_CGROUP, which writes to nothing but puts a
//     process there). cgroup v1: it writes the child's PID to cgroup.procs
//     of every hierarchy the target is in (devices, memory, pids, ...),
//     before the child does anything. The child counts against the
//     container's limits (pids.max, memory) while it runs, and leaves with
//     its exit. No cgroup is created or removed, and no other process is
//     moved.
//   - one setns(CLONE_NEWPID) on an OS thread of accel-doctor that forks
//     the child and then ends (never reused), so that the child is a
//     process of the container's PID namespace: visible in the container's
//     /proc, killed with it.
//   - inside the container, what any process it runs does: the device
//     nodes opened and closed by the probe (see `accel-doctor probe`), and
//     the CUDA helper's 1 MiB on each GPU.
//
// Nothing is written into the container's file system: accel-doctor's own
// binary is opened (/proc/self/exe) before entering and executed from
// that fd, and the CUDA helper likewise (opened on the host, passed as an
// fd, executed as /proc/self/fd/3 inside).
//
// How the child takes the container's context, on its one OS thread (the
// main goroutine, locked; every step is per thread and the probe forks
// its helper from it):
//
//   - mount namespace: unshare(CLONE_FS), then setns(CLONE_NEWNS) on the
//     fd of /proc/PID/ns/mnt. A Go process cannot join a mount namespace
//     otherwise: its threads share one fs_struct, and mntns_install
//     refuses a shared one (fs/namespace.c).
//   - root: fchdir to the fd of /proc/PID/root and chroot("."), the
//     process's own root (which a chrooting runtime makes differ from the
//     namespace's).
//   - user namespace, when the container has its own: a replica. The
//     child is cloned with CLONE_NEWUSER and the container's uid_map and
//     gid_map, as the container's own was set up. Joining the container's
//     namespace itself (setns CLONE_NEWUSER) needs a single-threaded
//     caller (kernel/user_namespace.c userns_install: mm_users == 1), and
//     no Go process is one, even before main; a C constructor (runc's
//     nsexec) would be cgo. The replica decides every permission check of
//     an open or an ioctl the same way: those look at the caller's ids
//     and capabilities and at which ids its namespace maps
//     (fs/namei.c generic_permission, kernel/capability.c
//     capable_wrt_inode_uidgid). It does not own the container's other
//     namespaces, so the child cannot setns into its mount namespace and
//     enters its root by chroot alone (path lookups still walk the
//     container's mount tree).
//   - uid, gid, groups: setresgid, setgroups, setresuid with raw system
//     calls (per thread), in the container's ids.
//   - capabilities: the bounding set dropped to the container's CapBnd,
//     then CapEff, CapPrm and CapInh set with capset, CapAmb raised.
//   - no_new_privs: set when the container has it.
//   - environment: the init process's (/proc/PID/environ), passed to the
//     probe and the helper, never printed.
//
// What is not reproduced, and said so in the Result's aspects: the
// container's seccomp filters (reading them needs ptrace on the
// container's process, PTRACE_SECCOMP_GET_FILTER) and its LSM label
// (AppArmor profile, SELinux context). A probe that passes here can still
// fail inside when those refuse a call.
//
// The child reports as JSON on a pipe; every handle is taken from a PID
// whose pidfd was opened first and checked alive after the last open, so
// a PID reused in between is refused.
package enter
