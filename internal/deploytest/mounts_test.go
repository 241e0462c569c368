package deploytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
)

// hostMount is one host path the agent's pod is given: its hostPath and
// the volume's type ("" or Directory).
type hostMount struct {
	host string
	typ  corev1.HostPathType
}

// agentMounts are the agent DaemonSet's hostPath mounts, as deploy/
// installs it, sorted by host path.
func agentMounts(t *testing.T) []hostMount {
	t.Helper()
	spec, ok := readInstall(t, "deploy").podSpecs()["DaemonSet/accel-doctor-agent"]
	if !ok || len(spec.Containers) != 1 {
		t.Fatal("deploy/ has no agent DaemonSet of one container")
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	var out []hostMount
	for _, m := range spec.Containers[0].VolumeMounts {
		v, ok := vols[m.Name]
		if !ok || v.HostPath == nil {
			continue
		}
		if m.MountPath != "/host"+v.HostPath.Path || !m.ReadOnly {
			t.Fatalf("hostPath %s mounted at %s (read-only %v): these tests want it read-only at /host%[1]s", v.HostPath.Path, m.MountPath, m.ReadOnly)
		}
		hm := hostMount{host: path.Clean(v.HostPath.Path)}
		if v.HostPath.Type != nil {
			hm.typ = *v.HostPath.Type
		}
		out = append(out, hm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].host < out[j].host })
	return out
}

// liveSocket is the one socket of the node trees below that serves (a
// DRA driver's, which the DRA layer counts as a driver only when a
// connect succeeds): the tree builders listen on it wherever they put it.
const liveSocket = "/var/lib/kubelet/plugins/gpu.example.com/dra.sock"

// kubeletStart is when the node trees' kubelet bound its sockets.
var kubeletStart = time.Date(2026, 11, 30, 22, 14, 5, 0, time.UTC)

