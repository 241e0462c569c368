package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// runcEnv is what real runc containers need here: root, Debian's runc and
// a busybox-static rootfs, shared read-only by every container of a test.
type runcEnv struct {
	runc     string
	rootfs   string
	template []byte       // runc spec's config.json
	tag      string       // unique per test process and run, in IDs and cgroup names
	n        atomic.Int64 // containers started, numbering their cgroups
}

func needRunc(tb testing.TB) *runcEnv {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("runc containers need root")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		tb.Skip("runc is not installed (apt-get install runc)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		tb.Skip("busybox-static is not installed (apt-get install busybox-static)")
	}
	dir := tb.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/busybox"), b, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, app := range []string{"sh", "sleep"} {
		os.Symlink("busybox", filepath.Join(rootfs, "bin", app))
	}
	gen := filepath.Join(dir, "gen")
	os.Mkdir(gen, 0o755)
	if out, err := exec.Command(runc, "spec", "--bundle", gen).CombinedOutput(); err != nil {
		tb.Fatalf("runc spec: %v: %s", err, out)
	}
	tmpl, err := os.ReadFile(filepath.Join(gen, "config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return &runcEnv{runc: runc, rootfs: rootfs, template: tmpl, tag: fmt.Sprintf("%d-%x", os.Getpid(), rand.Uint32())}
}

// ctr describes one container to start.
type ctr struct {
	id          string
	runcRoot    string // runc --root; "" for runc's default (/run/runc)
	bundle      string // the bundle directory (made); config.json goes there
	pidFile     string // --pid-file, as containerd's shim (BUNDLE/init.pid) or conmon (BUNDLE/pidfile) give it
	annotations map[string]string
	create      bool // runc create only: the container waits on exec.fifo
}

// start starts c with a sleeping busybox, in a cgroup of its own named
// after the test, and returns its init PID. The container and its
// cgroups are removed when the test ends, whatever happens.
func (e *runcEnv) start(tb testing.TB, c ctr) int {
	tb.Helper()
	pid, err := e.startErr(tb, c)
	if err != nil {
		tb.Fatal(err)
	}
	return pid
}

// startErr is start for any goroutine: it fails nothing, it says.
func (e *runcEnv) startErr(tb testing.TB, c ctr) (int, error) {
	var s specs.Spec
	if err := json.Unmarshal(e.template, &s); err != nil {
		return 0, err
	}
	s.Process.Terminal = false
	s.Process.Args = []string{"/bin/sleep", "600"}
	s.Process.Env = append(s.Process.Env, "ACCEL_DOCTOR_TOKEN=envS3cret")
	s.Root = &specs.Root{Path: e.rootfs, Readonly: true}
	s.Annotations = c.annotations
	s.Linux.CgroupsPath = fmt.Sprintf("/accel-doctor-test-%s-%d", e.tag, e.n.Add(1))
	if err := os.MkdirAll(c.bundle, 0o755); err != nil {
		return 0, err
	}
	raw, _ := json.MarshalIndent(&s, "", "  ")
	if err := os.WriteFile(filepath.Join(c.bundle, "config.json"), raw, 0o644); err != nil {
		return 0, err
	}
	if c.pidFile == "" {
		c.pidFile = filepath.Join(c.bundle, "runc.pid")
	}
	global := []string{}
	if c.runcRoot != "" {
		global = []string{"--root", c.runcRoot}
	}
	tb.Cleanup(func() { e.remove(global, c.id) })
	verb := []string{"run", "--detach"}
	if c.create {
		verb = []string{"create"}
	}
	if err := e.cmd(tb, append(append(global, verb...), "--bundle", c.bundle, "--pid-file", c.pidFile, c.id)...); err != nil {
		return 0, err
	}
	pb, err := os.ReadFile(c.pidFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(pb)))
}

// cmd runs runc with its output in a file: a detached process keeps the
// stdio it was given, and a pipe would hold the command until it exits.
func (e *runcEnv) cmd(tb testing.TB, args ...string) error {
	f, err := os.CreateTemp(tb.TempDir(), "runc.out")
	if err != nil {
		return err
	}
	defer f.Close()
	c := exec.Command(e.runc, args...)
	c.Stdout, c.Stderr = f, f
	if err := c.Run(); err != nil {
		msg, _ := os.ReadFile(f.Name())
		return fmt.Errorf("runc %v: %v: %s", args, err, msg)
	}
	return nil
}

