package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Real runc containers judged by `accel-doctor container`: each case
// plants one fault and expects the first failing checkpoint, its layer and
// its code, and the errno that an open inside (runc exec) gets.

func containerReport(t *testing.T, args ...string) (*report.Report, int) {
	t.Helper()
	out, stderr, code := run(t, append([]string{"container", "-o", "json"}, args...)...)
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("container %v: exit %d: %v\n%s\n%s", args, code, err, out, stderr)
	}
	return &rep, code
}

// firstFail is the finding the verdict names.
func firstFail(rep *report.Report) (report.Finding, bool) {
	for _, f := range rep.Findings {
		if f.Status == report.Fail && f.Checkpoint == rep.Verdict.Checkpoint && f.Layer == rep.Verdict.Layer {
			return f, true
		}
	}
	return report.Finding{}, false
}

func statusCodes(rep *report.Report, st report.Status) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Status == st {
			out = append(out, f.Code+" "+f.Subject)
		}
	}
	return out
}

var accelNode = specs.LinuxDevice{Path: "/dev/accel0", Type: "c", Major: 1, Minor: 5, FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))}

var allowAccel = specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(int64(1)), Minor: ptr(int64(5)), Access: "rw"}

// A node backed by a real driver (mem's 1:5 under an accelerator's name),
// allowed by its spec: every checkpoint passes and the open inside works.
func TestContainerHealthy(t *testing.T) {
	id, _, _ := runcContainer(t, []specs.LinuxDevice{accelNode}, []specs.LinuxDeviceCgroup{allowAccel})
	rep, code := containerReport(t, id)
	if code != 0 || rep.Verdict.Status == report.Fail {
		t.Fatalf("exit %d, verdict %+v, FAILs %v", code, rep.Verdict, statusCodes(rep, report.Fail))
	}
	want := map[string]report.Checkpoint{"CONTAINER_NODE_DRIVER": 1, "CONTAINER_FOUND": 2, "RUNTIME_NODE_APPLIED": 3, "CGROUP_DEVICE_ALLOWED": 3}
	for _, f := range rep.Findings {
		if cp, ok := want[f.Code]; ok && f.Status == report.Pass && f.Checkpoint == cp {
			delete(want, f.Code)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing PASS findings %v in %v", want, statusCodes(rep, report.Pass))
	}
	probeAgrees(t, id, "/dev/accel0", "PROBE_NODE_OPENED", "")
}

// A 195:0 node injected and allowed on a host without the NVIDIA driver:
// ENXIO, and the verdict names the host (checkpoint 1), not the cgroup.
func TestContainerNodeWithoutDriver(t *testing.T) {
	if b, _ := os.ReadFile("/proc/devices"); strings.Contains(string(b), "195 nvidia") {
		t.Skip("this host has the NVIDIA driver")
	}
	gpu := specs.LinuxDevice{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, FileMode: ptr(os.FileMode(0o666))}
	id, _, _ := runcContainer(t, []specs.LinuxDevice{gpu},
		[]specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: ptr(int64(195)), Minor: ptr(int64(0)), Access: "rw"}})
	rep, code := containerReport(t, id)
	f, ok := firstFail(rep)
	if code != 1 || !ok || rep.Verdict.Checkpoint != report.CheckpointHost || f.Code != "CONTAINER_NODE_NO_DRIVER" || !strings.Contains(f.Summary, "ENXIO") {
		t.Fatalf("exit %d, verdict %+v, first %+v", code, rep.Verdict, f)
	}
	probeAgrees(t, id, "/dev/nvidia0", "PROBE_NODE_NO_DRIVER", "No such device or address")
}

// The node is injected but the spec's device rules deny it: EPERM, and
// the verdict names the cgroup at checkpoint 3. (1:5 is one of the nodes
// runc allows every container; 10:229, /dev/fuse's number, is not, and a
// write to it would be harmless.)
func TestContainerDeniedBySpec(t *testing.T) {
	id, _, _ := runcContainer(t, []specs.LinuxDevice{{Path: "/dev/accel0", Type: "c", Major: 10, Minor: 229, FileMode: ptr(os.FileMode(0o666))}}, nil)
	rep, code := containerReport(t, id)
	f, ok := firstFail(rep)
	if code != 1 || !ok || rep.Verdict.Checkpoint != report.CheckpointApplied || f.Code != "CGROUP_DEVICE_DENIED" || f.Subject != "/dev/accel0" {
		t.Fatalf("exit %d, verdict %+v, first %+v", code, rep.Verdict, f)
	}
	probeAgrees(t, id, "/dev/accel0", "PROBE_NODE_CGROUP_DENIED", "Operation not permitted")
}