// nodeTree builds, in a directory short enough for a socket's path (a
// socket's path must fit sun_path, 108 bytes), a Kubernetes node with the
// kernel trees (/sys, /proc, /dev and the device manifest) of
// testdata/hosts/HOST and what such a node has in /run and in the
// kubelet's and CDI's directories:
//
//   - /run: containerd (its sockets, a shim's socket, a task bundle, the
//     runc state of the task), CRI-O (its socket, a containers/storage
//     container), runc's and crun's roots, Docker's socket and its runc
//     root, Podman's, k3s's, NRI's, D-Bus's and systemd's sockets; a CDI
//     spec (/run/cdi); a modprobe.d file naming the NVIDIA H100's id for
//     vfio-pci. /var/run links to it.
//   - /etc/cdi: a DRA driver's CDI spec for /dev/nvidia0 (and /run/cdi's
//     for /dev/nvidia1), which the device plugin's checkpoint also
//     registers: advertised twice (DRA_DOUBLE_ADVERTISED on the H100
//     hosts).
//   - /var/lib/kubelet: device-plugins/ (kubelet.sock, the NVIDIA
//     plugin's socket, bound after it, and the checkpoint),
//     pod-resources/kubelet.sock, plugins_registry/ (a DRA driver's
//     registration socket), plugins/DRIVER/dra.sock (serving: liveSocket),
//     and pods/ (a pod's secret volume), which no check reads.
//
// The sockets but liveSocket are bound and closed: nothing answers
// them, and check says so the same way wherever it finds them. What a
// check would read and the agent is never given (/usr, /boot, /etc but
// /etc/cdi, dra_manager_state) is not in the tree, so that a report of
// the tree and one of what the agent's mounts give of it can differ only
// by what the narrowed mounts leave out of /run and the kubelet's and
// CDI's directories.
func nodeTree(t *testing.T, host string) string {
	t.Helper()
	dir := shortDir(t)
	src := filepath.Join(repoRoot, "testdata/hosts", host)
	for _, p := range []string{"/sys", "/proc", "/dev", "/" + fixtureManifest} {
		if _, err := os.Lstat(src + p); err == nil {
			copyTree(t, src+p, dir+p, nil)
		}
	}
	// The containerd task bundle of the repository's Kubernetes fixture.
	copyTree(t, filepath.Join(repoRoot, "testdata/hosts/nvidia-h100x8-k8s-cgroupv1/run"), dir+"/run", nil)
	const (
		id    = "5e1c0ffee0ddba11"
		crio  = "c0ffee0000000000000000000000000000000000000000000000000000000001"
		runc  = "7a11e10000000000"
		crun  = "c4a11e1000000000"
		moby  = "d0c4e40000000000000000000000000000000000000000000000000000000001"
		bdl   = "/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id
		stdir = "/run/containers/storage/overlay-containers/" + crio + "/userdata"
	)
	files := map[string]string{
		bdl + "/init.pid":     "4242",
		bdl + "/options.json": `{"binary_name":"runc","root":"/run/containerd/runc"}`,
		"/run/containerd/runc/k8s.io/" + id + "/state.json":     `{"id":"` + id + `","init_process_pid":4242,"created":"2026-11-30T22:20:00Z","config":{"labels":["bundle=` + bdl + `"]}}`,
		stdir + "/config.json":                                  `{"ociVersion":"1.2.0","process":{"args":["sleep","inf"],"cwd":"/"},"root":{"path":"rootfs"},"annotations":{"io.kubernetes.pod.namespace":"ml","io.kubernetes.pod.name":"trainer-1"}}`,
		stdir + "/pidfile":                                      "5151",
		"/run/runc/" + runc + "/state.json":                     `{"id":"` + runc + `","init_process_pid":6161,"config":{"labels":["bundle=/run/containers/storage/overlay-containers/` + crio + `/userdata"]}}`,
		"/run/crun/" + crun + "/status":                         `{"id":"` + crun + `","pid":7171,"bundle":"/run/containers/storage/overlay-containers/` + crio + `/userdata"}`,
		"/run/docker/runtime-runc/moby/" + moby + "/state.json": `{"id":"` + moby + `","init_process_pid":8181}`,
		"/run/modprobe.d/vfio.conf":                             "# the NVIDIA H100 SXM5 is for passthrough\noptions vfio-pci ids=10de:2330\n",
		"/run/cdi/gpu-example-claim.json":                       cdiSpec("gpu1", "/dev/nvidia1"),
		"/etc/cdi/gpu-example.json":                             cdiSpec("gpu0", "/dev/nvidia0"),
		"/var/lib/kubelet/pods/6f0c2a57-3d1e-4b8a-9e2f-7a4c1d0b9e31/volumes/kubernetes.io~secret/creds/password": "s3cr3t",
	}
	for p, c := range files {
		writeFile(t, dir+p, c, time.Time{})
	}
	var uuids []string
	for _, g := range fixture.H100GPUs {
		uuids = append(uuids, fixture.H100UUID(g.Minor))
	}
	cp, err := kubelet.EncodeCheckpoint(&kubelet.Checkpoint{
		Entries: []kubelet.Allocation{{PodUID: "6f0c2a57-3d1e-4b8a-9e2f-7a4c1d0b9e31", Container: "cuda", Resource: "nvidia.com/gpu",
			DeviceIDs: uuids[:1], NUMA: map[string][]int64{uuids[0]: {0}}}},
		Registered: map[string][]string{"nvidia.com/gpu": uuids},
	})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/var/lib/kubelet/device-plugins/"+kubelet.CheckpointName, string(cp), kubeletStart.Add(2*time.Minute))
	for p, mtime := range map[string]time.Time{
		"/run/containerd/containerd.sock":                                  kubeletStart.Add(-time.Hour),
		"/run/containerd/containerd.sock.ttrpc":                            kubeletStart.Add(-time.Hour),
		"/run/containerd/s/0c3e5d21a7b9f64e":                               kubeletStart,
		"/run/crio/crio.sock":                                              kubeletStart.Add(-time.Hour),
		"/run/docker.sock":                                                 kubeletStart.Add(-time.Hour),
		"/run/podman/podman.sock":                                          kubeletStart.Add(-time.Hour),
		"/run/k3s/containerd/containerd.sock":                              kubeletStart.Add(-time.Hour),
		"/run/nri/nri.sock":                                                kubeletStart.Add(-time.Hour),
		"/run/dbus/system_bus_socket":                                      kubeletStart.Add(-2 * time.Hour),
		"/run/systemd/private":                                             kubeletStart.Add(-2 * time.Hour),
		"/var/lib/kubelet/device-plugins/" + kubelet.KubeletSocketName:     kubeletStart,
		"/var/lib/kubelet/device-plugins/nvidia-gpu.sock":                  kubeletStart.Add(time.Minute),
		"/var/lib/kubelet/pod-resources/" + kubelet.PodResourcesSocketName: kubeletStart,
		"/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock":       kubeletStart.Add(time.Minute),
		liveSocket: kubeletStart.Add(time.Minute),
	} {
		makeSocket(t, dir+p, p == liveSocket, mtime)
	}
	if err := os.Symlink("../run", dir+"/var/run"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixtureManifest is the device manifest of a tree (hostfs.ManifestPath).
const fixtureManifest = ".accel-doctor/devices.manifest"

// cdiSpec is a DRA driver's CDI spec (its vendor is "k8s." and the
// driver's name, as kubeletplugin's CDI helper writes) for one device
// node.
func cdiSpec(name, node string) string {
	return `{"cdiVersion":"0.6.0","kind":"k8s.gpu.example.com/gpu","devices":[{"name":"` + name + `","containerEdits":{"deviceNodes":[{"path":"` + node + `"}]}}]}`
}

// shortDir is a temporary directory under the system's (not the test's,
// whose name would not leave room for a socket's path), removed at the
// end of the test.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "am")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func writeFile(t *testing.T, p, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// makeSocket binds a unix socket at p: listening (each connection
// accepted and closed) until the test ends when live, else closed at
// once, which leaves the socket file that nothing answers.
func makeSocket(t *testing.T, p string, live bool, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if live {
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	} else {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: p})
		unix.Close(fd)
		if err != nil {
			t.Fatalf("bind %s: %v", p, err)
		}
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the tree at src to dst as a node's files would be seen
// through a bind mount of src: directories, regular files (content, mode
// and mtime), symbolic links as they are, sockets made anew with their
// mtime (serving when their host path, hostPath(rel), is liveSocket).
func copyTree(t *testing.T, src, dst string, hostPath func(rel string) string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		switch m := info.Mode(); {
		case m.IsDir():
			return os.MkdirAll(to, m.Perm()|0o700)
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case m&fs.ModeSocket != 0:
			makeSocket(t, to, hostPath != nil && hostPath(filepath.ToSlash(rel)) == liveSocket, info.ModTime())
			return nil
		case m.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, m.Perm()); err != nil {
				return err
			}
			return os.Chtimes(to, info.ModTime(), info.ModTime())
		}
		return errors.New(p + ": not a file, directory, link or socket")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// resolveIn is where a hostPath of p leads on the node at dir (the kubelet
// and the runtime resolve it on the node: /var/run/cdi is /run/cdi), and
// whether it is there.
func resolveIn(t *testing.T, dir, p string) (string, bool) {
	t.Helper()
	r, err := securejoin.SecureJoin(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Lstat(r)
	return r, err == nil
}

// mountedCopy is the agent's /host as copies: each mount's tree copied
// from the node at dir to the same path under a new directory, and the
// device manifest (the fixture's /dev, which no mount carries). A
// volume whose path the node lacks is what the runtime gives the pod: an
// empty directory for type "" (containerd and CRI-O make a missing bind
// source), and no pod at all for type Directory.
func mountedCopy(t *testing.T, dir string, mounts []hostMount) string {
	t.Helper()
	out := shortDir(t)
	if _, err := os.Stat(filepath.Join(dir, fixtureManifest)); err == nil {
		copyTree(t, filepath.Join(dir, fixtureManifest), filepath.Join(out, fixtureManifest), nil)
	}
	for _, m := range mounts {
		src, ok := resolveIn(t, dir, m.host)
		switch {
		case !ok && m.typ == corev1.HostPathDirectory:
			t.Fatalf("hostPath %s (type Directory) is not on the node: the pod would not start", m.host)
		case !ok:
			if err := os.MkdirAll(out+m.host, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			copyTree(t, src, out+m.host, func(rel string) string { return path.Join(m.host, rel) })
		}
	}
	return out
}

// checkReport runs `accel-doctor check --root ROOT -o json` and returns
// its exit status and its report with what names the root or the run
// (root, source, the time) left out and the root's path replaced by
// "ROOT" wherever a message quotes it.
func checkReport(t *testing.T, bin, root string) (int, map[string]any) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "accel-doctor"), "check", "--root", root, "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("check --root %s: %v", root, err)
	}
	if code > 2 {
		t.Fatalf("check --root %s: exit %d\n%s", root, code, stderr.String())
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	out = bytes.ReplaceAll(out, []byte(real), []byte("ROOT"))
	out = bytes.ReplaceAll(out, []byte(root), []byte("ROOT"))
	var rep map[string]any
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("check --root %s -o json: %v\n%s", root, err, out)
	}
	for _, k := range []string{"root", "source", "generated"} {
		delete(rep, k)
	}
	return code, rep
}

// testHosts are the host trees of testdata/hosts.
func testHosts(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot, "testdata/hosts"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 5 {
		t.Fatalf("testdata/hosts holds %d hosts", len(out))
	}
	return out
}

// exercised reports which of the agent's mounts (but the kernel trees)
// some report names a path under: the fixture reaches every reader the
// mounts are for, so that a mount left out would show.
func exercised(reports []map[string]any, mounts []hostMount) map[string]bool {
	var all []byte
	for _, r := range reports {
		b, _ := json.Marshal(r["findings"])
		all = append(all, b...)
	}
	out := map[string]bool{}
	for _, m := range mounts {
		out[m.host] = bytes.Contains(all, []byte(m.host+"/"))
	}
	return out
}

// `check` over what the agent's mounts give of a node (each mount's tree
// copied, nothing else: the runtimes' state and sockets under /run left
// behind) reports exactly what it reports over the node, for every host
// of testdata/hosts made a Kubernetes node (nodeTree): narrowing the
// mounts to what the readers read loses no finding. And every mount but
// the kernel trees is read: some finding names a path under it, so the
// comparison would show one left out (as it does with modprobe.d or
// pod-resources taken away: the VFIO and PodResources findings change).
func TestAgentMountsLoseNoFinding(t *testing.T) {
	bin := binaries(t, false)
	mounts := agentMounts(t)
	var reports []map[string]any
	for _, host := range testHosts(t) {
		t.Run(host, func(t *testing.T) {
			node := nodeTree(t, host)
			given := mountedCopy(t, node, mounts)
			codeN, full := checkReport(t, bin, node)
			codeG, got := checkReport(t, bin, given)
			if d := cmp.Diff(full, got); d != "" || codeN != codeG {
				t.Errorf("check over the agent's mounts (exit %d) differs from check over the node (exit %d) (-node +mounts):\n%s", codeG, codeN, d)
			}
			reports = append(reports, full)
		})
	}
	for p, ok := range exercised(reports, mounts) {
		if !ok && p != "/sys" && p != "/proc" && p != "/dev" {
			t.Errorf("no finding of any host names a path under %s: the node trees do not exercise that mount", p)
		}
	}
}

// mountsChild marks the run of TestAgentMountsLoseNoFindingInAPod inside
// its own mount namespace.
const mountsChild = "ACCEL_DOCTOR_TEST_AGENT_MOUNTS_CHILD"

// The same in the agent's own conditions: /host assembled from read-only
// bind mounts (as the runtime makes a pod's hostPath volumes), where a
// path no mount gives is "not given", never absent (hostfs NotGiven). The
// mounts as they are report exactly what the mounts with the node's whole
// /run in place of their part of it report, for every host: the part of
// /run left out holds nothing a check reads. Run as root, in a private
// mount namespace: the test binary runs itself again under unshare -m,
// so that the mounts are the child's alone and end with it.
func TestAgentMountsLoseNoFindingInAPod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bind mounts in a private mount namespace")
	}
	if os.Getenv(mountsChild) == "" {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("needs unshare(1) (util-linux)")
		}
		bin := binaries(t, false)
		cmd := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0], "-test.run=^TestAgentMountsLoseNoFindingInAPod$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), mountsChild+"="+bin)
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("\nPASS")) {
			t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
		}
		return
	}
	bin := os.Getenv(mountsChild)
	mounts := agentMounts(t)
	// The agent as it was given /run: all of it.
	wide := []hostMount{{host: "/run", typ: corev1.HostPathDirectory}}
	for _, m := range mounts {
		if m.host != "/run" && !strings.HasPrefix(m.host, "/run/") {
			wide = append(wide, m)
		}
	}
	if len(wide) == len(mounts)+1 {
		t.Fatal("the agent mounts nothing of /run: this test compares the part it mounts with the whole")
	}
	for _, host := range testHosts(t) {
		t.Run(host, func(t *testing.T) {
			node := nodeTree(t, host)
			_, w := checkReport(t, bin, bindView(t, node, wide))
			_, got := checkReport(t, bin, bindView(t, node, mounts))
			if d := cmp.Diff(w, got); d != "" {
				t.Errorf("check over the agent's mounts differs from check with the whole /run (-whole +mounts):\n%s", d)
			}
			// The root is a pod's: what no mount gives is not given.
			if b, _ := json.Marshal(got); !bytes.Contains(b, []byte("was not given to it")) {
				t.Errorf("no finding says a path was not given: the bind mounts are not what check sees")
			}
		})
	}
}

// bindView is the agent's /host in this mount namespace: a new directory
// with each mount's path on the node at dir bind-mounted read-only at the
// same path under it (an empty directory for a path the node lacks, as the
// runtime makes one), and the device manifest written into the
// directory itself (the container's own file system).
func bindView(t *testing.T, dir string, mounts []hostMount) string {
	t.Helper()
	out := shortDir(t)
	if _, err := os.Stat(filepath.Join(dir, fixtureManifest)); err == nil {
		copyTree(t, filepath.Join(dir, fixtureManifest), filepath.Join(out, fixtureManifest), nil)
	}
	for _, m := range mounts {
		src, ok := resolveIn(t, dir, m.host)
		if !ok {
			if m.typ == corev1.HostPathDirectory {
				t.Fatalf("hostPath %s (type Directory) is not on the node: the pod would not start", m.host)
			}
			src = shortDir(t)
		}
		dst := out + m.host
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Fatalf("bind %s at %s: %v", src, dst, err)
		}
		// Before the directories go (cleanups run last first).
		t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("read-only %s: %v", dst, err)
		}
	}
	return out
}
