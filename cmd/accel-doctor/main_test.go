package main

// These tests drive the built binary as a user would: the exit status, the
// words printed, and what is left on disk. The binary is built once per
// test run, the way the README builds it (CGO_ENABLED=0: a static binary
// that runs in any pod).

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/testbin"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// accelDoctor is accel-doctor alone in its directory, static as it ships
// (CGO_ENABLED=0: the tests here hold that it runs in an empty root);
// internal/testbin builds it once for the whole run. -trimpath and
// stripping, the rest of the README's build, change no behaviour, and
// would compile every package again beside go test's build.
func accelDoctor(t testing.TB) string {
	t.Helper()
	return filepath.Join(testbin.Dir(t, "../..", testbin.Options{Static: true, Packages: []string{"./cmd/accel-doctor"}}), "accel-doctor")
}

// product is the three binaries side by side, built with go test's own
// settings (product_test.go has go test compile their packages first):
// for the tests of what one binary does with the others.
func product(t testing.TB) string {
	t.Helper()
	return testbin.Dir(t, "../..", testbin.Options{})
}

const hosts = "../../testdata/hosts/"

type result struct {
	stdout, stderr string
	code           int
}

func runBin(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(accelDoctor(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return result{o.String(), e.String(), code}
}

// A static binary: no program interpreter, no dynamic section, and the
// build says CGO_ENABLED=0.
func TestBinaryIsStatic(t *testing.T) {
	bin := accelDoctor(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %s program header: it is dynamically linked", p.Type)
		}
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	cgo := ""
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			cgo = s.Value
		}
	}
	if cgo != "0" {
		t.Errorf("CGO_ENABLED=%q in the build info, want 0", cgo)
	}
}

// Every address form names the same function (lspci's short form,
// upper case and nvidia-smi's 8-digit domain each gave "accelerators:
// none found ... PASS" once).
func TestDeviceAddressForms(t *testing.T) {
	for _, form := range []string{"0000:ab:00.0", "ab:00.0", "0000:AB:00.0", "00000000:ab:00.0", "AB:00.0"} {
		r := runBin(t, nil, "check", "--snapshot", "demo", "--device", form)
		if r.code != 1 || !strings.Contains(r.stdout, "accelerators: NVIDIA GH100") ||
			!strings.Contains(r.stdout, "required node /dev/nvidia5 of 0000:ab:00.0 is missing") {
			t.Errorf("--device %s: exit %d\n%s%s", form, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "0000:18:00.0") {
			t.Errorf("--device %s: the report speaks of another GPU", form)
		}
	}
	r := runBin(t, nil, "check", "--snapshot", "demo", "--device", "fe:1f.7")
	if r.code != 2 || !strings.Contains(r.stderr, "no PCI function 0000:fe:1f.7") || !strings.Contains(r.stderr, "0000:18:00.0") || r.stdout != "" {
		t.Errorf("unknown address: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, nil, "check", "--snapshot", "demo", "--device", "nvidia0")
	if r.code != 2 || !strings.Contains(r.stderr, "not a PCI address") {
		t.Errorf("not an address: exit %d %q", r.code, r.stderr)
	}
}

// A run whose target cannot be examined is a usage error before any work,
// never "Verdict: PASS".
func TestNothingToExamineIsAnError(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"check", "--root", empty}, "nothing to examine"},
		{[]string{"check", "--pid", "999999999"}, "no process 999999999"},
		{[]string{"check", "--snapshot", "demo", "--pid", "999"}, "no process 999 in snapshot demo"},
		{[]string{"check", "--cgroup", "/accel-doctor-no-such-cgroup"}, "no such cgroup"},
		{[]string{"check", "--pid", "1", "--cgroup", "/"}, "give one"},
		{[]string{"check", "--root", hosts + "kvm-virtio", "--snapshot", "demo"}, "--root and --snapshot"},
		{[]string{"check", "--snapshot", "demo", "--oci-spec", "/no/such/config.json"}, "no such file"},
		{[]string{"cgroup", "eval", "--snapshot", "demo", "--pid", "999"}, "pid 999"},
	} {
		r := runBin(t, nil, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.says) || strings.Contains(r.stdout, "Verdict") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want exit 2 saying %q)", c.args, r.code, r.stdout, r.stderr, c.says)
		}
	}
}