// The spec allows the node but the kernel's policy changed after start (a
// rule taken away, as a daemon-reload does): drift, at checkpoint 3.
func TestContainerDrift(t *testing.T) {
	id, pid, _ := runcContainer(t, []specs.LinuxDevice{accelNode}, []specs.LinuxDeviceCgroup{allowAccel})
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	dir := ""
	for _, l := range strings.Split(string(cg), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.Contains(","+f[1]+",", ",devices,") {
			dir = filepath.Join("/sys/fs/cgroup/devices", f[2])
		}
	}
	if dir == "" {
		t.Skip("no v1 devices controller: the drift is planted through devices.deny")
	}
	if err := os.WriteFile(filepath.Join(dir, "devices.deny"), []byte("c 1:5 rw"), 0); err != nil {
		t.Fatal(err)
	}
	rep, code := containerReport(t, id)
	codes := statusCodes(rep, report.Fail)
	if code != 1 || rep.Verdict.Checkpoint != report.CheckpointApplied || !containsPrefix(codes, "CGROUP_DEVICE_DRIFT") {
		t.Fatalf("exit %d, verdict %+v, FAILs %v", code, rep.Verdict, codes)
	}
}

// A user-namespaced container given a host node owned by a uid it does not
// map: the owner shows as 65534 inside and open gives EACCES; the verdict
// names checkpoint 3's node owner, not the cgroup (which allows it).
func TestContainerUnmappedOwner(t *testing.T) {
	dir := sharedDir(t)
	node := filepath.Join(dir, "accel-ns0")
	mknodT(t, node, 1, 5, 0o600)
	id, _, _ := runcContainer(t, nil, []specs.LinuxDeviceCgroup{allowAccel}, func(s *specs.Spec) {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
		s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/accel-ns0", Source: node, Type: "bind", Options: []string{"bind"}})
	})
	rep, code := containerReport(t, id)
	f, ok := firstFail(rep)
	if code != 1 || !ok || f.Code != "RUNTIME_NODE_OWNER_UNMAPPED" || f.Checkpoint != report.CheckpointApplied || !strings.Contains(f.Summary, "EACCES") {
		t.Fatalf("exit %d, verdict %+v, first %+v, FAILs %v", code, rep.Verdict, f, statusCodes(rep, report.Fail))
	}
	probeAgrees(t, id, "/dev/accel-ns0", "PROBE_NODE_PERMISSION_DENIED", "Permission denied")
}

// A node on a nodev mount: EACCES from the mount, named at checkpoint 3.
func TestContainerNodevMount(t *testing.T) {
	dir := sharedDir(t)
	node := filepath.Join(dir, "accel-nd0")
	mknodT(t, node, 1, 5, 0o666)
	id, _, _ := runcContainer(t, nil, []specs.LinuxDeviceCgroup{allowAccel}, func(s *specs.Spec) {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/accel-nd0", Source: node, Type: "bind", Options: []string{"bind", "nodev"}})
	})
	rep, code := containerReport(t, id)
	f, ok := firstFail(rep)
	if code != 1 || !ok || f.Code != "RUNTIME_NODE_NODEV" || f.Subject != "/dev/accel-nd0" {
		t.Fatalf("exit %d, verdict %+v, first %+v, FAILs %v", code, rep.Verdict, f, statusCodes(rep, report.Fail))
	}
	probeAgrees(t, id, "/dev/accel-nd0", "PROBE_NODE_PERMISSION_DENIED", "Permission denied")
}

