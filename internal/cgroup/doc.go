// Package cgroup reads the device policy the kernel applies to a cgroup and
// evaluates it for a device and an access, with the kernel's semantics.
//
// What it reads, all through a *hostfs.Root:
//   - /proc/self/mountinfo (the live host) or /proc/1/mountinfo (a host
//     mounted at --root): the cgroup mode (v1, v2 or hybrid), the mount of
//     the v1 devices controller and of the cgroup2 hierarchy;
//   - /proc/PID/cgroup: where a process lives in each hierarchy. Both are
//     written relative to accel-doctor's own cgroup namespace; paths above
//     its root are read again in the initial cgroup namespace (cgns.go);
//   - <devices mount>/<path>/devices.list at the cgroup and every ancestor
//     (cgroup v1, security/device_cgroup.c);
//   - the BPF_CGROUP_DEVICE programs in effect for a cgroup2 directory, read
//     back from the running kernel with BPF_PROG_QUERY (BPF_F_QUERY_EFFECTIVE)
//     and BPF_OBJ_GET_INFO_BY_FD (xlated instructions). This needs the live
//     host and CAP_SYS_ADMIN (BPF_PROG_QUERY on a cgroup needs CAP_NET_ADMIN
//     or CAP_SYS_ADMIN, BPF_PROG_GET_FD_BY_ID CAP_SYS_ADMIN: kernel/bpf/syscall.c;
//     measured on 6.18 under setpriv, deploy/README.md); a captured host
//     cannot answer it.
//
// The v2 programs are evaluated by an interpreter of our own (interp.go)
// over struct bpf_cgroup_dev_ctx (include/uapi/linux/bpf.h). Anything the
// interpreter does not model gives an undecided result with the reason,
// never a guess.
//
// The package is read-only: nothing in it writes, creates, removes,
// attaches or loads anything (internal/archtest holds that). The one part
// of accel-doctor that writes to the host, the sandbox, is
// internal/sandbox; it uses this package's readers and its rule
// semantics (rules.go), so that what the sandbox applies and what the
// diagnosis evaluates are decided the same way.
package cgroup
