package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// Container IDs of the fixture node, 64 hex digits as containerd, Docker
// and CRI-O make them.
var (
	idApp     = "a1" + strings.Repeat("0", 62) // containerd, k8s.io: pod ml/train-0, container cuda
	idSandbox = "a2" + strings.Repeat("0", 62) // its sandbox
	idDocker  = "d0" + strings.Repeat("1", 62) // Docker; its PID was reused
	idCRIO    = "c0" + strings.Repeat("2", 62) // CRI-O: pod ml/infer, container triton; exited
)

// stateJSON is a runc state.json of the fields runc writes (and a hook
// with a token, which must never reach a snapshot).
func stateJSON(id string, pid int, start uint64, bundle string, labels []string, cgroup string) string {
	doc := map[string]any{
		"id": id, "init_process_pid": pid, "init_process_start": start, "created": "2026-01-02T03:04:05Z",
		"config": map[string]any{"labels": append(labels, "bundle="+bundle),
			"Hooks": map[string]any{"prestart": []any{map[string]any{"path": "/h", "args": []string{"/h", "--token=S3cret"}}}}},
		"cgroup_paths": map[string]string{"": "/sys/fs/cgroup/unified" + cgroup, "devices": "/sys/fs/cgroup/devices" + cgroup,
			"freezer": "/sys/fs/cgroup/freezer" + cgroup},
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func specJSON(ann map[string]string, cgroupsPath string) string {
	doc := map[string]any{"ociVersion": "1.2.0",
		"process":     map[string]any{"args": []string{"/bin/sleep", "inf"}, "env": []string{"HF_TOKEN=envS3cret"}, "cwd": "/"},
		"annotations": ann, "linux": map[string]any{"cgroupsPath": cgroupsPath}}
	b, _ := json.Marshal(doc)
	return string(b)
}

func procStatLine(pid int, state byte, start uint64) string {
	return fmt.Sprintf("%d (sleep) %c 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 1000 10 0\n", pid, state, start)
}

// fixtureNode writes a node running containers of containerd (a pod and
// its sandbox), Docker, CRI-O, plain runc and crun, with the /proc and
// cgroup files their lookup reads.
func fixtureNode(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	const (
		v2    = "/run/containerd/io.containerd.runtime.v2.task"
		store = "/containers/storage/overlay-containers/"
	)
	podApp := map[string]string{annCRIType: "container", annCRINamespace: "ml", annCRIName: "train-0", annCRIUID: "u1",
		annCRIContainer: "cuda", annCRISandboxID: idSandbox}
	podSandbox := map[string]string{annCRIType: "sandbox", annCRINamespace: "ml", annCRIName: "train-0", annCRIUID: "u1", annCRISandboxID: idSandbox}
	podCRIO := map[string]string{annKubeNamespace: "ml", annKubeName: "infer", annKubeContainer: "triton", annKubeUID: "u2",
		annCRIOType: "container", annContainerManager: "cri-o"}
	files := map[string]string{
		// containerd (CRI): runc state, the task bundle.
		"/run/containerd/runc/k8s.io/" + idApp + "/state.json":     stateJSON(idApp, 100, 5000, v2+"/k8s.io/"+idApp, nil, "/kubepods/podu1/"+idApp),
		v2 + "/k8s.io/" + idApp + "/config.json":                   specJSON(podApp, "/kubepods/podu1/"+idApp),
		v2 + "/k8s.io/" + idApp + "/init.pid":                      "100",
		"/run/containerd/runc/k8s.io/" + idSandbox + "/state.json": stateJSON(idSandbox, 90, 4000, v2+"/k8s.io/"+idSandbox, nil, "/kubepods/podu1/"+idSandbox),
		v2 + "/k8s.io/" + idSandbox + "/config.json":               specJSON(podSandbox, "/kubepods/podu1/"+idSandbox),
		v2 + "/k8s.io/" + idSandbox + "/init.pid":                  "90",
		"/proc/100/stat":   procStatLine(100, 'S', 5000),
		"/proc/100/cgroup": "5:devices:/kubepods/podu1/" + idApp + "\n0::/kubepods/podu1/" + idApp + "\n",
		"/proc/90/stat":    procStatLine(90, 'S', 4000),
		"/proc/90/cgroup":  "5:devices:/kubepods/podu1/" + idSandbox + "\n0::/kubepods/podu1/" + idSandbox + "\n",
		// A process exec'd into the app container, one in a sub-cgroup
		// of it, and a host process.
		"/proc/555/stat":   procStatLine(555, 'S', 9000),
		"/proc/555/cgroup": "5:devices:/kubepods/podu1/" + idApp + "\n0::/kubepods/podu1/" + idApp + "\n",
		"/proc/556/stat":   procStatLine(556, 'S', 9001),
		"/proc/556/cgroup": "5:devices:/kubepods/podu1/" + idApp + "/inner\n0::/kubepods/podu1/" + idApp + "/inner\n",
		"/proc/777/stat":   procStatLine(777, 'S', 10),
		"/proc/777/cgroup": "5:devices:/\n0::/system.slice/sshd.service\n",
		"/sys/fs/cgroup/freezer/kubepods/podu1/" + idApp + "/freezer.state": "THAWED\n",

		// Docker: runc state under dockerd's root, the bundle in
		// containerd's moby namespace with the shim's options; PID 200
		// now belongs to another process.
		"/run/docker/runtime-runc/moby/" + idDocker + "/state.json": stateJSON(idDocker, 200, 1111, v2+"/moby/"+idDocker, nil, "/docker/"+idDocker),
		v2 + "/moby/" + idDocker + "/config.json":                   specJSON(nil, "/docker/"+idDocker),
		v2 + "/moby/" + idDocker + "/init.pid":                      "200",
		v2 + "/moby/" + idDocker + "/options.json":                  `{"binary_name":"nvidia-container-runtime","root":"/var/run/docker/runtime-runc","systemd_cgroup":true}`,
		"/proc/200/stat": procStatLine(200, 'S', 2222),

		// CRI-O: runc state at CRI-O's runc root, the storage run
		// directory (bundle) and CRI-O's state.json; its process is gone.
		"/run/runc/" + idCRIO + "/state.json":                stateJSON(idCRIO, 300, 3000, "/run"+store+idCRIO+"/userdata", nil, "/crio-"+idCRIO),
		"/run" + store + idCRIO + "/userdata/config.json":    specJSON(podCRIO, "/kubepods/podu2/crio-"+idCRIO),
		"/run" + store + idCRIO + "/userdata/pidfile":        "300",
		"/var/lib" + store + idCRIO + "/userdata/state.json": `{"ociVersion":"1.0.2","id":"` + idCRIO + `","status":"running","pid":300,"initPid":300,"initStartTime":"3000","created":"2026-01-01T00:00:00Z"}`,
		// A build container in storage: no config.json, no container.
		"/run" + store + "b0b0/userdata/.keep": "",

		// Plain runc, bundle elsewhere, created but not started.
		"/run/runc/plain-1/state.json":     stateJSON("plain-1", 400, 4444, "/srv/bundles/plain-1", []string{"com.example/owner=ci"}, "/plain-1"),
		"/srv/bundles/plain-1/config.json": specJSON(map[string]string{"com.example/owner": "ci"}, "/plain-1"),
		"/proc/400/stat":                   procStatLine(400, 'S', 4444),

		// crun (CRI-O 1.31's default, Podman's): its status file; paused.
		"/run/crun/crun-1/status":             `{"pid":500,"process-start-time":5555,"cgroup-path":"/crun-1","bundle":"/srv/bundles/crun-1","created":"2026-01-02T03:04:05Z"}`,
		"/srv/bundles/crun-1/config.json":     specJSON(nil, "/crun-1"),
		"/proc/500/stat":                      procStatLine(500, 'S', 5555),
		"/sys/fs/cgroup/crun-1/cgroup.freeze": "1\n",
	}
	testutil.WriteTree(t, dir, files, nil, "")
	if err := syscall.Mkfifo(filepath.Join(dir, "run/runc/plain-1/exec.fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func byRef(cs []Container) map[string]Container {
	m := map[string]Container{}
	for _, c := range cs {
		m[c.Ref()] = c
	}
	return m
}

// facts is what a lookup decided, for comparing runs (errors as text).
type facts struct {
	ID, Namespace, Bundle, ConfigPath, StatePath, CgroupPath, RuntimeBinary string
	Runtime, OCIRuntime                                                     Runtime
	PID                                                                     int
	StartTime                                                               uint64
	Status                                                                  Status
	StatusReason                                                            string
	Pod                                                                     *Pod
	Annotations, CgroupPaths                                                map[string]string
	Sources                                                                 []Source
	Errors                                                                  []string
	HasSpec                                                                 bool
}

func factsOf(c Container) facts {
	f := facts{ID: c.ID, Namespace: c.Namespace, Bundle: c.Bundle, ConfigPath: c.ConfigPath, StatePath: c.StatePath,
		CgroupPath: c.CgroupPath, RuntimeBinary: c.RuntimeBinary, Runtime: c.Runtime, OCIRuntime: c.OCIRuntime, PID: c.PID,
		StartTime: c.StartTime, Status: c.Status, StatusReason: c.StatusReason, Pod: c.Pod, Annotations: c.Annotations,
		CgroupPaths: c.CgroupPaths, Sources: c.Sources, HasSpec: c.Spec != nil}
	for _, e := range c.Errors {
		f.Errors = append(f.Errors, e.Error())
	}
	return f
}

func TestContainersFixtureNode(t *testing.T) {
	root := hostfs.MustNew(fixtureNode(t))
	cs, errs := Containers(root)
	if len(errs) != 0 {
		t.Errorf("errors: %v", errs)
	}
	got := byRef(cs)
	if len(cs) != 6 {
		t.Errorf("%d containers, want 6: %v", len(cs), keys(got))
	}
	const v2 = "/run/containerd/io.containerd.runtime.v2.task"
	for ref, want := range map[string]facts{
		"k8s.io/" + idApp: {Runtime: Containerd, OCIRuntime: Runc, PID: 100, StartTime: 5000, Status: StatusRunning,
			Bundle: v2 + "/k8s.io/" + idApp, StatePath: "/run/containerd/runc/k8s.io/" + idApp + "/state.json",
			Pod: &Pod{"ml", "train-0", "u1", "cuda", false, idSandbox, "containerd"}},
		"k8s.io/" + idSandbox: {Runtime: Containerd, OCIRuntime: Runc, PID: 90, Status: StatusRunning,
			Pod: &Pod{Namespace: "ml", Name: "train-0", UID: "u1", Sandbox: true, SandboxID: idSandbox, From: "containerd"}},
		"moby/" + idDocker: {Runtime: Docker, OCIRuntime: Runc, RuntimeBinary: "nvidia-container-runtime", PID: 200, Status: StatusStopped,
			StatePath: "/run/docker/runtime-runc/moby/" + idDocker + "/state.json"},
		idCRIO: {Runtime: CRIO, OCIRuntime: Runc, PID: 300, StartTime: 3000, Status: StatusStopped,
			Bundle:    "/run/containers/storage/overlay-containers/" + idCRIO + "/userdata",
			StatePath: "/run/runc/" + idCRIO + "/state.json",
			Pod:       &Pod{Namespace: "ml", Name: "infer", UID: "u2", Container: "triton", From: "cri-o"}},
		"plain-1": {Runtime: Runc, OCIRuntime: Runc, PID: 400, Status: StatusCreated, Bundle: "/srv/bundles/plain-1"},
		"crun-1":  {Runtime: Crun, OCIRuntime: Crun, PID: 500, Status: StatusPaused, Bundle: "/srv/bundles/crun-1", CgroupPath: "/crun-1"},
	} {
		c, ok := got[ref]
		if !ok {
			t.Errorf("%s not found", ref)
			continue
		}
		f := factsOf(c)
		if len(f.Errors) > 0 {
			t.Errorf("%s: errors %v", ref, f.Errors)
		}
		if !f.HasSpec || c.ConfigPath != c.Bundle+"/config.json" {
			t.Errorf("%s: spec not read from %s", ref, c.ConfigPath)
		}
		check := func(what string, g, w any, set bool) {
			if set && !cmp.Equal(g, w) {
				t.Errorf("%s: %s = %v, want %v", ref, what, g, w)
			}
		}
		check("runtime", f.Runtime, want.Runtime, true)
		check("oci runtime", f.OCIRuntime, want.OCIRuntime, true)
		check("pid", f.PID, want.PID, true)
		check("status", f.Status, want.Status, true)
		check("pod", f.Pod, want.Pod, true)
		check("runtime binary", f.RuntimeBinary, want.RuntimeBinary, true)
		check("start time", f.StartTime, want.StartTime, want.StartTime != 0)
		check("bundle", f.Bundle, want.Bundle, want.Bundle != "")
		check("state path", f.StatePath, want.StatePath, want.StatePath != "")
		check("cgroup path", f.CgroupPath, want.CgroupPath, want.CgroupPath != "")
	}
	// The reasons name what they rest on.
	for ref, want := range map[string]string{
		"moby/" + idDocker: "PID 200 is another process now: it started at tick 2222, the container's init at tick 1111 (PID reused)",
		idCRIO:             "init process 300 no longer exists",
		"plain-1":          "waits on /run/runc/plain-1/exec.fifo",
		"crun-1":           "/sys/fs/cgroup/crun-1/cgroup.freeze says the cgroup is frozen",
	} {
		if r := got[ref].StatusReason; !strings.Contains(r, want) {
			t.Errorf("%s: reason %q, want %q", ref, r, want)
		}
	}
	if c := got["k8s.io/"+idApp]; c.CgroupPaths["devices"] != "/sys/fs/cgroup/devices/kubepods/podu1/"+idApp || len(c.Sources) != 2 {
		t.Errorf("app: cgroup paths %v, sources %v", c.CgroupPaths, c.Sources)
	}
}

func keys(m map[string]Container) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestFind(t *testing.T) {
	root := hostfs.MustNew(fixtureNode(t))
	for _, tc := range []struct {
		q, ref, by string
	}{
		{idApp, "k8s.io/" + idApp, "ID"},
		{"a1", "k8s.io/" + idApp, "ID prefix"},
		{"d0", "moby/" + idDocker, "ID prefix"},
		{"plain", "plain-1", "ID prefix"},
		{"100", "k8s.io/" + idApp, "init PID"},
		{"555", "k8s.io/" + idApp, "cgroup member"},
		{"556", "k8s.io/" + idApp, "cgroup member"},
		{"90", "k8s.io/" + idSandbox, "init PID"},
	} {
		m, errs, err := Find(root, tc.q)
		if err != nil || len(errs) > 0 {
			t.Errorf("Find(%q): %v %v", tc.q, err, errs)
			continue
		}
		if m.Ref() != tc.ref || m.By != tc.by {
			t.Errorf("Find(%q) = %s by %s, want %s by %s", tc.q, m.Ref(), m.By, tc.ref, tc.by)
		}
		if tc.by == "cgroup member" && !strings.Contains(m.Evidence, "inside /kubepods/podu1/"+idApp) {
			t.Errorf("Find(%q): evidence %q", tc.q, m.Evidence)
		}
	}
	for _, tc := range []struct {
		q, reason string
	}{
		{"777", "process 777 (cgroup /system.slice/sshd.service) is in no container's cgroup"},
		{"12345", "no process 12345"},
		{"zz", `no container ID starts with "zz"`},
		// The Docker container's PID is another process: not its init.
		{"200", "process 200"},
	} {
		_, _, err := Find(root, tc.q)
		var nf *NotFoundError
		if !errors.As(err, &nf) || !strings.Contains(nf.Reason, tc.reason) {
			t.Errorf("Find(%q): %v, want not found: %s", tc.q, err, tc.reason)
		}
	}
	// "a" prefixes the pod's two containers.
	_, _, err := Find(root, "a")
	var amb *AmbiguousError
	if !errors.As(err, &amb) || len(amb.Matches) != 2 || !strings.Contains(err.Error(), idApp) || !strings.Contains(err.Error(), idSandbox) {
		t.Errorf("Find(a): %v, want both pod containers", err)
	}
	for _, bad := range []string{"", "../etc", "a/b", ".", "..", "x\x1b[31m", strings.Repeat("f", 2000)} {
		if _, _, err := Find(root, bad); err == nil || errors.As(err, &amb) {
			t.Errorf("Find(%q): %v, want an invalid query", bad, err)
		}
	}
}

// One ID in two containerd namespaces is two containers; asking for it is
// ambiguous, and a digit query that is both a PID's container and
// another's ID prefix is too.
func TestFindAmbiguous(t *testing.T) {
	dir := fixtureNode(t)
	const v2 = "/run/containerd/io.containerd.runtime.v2.task"
	testutil.WriteTree(t, dir, map[string]string{
		v2 + "/default/" + idApp + "/config.json": specJSON(nil, ""),
		v2 + "/default/" + idApp + "/init.pid":    "100",
		v2 + "/default/10abc/config.json":         specJSON(nil, ""),
	}, nil, "")
	root := hostfs.MustNew(dir)
	_, _, err := Find(root, idApp)
	var amb *AmbiguousError
	if !errors.As(err, &amb) || len(amb.Matches) != 2 || amb.Matches[0].Namespace == amb.Matches[1].Namespace {
		t.Errorf("Find(ID in two namespaces): %v", err)
	}
	// No process 10: "10" is only an ID prefix.
	m, _, err := Find(root, "10")
	if err != nil || m.Ref() != "default/10abc" || m.By != "ID prefix" || m.Evidence != "no process 10" {
		t.Errorf("Find(10): %s by %s (%s), %v; want default/10abc by ID prefix", m.Ref(), m.By, m.Evidence, err)
	}
	// PID 100 is the init of two containers (the k8s.io one and a
	// default-namespace bundle that claims the same init.pid).
	if _, _, err := Find(root, "100"); !errors.As(err, &amb) {
		t.Errorf("Find(100): %v", err)
	}
}

func TestFindPod(t *testing.T) {
	root := hostfs.MustNew(fixtureNode(t))
	cs, errs, err := FindPod(root, "ml", "train-0", "")
	if err != nil || len(errs) > 0 || len(cs) != 2 || cs[0].ID != idApp || !cs[1].Pod.Sandbox {
		t.Fatalf("pod ml/train-0: %v %v %v", refs(cs), errs, err)
	}
	cs, _, err = FindPod(root, "ml", "train-0", "cuda")
	if err != nil || len(cs) != 1 || cs[0].ID != idApp {
		t.Errorf("container cuda: %v %v", refs(cs), err)
	}
	cs, _, err = FindPod(root, "ml", "infer", "triton")
	if err != nil || len(cs) != 1 || cs[0].ID != idCRIO || cs[0].Runtime != CRIO {
		t.Errorf("CRI-O pod: %v %v", refs(cs), err)
	}
	var nf *NotFoundError
	if _, _, err := FindPod(root, "ml", "train-0", "nope"); !errors.As(err, &nf) || !strings.Contains(nf.Reason, "its containers: cuda") {
		t.Errorf("missing container: %v", err)
	}
	if _, _, err := FindPod(root, "ml", "gone", ""); !errors.As(err, &nf) {
		t.Errorf("missing pod: %v", err)
	}
	if _, _, err := FindPod(root, "", "x", ""); err == nil {
		t.Error("an empty namespace is accepted")
	}
}

func refs(cs []Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Ref())
	}
	return out
}

// Hostile runtime state: each bad item is its own error, names itself,
// and hides no good container. Nothing panics or hangs.
func TestContainersHostileState(t *testing.T) {
	dir := t.TempDir()
	const v2 = "/run/containerd/io.containerd.runtime.v2.task"
	testutil.WriteTree(t, dir, map[string]string{
		"/run/runc/good/state.json":         stateJSON("good", 0, 0, "/b/good", nil, "/good"),
		"/b/good/config.json":               specJSON(nil, ""),
		"/run/runc/garbage/state.json":      "{not json",
		"/run/runc/liar/state.json":         stateJSON("../../etc", 0, 0, "relative/bundle", nil, "/x"),
		"/run/runc/bigpid/state.json":       `{"id":"bigpid","init_process_pid":99999999}`,
		"/run/runc/strayfile":               "not a container",
		"/run/runc/dirstate/state.json/x":   "a directory where the file should be",
		"/run/runc/bad\x01name/state.json":  "{}",
		"/run/containerd/runc":              "a file where the namespaces should be",
		v2 + "/k8s.io/badpid/config.json":   specJSON(nil, ""),
		v2 + "/k8s.io/badpid/init.pid":      "garbage",
		v2 + "/k8s.io/badcfg/config.json":   "]",
		v2 + "/k8s.io/badopts/init.pid":     "7",
		v2 + "/k8s.io/badopts/options.json": "{",
		v2 + "/k8s.io/.deleting/init.pid":   "8",
		"/proc/.keep":                       "",
	}, map[string]string{
		"/run/runc/loop/state.json": "state.json",
		"/run/crun":                 "/run/crun",
	}, "")
	// 100 MiB, sparse: read up to the limit, never whole.
	os.MkdirAll(filepath.Join(dir, "run/runc/huge"), 0o755)
	f, err := os.Create(filepath.Join(dir, "run/runc/huge/state.json"))
	if err == nil {
		err = f.Truncate(100 << 20)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	cs, errs := Containers(hostfs.MustNew(dir))
	got := byRef(cs)
	if c, ok := got["good"]; !ok || len(c.Errors) != 0 || c.Spec == nil || c.Status != StatusUnknown {
		t.Errorf("good: %+v", factsOf(c))
	}
	for ref, want := range map[string]string{
		"garbage":        "parse /run/runc/garbage/state.json",
		"liar":           `names container "../../etc", its directory "liar"`,
		"bigpid":         "init_process_pid 99999999 is outside",
		"dirstate":       "/run/runc/dirstate/state.json",
		"loop":           "/run/runc/loop/state.json",
		"huge":           "larger than the read limit",
		"k8s.io/badpid":  "parse " + v2 + "/k8s.io/badpid/init.pid",
		"k8s.io/badcfg":  v2 + "/k8s.io/badcfg/config.json",
		"k8s.io/badopts": "parse " + v2 + "/k8s.io/badopts/options.json",
	} {
		c, ok := got[ref]
		if !ok {
			t.Errorf("%s: not listed (its error would be lost)", ref)
			continue
		}
		var all []string
		for _, e := range c.Errors {
			all = append(all, e.Error())
		}
		if !strings.Contains(strings.Join(all, "\n"), want) {
			t.Errorf("%s: errors %q, want one with %q", ref, all, want)
		}
	}
	if c := got["liar"]; !strings.Contains(fmt.Sprint(c.Errors), `bundle "relative/bundle" is not an absolute path`) {
		t.Errorf("liar: %v", c.Errors)
	}
	for _, ref := range []string{"strayfile", "k8s.io/.deleting", "bad\x01name"} {
		if _, ok := got[ref]; ok {
			t.Errorf("%q listed as a container", ref)
		}
	}
	joined := fmt.Sprint(errs)
	for _, want := range []string{"/run/containerd/runc", `holds a control character`, "/run/crun"} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors %v: want one naming %s", errs, want)
		}
	}
	// Find says which item it could not read when asked for it.
	m, _, err := Find(hostfs.MustNew(dir), "garbage")
	if err != nil || m.Status != StatusUnknown || len(m.Errors) == 0 {
		t.Errorf("Find(garbage): %+v %v", factsOf(m.Container), err)
	}
}

// A capture that never looked at the runtime state says so: its silence
// is not "no containers".
func TestContainersNotCaptured(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteTree(t, dir, map[string]string{"/sys/class/drm/.keep": ""}, nil, "")
	cs, errs := Containers(hostfs.MustNew(dir))
	if len(cs) != 0 || len(errs) == 0 {
		t.Fatalf("containers %v errors %v", refs(cs), errs)
	}
	for _, e := range errs {
		if !errors.Is(e, ErrNotCaptured) {
			t.Errorf("%v: want ErrNotCaptured", e)
		}
	}
	// A host with /run but no runtime installed has no containers, and no
	// error.
	testutil.WriteTree(t, dir, map[string]string{"/run/.keep": "", "/run/containers/.keep": ""}, nil, "")
	if cs, errs := Containers(hostfs.MustNew(dir)); len(cs) != 0 || len(errs) != 0 {
		t.Errorf("a host without runtimes: %v %v", refs(cs), errs)
	}
	_, _, err := Find(hostfs.MustNew(dir), "abc")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("Find: %v", err)
	}
}