// --pod finds the container by the CRI annotations in its spec; --all
// lists it.
func TestContainerByPod(t *testing.T) {
	id, _, _ := runcContainer(t, []specs.LinuxDevice{accelNode}, []specs.LinuxDeviceCgroup{allowAccel}, func(s *specs.Spec) {
		s.Annotations = map[string]string{"io.kubernetes.cri.sandbox-namespace": "ml", "io.kubernetes.cri.sandbox-name": "trainer-" + s.Linux.CgroupsPath[len(s.Linux.CgroupsPath)-8:],
			"io.kubernetes.cri.container-name": "cuda", "io.kubernetes.cri.container-type": "container"}
	})
	var s specs.Spec
	b, _ := exec.Command("runc", "state", id).Output()
	var st struct{ Bundle string }
	json.Unmarshal(b, &st)
	raw, _ := os.ReadFile(filepath.Join(st.Bundle, "config.json"))
	json.Unmarshal(raw, &s)
	pod := "ml/" + s.Annotations["io.kubernetes.cri.sandbox-name"]
	rep, code := containerReport(t, "--pod", pod, "--container", "cuda")
	if code != 0 || !strings.Contains(rep.Source, id) || !strings.Contains(rep.Source, "pod "+pod) {
		t.Errorf("--pod: exit %d, source %q", code, rep.Source)
	}
	out, _, code := run(t, "container", "--all")
	if code == 2 || !strings.Contains(out, id) {
		t.Errorf("--all: exit %d:\n%s", code, out)
	}
	if _, stderr, code := run(t, "container", "no-such-container-xyz"); code != 2 || !strings.Contains(stderr, "no container matches") {
		t.Errorf("unknown container: exit %d %q", code, stderr)
	}
}

// probeAgrees runs `container ID --probe` and checks that the host-side
// probe's open of node gets the same answer as an open inside (runc exec):
// the finding code of the errno class, and the errno's words.
func probeAgrees(t *testing.T, id, node, wantCode, insideWords string) {
	t.Helper()
	rep, _ := containerReport(t, id, "--probe")
	got := ""
	for _, f := range rep.Findings {
		if f.Layer == report.LayerFunctional && f.Subject == node && strings.HasPrefix(f.Code, "PROBE_NODE_") {
			got = f.Code
			if f.Checkpoint != report.CheckpointWorks {
				t.Errorf("%s at checkpoint %d, want 4", f.Code, f.Checkpoint)
			}
		}
	}
	if got != wantCode {
		t.Errorf("container --probe: %s gave %q, want %q; findings %v", node, got, wantCode, statusCodes(rep, report.Fail))
	}
	msg := inContainer(t, id, node)
	if (insideWords == "") != (msg == "") || !strings.Contains(msg, insideWords) {
		t.Errorf("open inside: %q, want %q", msg, insideWords)
	}
}

func containsPrefix(list []string, p string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// sharedDir is a directory a user-namespaced container's root (host uid
// 100000) can traverse, for bind sources.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mknodT(t *testing.T, p string, major, minor uint32, mode uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	if err := unix.Mknod(p, unix.S_IFCHR, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, os.FileMode(mode)); err != nil {
		t.Fatal(err)
	}
}

// CDI cases: the container (a runc one, which applies no CDI itself, as
// CRI-O leaves the names in the spec for its own injection) names a CDI
// device in its annotations; the spec directory is a temp dir given with
// --cdi-spec-dir.
func cdiContainer(t *testing.T, spec, device string) (id, specDir string) {
	t.Helper()
	specDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(specDir, "accel-test.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	id, _, _ = runcContainer(t, []specs.LinuxDevice{accelNode}, []specs.LinuxDeviceCgroup{allowAccel}, func(s *specs.Spec) {
		s.Annotations = map[string]string{"cdi.k8s.io/accel": device}
	})
	return id, specDir
}

func cdiFirstFail(t *testing.T, id, specDir string) (*report.Report, report.Finding) {
	t.Helper()
	rep, code := containerReport(t, id, "--cdi-spec-dir", specDir)
	f, ok := firstFail(rep)
	if code != 1 || !ok {
		t.Fatalf("exit %d, verdict %+v, FAILs %v", code, rep.Verdict, statusCodes(rep, report.Fail))
	}
	return rep, f
}

// A CDI spec that declares only "all" does not resolve example.com/accel=0:
// checkpoint 2, "unresolvable CDI devices".
func TestContainerCDIUnresolvable(t *testing.T) {
	id, dir := cdiContainer(t, `cdiVersion: 0.5.0
kind: example.com/accel
devices:
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/zero
`, "example.com/accel=0")
	_, f := cdiFirstFail(t, id, dir)
	if f.Code != "CDI_DEVICE_UNRESOLVABLE" || f.Checkpoint != report.CheckpointAsked || !strings.Contains(f.Summary+strings.Join(evidenceValues(f), " "), "unresolvable CDI devices") {
		t.Errorf("first failure %+v", f)
	}
}

