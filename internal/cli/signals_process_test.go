package cli

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/probe"
)

// These tests run the built binaries as a user does and signal them
// while they work: the exit status and what is left on disk, in the
// cgroup trees and in the process table are what a user sees.

// sigProc is a started binary, in a session of its own (no controlling
// terminal: the sandbox treats a SIGINT that a terminal gave the whole
// process group differently), whose stdout lines can be awaited.
type sigProc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	mu    sync.Mutex
	out   strings.Builder
	errb  strings.Builder
}

func startSig(t testing.TB, env []string, bin string, args ...string) *sigProc {
	t.Helper()
	p := &sigProc{cmd: exec.Command(bin, args...), lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.errb}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

// waitLine waits for a stdout line that starts with prefix.
func (p *sigProc) waitLine(t testing.TB, prefix string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-p.done:
			t.Fatalf("%v ended before a line %q: %s", p.cmd.Args, prefix, p.output())
		case <-deadline:
			t.Fatalf("no line %q from %v in 30s", prefix, p.cmd.Args)
		}
	}
}

// waitFor polls cond (every half millisecond: the signal must land while
// the work is under way) until it holds.
func (p *sigProc) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !p.seen(t, what, cond) {
		t.Fatalf("%v ended before %s: %s", p.cmd.Args, what, p.output())
	}
}

// seen is waitFor that reports false, instead of failing, when the
// process ended before cond was seen: on a loaded machine the poll can
// miss a short window, which says nothing of the run.
func (p *sigProc) seen(t testing.TB, what string, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case <-p.done:
			return false
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: no %s in 30s", p.cmd.Args, what)
		}
		time.Sleep(500 * time.Microsecond)
	}
	return true
}

func (p *sigProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "stdout:\n" + p.out.String() + "stderr:\n" + p.errb.String()
}

