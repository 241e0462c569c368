package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func logChecks(t *testing.T, cs []AppliedCheck) {
	t.Helper()
	for _, c := range cs {
		t.Logf("%s %s: %s %v", c.Kind, c.Subject, c.Outcome, c.Diffs)
		for _, e := range c.Evidence {
			t.Logf("    %s", e)
		}
	}
}

// gpuContainerTree is a captured host with one user-namespaced container
// (init PID 42, root = host uid 100000) whose /dev holds a root-owned 0600
// nvidia0 (its owner unmapped) on a tmpfs, whose libcuda is bind-mounted
// from the host's ext4, and whose environment names NVIDIA_VISIBLE_DEVICES.
func gpuContainerTree(t *testing.T) string {
	dir := t.TempDir()
	files := map[string]string{
		"/proc/42/status":  strings.Replace(statusContainer, "Tgid:\t31337", "Tgid:\t42", 1),
		"/proc/42/limits":  limitsReal,
		"/proc/42/uid_map": "         0     100000      65536\n",
		"/proc/42/gid_map": "         0     100000      65536\n",
		"/proc/42/mountinfo": "594 498 254:1 /var/lib/c/rootfs / ro,relatime - ext4 /dev/vda1 rw\n" +
			"596 594 0:59 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n" +
			"598 594 254:1 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54 /usr/lib/x86_64-linux-gnu/libcuda.so.1 ro,nosuid,nodev,relatime - ext4 /dev/vda1 rw\n",
		"/proc/42/environ":                            "PATH=/bin\x00NVIDIA_VISIBLE_DEVICES=GPU-0123\x00",
		"/proc/1/mountinfo":                           "27 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n40 27 0:33 / /tmp rw shared:2 - tmpfs tmpfs rw\n",
		"/proc/sys/kernel/overflowuid":                "65534\n",
		"/proc/sys/kernel/overflowgid":                "65534\n",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54": "ELF",
		"/proc/42/root/dev/.keep":                     "",
	}
	links := map[string]string{
		"/proc/42/ns/user":                          "user:[4026532201]",
		"/proc/self/ns/user":                        "user:[4026531837]",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1":    "libcuda.so.550.54",
		"/proc/42/root/dev/ptmx":                    "pts/ptmx",
		"/proc/42/root/usr/lib/x86_64-linux-gnu/.k": "x",
	}
	manifest := "/proc/42/root/dev/nvidia0 c 195:0 0600 0:0\n/proc/42/root/dev/null c 1:3 0666 0:0\n/proc/42/root/dev/dri d 0755 0:0\n/proc/42/root/dev/dri/renderD128 c 226:128 0660 0:44\n"
	testutil.WriteTree(t, dir, files, links, manifest)
	os.Remove(filepath.Join(dir, "proc/42/root/dev/.keep"))
	return dir
}