// A CDI spec whose node is not on the host: checkpoint 2, naming it.
func TestContainerCDIHostNodeMissing(t *testing.T) {
	id, dir := cdiContainer(t, `cdiVersion: 0.5.0
kind: example.com/accel
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/accel-doctor-no-such-node
`, "example.com/accel=0")
	_, f := cdiFirstFail(t, id, dir)
	if f.Code != "CDI_NODE_MISSING" || f.Checkpoint != report.CheckpointAsked || !strings.Contains(f.Summary+strings.Join(evidenceValues(f), " "), "/dev/accel-doctor-no-such-node") {
		t.Errorf("first failure %+v", f)
	}
}

// A CDI spec mounts a library and sets a variable the container's process
// does not have (the runtime did not apply the edits): checkpoint 3,
// naming the mount's path, and the variable.
func TestContainerCDIEditsNotApplied(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libaccel.so.1")
	if err := os.WriteFile(lib, []byte("not really a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, dir := cdiContainer(t, `cdiVersion: 0.5.0
kind: example.com/accel
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/zero
containerEdits:
  env:
  - ACCEL_VISIBLE_DEVICES=0
  mounts:
  - hostPath: `+lib+`
    containerPath: /usr/lib/libaccel.so.1
    options: [ro, bind]
`, "example.com/accel=0")
	rep, f := cdiFirstFail(t, id, dir)
	if rep.Verdict.Checkpoint != report.CheckpointApplied {
		t.Errorf("verdict %+v", rep.Verdict)
	}
	fails := statusCodes(rep, report.Fail)
	for _, want := range []string{"RUNTIME_MOUNT_MISSING /usr/lib/libaccel.so.1", "RUNTIME_ENV_MISSING ACCEL_VISIBLE_DEVICES"} {
		if !containsPrefix(fails, want) {
			t.Errorf("no %s among %v (first %+v)", want, fails, f)
		}
	}
}

func evidenceValues(f report.Finding) []string {
	var out []string
	for _, e := range f.Evidence {
		out = append(out, e.Path+" "+e.Value)
	}
	return out
}

// BenchmarkContainerAll100: `container --all` judging 100 running runc
// containers (each with a device node and a rule). The goal is
// 1 s in total.
func BenchmarkContainerAll100(b *testing.B) {
	for i := 0; i < 100; i++ {
		runcContainer(b, []specs.LinuxDevice{accelNode}, []specs.LinuxDeviceCgroup{allowAccel})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var o, e strings.Builder
		if code := Main(context.Background(), []string{"container", "--all", "-o", "json"}, &o, &e); code == 2 {
			b.Fatalf("exit 2: %s", e.String())
		}
	}
}

// A snapshot taken with --container-id replays the container's report: the
// same findings, checkpoint by checkpoint, elsewhere.
func TestContainerSnapshotReplays(t *testing.T) {
	gpu := specs.LinuxDevice{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, FileMode: ptr(os.FileMode(0o666))}
	id, _, _ := runcContainer(t, []specs.LinuxDevice{accelNode, gpu}, []specs.LinuxDeviceCgroup{allowAccel})
	snap := filepath.Join(t.TempDir(), "ctr.tar.gz")
	if _, stderr, code := run(t, "snapshot", "--container-id", id, snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	live, c1 := containerReport(t, id)
	replay, c2 := containerReport(t, id, "--snapshot", snap)
	if c1 != c2 || live.Verdict.Summary != replay.Verdict.Summary {
		t.Errorf("exit %d/%d, verdicts:\n%s\n%s", c1, c2, live.Verdict.Summary, replay.Verdict.Summary)
	}
	a, b := checkpointsOf(live), checkpointsOf(replay)
	if a != b {
		t.Errorf("replay differs:\n%s\n---\n%s", a, b)
	}
}

func checkpointsOf(rep *report.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		if f.Code == "CONTAINER_FOUND" {
			continue // its evidence names the state file as read, live or captured alike, but the summary is the same
		}
		fmt.Fprintf(&b, "%d %s %s %s %s\n", f.Checkpoint, f.Code, f.Status, f.Subject, f.Summary)
	}
	return b.String()
}