// A snapshot recorded while Find ran replays it: the same container, the
// same status and reason; and the snapshot holds no token of the spec or
// of runc's state.
func TestFindSnapshotReplay(t *testing.T) {
	dir := fixtureNode(t)
	for _, q := range []string{idApp, "d0", idCRIO, "plain-1", "crun-1", "555", "100"} {
		root := hostfs.MustNew(dir)
		rec := root.Record()
		live, _, err := Find(root, q)
		if err != nil {
			t.Fatalf("Find(%q): %v", q, err)
		}
		var buf bytes.Buffer
		if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
			t.Fatal(err)
		}
		if s := buf.String(); strings.Contains(s, "S3cret") {
			t.Errorf("%s: the archive holds a secret", q)
		}
		snap, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		filepath.WalkDir(snap.Dir(), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("S3cret")) {
					t.Errorf("%s: %s holds a secret", q, p)
				}
			}
			return nil
		})
		replay, _, err := Find(snap, q)
		cleanup()
		if err != nil {
			t.Errorf("replay Find(%q): %v", q, err)
			continue
		}
		if d := cmp.Diff(factsOf(live.Container), factsOf(replay.Container)); d != "" || live.By != replay.By {
			t.Errorf("replay of %q differs (-live +replay):\n%s%s / %s", q, d, live.By, replay.By)
		}
	}
}
