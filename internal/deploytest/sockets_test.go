package deploytest

import (
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// runtimeSockets are where container runtimes and the services that can
// start a process as root on the node listen. A read-only bind mount
// does not stop connect(2): net/unix/af_unix.c unix_find_bsd asks
// path_permission(MAY_WRITE) of the socket's inode, and a read-only file
// system refuses a write only to regular files, directories and links
// (fs/namei.c sb_permission); the mount's read-only flag is not
// consulted. So a pod that mounts one of these, or a directory above it,
// can drive the runtime as root. A path ending in "/" is a directory
// that holds only such sockets (a mount below it reaches them too).
var runtimeSockets = []string{
	// containerd: its gRPC and ttrpc addresses and debug socket
	// (defaults/defaults_unix.go DefaultAddress, DefaultDebugAddress;
	// ttrpc is the address + ".ttrpc"), and its v2 shims' task sockets
	// (core/runtime/v2/shim: STATE/s/HASH).
	"/run/containerd/containerd.sock",
	"/run/containerd/containerd.sock.ttrpc",
	"/run/containerd/debug.sock",
	"/run/containerd/s/",
	// k3s and RKE2 run containerd with their own state directory.
	"/run/k3s/containerd/containerd.sock",
	// CRI-O (crio.conf [crio.api] listen) and its shim monitor.
	"/run/crio/crio.sock",
	// Docker Engine (dockerd -H default, both spellings: /var/run links
	// to /run), the containerd dockerd starts when no system one is
	// given (libcontainerd/supervisor), its plugins' sockets, and
	// cri-dockerd and the kubelet's former dockershim.
	"/var/run/docker.sock",
	"/run/docker.sock",
	"/run/docker/containerd/containerd.sock",
	"/run/docker/plugins/",
	"/run/cri-dockerd.sock",
	"/run/dockershim.sock",
	// Podman's API service (podman-system-service(1), rootful), and
	// BuildKit.
	"/run/podman/podman.sock",
	"/run/buildkit/buildkitd.sock",
	// NRI: a plugin connected here adjusts every container the runtime
	// creates (containerd and CRI-O, nri.sock's default path).
	"/run/nri/nri.sock",
	// systemd's private bus and the system D-Bus: root on either starts
	// a unit (StartTransientUnit), a process as root on the node.
	"/run/systemd/private",
	"/run/dbus/system_bus_socket",
}

// spellings are the paths that name p on a node, where /var/run links
// to /run (every systemd host; FHS 3.0): p cleaned and, under either,
// both forms.
func spellings(p string) []string {
	p = path.Clean(p)
	for _, pre := range []string{"/run", "/var/run"} {
		if rest, ok := strings.CutPrefix(p, pre); ok && (rest == "" || rest[0] == '/') {
			return []string{"/run" + rest, "/var/run" + rest}
		}
	}
	return []string{p}
}

// reachesSocket returns the runtime sockets a hostPath volume of p gives
// a pod: those at p or below it (in either spelling: a volume of /var
// holds /var/run, so /run), and every one of a socket directory p lies
// in.
func reachesSocket(p string) []string {
	var out []string
	for _, s := range runtimeSockets {
		dir := strings.HasSuffix(s, "/")
		hit := false
		for _, v := range spellings(p) {
			for _, n := range spellings(s) {
				hit = hit || v == n || v == "/" || strings.HasPrefix(n, v+"/") || dir && strings.HasPrefix(v, n+"/")
			}
		}
		if hit {
			out = append(out, s)
		}
	}
	return out
}

// hostPathVolumes lists the hostPath volumes of every workload of an
// install, as "Kind/name: PATH".
func hostPathVolumes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, spec := range readInstall(t, dir).podSpecs() {
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				out[name+" volume "+v.Name] = v.HostPath.Path
			}
		}
	}
	return out
}

// No pod that deploy/ ships (the agent, the device plugin, the check Job,
// the probe gate; the agent with components/dra-state too) has a hostPath
// volume that is, or lies above, a container runtime's socket, or lies
// inside a directory of such sockets: the agent's host access is what it
// reads (the kubelet's own sockets, which its checks connect to, are no
// runtime's).
func TestAgentReachesNoRuntimeSocket(t *testing.T) {
	vols := map[string]string{}
	for _, dir := range []string{"deploy", "deploy/plugin", "deploy/examples"} {
		for k, v := range hostPathVolumes(t, dir) {
			vols[dir+": "+k] = v
		}
	}
	var c struct {
		Patches []struct{ Patch string }
	}
	readYAML(t, repoRoot+"/deploy/components/dra-state/kustomization.yaml", &c)
	for _, p := range c.Patches {
		var ds appsv1.DaemonSet
		if err := yaml.UnmarshalStrict([]byte(p.Patch), &ds); err != nil {
			t.Fatal(err)
		}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.HostPath != nil {
				vols["components/dra-state: volume "+v.Name] = v.HostPath.Path
			}
		}
	}
	if len(vols) < 10 {
		t.Fatalf("%d hostPath volumes found in deploy/: the agent's alone has 10", len(vols))
	}
	keys := make([]string, 0, len(vols))
	for k := range vols {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s := reachesSocket(vols[k]); len(s) > 0 {
			t.Errorf("%s: hostPath %s reaches %q", k, vols[k], s)
		}
	}
}

// The detector flags what it is for: the agent's former /run, the
// node's root, /var and /var/run, a runtime's directory and its socket
// itself, a shim's socket; and not the directories the agent mounts
// now, nor a runtime state directory that holds no socket.
func TestReachesSocketDetector(t *testing.T) {
	for _, p := range []string{"/run", "/run/", "/", "/var", "/var/run", "/run/containerd", "/var/run/containerd", "/run/docker",
		"/var/run/docker.sock", "/run/docker.sock", "/run/crio", "/run/containerd/s/0123abcd", "/run/k3s", "/run/dbus", "/run/systemd"} {
		if len(reachesSocket(p)) == 0 {
			t.Errorf("hostPath %s: no runtime socket found", p)
		}
	}
	for _, p := range []string{"/run/modprobe.d", "/var/run/cdi", "/run/cdi", "/etc/cdi", "/sys", "/proc", "/dev", "/var/lib/kubelet",
		"/var/lib/kubelet/device-plugins", "/run/containerd/runc", "/run/containerd/io.containerd.runtime.v2.task", "/run/crun", "/run/runc",
		"/run/containers/storage", "/run/docker/runtime-runc"} {
		if s := reachesSocket(p); len(s) > 0 {
			t.Errorf("hostPath %s: flagged for %q", p, s)
		}
	}
	// The whole of /run reaches every runtime's.
	if s := reachesSocket("/run"); !slices.Contains(s, "/run/containerd/containerd.sock") || !slices.Contains(s, "/run/crio/crio.sock") ||
		!slices.Contains(s, "/var/run/docker.sock") || len(s) != len(runtimeSockets) {
		t.Errorf("/run reaches %q", s)
	}
}
