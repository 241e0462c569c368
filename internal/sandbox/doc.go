// Package sandbox is the one part of accel-doctor that writes to the host.
// It runs a command (or probes device nodes) in a transient cgroup that
// holds exactly the device rules it was given, the way
// `systemd-run -p DevicePolicy=closed -p DeviceAllow=...` or cgexec would,
// so that a rule set can be measured on the running kernel instead of
// inferred: the diagnosis in internal/cgroup can only read a policy, and a
// default-allow v1 cgroup hides its deny rules from any reader.
//
// What it writes, and why:
//   - a cgroup directory named accel-doctor-sandbox-<pid>-<random> at the
//     top of the v1 devices hierarchy or of cgroup2 (mkdir), to hold the
//     rules and the process;
//   - on cgroup v1, the rules as lines in that cgroup's devices.deny and
//     devices.allow, and the process (or, for probes, one thread of
//     accel-doctor) in its cgroup.procs or tasks;
//   - on cgroup2, a generated BPF_PROG_TYPE_CGROUP_DEVICE program named
//     adoc_sandbox, loaded and attached to that directory through a
//     bpf_link, and the probe helper in its cgroup.procs;
//   - for the mknod probe, a node in a temporary directory of its own,
//     removed at once;
//   - the signal that stopped the sandbox, passed on to the command, and
//     after a grace period (DefaultStopGrace) or the command's exit,
//   - cgroup.kill, SIGKILL to what runs inside, and rmdir of the cgroup
//     when the sandbox ends, on every exit path, with a reaper process for
//     the case where accel-doctor itself is killed, and a sweep of
//     sandbox cgroups whose owner is dead.
//
// It never touches a cgroup it did not name itself.
//
// A rule set means what cgroup.DeviceRules says (internal/cgroup/rules.go),
// the semantics the v1 evaluator and the drift check use too, which are
// the kernel's and runc's: rules applied in order to a default and an
// exception list, and one exception must hold the whole of an access (an
// O_RDWR open asks for r and w at once). --v1 gets the v1 controller's
// decisions from the kernel itself; --v2 generates a program that decides
// as runc's generated program does (bpfgen.go). The two mechanisms differ
// only over a default allow, for an open for reading and writing that a
// deny rule covers in part (EPERM on v1, allowed by the program); the
// sandbox warns where a rule set has such a device. Rules that the kernel
// would ignore and runc refuses (a hole in a wider rule) are refused.
// RulesHelp is the user's version.
package sandbox