var gpuWant = Expected{
	Nodes: []ExpectedNode{
		{Path: "/dev/nvidia0", Type: hostfs.TypeChar, Major: 195, Minor: 0},
		{Path: "/dev/nvidiactl", Type: hostfs.TypeChar, Major: 195, Minor: 255},
		{Path: "/dev/dri/renderD128", Type: hostfs.TypeChar, Major: 226, Minor: 129},
	},
	Mounts: []ExpectedMount{{HostPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", ContainerPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}},
	Env:    []string{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"},
}

// TestAppliedFromTree: a captured tree answers through the same code as a
// live host: an unmapped owner, a missing node, a wrong minor, a library
// bind mount identified through a host symlink, env names.
func TestAppliedFromTree(t *testing.T) {
	root := hostfs.MustNew(gpuContainerTree(t))
	a := ReadApplied(root, 42, gpuWant)
	checks := a.Compare(gpuWant)
	logChecks(t, checks)
	got := outcomesOf(checks)
	want := `node /dev/nvidia0 present []
node /dev/nvidiactl missing []
node /dev/dri/renderD128 different [major:minor 226:128, want 226:129]
mount /usr/lib/x86_64-linux-gnu/libcuda.so.1 present []
env NVIDIA_VISIBLE_DEVICES present []
env NVIDIA_DRIVER_CAPABILITIES missing []
`
	if got != want {
		t.Errorf("outcomes:\n%s\nwant:\n%s", got, want)
	}
	nv := checkOf(t, checks, "node", "/dev/nvidia0").Entry
	if nv.Owner.Mapped || nv.Owner.Inside != 65534 {
		t.Errorf("nvidia0 owner: %+v", nv.Owner)
	}
	if d := a.ModeCheck(*nv, MayRW); !d.Known || d.Allowed {
		t.Errorf("nvidia0 mode check: %s", d)
	}
	if m := checkOf(t, checks, "mount", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"); !m.SourceVerified {
		t.Errorf("libcuda: %+v", m)
	}
	if names := devListing(a.Dev); !strings.Contains(names, "/dev/dri/renderD128: char device 226:128") || !strings.Contains(names, "/dev/ptmx: symlink -> pts/ptmx") {
		t.Errorf("dev walk:\n%s", names)
	}
	if a.Status.UID[0] != 100000 || *a.Status.Seccomp != 2 {
		t.Errorf("status: %+v", a.Status)
	}
	// The tree has no /proc/42/attr: it did not capture the label.
	if a.LSM.Current.State != ReadNotCaptured {
		t.Errorf("LSM: %s", a.LSM.Current)
	}

	// A snapshot of the tree replays it, and keeps the names only.
	rec := root.Record()
	ReadApplied(root, 42, gpuWant)
	var buf bytes.Buffer
	if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if _, err := os.Stat(filepath.Join(snap.Dir(), "proc/42/environ")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the snapshot holds the environ file: %v", err)
	}
	replay := ReadApplied(snap, 42, gpuWant)
	if got := outcomesOf(replay.Compare(gpuWant)); got != want {
		t.Errorf("replay:\n%s", got)
	}
}

// TestAppliedNotCaptured: a snapshot that recorded another reader's stat
// of one node through the process's root, and nothing else, is "not
// captured" for everything ReadApplied would have read: never absent,
// never missing.
func TestAppliedNotCaptured(t *testing.T) {
	root := hostfs.MustNew(gpuContainerTree(t))
	rec := root.Record()
	if _, err := root.StatInProcess(42, "/dev/nvidia0"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	a := ReadApplied(snap, 42, gpuWant)
	for _, r := range []ProcRead{a.StatusRead, a.LimitsRead, a.MountsRead, a.Dev.Read, a.Env.Read, a.UserNS.UIDRead} {
		if r.State != ReadNotCaptured {
			t.Errorf("%s", r)
		}
	}
	for _, c := range a.Compare(gpuWant) {
		if c.Subject == "/dev/nvidia0" {
			// The recorded node replays; its owner's mapping does not.
			if c.Outcome != CheckPresent || c.Entry.Owner.Known {
				t.Errorf("%+v", c)
			}
			continue
		}
		if c.Outcome != CheckUnknown || c.State != ReadNotCaptured {
			t.Errorf("%s %s: %s (%s)", c.Kind, c.Subject, c.Outcome, c.State)
		}
	}
}

// TestAppliedHostileTree: a tree whose /proc files are garbage, huge, or
// links to elsewhere gives per-item errors, never a panic or a fact.
func TestAppliedHostileTree(t *testing.T) {
	dir := gpuContainerTree(t)
	huge := strings.Repeat("x", mountInfoLimit+1)
	testutil.WriteTree(t, dir, map[string]string{
		"/proc/42/status":    "\x00\x00garbage\n" + strings.Repeat("Uid:\n", 1000),
		"/proc/42/limits":    strings.Repeat("\n", 1<<16),
		"/proc/42/uid_map":   "0 0\n",
		"/proc/42/mountinfo": huge,
		"/proc/42/environ":   strings.Repeat("\xff=\x00", 1000),
	}, nil, "")
	os.Remove(filepath.Join(dir, "proc/42/gid_map"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "proc/42/gid_map"))
	a := ReadApplied(hostfs.MustNew(dir), 42, gpuWant)
	for name, r := range map[string]ProcRead{"status": a.StatusRead, "limits": a.LimitsRead, "uid_map": a.UserNS.UIDRead, "mountinfo": a.MountsRead} {
		if r.State != ReadMalformed {
			t.Errorf("%s: %s", name, r)
		}
	}
	// gid_map points at the tree's own /etc/passwd (not the host's):
	// absent there.
	if a.UserNS.GIDRead.OK() {
		t.Errorf("gid_map: %s", a.UserNS.GIDRead)
	}
	if !a.Env.Read.OK() || len(a.Env.Names) != 0 || a.Env.Malformed != 1000 {
		t.Errorf("environ: %+v", a.Env)
	}
	for _, c := range a.Compare(gpuWant) {
		if c.Kind == "mount" && c.Outcome != CheckUnknown {
			t.Errorf("mount with an unreadable table: %+v", c)
		}
		if c.Kind == "node" && c.Outcome == CheckPresent && c.Entry.Owner.Known {
			t.Errorf("owner known from a malformed map: %+v", c.Entry.Owner)
		}
	}
}

// TestAppliedGoneProcess: a zombie has no root, memory or namespaces to
// show; a reaped process has no /proc entry. Both are "process gone",
// never "absent".
func TestAppliedGoneProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Kill()
	root := hostfs.MustNew("/")
	// Wait for the zombie without reaping it.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		cmd.Wait()
		t.Fatalf("waitid: %v", err)
	}
	want := Expected{Nodes: []ExpectedNode{{Path: "/dev/null", Type: hostfs.TypeChar, Major: 1, Minor: 3}}, Env: []string{"PATH"}}
	a := ReadApplied(root, pid, want)
	if !a.Status.Zombie() {
		t.Errorf("not a zombie: %q", a.Status.State)
	}
	for _, r := range []ProcRead{a.Dev.Read, a.Env.Read, a.MountsRead, a.Paths["/dev/null"].Read} {
		if r.State != ReadGone {
			t.Errorf("zombie: %s", r)
		}
	}
	cmd.Wait()
	a = ReadApplied(root, pid, want)
	for _, r := range []ProcRead{a.Process, a.StatusRead, a.LimitsRead, a.Dev.Read, a.Env.Read, a.MountsRead, a.UserNS.UIDRead, a.Paths["/dev/null"].Read} {
		if r.State != ReadGone {
			t.Errorf("reaped: %s", r)
		}
	}
	for _, c := range a.Compare(want) {
		if c.Outcome != CheckUnknown || c.State != ReadGone {
			t.Errorf("reaped: %+v", c)
		}
	}
}

const unprivHelperEnv = "ACCEL_DOCTOR_APPLIED_UNPRIV_PID"

// TestAppliedUnprivilegedHelper is not a test: TestAppliedUnprivileged
// runs this binary as nobody to read a root process.
func TestAppliedUnprivilegedHelper(t *testing.T) {
	pidText := os.Getenv(unprivHelperEnv)
	if pidText == "" {
		t.Skip("reader of TestAppliedUnprivileged; runs only when re-executed by it as nobody")
	}
	pid, _ := strconv.Atoi(pidText)
	a := ReadApplied(hostfs.MustNew("/"), pid, Expected{Nodes: []ExpectedNode{{Path: "/dev/null"}}})
	states := map[string]string{"status": a.StatusRead.State.String(), "environ": a.Env.Read.State.String(),
		"dev": a.Dev.Read.State.String(), "stat": a.Paths["/dev/null"].Read.State.String()}
	b, _ := json.Marshal(states)
	fmt.Printf("APPLIED-STATES:%s\n", b)
}

// TestAppliedUnprivileged: as nobody, another user's environment and root
// are refused by the kernel (ptrace read access): "unreadable", never
// "not set" or "missing"; the status stays readable.
func TestAppliedUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a reader as nobody")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	bin := filepath.Join(dir, "reader.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestAppliedUnprivilegedHelper$", "-test.v")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), unprivHelperEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reader as nobody: %v\n%s", err, out)
	}
	_, line, ok := strings.Cut(string(out), "APPLIED-STATES:")
	if !ok {
		t.Fatalf("no result:\n%s", out)
	}
	line, _, _ = strings.Cut(line, "\n")
	var states map[string]string
	if err := json.Unmarshal([]byte(line), &states); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"status": "ok", "environ": "unreadable", "dev": "unreadable", "stat": "unreadable"}
	for k, v := range want {
		if states[k] != v {
			t.Errorf("%s: %s, want %s", k, states[k], v)
		}
	}
}