// status waits for the process and says how it ended: "exit N" or
// "killed by SIG".
func (p *sigProc) status(t testing.TB) string {
	t.Helper()
	exited := make(chan error, 1)
	go func() { <-p.done; exited <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-exited
		return "hung (killed after 30s)"
	}
	if err == nil {
		return "exit 0"
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatal(err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit %d", ee.ExitCode())
}

func exitFor(sig syscall.Signal) string { return fmt.Sprintf("exit %d", 128+int(sig)) }

var bothSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}

// bigSnapshot writes a snapshot archive of n small files (the description
// first, as snapshot writes it), large enough that unpacking it takes a
// while: a signal sent when its first entry appears lands during the
// unpacking.
func bigSnapshot(t testing.TB, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "big.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	add := func(name string, typ byte, body string) {
		h := &tar.Header{Name: name, Typeflag: typ, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}
		if typ == tar.TypeDir {
			h.Mode, h.Size = 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add(".accel-doctor/", tar.TypeDir, "")
	add(".accel-doctor/snapshot.json", tar.TypeReg, `{"format":1,"tool":"signal test","source":"/"}`)
	for d := 0; d*100 < n; d++ {
		dir := fmt.Sprintf("sys/devices/pci0000:00/0000:00:%02x.0/", d%256) + fmt.Sprintf("%d/", d)
		add(dir, tar.TypeDir, "")
		for i := 0; i < 100 && d*100+i < n; i++ {
			add(fmt.Sprintf("%sattr%d", dir, i), tar.TypeReg, "0x10de\n")
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// unpackStarted: an unpack directory in tmp holds the snapshot's first
// entry, so the unpacking is under way.
func unpackStarted(tmp string) func() bool {
	return func() bool {
		m, _ := filepath.Glob(filepath.Join(tmp, "accel-doctor-snapshot-*", ".accel-doctor"))
		return len(m) > 0
	}
}

func dirEntries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// sandboxCgroups are the sandbox cgroups of owner pid left in either
// hierarchy.
func sandboxCgroups(pid int) []string {
	var out []string
	for _, d := range []string{"/sys/fs/cgroup/devices", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		m, _ := filepath.Glob(filepath.Join(d, fmt.Sprintf("accel-doctor-sandbox-%d-*", pid)))
		out = append(out, m...)
	}
	return out
}

// sandboxVersions are the sandbox's --v1 and --v2 this host has.
func sandboxVersions(t testing.TB) []string {
	var vs []string
	if _, err := os.Stat("/sys/fs/cgroup/devices/devices.list"); err == nil {
		vs = append(vs, "--v1")
	}
	for _, p := range []string{"/sys/fs/cgroup/unified/cgroup.procs", "/sys/fs/cgroup/cgroup.procs"} {
		if _, err := os.Stat(p); err == nil {
			vs = append(vs, "--v2")
			break
		}
	}
	return vs
}

// tally counts how runs ended.
type tally map[string]int

func (c tally) String() string {
	var ks []string
	for k := range c {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "%s: %d; ", k, c[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// TestSignalStress signals, 200 times with each of SIGINT and SIGTERM,
// the two runs where the signal races the work: a snapshot being
// unpacked (the handler removes the directory while the unpack stops and
// returns an error) and a command running in the sandbox (the command is
// told, then the cgroup is removed). Every run must exit 128+N with
// nothing left: no exception.
func TestSignalStress(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 800 runs")
	}
	bin := binary(t)
	runs := 200
	t.Run("unpack", func(t *testing.T) {
		archive := bigSnapshot(t, 3000)
		for _, sig := range bothSignals {
			got := tally{}
			missed := 0
			for i := 0; i < runs; i++ {
				tmp := t.TempDir()
				p := startSig(t, []string{"TMPDIR=" + tmp}, bin, "check", "--snapshot", archive, "-o", "json")
				if !p.seen(t, "unpacking", unpackStarted(tmp)) {
					// The unpack was over before the poll saw it: the
					// signal would not race it. Not counted; again.
					p.status(t)
					if missed++; missed > runs/4 {
						t.Fatalf("%d runs ended before their unpacking was seen: %s", missed, p.output())
					}
					i--
					continue
				}
				p.cmd.Process.Signal(sig)
				st := p.status(t)
				got[st]++
				if st != exitFor(sig) && got[st] == 1 {
					t.Logf("run %d: %s: %s", i, st, p.output())
				}
				if left := dirEntries(tmp); len(left) > 0 {
					got["left "+strings.Join(left, ",")]++
				}
			}
			t.Logf("%v, %d runs (and %d whose unpacking ended unseen): %s", sig, runs, missed, got)
			if got[exitFor(sig)] != runs || len(got) != 1 {
				t.Errorf("%v: want %d × %s and nothing left, got %s", sig, runs, exitFor(sig), got)
			}
		}
	})
	t.Run("sandbox", func(t *testing.T) {
		needSandbox(t)
		vs := sandboxVersions(t)
		for _, sig := range bothSignals {
			got := tally{}
			for i := 0; i < runs; i++ {
				v := vs[i%len(vs)]
				p := startSig(t, nil, bin, "sandbox", v, "--allow", "c 1:3 rw", "--", "sh", "-c", "echo ready; exec sleep 30")
				p.waitLine(t, "ready")
				p.cmd.Process.Signal(sig)
				st := p.status(t)
				got[st]++
				if st != exitFor(sig) && got[st] == 1 {
					t.Logf("run %d (%s): %s: %s", i, v, st, p.output())
				}
				if left := sandboxCgroups(p.cmd.Process.Pid); len(left) > 0 {
					got["left a cgroup"]++
				}
			}
			t.Logf("%v, %d runs: %s", sig, runs, got)
			if got[exitFor(sig)] != runs || len(got) != 1 {
				t.Errorf("%v: want %d × %s and nothing left, got %s", sig, runs, exitFor(sig), got)
			}
		}
	})
}

// signalRun is one command run to be signalled: started by start, sent
// the signal once ready holds, then judged by its exit status and by left,
// what it made that is still there.
type signalRun struct {
	env   []string
	bin   string
	args  []string
	line  string      // signal after a stdout line with this prefix, or
	ready func() bool // once this holds
	left  func() []string
}

// signalCase makes a run of one command; daemon: SIGINT and SIGTERM are
// its normal stop (exit 0).
type signalCase struct {
	name   string
	daemon bool
	run    func(t *testing.T) signalRun
}

// TestSignalEveryCommand runs every command that takes the cancel or
// cleans up as a process, signals it with SIGINT and with SIGTERM while it
// works, and checks how it ended: 128+N (the daemons: 0), and nothing it
// made left behind.
func TestSignalEveryCommand(t *testing.T) {
	bin := binary(t)
	dir := filepath.Dir(bin)
	kubelet, kube := filepath.Join(dir, KubeletBinary), filepath.Join(dir, KubeBinary)
	archive := bigSnapshot(t, 3000)
	cases := []signalCase{
		{name: "check --snapshot, unpacking", run: func(t *testing.T) signalRun {
			tmp := t.TempDir()
			return signalRun{env: []string{"TMPDIR=" + tmp}, bin: bin, args: []string{"check", "--snapshot", archive},
				ready: unpackStarted(tmp), left: func() []string { return dirEntries(tmp) }}
		}},
		{name: "iommu --snapshot, unpacking", run: func(t *testing.T) signalRun {
			tmp := t.TempDir()
			return signalRun{env: []string{"TMPDIR=" + tmp}, bin: bin, args: []string{"iommu", "--snapshot", archive},
				ready: unpackStarted(tmp), left: func() []string { return dirEntries(tmp) }}
		}},
		{name: "snapshot, writing", run: func(t *testing.T) signalRun {
			root, out := bigPCIIDsRoot(t), t.TempDir()
			return signalRun{bin: bin, args: []string{"--root", root, "snapshot", filepath.Join(out, "s.tar.gz")},
				ready: func() bool { m, _ := filepath.Glob(filepath.Join(out, ".snapshot-*")); return len(m) > 0 },
				left:  func() []string { return dirEntries(out) }}
		}},
		{name: "sandbox", run: func(t *testing.T) signalRun {
			needSandbox(t)
			r := signalRun{bin: bin, args: []string{"sandbox", "--allow", "c 1:3 rw", "--", "sh", "-c", "echo ready; exec sleep 30"}, line: "ready"}
			return r // left: set once the pid is known (below)
		}},
		{name: "container --probe", run: containerProbeRun},
		{name: "probe", run: probeRun},
		{name: "plugin serve", daemon: true, run: func(t *testing.T) signalRun {
			host, kd := pluginHost(t), sockDir(t)
			cfg := filepath.Join(host, "plugin.yaml")
			return signalRun{bin: kubelet, args: []string{"--root", host, "plugin", "serve", "--device-plugin-dir", kd, "--config", cfg},
				line: "SERVING ", left: func() []string { return dirEntries(kd) }}
		}},
		{name: "plugin mock", daemon: true, run: func(t *testing.T) signalRun {
			kd := sockDir(t)
			return signalRun{bin: kubelet, args: []string{"plugin", "mock", "--device-plugin-dir", kd}, line: "SERVING ",
				left: func() []string { return dirEntries(kd) }}
		}},
		{name: "plugin test --device-plugin-dir", run: func(t *testing.T) signalRun {
			kd := sockDir(t)
			return signalRun{bin: kubelet, args: []string{"plugin", "test", "--device-plugin-dir", kd, "--timeout", "60s"},
				ready: fileExists(filepath.Join(kd, "kubelet.sock")), left: func() []string { return dirEntries(kd) }}
		}},
		{name: "plugin mock --dra", daemon: true, run: func(t *testing.T) signalRun {
			d := draDirs(t)
			return signalRun{bin: kube, args: d.mockArgs(), line: "REGISTRATION ", left: d.left}
		}},
		{name: "plugin test --dra", run: func(t *testing.T) signalRun {
			d := draDirs(t)
			mock := startSig(t, nil, kube, d.mockArgs()...)
			mock.waitLine(t, "REGISTRATION ")
			t.Cleanup(func() { mock.cmd.Process.Signal(syscall.SIGTERM); mock.status(t) })
			// Signalled once a claim is prepared (its CDI spec written):
			// the test must unprepare it before it exits.
			return signalRun{bin: kube, args: []string{"plugin", "test", "--dra", "--plugins-registry", d.reg, "--driver", "gpu.example.com",
				"--cdi-spec-dir", d.cdi, "--samples", "1000000", "--timeout", "10s"},
				ready: func() bool { return len(dirEntries(d.cdi)) > 0 }, left: func() []string { return dirEntries(d.cdi) }}
		}},
		{name: "hand-over: accel-doctor plugin test", run: func(t *testing.T) signalRun {
			kd := sockDir(t)
			return signalRun{bin: bin, args: []string{"plugin", "test", "--device-plugin-dir", kd, "--timeout", "60s"},
				ready: fileExists(filepath.Join(kd, "kubelet.sock")), left: func() []string { return dirEntries(kd) }}
		}},
		{name: "hand-over: accel-doctor plugin mock --dra", daemon: true, run: func(t *testing.T) signalRun {
			d := draDirs(t)
			return signalRun{bin: bin, args: d.mockArgs(), line: "REGISTRATION ", left: d.left}
		}},
	}
	for _, c := range cases {
		for _, sig := range bothSignals {
			t.Run(c.name+"/"+sig.String(), func(t *testing.T) {
				r := c.run(t)
				p := startSig(t, r.env, r.bin, r.args...)
				if c.name == "sandbox" {
					r.left = func() []string { return sandboxCgroups(p.cmd.Process.Pid) }
				}
				if r.line != "" {
					p.waitLine(t, r.line)
				} else {
					p.waitFor(t, "the work under way", r.ready)
				}
				p.cmd.Process.Signal(sig)
				want := exitFor(sig)
				if c.daemon {
					want = "exit 0"
				}
				if st := p.status(t); st != want {
					t.Errorf("%s, want %s\n%s", st, want, p.output())
				}
				if left := r.left(); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			})
		}
	}
}

func fileExists(p string) func() bool {
	return func() bool { _, err := os.Lstat(p); return err == nil }
}

// bigPCIIDsRoot is a host tree (nvidia-h100x8) whose pci.ids is 12 MiB
// bigger, in comments that compress badly: a snapshot of it writes long
// enough for a signal sent when its temporary file appears to land during
// the writing.
func bigPCIIDsRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if out, err := exec.Command("cp", "-a", hosts+"nvidia-h100x8/.", root).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f, err := os.OpenFile(filepath.Join(root, "usr/share/misc/pci.ids"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	x := uint64(0x9e3779b97f4a7c15) // xorshift: text that gzip cannot shrink much
	for n := 0; n < 12<<20; n += 35 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		fmt.Fprintf(w, "# %016x%016x\n", x, x*0x2545f4914f6cdd1d)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return root
}

// pluginHost is a host tree for plugin serve and its config: one resource
// of the tree's GPUs, without CDI (so that it writes only its socket).
func pluginHost(t *testing.T) string {
	t.Helper()
	host := t.TempDir()
	if out, err := exec.Command("cp", "-a", hosts+"nvidia-h100x8/.", host).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cfg := "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: \"10de\", class: \"0302\", drivers: [nvidia]}}\n  container: {deviceIDsEnv: ACCEL_VISIBLE_DEVICES}\n"
	if err := os.WriteFile(filepath.Join(host, "plugin.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return host
}

// draRun is the directories of one DRA mock.
type draRun struct{ reg, plug, cdi string }

func draDirs(t *testing.T) draRun {
	d := sockDir(t)
	return draRun{filepath.Join(d, "reg"), filepath.Join(d, "p", "gpu.example.com"), filepath.Join(d, "cdi")}
}

func (d draRun) mockArgs() []string {
	return []string{"plugin", "mock", "--dra", "--driver", "gpu.example.com", "--devices", "2",
		"--plugins-registry", d.reg, "--plugin-data-dir", d.plug, "--cdi-spec-dir", d.cdi, "--node-name", "n1"}
}

func (d draRun) left() []string {
	var out []string
	for _, dir := range []string{d.reg, d.plug, d.cdi} {
		for _, e := range dirEntries(dir) {
			out = append(out, filepath.Join(dir, e))
		}
	}
	return out
}

// stuckCUDA is a stand-in libcuda whose cuInit says it started (the file
// $STUCK_MARK) and then never returns: the probe's CUDA helper is still
// running when the signal comes.
const stuckCUDA = `
#include <fcntl.h>
#include <unistd.h>
#include <stddef.h>
#include <stdlib.h>
int cuInit(unsigned int f) { close(open(getenv("STUCK_MARK"), O_CREAT | O_WRONLY, 0644)); for (;;) pause(); return 0; }
int cuDriverGetVersion(int *v) { *v = 12080; return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDeviceGetName(char *n, int len, int d) { n[0] = 0; return 0; }
int cuCtxCreate_v2(void **c, unsigned int f, int d) { return 0; }
int cuCtxDestroy_v2(void *c) { return 0; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) { return 0; }
int cuMemFree_v2(unsigned long long p) { return 0; }
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { return 0; }
int cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n) { return 0; }
`

// containerProbeRun is container --probe of a runc container whose CUDA
// library never returns from cuInit: the signal lands while the probe's
// child and its helper run in the container. Nothing of the probe may
// still run there afterwards.
func containerProbeRun(t *testing.T) signalRun {
	bin, helper, lib, mark := stuckHelper(t)
	ro := []string{"rbind", "ro"}
	id, _, _ := runcContainer(t, nil, nil, func(s *specs.Spec) {
		s.Process.Env = append(s.Process.Env, "LD_LIBRARY_PATH=/opt/fake", "STUCK_MARK=/mark/started")
		s.Mounts = append(s.Mounts,
			specs.Mount{Destination: "/opt/fake", Type: "bind", Source: lib, Options: ro},
			specs.Mount{Destination: "/mark", Type: "bind", Source: mark, Options: []string{"rbind", "rw"}})
		for _, d := range []string{"/lib64", "/lib/x86_64-linux-gnu"} {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: d, Type: "bind", Source: d, Options: ro})
		}
	})
	return signalRun{bin: bin, args: []string{"container", id, "--probe", "-o", "json"},
		ready: fileExists(filepath.Join(mark, "started")), left: stillRunning(helper, bin)}
}

// probeRun is accel-doctor probe (run where the library is: here the
// host) with the stuck library: the signal lands while its CUDA helper
// runs.
func probeRun(t *testing.T) signalRun {
	bin, helper, lib, mark := stuckHelper(t)
	return signalRun{env: []string{"LD_LIBRARY_PATH=" + lib, "STUCK_MARK=" + filepath.Join(mark, "started")},
		bin: bin, args: []string{"probe", "--dev", t.TempDir(), "-o", "json"},
		ready: fileExists(filepath.Join(mark, "started")), left: stillRunning(helper)}
}

// stuckHelper builds the CUDA helper beside the binaries (once) and the
// stuck library into lib; mark is where it says it started.
func stuckHelper(t *testing.T) (bin, helper, lib, mark string) {
	const loader = "/lib64/ld-linux-x86-64.so.2"
	if _, err := os.Stat(loader); err != nil {
		t.Skipf("no %s on this host", loader)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler for the stand-in library")
	}
	bin = binary(t)
	helper = filepath.Join(filepath.Dir(bin), probe.HelperName)
	helperOnce.Do(func() {
		build := exec.Command("go", "build", "-trimpath", "-o", helper, "../../cmd/accel-doctor-cuda")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("go build helper: %v\n%s", err, out)
		}
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	lib, mark = t.TempDir(), t.TempDir()
	for _, d := range []string{lib, mark} {
		os.Chmod(d, 0o777)
	}
	src := filepath.Join(t.TempDir(), "stuck.c")
	os.WriteFile(src, []byte(stuckCUDA), 0o644)
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(lib, probe.LibCUDA), "-Wl,-soname,"+probe.LibCUDA, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return bin, helper, lib, mark
}

// stillRunning lists the processes of exes that still run. They were
// sent SIGKILL before accel-doctor exited; a killed process takes a
// moment to go.
func stillRunning(exes ...string) func() []string {
	return func() []string {
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			live := running(exes...)
			if len(live) == 0 || time.Now().After(deadline) {
				return live
			}
		}
	}
}

var (
	helperOnce sync.Once
	helperErr  error
)

// running lists the live processes (not zombies) that run one of exes.
func running(exes ...string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		exe, err := os.Readlink(filepath.Join(p, "exe"))
		if err != nil || !slices.Contains(exes, exe) {
			continue
		}
		if st, _ := os.ReadFile(filepath.Join(p, "stat")); strings.Contains(string(st), ") Z ") {
			continue
		}
		out = append(out, p+" "+exe)
	}
	return out
}

// The sandbox passes the signal it got on to its command: a command that
// traps it runs its handler (here: writes a marker and exits 0), then the
// cgroup is removed and accel-doctor exits 128+N.
func TestSignalSandboxPassesItOn(t *testing.T) {
	needSandbox(t)
	bin := binary(t)
	for _, v := range sandboxVersions(t) {
		for _, sig := range bothSignals {
			t.Run(v+"/"+sig.String(), func(t *testing.T) {
				mark := filepath.Join(t.TempDir(), "mark")
				name := strings.TrimPrefix(unixSignalName(int(sig)), "SIG")
				script := fmt.Sprintf("trap 'echo caught > %s; exit 0' %s; echo ready; while :; do sleep 0.05; done", mark, name)
				p := startSig(t, nil, bin, "sandbox", v, "--allow", "c 1:3 rw", "--", "sh", "-c", script)
				p.waitLine(t, "ready")
				p.cmd.Process.Signal(sig)
				if st := p.status(t); st != exitFor(sig) {
					t.Errorf("%s, want %s\n%s", st, exitFor(sig), p.output())
				}
				if b, err := os.ReadFile(mark); err != nil || string(b) != "caught\n" {
					t.Errorf("the command's %s handler did not run: %q %v\n%s", name, b, err, p.output())
				}
				if !strings.Contains(p.output(), "command exited 0") {
					t.Errorf("the report does not say the command exited 0:\n%s", p.output())
				}
				if left := sandboxCgroups(p.cmd.Process.Pid); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			})
		}
	}
}

// A ^C typed at the terminal reaches the whole foreground process group,
// the sandboxed command included: the sandbox does not send it a second
// SIGINT (its handler runs once), and still ends with 130 and no cgroup.
func TestSignalSandboxTerminalInterruptOnce(t *testing.T) {
	needSandbox(t)
	bin := binary(t)
	master, tty := openPTY(t)
	mark := filepath.Join(t.TempDir(), "mark")
	// The handler counts; the command then runs on for a second, time
	// for a second SIGINT to be counted too, and exits 0.
	script := fmt.Sprintf("trap 'echo int >> %s' INT; echo ready; i=0; while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done; exit 0", mark)
	cmd := exec.Command(bin, "sandbox", "--allow", "c 1:3 rw", "--", "sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stdin, cmd.Stderr = tty, &stderr
	// A session of its own whose controlling terminal is the pty: its
	// process group is the terminal's foreground group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("no ready line: %q", sc.Text())
	}
	if _, err := master.Write([]byte{0x03}); err != nil { // VINTR: ^C
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("%v, want exit 130\n%s", err, stderr.String())
	}
	if b, _ := os.ReadFile(mark); string(b) != "int\n" {
		t.Errorf("the command's INT handler ran %d times, want once", strings.Count(string(b), "int"))
	}
	if left := sandboxCgroups(cmd.Process.Pid); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// openPTY opens a pseudo-terminal pair; both ends are closed when the
// test ends.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}