func (e *runcEnv) remove(global []string, id string) {
	exec.Command(e.runc, append(global, "kill", id, "KILL")...).Run()
	for i := 0; i < 100; i++ {
		if exec.Command(e.runc, append(global, "delete", "--force", id)...).Run() == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hexID is a 64-hex-digit ID as containerd, Docker and CRI-O make them,
// starting with the given digits.
func hexID(start string) string {
	s := start + fmt.Sprintf("%016x%016x%016x%016x", rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64())
	return s[:64]
}

// waitGone waits until pid has exited (gone or a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if st, err := parseProcStat(b); err == nil && (st.State == 'Z' || st.State == 'X') {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d did not exit", pid)
}

// Containers of plain runc at its default root on the live host, found
// by PID (init and a process exec'd in), by ID, by prefix, in the full
// list and by pod; created, paused and dead ones say so; a PID in no
// container says so.
func TestRuncLive(t *testing.T) {
	e := needRunc(t)
	root := hostfs.MustNew("/")
	base := "accel-doctor-test-" + e.tag
	idA, idB, idC := base+"-alpha", base+"-beta", base+"-gamma"
	pidA := e.start(t, ctr{id: idA, bundle: filepath.Join(t.TempDir(), "alpha"),
		annotations: map[string]string{annCRIType: "container", annCRINamespace: "accel-doctor-test", annCRIName: "pod-" + e.tag, annCRIContainer: "gpu"}})
	pidB := e.start(t, ctr{id: idB, bundle: filepath.Join(t.TempDir(), "b")})

	for _, q := range []string{strconv.Itoa(pidA), idA, base + "-al"} {
		m, _, err := Find(root, q)
		if err != nil || m.ID != idA || m.Runtime != Runc || m.PID != pidA || m.Status != StatusRunning || m.Spec == nil {
			t.Errorf("Find(%q): %+v, %v", q, factsOf(m.Container), err)
		}
	}
	if m, _, err := Find(root, idB); err != nil || m.PID != pidB || m.StartTime == 0 || !strings.Contains(m.StatusReason, "start time") {
		t.Errorf("Find(%s): %+v, %v", idB, factsOf(m.Container), err)
	}
	var amb *AmbiguousError
	if _, _, err := Find(root, base+"-"); !errors.As(err, &amb) || len(amb.Matches) != 2 {
		t.Errorf("Find(prefix of both): %v", err)
	}

	// A process runc exec'd into A is found by its cgroups.
	execPid := filepath.Join(t.TempDir(), "exec.pid")
	if err := e.cmd(t, "exec", "--detach", "--pid-file", execPid, idA, "/bin/sleep", "600"); err != nil {
		t.Fatal(err)
	}
	pb, _ := os.ReadFile(execPid)
	member, _ := strconv.Atoi(strings.TrimSpace(string(pb)))
	if m, _, err := Find(root, strconv.Itoa(member)); err != nil || m.ID != idA || m.By != "cgroup member" {
		t.Errorf("Find(exec'd PID %d): %s by %s, %v", member, m.ID, m.By, err)
	}

	// This test's own process is in no container.
	var nf *NotFoundError
	if _, _, err := Find(root, strconv.Itoa(os.Getpid())); !errors.As(err, &nf) || !strings.Contains(nf.Reason, "is in no container's cgroup") {
		t.Errorf("Find(own PID): %v", err)
	}

	// --all lists both; the pod is found from the annotations.
	cs, _ := Containers(root)
	all := byRef(cs)
	if _, ok := all[idA]; !ok {
		t.Errorf("Containers lacks %s", idA)
	}
	if _, ok := all[idB]; !ok {
		t.Errorf("Containers lacks %s", idB)
	}
	pod, _, err := FindPod(root, "accel-doctor-test", "pod-"+e.tag, "gpu")
	if err != nil || len(pod) != 1 || pod[0].ID != idA {
		t.Errorf("FindPod: %v %v", refs(pod), err)
	}

	// Paused: runc freezes the cgroup.
	if err := e.cmd(t, "pause", idB); err != nil {
		t.Error(err)
	} else {
		if m, _, _ := Find(root, idB); m.Status != StatusPaused {
			t.Errorf("paused: %s (%s)", m.Status, m.StatusReason)
		}
		e.cmd(t, "resume", idB)
	}

	// Created, not started: init waits on exec.fifo.
	pidC := e.start(t, ctr{id: idC, bundle: filepath.Join(t.TempDir(), "c"), create: true})
	if m, _, err := Find(root, idC); err != nil || m.Status != StatusCreated || m.PID != pidC {
		t.Errorf("created: %+v %v", factsOf(m.Container), err)
	}

	// Dead: the state stays, the init is gone.
	if err := e.cmd(t, "kill", idB, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pidB)
	m, _, err := Find(root, idB)
	if err != nil || m.Status != StatusStopped {
		t.Errorf("dead container: %+v, %v", factsOf(m.Container), err)
	}
	if _, _, err := Find(root, strconv.Itoa(pidB)); err == nil {
		t.Errorf("the dead container's PID %d still finds it", pidB)
	}
}

// The layouts of containerd (CRI), Docker, CRI-O and plain runc, made by
// running runc with the roots and bundles those runtimes use, in a tree
// read as --root (the host's / mounted in a pod): its /proc is the
// kernel's, bind-mounted, as a pod's /host/proc is. Each container is
// found by PID, ID and prefix, its pod by the annotations, and a snapshot
// replays what the lookup decided.
func TestRuncLayoutsUnderRoot(t *testing.T) {
	e := needRunc(t)
	tree := t.TempDir()
	bindProc(t, tree)
	// runc records the bundle's path as it sees it. On a host mounted at
	// /host that path is the same under /host; here the tree gets a link
	// from its own path to its root, so that runc's absolute paths resolve
	// inside it the same way.
	if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(tree)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(tree, tree)); err != nil {
		t.Fatal(err)
	}
	in := func(p string) string { return filepath.Join(tree, p) }
	const v2 = "/run/containerd/io.containerd.runtime.v2.task"
	const storage = "/containers/storage/overlay-containers/"
	podNS, podName := "accel-doctor-test", "train-"+e.tag

	// containerd's CRI plugin: a sandbox and a workload container in
	// k8s.io, runc under the shim's root, the shim's --pid-file init.pid.
	sb, app := hexID("5b"), hexID("ab")
	var pids = map[string]int{}
	for _, c := range []struct {
		id  string
		ann map[string]string
	}{
		{sb, map[string]string{annCRIType: "sandbox", annCRINamespace: podNS, annCRIName: podName, annCRIUID: "uid-1", annCRISandboxID: sb}},
		{app, map[string]string{annCRIType: "container", annCRINamespace: podNS, annCRIName: podName, annCRIUID: "uid-1",
			annCRIContainer: "cuda", annCRISandboxID: sb}},
	} {
		b := in(v2 + "/k8s.io/" + c.id)
		pids[c.id] = e.start(t, ctr{id: c.id, runcRoot: in("/run/containerd/runc/k8s.io"), bundle: b,
			pidFile: filepath.Join(b, "init.pid"), annotations: c.ann})
	}
	// Docker: dockerd's runc root, the bundle in containerd's moby
	// namespace, with the shim's options.json.
	dk := hexID("dc")
	dkb := in(v2 + "/moby/" + dk)
	pids[dk] = e.start(t, ctr{id: dk, runcRoot: in("/run/docker/runtime-runc/moby"), bundle: dkb, pidFile: filepath.Join(dkb, "init.pid")})
	os.WriteFile(filepath.Join(dkb, "options.json"), []byte(`{"binary_name":"runc","root":"/var/run/docker/runtime-runc"}`), 0o600)
	// CRI-O: its runc root, the storage run directory as the bundle,
	// conmon's pidfile, and CRI-O's own state.json in the graph root.
	co := hexID("c0")
	cob := in("/run" + storage + co + "/userdata")
	pids[co] = e.start(t, ctr{id: co, runcRoot: in("/run/runc"), bundle: cob, pidFile: filepath.Join(cob, "pidfile"),
		annotations: map[string]string{annKubeNamespace: podNS, annKubeName: "infer-" + e.tag, annKubeContainer: "triton",
			annCRIOType: "container", annContainerManager: "cri-o"}})
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pids[co]))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parseProcStat(st)
	if err != nil {
		t.Fatal(err)
	}
	crioState := fmt.Sprintf(`{"ociVersion":"1.0.2","id":%q,"status":"running","pid":%d,"bundle":%q,"created":"2026-01-01T00:00:00Z","initPid":%d,"initStartTime":"%d"}`,
		co, pids[co], "/run"+storage+co+"/userdata", pids[co], ps.StartTime)
	os.MkdirAll(in("/var/lib"+storage+co+"/userdata"), 0o700)
	if err := os.WriteFile(in("/var/lib"+storage+co+"/userdata/state.json"), []byte(crioState), 0o600); err != nil {
		t.Fatal(err)
	}
	// Plain runc at CRI-O's root too, its bundle elsewhere in the tree.
	pl := "plain-" + e.tag
	pids[pl] = e.start(t, ctr{id: pl, runcRoot: in("/run/runc"), bundle: in("/srv/bundles/" + pl)})

	root := hostfs.MustNew(tree)
	want := map[string]facts{
		"k8s.io/" + app: {Runtime: Containerd, Bundle: v2 + "/k8s.io/" + app, StatePath: "/run/containerd/runc/k8s.io/" + app + "/state.json",
			Pod: &Pod{podNS, podName, "uid-1", "cuda", false, sb, "containerd"}},
		"k8s.io/" + sb: {Runtime: Containerd, Bundle: v2 + "/k8s.io/" + sb,
			Pod: &Pod{Namespace: podNS, Name: podName, UID: "uid-1", Sandbox: true, SandboxID: sb, From: "containerd"}},
		"moby/" + dk: {Runtime: Docker, Bundle: v2 + "/moby/" + dk, RuntimeBinary: "runc", StatePath: "/run/docker/runtime-runc/moby/" + dk + "/state.json"},
		co: {Runtime: CRIO, Bundle: "/run" + storage + co + "/userdata", StatePath: "/run/runc/" + co + "/state.json",
			Pod: &Pod{Namespace: podNS, Name: "infer-" + e.tag, Container: "triton", From: "cri-o"}},
		pl: {Runtime: Runc, Bundle: tree + "/srv/bundles/" + pl, StatePath: "/run/runc/" + pl + "/state.json"},
	}
	cs, errs := Containers(root)
	if len(errs) > 0 {
		t.Errorf("errors: %v", errs)
	}
	all := byRef(cs)
	for ref, w := range want {
		id := ref[strings.LastIndex(ref, "/")+1:]
		c, ok := all[ref]
		if !ok {
			t.Errorf("%s: not listed (%v)", ref, keys(all))
			continue
		}
		got := factsOf(c)
		if got.Runtime != w.Runtime || got.OCIRuntime != Runc || got.PID != pids[id] || got.Status != StatusRunning || got.Bundle != w.Bundle ||
			!cmp.Equal(got.Pod, w.Pod) || got.RuntimeBinary != w.RuntimeBinary || (w.StatePath != "" && got.StatePath != w.StatePath) ||
			len(got.Errors) > 0 || !got.HasSpec || c.StartTime == 0 {
			t.Errorf("%s: %+v", ref, got)
		}
		for _, q := range []string{id, id[:10], strconv.Itoa(pids[id])} {
			m, _, err := Find(root, q)
			if err != nil || m.Ref() != ref {
				t.Errorf("Find(%q) = %s, %v; want %s", q, m.Ref(), err, ref)
			}
		}
	}
	pod, _, err := FindPod(root, podNS, podName, "")
	if err != nil || len(pod) != 2 || pod[0].ID != app || pod[1].ID != sb {
		t.Errorf("FindPod(%s/%s): %v %v", podNS, podName, refs(pod), err)
	}
	if pod, _, err := FindPod(root, podNS, "infer-"+e.tag, "triton"); err != nil || len(pod) != 1 || pod[0].ID != co {
		t.Errorf("FindPod(CRI-O): %v %v", refs(pod), err)
	}

	// A snapshot taken while Find ran replays the same container; the
	// spec's environment did not travel.
	for _, q := range []string{app, dk[:12], co, pl} {
		r := hostfs.MustNew(tree)
		rec := r.Record()
		live, _, err := Find(r, q)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := r.WriteSnapshot(rec, &buf, "test"); err != nil {
			t.Fatal(err)
		}
		snap, cleanup, err := hostfs.OpenSnapshot(&buf)
		if err != nil {
			t.Fatal(err)
		}
		replay, _, err := Find(snap, q)
		cleanup()
		if err != nil {
			t.Errorf("replay of %s: %v", q, err)
			continue
		}
		if d := cmp.Diff(factsOf(live.Container), factsOf(replay.Container)); d != "" {
			t.Errorf("replay of %s differs (-live +replay):\n%s", q, d)
		}
		if env := replay.Spec.Process.Env; len(env) == 0 || strings.Contains(strings.Join(env, " "), "envS3cret") {
			t.Errorf("replayed spec env %v", env)
		}
	}

	// A container stopped behind the runtimes' back is reported stopped,
	// through the root too.
	if err := e.cmd(t, "--root", in("/run/runc"), "kill", pl, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pids[pl])
	if m, _, err := Find(root, pl); err != nil || m.Status != StatusStopped {
		t.Errorf("killed %s: %+v %v", pl, factsOf(m.Container), err)
	}
}

// bindProc bind-mounts the kernel's /proc at DIR/proc, private (nothing
// propagates), and unmounts it when the test ends.
func bindProc(tb testing.TB, dir string) {
	tb.Helper()
	p := filepath.Join(dir, "proc")
	if err := os.MkdirAll(p, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Mount("/proc", p, "", unix.MS_BIND, ""); err != nil {
		tb.Skipf("bind-mount /proc at %s: %v", p, err)
	}
	tb.Cleanup(func() { unix.Unmount(p, unix.MNT_DETACH) })
	if err := unix.Mount("", p, "", unix.MS_PRIVATE, ""); err != nil {
		tb.Fatal(err)
	}
}