// TestExpectedFromSpec: the corpus's real CRI-O config asks for one FPGA
// port node and sets its env; the spec's bind mounts become expected
// mounts.
func TestExpectedFromSpec(t *testing.T) {
	dir := testutil.CorpusDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "intel-device-plugins", "oci-config-crio-fpga.json"))
	if err != nil {
		t.Skipf("corpus config: %v", err)
	}
	s, err := ParseSpec(b, "oci-config-crio-fpga.json")
	if err != nil {
		t.Fatal(err)
	}
	w := ExpectedFromSpec(s)
	if len(w.Nodes) != 1 || w.Nodes[0].Path != "/dev/intel-fpga-port.0" || w.Nodes[0].Type != hostfs.TypeChar ||
		w.Nodes[0].Major != 243 || w.Nodes[0].Minor != 0 || w.Nodes[0].Mode != nil || w.Nodes[0].UID == nil || *w.Nodes[0].UID != 0 {
		t.Errorf("nodes: %+v", w.Nodes)
	}
	if len(w.Mounts) != 0 || !strings.Contains(strings.Join(w.Env, ","), "FPGA_REGION_1") {
		t.Errorf("mounts %v env %v", w.Mounts, w.Env)
	}
	spec := `{"process":{"env":["A=1","A=2","B"]},"mounts":[{"destination":"/usr/lib/libcuda.so.1","source":"/usr/lib/x/libcuda.so.1","options":["ro","rbind"]},{"destination":"/proc","type":"proc","source":"proc"}],
		"linux":{"devices":[{"path":"/dev/nvidia0","type":"c","major":195,"minor":0,"fileMode":438},{"path":"/dev/sda","type":"b","major":8,"minor":0},{"path":"/dev/x","type":"?"}]}}`
	s, err = ParseSpec([]byte(spec), "inline")
	if err != nil {
		t.Fatal(err)
	}
	w = ExpectedFromSpec(s)
	if len(w.Nodes) != 2 || *w.Nodes[0].Mode != 0o666 || w.Nodes[1].Type != hostfs.TypeBlock || len(w.Mounts) != 1 ||
		w.Mounts[0].HostPath != "/usr/lib/x/libcuda.so.1" || strings.Join(w.Env, ",") != "A,B" {
		t.Errorf("%+v", w)
	}
}

// BenchmarkReadApplied reads this process's applied state from the live
// host: what `container` costs per container for checkpoint 3.
func BenchmarkReadApplied(b *testing.B) {
	root := hostfs.MustNew("/")
	want := Expected{Nodes: []ExpectedNode{{Path: "/dev/null", Type: hostfs.TypeChar, Major: 1, Minor: 3}},
		Mounts: []ExpectedMount{{HostPath: "/etc/hostname", ContainerPath: "/etc/hostname"}}, Env: []string{"PATH"}}
	for b.Loop() {
		a := ReadApplied(root, os.Getpid(), want)
		if !a.StatusRead.OK() {
			b.Fatal(a.StatusRead)
		}
	}
}

func BenchmarkParseMountInfo(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&buf, "%d 1 0:%d / /var/lib/kubelet/pods/%d/volumes/kubernetes.io~projected/kube-api-access rw,relatime shared:%d - tmpfs tmpfs rw,size=1048576k\n", i+2, i, i, i)
	}
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if _, err := ParseMountInfo(buf.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
}
