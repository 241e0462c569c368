// Package cdi is checkpoint 2 of a container's diagnosis: what should
// inject its devices, resolved against the host. It reads, through
// hostfs only (a live host, --root /host, a snapshot):
//
//   - a container's OCI spec (a *specs.Spec from runtime.ReadSpec), to name
//     its injection mechanisms (Inspect): plain linux.devices, CDI device
//     names (cdi.k8s.io/* annotations, the copy of the Kubernetes
//     annotations CRI-O keeps in io.kubernetes.cri-o.Annotations, qualified
//     names in other annotations and in NVIDIA_VISIBLE_DEVICES), the legacy
//     NVIDIA hook, and privileged (every device allowed);
//   - the CDI spec files in the spec directories (/etc/cdi, /var/run/cdi,
//     or the runtime's cdi_spec_dirs; /run/cdi when it is a directory of
//     its own), parsed and validated with the CDI library's own functions
//     over bytes read by hostfs, with its priority and conflict rules
//     (Load); the library never opens a host file itself;
//   - the host paths each CDI device's edits name: device nodes (lstat,
//     type and major:minor), mount sources, hook programs (present and
//     executable);
//   - the container runtimes' binaries (containerd, crio, podman, dockerd,
//     cri-dockerd under the root's PATH directories): their Go build
//     information, read from a read-only mapping of the binary, never
//     by running it; else the dpkg database; and their configuration
//     (containerd's config.toml, CRI-O's crio.conf, Docker's daemon.json,
//     containers.conf) for whether CDI is enabled and where specs live.
//
// It returns facts (Fact: a stable Kind, a subject and evidence), never
// findings: diagnose turns them into findings (codes.go proposes the
// catalog). It writes nothing. In a snapshot being recorded, what cannot
// travel as a file (a runtime's build information, a hook's mode bits) is
// handed to the recorder with Root.Capture so that a replay answers the
// same.
package cdi
