// Package runtime reads what container runtimes leave on a host: a
// container's OCI runtime config (config.json, read with the runtime-spec
// types), the containers themselves, and what the runtime really applied
// to a container's init process (checkpoint 3), read from /proc/PID
// without entering the container. It reads through hostfs and writes
// nothing.
//
// Containers are found through the runtimes' own state, never by running
// a runtime or dialling its socket (containers.go): runc's state.json and
// crun's status under their roots (/run/runc, /run/crun, and the roots
// containerd's and Docker's shims give runc), containerd's task bundles
// (config.json, init.pid, options.json) and CRI-O's containers/storage
// directories (config.json, conmon's pidfile, CRI-O's state.json). What
// several of them say about one container is merged; a container's status
// is its init process as /proc shows it, with the recorded start time
// ruling out a reused PID. Find looks one up by ID, ID prefix or PID (its
// init, or any process in its cgroups), FindPod by the CRI annotations.
// A snapshot keeps of runtime state files only the fields the lookup
// reads.
//
// What a snapshot keeps of a config is redacted (Redact): the values of the
// process's arguments and environment and of every hook's arguments and
// environment are where tokens and passwords live, so they never leave the
// host; their keys and positions stay, so that a replay decides the same.
//
// Applied state (ReadApplied, applied.go): the process's /dev as it sees it
// (hostfs.ReadDirInProcess, LstatInProcess, StatInProcess through
// /proc/PID/root), owners mapped through its user namespace (userns.go),
// the mount holding each node and the sources of bind mounts
// (mountinfo.go), its environment's names, never values, its status,
// limits and LSM label (procpid.go), and the spec's seccomp profile as
// runc applies it (applied_seccomp.go). Each fact carries the path it was
// read from and a ReadState: absent, unreadable, process gone, malformed
// and not captured are kept apart. Compare (applied_compare.go) checks what
// checkpoint 2 expects against it, mechanically; judging is the diagnose
// layer's, with the codes proposed in applied_codes.go.
package runtime