// Flags that behave: -o is checked before any work and every listed format
// works; snapshot writes to standard output with "-".
func TestOutputFormats(t *testing.T) {
	tmp := t.TempDir()
	r := runBin(t, []string{"TMPDIR=" + tmp}, "check", "--snapshot", "demo", "-o", "yaml")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown output "yaml"`) || r.stdout != "" {
		t.Errorf("-o yaml: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("-o yaml unpacked the demo before refusing: %v", left)
	}
	for _, args := range [][]string{
		{"check", "--snapshot", "demo"}, {"pci", "--snapshot", "demo"},
		{"cgroup", "eval", "--root", hosts + "nvidia-h100x8-k8s-cgroupv1", "--pid", "4242"},
	} {
		for _, format := range []string{"text", "json", "markdown"} {
			r := runBin(t, nil, append(args, "-o", format)...)
			if r.code == 2 || r.stdout == "" {
				t.Errorf("%v -o %s: exit %d: %s", args, format, r.code, r.stderr)
				continue
			}
			switch format {
			case "json":
				if !strings.HasPrefix(strings.TrimSpace(r.stdout), "{") && !strings.HasPrefix(strings.TrimSpace(r.stdout), "[") {
					t.Errorf("%v -o json is not JSON:\n%s", args, r.stdout)
				}
			case "markdown":
				if !strings.Contains(r.stdout, "|---|") {
					t.Errorf("%v -o markdown has no table:\n%s", args, r.stdout)
				}
			}
		}
	}
	for _, args := range [][]string{{"-"}, {"-f", "-"}, {"-o", "-"}} {
		r = runBin(t, nil, append([]string{"snapshot", "--root", hosts + "kvm-virtio"}, args...)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "\x1f\x8b") {
			t.Errorf("snapshot %v: exit %d, stdout starts %q, stderr %q", args, r.code, r.stdout[:min(4, len(r.stdout))], r.stderr)
		}
	}
	if _, err := os.Stat("-"); err == nil {
		t.Error(`snapshot - wrote a file named "-"`)
	}
}

// `check --snapshot demo | head -1`, 20 times, leaves nothing behind.
func TestNothingLeftBehindByAClosedPipe(t *testing.T) {
	bin := accelDoctor(t)
	tmp := t.TempDir()
	for i := 0; i < 20; i++ {
		cmd := exec.Command("sh", "-c", bin+" check --snapshot demo --verbose | head -1")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		out, err := cmd.Output()
		if err != nil || !strings.HasPrefix(string(out), "accel-doctor check: built-in demo") {
			t.Fatalf("run %d: %v %q", i, err, out)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind: %v", names(left))
	}
}

// SIGINT and SIGTERM end a run at once, with 130 and 143, and remove its
// temporary files, even while it is blocked writing to a pipe nobody
// reads.
func TestSignalsEndARunAndCleanUp(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		// Stuck once the unpacked snapshot exists.
		took, err := signalBlockedRun(t, sig, func(tmp string) bool {
			left, _ := os.ReadDir(tmp)
			return len(left) > 0
		}, "check", "--snapshot", "demo", "-o", "json")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
			t.Errorf("%v: %v, want exit %d", sig, err, 128+int(sig))
		}
		t.Logf("%v: exited %v after the signal", sig, took)
	}
}

// A run with nothing to clean up does not catch the signals (cli.Run says
// why): SIGINT and SIGTERM end it by the signal itself, their default
// action, at once, even blocked writing to a pipe nobody reads, and it
// leaves nothing behind.
func TestSignalsEndARunWithNothingToCleanUp(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		_, err := signalBlockedRun(t, sig, nil, "check", "--root", "../../testdata/hosts/nvidia-h100x8", "-o", "json")
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%v: %v, want the process ended by the signal", sig, err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("%v: %v, want the process ended by the signal", sig, err)
		}
	}
}

// signalBlockedRun runs the binary with args, its TMPDIR a new directory,
// until it is blocked writing its report to a pipe of one page nobody
// reads (the JSON reports do not fit) and ready(tmp) holds (nil: at
// once); then sends sig and returns how long the run took to end and what
// Wait returned. Nothing may be left in TMPDIR.
func signalBlockedRun(t *testing.T, sig syscall.Signal, ready func(tmp string) bool, args ...string) (time.Duration, error) {
	t.Helper()
	tmp := t.TempDir()
	cmd := exec.Command(accelDoctor(t), args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if _, err := unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !blockedInWrite(cmd.Process.Pid) || ready != nil && !ready(tmp) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%v: the run never blocked writing", sig)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	cmd.Process.Signal(sig)
	err = cmd.Wait()
	took := time.Since(start)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("%v: left behind %v", sig, names(left))
	}
	return took, err
}

// blockedInWrite: the process's main thread sleeps in a pipe write
// (wchan pipe_write), or any of its threads does.
func blockedInWrite(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	for _, w := range tasks {
		if b, _ := os.ReadFile(w); strings.Contains(string(b), "pipe_write") {
			return true
		}
	}
	return false
}

func names(es []os.DirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// Real captures of working machines that lack trees (ghw's P100 has no
// /dev, hwloc's POWER9 no driver links) give NOT_RUN naming the gap, never
// a FAIL: one gave DEVNODE_MISSING "expected unknown from unknown"
// and DRIVER_NONE on all six V100s.
func TestIncompleteCapturesAreNotFailures(t *testing.T) {
	corpus := testutil.CorpusDir(t)
	p100 := testutil.Unpack(t, filepath.Join(corpus, "ghw", "linux-amd64-accel-nvidia.tar.gz"))
	r := runBin(t, nil, "check", "--root", p100, "-o", "json")
	if r.code != 0 || strings.Contains(r.stdout, `"FAIL"`) || strings.Contains(r.stdout, "unknown from unknown") ||
		!strings.Contains(r.stdout, "the capture holds no /dev") {
		t.Errorf("P100: exit %d\n%s", r.code, r.stdout)
	}
	power9 := testutil.Unpack(t, filepath.Join(corpus, "hwloc", "linux", "nvidiagpunumanodes.tar.bz2"))
	r = runBin(t, nil, "check", "--root", power9, "--layer", "pci,driver", "-o", "json")
	if r.code != 0 || strings.Contains(r.stdout, "DRIVER_NONE") || strings.Count(r.stdout, `"code": "DRIVER_BOUND"`) != 6 {
		t.Errorf("POWER9: exit %d, %d DRIVER_BOUND\n%s", r.code, strings.Count(r.stdout, `"code": "DRIVER_BOUND"`), r.stdout)
	}
}

// Hostile input given to --snapshot: a FIFO is refused before it is
// opened (it used to block in open until SIGKILL), an archive that is not
// a snapshot is refused, and a snapshot's own description cannot reach the
// terminal raw.
func TestHostileSnapshots(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() { done <- runBin(t, nil, "check", "--snapshot", fifo) }()
	select {
	case r := <-done:
		if r.code != 2 || !strings.Contains(r.stderr, "not a regular file") {
			t.Errorf("FIFO: exit %d %q", r.code, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("check --snapshot FIFO blocked")
	}

	plain := filepath.Join(dir, "plain.tgz")
	if out, err := exec.Command("tar", "-czf", plain, "-C", hosts+"kvm-virtio", ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	r := runBin(t, nil, "check", "--snapshot", plain)
	if r.code != 2 || !strings.Contains(r.stderr, "snapshot") || strings.Contains(r.stdout, "Verdict") {
		t.Errorf("a .tgz without snapshot.json: exit %d %q %q", r.code, r.stdout, r.stderr)
	}

	// A real snapshot whose description carries escape sequences.
	snap := filepath.Join(dir, "snap.tar.gz")
	if r := runBin(t, nil, "snapshot", "--root", hosts+"kvm-virtio", snap); r.code != 0 {
		t.Fatalf("snapshot: %d %s", r.code, r.stderr)
	}
	evil := filepath.Join(dir, "evil.tar.gz")
	rewriteMeta(t, snap, evil, func(m map[string]any) { m["source"] = "x\x1b]0;owned\x07\x1b[2J\rVerdict: PASS" })
	r = runBin(t, nil, "check", "--snapshot", evil)
	if strings.ContainsAny(r.stdout, "\x1b\x07\r") || !strings.Contains(r.stdout, `\x1b]0;owned`) {
		t.Errorf("escape codes reach the terminal:\n%q", r.stdout)
	}
	r = runBin(t, nil, "check", "--snapshot", evil, "-o", "markdown")
	if strings.ContainsAny(r.stdout, "\x1b\x07\r") {
		t.Errorf("escape codes reach the Markdown:\n%q", r.stdout)
	}
}

// rewriteMeta copies a snapshot archive, changing its snapshot.json.
func rewriteMeta(t *testing.T, src, dst string, edit func(map[string]any)) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	gz, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	gw := gzip.NewWriter(out)
	tw := tar.NewWriter(gw)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if h.Name == ".accel-doctor/snapshot.json" {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			b, _ = json.Marshal(m)
			h.Size = int64(len(b))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	tw.Close()
	gw.Close()
}

// Hostile trees, through the binary: a driver link that loops, a 64 KiB
// line in /proc/devices, a garbage class and an unparsable numa_node each
// give a finding that names the path, and no GPU drops out of the later
// layers (one gave a PASS "bound to driver driver", a whole /proc
// file silently unread, a GPU gone from layers 2-3, and "absent" for a
// malformed value).
func TestHostileTreeFindingsNameThePath(t *testing.T) {
	host := t.TempDir()
	if err := os.CopyFS(host, os.DirFS(hosts+"nvidia-h100x8")); err != nil {
		t.Fatal(err)
	}
	dev := func(bdf string) string {
		p, err := filepath.EvalSymlinks(filepath.Join(host, "sys/bus/pci/devices", bdf))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	loop := filepath.Join(dev("0000:18:00.0"), "driver")
	os.Remove(loop)
	if err := os.Symlink("driver", loop); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dev("0000:2a:00.0"), "class"), []byte("0xZZ-garbage\n"), 0o644)
	os.WriteFile(filepath.Join(dev("0000:3a:00.0"), "numa_node"), []byte("one\n"), 0o644)
	pd := filepath.Join(host, "proc/devices")
	b, _ := os.ReadFile(pd)
	// A 64 KiB line that is no "major name" line, before the real ones.
	long := "Character devices:\n" + strings.Repeat("x", 64<<10) + "\n"
	os.WriteFile(pd, []byte(strings.Replace(string(b), "Character devices:\n", long, 1)), 0o644)

	r := runBin(t, nil, "check", "--root", host, "-o", "json")
	var rep struct {
		Findings []struct {
			Code, Status, Subject, Summary, Reason string
			Layer                                  int
			Evidence                               []struct{ Path, Value string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s %s", err, r.stdout, r.stderr)
	}
	named := func(path string) bool {
		for _, f := range rep.Findings {
			if f.Status == "PASS" {
				continue
			}
			text := f.Summary + " " + f.Reason
			for _, e := range f.Evidence {
				text += " " + e.Path + " " + e.Value
			}
			if strings.Contains(text, path) {
				return true
			}
		}
		return false
	}
	for _, p := range []string{"0000:18:00.0/driver", "0000:2a:00.0/class", "0000:3a:00.0/numa_node", "/proc/devices"} {
		if !named(p) {
			t.Errorf("no WARN, FAIL or NOT_RUN names %s", p)
		}
	}
	for _, f := range rep.Findings {
		if f.Status == "PASS" && strings.Contains(f.Summary, "driver driver") {
			t.Errorf("a looping link passes as a driver: %+v", f)
		}
	}
	// The lines after the long one are still read.
	if !strings.Contains(r.stdout, "char major 195: nvidia") {
		t.Error("the majors after the long line were not read")
	}
	// Every GPU is still judged (or NOT_RUN) in layer 3.
	for _, bdf := range []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"} {
		seen := false
		for _, f := range rep.Findings {
			seen = seen || (f.Layer == 3 && (f.Subject == bdf || strings.Contains(f.Summary, bdf) || strings.Contains(f.Reason, bdf)))
		}
		for _, f := range rep.Findings {
			for _, e := range f.Evidence {
				seen = seen || (f.Layer == 3 && strings.Contains(e.Value, bdf))
			}
		}
		if !seen {
			t.Errorf("%s dropped out of layer 3", bdf)
		}
	}
}

// A run's last word on stderr says what its exit says: from a verdict
// that judged nothing, exit 2 and why (it said "at least one check failed"
// there, where nothing had failed, and check added "No accelerator here"
// of a bus it could not read); a FAIL is exit 1 and says nothing of the
// sort.
func TestExitSaysWhy(t *testing.T) {
	empty := t.TempDir()
	procOnly := t.TempDir()
	if err := os.Mkdir(filepath.Join(procOnly, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "--root", procOnly}, {"iommu", "--root", empty}} {
		r := runBin(t, nil, args...)
		if r.code != 2 || strings.Contains(r.stderr, "check failed") || strings.Contains(r.stderr, "No accelerator here") ||
			!strings.Contains(r.stderr, "accel-doctor: nothing could be judged; layer 1 NOT_RUN") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and why nothing could be judged", args, r.code, r.stderr)
		}
	}
	r := runBin(t, nil, "check", "--snapshot", "demo")
	if r.code != 1 || strings.Contains(r.stderr, "nothing could be judged") {
		t.Errorf("check --snapshot demo: exit %d, stderr %q; want 1", r.code, r.stderr)
	}
}
