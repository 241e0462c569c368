package runtime

// AppliedCode is a proposed catalog entry for the findings the diagnose
// layer makes of checkpoint 3 (layer 5, runtime/CDI). The entries live
// here, beside the facts that decide them, until the diagnose layer takes
// them over (internal/diagnose.Code has the same fields but Status and
// Decides, which say how the facts map to a finding).
type AppliedCode struct {
	Code    string
	Status  string // the finding's usual status: PASS, WARN, FAIL or NOT_RUN
	Title   string // one line
	Decides string // which fact or comparison of this package decides it
	Explain string // the long form: what it means, how it was decided, why it matters
	// Remediation names only commands that exist.
	Remediation string
}

// AppliedCodes are the proposed checkpoint-3 codes.
var AppliedCodes = []AppliedCode{{
	Code: "RUNTIME_NODE_APPLIED", Status: "PASS",
	Title:   "the container's process has the expected device node",
	Decides: "CheckNode: CheckPresent, not on a nodev mount, ModeCheck allows",
	Explain: `The node checkpoint 2 expects (from linux.devices or a CDI spec) is at its
path in the container's root as its init process sees it, read from the host
through /proc/PID/root without entering the container: its type and
major:minor are the expected ones, the mount that holds it is not nodev, and
its mode and owner, as the container's user namespace sees them, let the
process open it for reading and writing. The device cgroup (layer 4) and the
functional probe (checkpoint 4) judge the rest.`,
}, {
	Code: "RUNTIME_NODE_MISSING", Status: "FAIL",
	Title:   "an expected device node is not in the container",
	Decides: "CheckNode: CheckMissing",
	Explain: `Checkpoint 2 expects a node (the spec's linux.devices, a CDI device's
deviceNodes) at this path, but there is nothing at it in the container's
root (an lstat through /proc/PID/root gave ENOENT). open() inside gives
ENOENT whatever the cgroup allows. Typical causes: CDI devices named in
annotations that the runtime does not apply (CDI support off), a device
plugin's Allocate response that lists the node for another container, a node
created by a hook after the container started and lost on restart, or a
/dev mounted over the runtime's own after the node was made.`,
	Remediation: "Compare the container's spec (`crictl inspect CONTAINER`, or the bundle's config.json) with its /dev (`runc exec ID ls -l /dev`, `kubectl exec POD -- ls -l /dev`); inject the device through the runtime: CDI (enable it in containerd's CRI config with enable_cdi = true; CRI-O and Podman apply CDI by default) or `docker run --device /dev/NODE`, and restart the container.",
}, {
	Code: "RUNTIME_NODE_MISMATCH", Status: "FAIL",
	Title:   "the node at the expected path is not the expected one",
	Decides: "CheckNode: CheckDifferent (Diffs: type, major:minor, mode, owner)",
	Explain: `Something is at the node's path, but not what checkpoint 2 expects: another
type (a regular file or directory where a character device belongs, often a
bind mount of a missing host node), another major:minor (open reaches
another device or none), or another mode or owner. A wrong type or number
is a FAIL. A mode or owner that differs is a WARN by itself (a user-
namespaced runc container bind-mounts host nodes and keeps their mode and
owner, ignoring the spec's fileMode, uid and gid), and a FAIL only when the
mode check refuses the open (RUNTIME_NODE_MODE_DENIED).`,
	Remediation: "Recreate the host node with the numbers the driver publishes (see layer 3) and restart the container so that the runtime makes its node again; for a regular file or directory at the path, remove the volume or bind mount that put it there.",
}, {
	Code: "RUNTIME_NODE_OWNER_UNMAPPED", Status: "FAIL",
	Title:   "the node's owner is not mapped in the container's user namespace: EACCES",
	Decides: "DevEntry.Owner/Group Mapped false, and ModeCheck refuses",
	Explain: `The container has a user namespace of its own, and the node's owner (or
group) has no mapping in it (/proc/PID/uid_map, gid_map): inside, the node
shows as owned by the overflow ID (/proc/sys/kernel/overflowuid, 65534
"nobody"). The mode's owner bits then apply to no one in the container, and
the namespace's root has no capability over the inode: CAP_DAC_OVERRIDE
and CAP_DAC_READ_SEARCH count only for inodes whose owner and group are both
mapped (fs/namei.c, capable_wrt_inode_uidgid). Unless the mode's "other"
bits allow the access, open() gives EACCES, before the device cgroup is
asked: this is not a cgroup denial, and granting the device in the cgroup
changes nothing.`,
	Remediation: "Make the node usable through its other bits (`chmod 0666 /dev/NODE` on the host; for NVIDIA the module option NVreg_DeviceFileMode=0666), or give it a group the container's namespace maps and run the process with that group as a supplemental group (Kubernetes: securityContext.supplementalGroups); compare `runc exec ID stat -c %u:%g /dev/NODE` with `stat -c %u:%g /dev/NODE` on the host.",
}, {
	Code: "RUNTIME_NODE_MODE_DENIED", Status: "FAIL",
	Title:   "the node's mode and owner refuse the container's process: EACCES",
	Decides: "ModeCheck: Known, not Allowed, owner and group mapped",
	Explain: `The kernel's discretionary check of an open for reading and writing refuses
the container's init process: its filesystem uid is not the node's owner,
neither its gid nor its supplementary groups are the node's group, the
"other" bits lack read or write, and it holds no CAP_DAC_OVERRIDE
(fs/namei.c generic_permission). open() gives EACCES, before the device
cgroup is asked. Common with a non-root container user and a 0660 node
whose group (video, render) the process does not hold. POSIX ACLs are not
read: an ACL on the node (udev's uaccess tag sets one) may allow more.`,
	Remediation: "Run the process with the node's group as a supplemental group (Kubernetes: securityContext.supplementalGroups with the group ID shown; Docker: `docker run --group-add GID`), or change the node's mode on the host with a udev rule (MODE=\"0666\" or the right GROUP).",
}, {
	Code: "RUNTIME_NODE_NODEV", Status: "FAIL",
	Title:   "the node is on a nodev mount: EACCES",
	Decides: "DevEntry.OnNodev: true",
	Explain: `The mount that holds the node in the container's mount namespace has the
nodev flag (/proc/PID/mountinfo, per-mount options). open() of any device
node on such a mount fails with EACCES before the mode, the device cgroup or
an LSM is consulted (fs/namei.c may_open, may_open_dev). Seen when a node is
bind-mounted from a volume or a host directory mounted nodev, or when /dev
itself is mounted nodev. A tmpfs mounted inside a user namespace is nodev
too without showing it (SB_I_NODEV), which is why runc bind-mounts host
nodes into user-namespaced containers.`,
	Remediation: "Inject the node as a device (linux.devices, CDI, the device plugin) so that the runtime creates or binds it in the container's /dev, rather than through a volume; or drop nodev from the mount's options in the spec. Check with `grep nodev /proc/PID/mountinfo` on the host.",
}, {
	Code: "RUNTIME_MOUNT_APPLIED", Status: "PASS",
	Title:   "the expected host path is mounted in the container",
	Decides: "CheckMount: CheckPresent with SourceVerified",
	Explain: `A mount at the expected container path exists in /proc/PID/mountinfo, and
its source is the expected host path: the same file system (major:minor)
and the same path within it (mountinfo's root field), as the host's own
mount table places the host path after resolving its links. Without that
identification (SourceVerified false) only the mount point is known, and
the finding says so.`,
}, {
	Code: "RUNTIME_MOUNT_MISSING", Status: "FAIL",
	Title:   "an expected mount (a driver library, a CDI mount) is not in the container",
	Decides: "CheckMount: CheckMissing",
	Explain: `Checkpoint 2 expects a host path (a CDI spec's mounts, the legacy NVIDIA
hook's libraries, the spec's own bind mounts) at a container path, but
/proc/PID/mountinfo has no mount there. The evidence says whether something
else is at the path (a file of the image, which a library loader would pick
up instead) or nothing. An application then fails to load the library
(libcuda.so.1: cannot open shared object file) or loads the image's copy,
which may not match the host's driver.`,
	Remediation: "Check that the runtime applies the CDI spec's edits for the devices the container names (`nvidia-ctk cdi list` shows the names the host's specs declare; containerd needs enable_cdi = true in its CRI config) and restart the container; for the legacy hook, check `nvidia-container-cli list`. Confirm with `grep libcuda /proc/PID/mountinfo` on the host.",
}, {
	Code: "RUNTIME_MOUNT_MISMATCH", Status: "FAIL",
	Title:   "a mount at the expected path comes from another source",
	Decides: "CheckMount: CheckDifferent",
	Explain: `There is a mount at the expected container path, but its source is not the
expected host path: another file system or another path within it. A stale
CDI spec (generated before a driver upgrade) mounts the old library, or two
injection mechanisms (a CDI spec and the legacy hook) mount different files
at the same path, the later hiding the earlier.`,
	Remediation: "Regenerate the CDI spec after driver changes (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`), use one injection mechanism (CDI or the legacy hook, not both), and restart the container.",
}, {
	Code: "RUNTIME_ENV_APPLIED", Status: "PASS",
	Title:   "the expected environment variable is set in the container's process",
	Decides: "CheckEnv: CheckPresent",
	Explain: `The variable is set in the init process's environment as it was exec'd
(/proc/PID/environ). Only names are read out; values are never printed,
compared or kept, so a wrong value is not detected here.`,
}, {
	Code: "RUNTIME_ENV_MISSING", Status: "FAIL",
	Title:   "an expected environment variable is not set in the container's process",
	Decides: "CheckEnv: CheckMissing",
	Explain: `Checkpoint 2 expects a variable (a CDI spec's containerEdits.env, a device
plugin's Allocate envs, the spec's process.env) that the init process's
environment does not have (/proc/PID/environ, the environment it was
exec'd with). Libraries and hooks that select devices by environment
(NVIDIA_VISIBLE_DEVICES, HABANA_VISIBLE_DEVICES...) then see none.`,
	Remediation: "Check that the runtime applies the CDI edits or the device plugin's response to this container (`crictl inspect CONTAINER` shows the spec's env), and restart the container; variables set by a wrapper script after exec do not show in the init process.",
}, {
	Code: "RUNTIME_SECCOMP_DENIES", Status: "FAIL",
	Title:   "the container's seccomp profile refuses a syscall devices need",
	Decides: "EvaluateSeccomp: SyscallErrno, SyscallKilled, SyscallTrapped or SyscallTraced for ioctl, openat, open, mmap",
	Explain: `The spec's linux.seccomp profile, evaluated as runc builds it with
libseccomp (the first rule without argument conditions decides; rules that
repeat the default action are skipped), refuses ioctl, openat, open or mmap
unconditionally: the call fails with the errno shown (EPERM by default),
kills the caller, raises SIGSYS, or, for SCMP_ACT_TRACE without a tracer,
fails with ENOSYS. A driver library then fails although the node is present
and allowed. /proc/PID/status Seccomp: 2 confirms a filter is attached.`,
	Remediation: "Use the runtime's default profile (Docker's, containerd's and CRI-O's allow these syscalls; Kubernetes: securityContext.seccompProfile.type RuntimeDefault) or add the syscall to the Localhost profile's allow list.",
}, {
	Code: "RUNTIME_SECCOMP_CONDITIONAL", Status: "WARN",
	Title:   "the seccomp profile decides a device syscall by its arguments",
	Decides: "EvaluateSeccomp: SyscallDependsOnArgs or SyscallNotified",
	Explain: `A rule for ioctl, openat, open or mmap has argument conditions (or hands the
call to a seccomp agent, SCMP_ACT_NOTIFY): whether a device's calls pass
depends on their arguments (the ioctl request number, the mmap flags),
which a static reading cannot know. The functional probe (checkpoint 4)
measures it.`,
	Remediation: "Run the functional probe inside the container; if it fails with the rule's errno, allow the device's requests in the profile.",
}, {
	Code: "RUNTIME_SECCOMP_UNEXPLAINED", Status: "WARN",
	Title:   "the process's seccomp state does not match the spec",
	Decides: "ProcStatus.Seccomp 2 with no linux.seccomp in the spec, or 0 with one",
	Explain: `/proc/PID/status says a seccomp filter is attached although the spec asks
for none (a filter inherited from the runtime's own process, or one a hook
or wrapper added), or none although the spec has a profile (a runtime that
ignores it). The spec's profile then does not say what the process may
call; a filter's rules cannot be read without ptrace-attaching the process.`,
	Remediation: "Find what attaches the filter (the runtime's own service unit, e.g. SystemCallFilter= in systemd, or a wrapper) and run the functional probe inside the container to measure.",
}, {
	Code: "RUNTIME_CAPS_DRIFT", Status: "WARN",
	Title:   "the process's capabilities differ from the spec's",
	Decides: "ProcStatus.CapEff/CapBnd against CapSetOf(spec process.capabilities)",
	Explain: `The effective or bounding set in /proc/PID/status is not the set the spec's
process.capabilities asks for: the runtime dropped or added capabilities,
or the process changed them after start. A device workload that needs
CAP_IPC_LOCK (VFIO, RDMA pinning), CAP_SYS_ADMIN (some management
interfaces) or CAP_SYS_RAWIO may then fail with EPERM.`,
	Remediation: "Set the capabilities in the workload's definition (Kubernetes securityContext.capabilities.add, `docker run --cap-add IPC_LOCK`) rather than relying on the runtime's defaults, and check what the runtime's configuration drops.",
}, {
	Code: "RUNTIME_MEMLOCK_LIMITED", Status: "WARN",
	Title:   "RLIMIT_MEMLOCK is finite and the process lacks CAP_IPC_LOCK",
	Decides: "ProcLimits.MemLock soft below RLimInfinity and CapEff without CAP_IPC_LOCK",
	Explain: `"Max locked memory" in /proc/PID/limits is finite and the process cannot
exceed it (no CAP_IPC_LOCK). VFIO maps a guest's or device's DMA memory by
pinning it, and RDMA registers memory the same way: past the limit the
mapping fails with ENOMEM. It does not matter for devices that do not pin
memory.`,
	Remediation: "Raise the limit for the container (`docker run --ulimit memlock=-1:-1`; containerd and CRI-O take the runtime service's limits, e.g. LimitMEMLOCK=infinity in its systemd unit) or grant CAP_IPC_LOCK.",
}, {
	Code: "RUNTIME_LSM_CONFINED", Status: "WARN",
	Title:   "the process runs under an LSM profile that may refuse devices",
	Decides: "LSMLabel: a label other than unconfined",
	Explain: `/proc/PID/attr/current (or attr/apparmor/current) names the AppArmor profile
or SELinux context the process runs under. An LSM is asked after the mode
and the device cgroup and refuses with EACCES; a profile without rules for
the device's nodes (AppArmor's docker-default allows /dev access broadly,
custom profiles may not; SELinux's container_t needs the node's type to be
allowed) explains an EACCES that neither nodev nor the mode explains.`,
	Remediation: "Check the audit log for the denial (`journalctl -k | grep -i apparmor`, `ausearch -m avc`), and allow the device in the profile or label the node (`chcon -t container_file_t /dev/NODE` for SELinux).",
}, {
	Code: "RUNTIME_PROC_UNREADABLE", Status: "NOT_RUN",
	Title:   "the container's process could not be read",
	Decides: "ProcRead.State ReadUnreadable",
	Explain: `The kernel refused to show the process's root, environment or mount table
(EACCES or EPERM): reading another user's /proc/PID/root and environ needs
ptrace read access (fs/proc/base.c), which root on the host has. Nothing is
concluded about the container.`,
	Remediation: "Run `accel-doctor container ID` as root on the host, or in a pod with hostPID: true and the host's / mounted at --root.",
}, {
	Code: "RUNTIME_PROCESS_GONE", Status: "NOT_RUN",
	Title:   "the container's process exited",
	Decides: "ProcRead.State ReadGone",
	Explain: `The init process is not in /proc any more, or is a zombie, which has no
root, memory or mounts left to show. The container stopped or restarted
between finding it and reading it; nothing is concluded.`,
	Remediation: "Find the container again (its new init PID after a restart) and rerun; if it keeps exiting, read its logs (`crictl logs CONTAINER`, `kubectl logs POD --previous`).",
}, {
	Code: "RUNTIME_NOT_CAPTURED", Status: "NOT_RUN",
	Title:   "the snapshot does not hold what the runtime applied",
	Decides: "ProcRead.State ReadNotCaptured",
	Explain: `The snapshot or tree being replayed did not capture this part of the
process's state (its /dev as the process sees it, its environment's names,
a path stat'ed through its root): a capture taken without the container,
or by a reader that did not ask. Absence in it says nothing about the
container.`,
	Remediation: "Take the snapshot on the host with the container: `accel-doctor snapshot --container-id ID snap.tar.gz`.",
}, {
	Code: "RUNTIME_PROC_MALFORMED", Status: "NOT_RUN",
	Title:   "a /proc file of the process is not in the kernel's format",
	Decides: "ProcRead.State ReadMalformed",
	Explain: `A file read for the process (status, limits, uid_map, mountinfo) did not
parse as the kernel writes it, or was larger than any kernel writes: an
edited or truncated capture, or a tree that is not a host. What parsed is
still used where it stands alone; the rest is not concluded.`,
	Remediation: "Recapture the snapshot on the host; report a bug with the file if it came from a live kernel.",
}}
