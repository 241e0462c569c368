package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/helper"
	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// A NOT_RUN's fix is about what kept its check from looking: never the
// catalog's remediation of its code, which is written for the WARN or
// FAIL the check would have judged.

// notRunWalk collects the NOT_RUN findings of many runs.
type notRunWalk struct {
	t     *testing.T
	seen  map[string]report.Finding // code -> the first NOT_RUN of it
	where map[string]string         // code -> the run that gave it
	fixes map[string]bool           // every fix given
	runs  int
}

// add judges every NOT_RUN of rep: a fix, and one that is not the
// catalog's fix of its code nor holds it.
func (w *notRunWalk) add(run string, rep *report.Report) {
	w.t.Helper()
	w.runs++
	for _, f := range rep.Findings {
		if f.Status != report.NotRun {
			continue
		}
		if strings.TrimSpace(f.Remediation) == "" {
			w.t.Errorf("%s: NOT_RUN %s (%s) has no fix; reason %q", run, f.Code, f.Subject, f.Reason)
		}
		if f.Reason == "" {
			w.t.Errorf("%s: NOT_RUN %s (%s) has no reason", run, f.Code, f.Subject)
		}
		if c, ok := diagnose.LookupCode(f.Code); ok && c.Remediation != "" &&
			(f.Remediation == c.Remediation || strings.Contains(f.Remediation, c.Remediation)) {
			w.t.Errorf("%s: NOT_RUN %s (%s) is given its code's catalog fix %q; reason %q", run, f.Code, f.Subject, c.Remediation, f.Reason)
		}
		w.fixes[f.Remediation] = true
		if _, ok := w.seen[f.Code]; !ok {
			w.seen[f.Code], w.where[f.Code] = f, run
		}
	}
}

// cmd runs a command in this process and adds its JSON report.
func (w *notRunWalk) cmd(args ...string) {
	w.t.Helper()
	out, stderr, code := run(w.t, append(args, "-o", "json")...)
	w.json(strings.Join(args, " "), out, stderr, code)
}

func (w *notRunWalk) json(run, out, stderr string, code int) {
	w.t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		w.t.Errorf("%s: exit %d: %v: %s", run, code, err, stderr)
		return
	}
	w.add(run, &rep)
}

// TestNotRunFixesFollowTheirReasons walks the NOT_RUN findings check,
// iommu, container and probe give: over every fixture host, captures
// that lack trees (the corpus, a snapshot of a fixture), a hostile tree,
// an empty root, the kubelet's sockets with and without the helper that
// calls them, inputs missing or wrong, as root and as nobody. Every
// NOT_RUN has a fix, and none is its code's catalog fix (the WARN or
// FAIL case's). The codes reached are counted so that the walk cannot
// silently shrink.
func TestNotRunFixesFollowTheirReasons(t *testing.T) {
	w := &notRunWalk{t: t, seen: map[string]report.Finding{}, where: map[string]string{}, fixes: map[string]bool{}}
	empty := t.TempDir()
	bin := testutil.Binaries(t, "../..") // accel-doctor and its helpers, side by side

	// Every fixture host, whole and as the iommu command judges it.
	ents, err := os.ReadDir(hosts)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		w.cmd("check", "--root", hosts+e.Name())
		w.cmd("iommu", "--root", hosts+e.Name())
	}
	// Inputs: a process without --guest-memory; an --oci-spec without device
	// rules (and one that is not JSON) on a root that holds them.
	w.cmd("iommu", "--root", hosts+"gpu4-switch-acs", "--pid", "5150")
	specRoot := t.TempDir()
	testutil.WriteTree(t, specRoot, map[string]string{
		"/sys/bus/pci/devices/.keep": "",
		"/config.json":               `{"ociVersion":"1.0.2","process":{"cwd":"/","args":["sh"]},"root":{"path":"rootfs"}}`,
		"/garbled.json":              "{not json",
	}, nil, "")
	w.cmd("check", "--root", specRoot, "--oci-spec", "/config.json")
	w.cmd("check", "--root", specRoot, "--oci-spec", "/garbled.json")

	// A host root with nothing in /sys and /proc, a hostile one (the
	// robust test's: loops, a 1 GiB attribute, garbage in class), and a
	// GPU bound to nvidia with nothing else (no libraries, no nodes).
	bare := t.TempDir()
	for _, d := range []string{"sys", "proc"} {
		os.Mkdir(filepath.Join(bare, d), 0o755)
	}
	w.cmd("check", "--root", bare)
	w.cmd("check", "--root", hostileTree(t))
	gpu := nvidiaTree(t)
	w.cmd("check", "--root", gpu)
	w.cmd("iommu", "--root", gpu)
	// The same GPU bound to nouveau: its nodes are not checked, a lower
	// layer failed (a GPU with no driver gets its nodes reported missing
	// as the consequence instead).
	w.cmd("check", "--root", nouveauTree(t))

	// The DRA node trees (internal/dra's fixtures: states, CDI specs,
	// runtimes whose configuration cannot be read).
	draNodes, _ := filepath.Glob("../dra/testdata/nodes/dra-*")
	for _, r := range draNodes {
		w.cmd("check", "--root", r)
	}

	// CDI: the spec directories of every tree.
	for _, r := range append([]string{hosts + "nvidia-h100x8", bare, gpu}, draNodes...) {
		w.cmd("cdi", "validate", "--root", r)
	}

	// Captures that lack trees: the corpus's, and a snapshot of a fixture.
	if dir := corpusDir(t); dir != "" {
		for _, a := range []string{"ghw/linux-amd64-accel-nvidia.tar.gz", "hwloc/linux/nvidiagpunumanodes.tar.bz2", "ghw/linux-arm64-c288e0776090cd558ef793b2a4e61939.tar.gz"} {
			if tree := testutil.Unpack(t, filepath.Join(dir, a)); tree != "" {
				w.cmd("check", "--root", tree)
				w.cmd("iommu", "--root", tree)
			}
		}
	}
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if _, stderr, code := run(t, "snapshot", "--root", hosts+"nvidia-h100x8", snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	w.cmd("check", "--snapshot", snap)
	w.cmd("check", "--snapshot", "demo")

	// The kubelet's sockets, without the helper that calls them (not
	// beside this test binary) and with it (in $ACCEL_DOCTOR_HELPER_DIR).
	kube := kubeletTree(t)
	t.Setenv(helper.EnvDir, "")
	w.cmd("check", "--root", kube)
	t.Setenv(helper.EnvDir, filepath.Dir(bin))
	w.cmd("check", "--root", kube)
	t.Setenv(helper.EnvDir, "")

	// The functional probe: no node, a node whose open fails, the
	// libraries not asked, a library without its helper, a helper that
	// is no program.
	w.cmd("probe", "--dev", t.TempDir(), "--termination-log", "")
	w.cmd("probe", "--dev", t.TempDir(), "--termination-log", "", "--no-libraries")
	garbled := filepath.Join(specRoot, "garbled.json")
	if os.Geteuid() == 0 {
		dev := probeDev(t)
		major := uint32(250)
		for majorRegistered(t, major) && major > 234 {
			major--
		}
		mkchar(t, filepath.Join(dev, "dri", "card0"), major, 0)
		// Shared objects of this machine's class, found as the libraries
		// (the C library's bytes), so that the helper is looked for.
		libs := t.TempDir()
		so := []byte(nil)
		if libc := probe.FindLibrary("libc.so.6", os.Getenv).Found; libc != "" {
			so, _ = os.ReadFile(libc)
		}
		for _, l := range []string{probe.LibCUDA, probe.LibNVML} {
			os.WriteFile(filepath.Join(libs, l), so, 0o644)
		}
		t.Setenv("LD_LIBRARY_PATH", libs)
		w.cmd("probe", "--dev", dev, "--termination-log", "")
		w.cmd("probe", "--dev", dev, "--termination-log", "", "--cuda-helper", garbled)
		w.cmd("probe", "--dev", dev, "--termination-log", "", "--cuda-helper", filepath.Join(empty, "none"))
		// A helper another user could change is not run.
		theirs := filepath.Join(t.TempDir(), probe.HelperName)
		if err := os.WriteFile(theirs, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		w.cmd("probe", "--dev", dev, "--termination-log", "", "--cuda-helper", theirs)
		t.Setenv("LD_LIBRARY_PATH", "")
	}

	// A container: live (runc), stopped, and replayed from a snapshot.
	if runcUsable() {
		id, _, _ := runcContainer(t, []specs.LinuxDevice{accelNode}, []specs.LinuxDeviceCgroup{allowAccel})
		w.cmd("container", id, "--probe")
		csnap := filepath.Join(t.TempDir(), "ctr.tar.gz")
		if _, stderr, code := run(t, "snapshot", "--container", id, csnap); code != 0 {
			t.Fatalf("snapshot --container: exit %d: %s", code, stderr)
		}
		w.cmd("container", id, "--snapshot", csnap)
		w.cmd("check", "--snapshot", csnap)
		if out, err := exec.Command("runc", "kill", id, "KILL").CombinedOutput(); err != nil {
			t.Logf("runc kill: %v: %s", err, out)
		} else {
			waitStopped(t, id)
			w.cmd("container", id, "--probe")
		}
	}

	// As nobody: the live host, a fixture, a kubelet directory it may
	// not read; with the helper beside the binary and without it.
	if os.Geteuid() == 0 {
		asNobody(t, w, bin, "check")
		asNobody(t, w, bin, "check", "--root", abs(t, hosts+"nvidia-h100x8"))
		asNobody(t, w, bin, "check", "--root", kube)
		asNobody(t, w, bin, "check", "--root", gpu)
		asNobody(t, w, bin, "cdi", "validate", "--root", gpu)
		asNobody(t, w, bin, "iommu")
		// dra-double with /var/run/cdi root's only: the claim's CDI
		// device and the double advertising are not known.
		dd := openCopy(t, "../dra/testdata/nodes/dra-double")
		os.Chmod(filepath.Join(dd, "var/run/cdi"), 0o700)
		asNobody(t, w, bin, "check", "--root", dd)
	}

	codes := make([]string, 0, len(w.seen))
	for c := range w.seen {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		f := w.seen[c]
		t.Logf("%s (%s): %s\n    fix: %s", c, w.where[c], f.Reason, f.Remediation)
	}
	t.Logf("%d runs, %d NOT_RUN codes reached, %d distinct fixes", w.runs, len(codes), len(w.fixes))
	// The accel-doctor commands the fixes name parse (those of the other
	// binaries are theirs to parse).
	span := regexp.MustCompile("`accel-doctor ([^`]*)`")
	other := map[string]bool{}
	for _, c := range append(slices.Clone(KubeCommands), KubeletCommands...) {
		other[c.Name] = true
	}
	for fix := range w.fixes {
		for _, m := range span.FindAllStringSubmatch(fix, -1) {
			args := testutil.SplitArgs(m[1])
			if len(args) == 0 || other[args[0]] {
				continue
			}
			if _, stderr, code := run(t, append(args, "--help")...); code != 0 || stderr != "" {
				t.Errorf("a fix names `accel-doctor %s`, which does not parse, or with a deprecated flag: exit %d, %s", m[1], code, stderr)
			}
		}
	}
	// What this walk reaches on a root test machine with runc and the
	// corpus; a change that loses a case lowers it.
	const floor = 39
	if os.Geteuid() == 0 && runcUsable() && corpusDir(t) != "" && len(codes) < floor {
		t.Errorf("the walk reached %d NOT_RUN codes, fewer than %d: %v", len(codes), floor, codes)
	}
}

// TestHelperMissingFixNamesTheHelper: kubelet.sock is there and served,
// but accel-doctor-kubelet, which makes the socket calls for accel-doctor,
// is not beside the binary (never looked for on PATH). The sockets' NOT_RUN says to
// install it there, naming the directory, and never to restart the
// kubelet (the catalog's fix for a kubelet.sock that does not answer);
// a helper that is there and fails is told apart.
func TestHelperMissingFixNamesTheHelper(t *testing.T) {
	kube := kubeletTree(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// One on PATH that would leave a mark is never run (as root: a
	// PATH directory of another user's, the helper theirs).
	onPath := t.TempDir()
	mark := filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(filepath.Join(onPath, KubeletBinary), []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		for _, p := range []string{onPath, filepath.Join(onPath, KubeletBinary)} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("PATH", onPath+":"+os.Getenv("PATH"))
	t.Setenv(helper.EnvDir, "")
	find := func(out string) report.Finding {
		t.Helper()
		var rep report.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			if f.Code == "KUBELET_SOCKET_NOT_ANSWERING" {
				return f
			}
		}
		t.Fatalf("no KUBELET_SOCKET_NOT_ANSWERING in %s", out)
		return report.Finding{}
	}
	out, stderr, _ := run(t, "check", "--root", kube, "--layer", "kube", "-o", "json")
	f := find(out)
	if f.Status != report.NotRun || !strings.Contains(f.Reason, KubeletBinary) {
		t.Fatalf("%s %s, reason %q (%s)", f.Code, f.Status, f.Reason, stderr)
	}
	for _, want := range []string{"Install " + KubeletBinary, "beside the accel-doctor binary", filepath.Dir(exe), "does not look for it on PATH"} {
		if !strings.Contains(f.Remediation, want) {
			t.Errorf("fix %q does not say %q", f.Remediation, want)
		}
	}
	if strings.Contains(f.Remediation, "Restart the kubelet") || strings.Contains(f.Remediation, "systemctl restart kubelet") {
		t.Errorf("the helper missing is answered with the kubelet's fix: %q", f.Remediation)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the %s on PATH was run", KubeletBinary)
	}

	// A helper that runs and fails (in the directory named by
	// $ACCEL_DOCTOR_HELPER_DIR): the fix is about that one.
	nsPath := t.TempDir()
	t.Setenv(helper.EnvDir, nsPath)
	if err := os.WriteFile(filepath.Join(nsPath, KubeletBinary), []byte("#!/bin/sh\necho broken >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, _, _ = run(t, "check", "--root", kube, "--layer", "kube", "-o", "json")
	f = find(out)
	if f.Status != report.NotRun || !strings.Contains(f.Reason, "exit status 3") ||
		!strings.Contains(f.Remediation, "the one found gave no answer") || !strings.Contains(f.Remediation, nsPath) {
		t.Errorf("a failing helper: %s, reason %q, fix %q", f.Status, f.Reason, f.Remediation)
	}

	// The same helper owned by another user is not run: NOT_RUN, and the
	// fix is who may change it.
	if os.Getuid() != 0 {
		return
	}
	if err := os.WriteFile(filepath.Join(nsPath, KubeletBinary), []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(nsPath, KubeletBinary), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out, _, _ = run(t, "check", "--root", kube, "--layer", "kube", "-o", "json")
	f = find(out)
	if f.Status != report.NotRun || !strings.Contains(f.Reason, "is owned by uid 65534") ||
		!strings.Contains(f.Remediation, "chown root:root "+filepath.Join(nsPath, KubeletBinary)) {
		t.Errorf("a helper owned by nobody: %s, reason %q, fix %q", f.Status, f.Reason, f.Remediation)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the %s owned by nobody was run", KubeletBinary)
	}
}

// hostileTree is TestHostileTree's root (internal/diagnose): a symlink
// loop under /sys/bus/pci/devices, a 1 GiB attribute, garbage in class
// and a function without vendor.
func hostileTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	dev := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:02.0")
	bad := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:03.0")
	for _, d := range []string{dev, bad, filepath.Join(dir, "sys/bus/pci/devices")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{dev + "/vendor": "0x10de\n", dev + "/device": "0x2330\n", dev + "/class": "0x030200\n", bad + "/class": "not a class \x00\xff\n"}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{dev + "/config", dev + "/numa_node"} {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(1 << 30) // sparse
		f.Close()
	}
	for l, target := range map[string]string{
		"sys/bus/pci/devices/0000:00:02.0":           "../../../devices/pci0000:00/0000:00:02.0",
		"sys/bus/pci/devices/0000:00:03.0":           "../../../devices/pci0000:00/0000:00:03.0",
		"sys/bus/pci/devices/0000:00:04.0":           "0000:00:05.0",
		"sys/bus/pci/devices/0000:00:05.0":           "0000:00:04.0",
		"sys/devices/pci0000:00/0000:00:02.0/driver": "../../../sys/devices/pci0000:00/0000:00:02.0/driver",
	} {
		if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// kubeletTree is a root (traversable by others) whose kubelet directory
// has kubelet.sock, a plugin socket and a DRA registration socket, all
// served (listening), a PodResources socket, and a checkpoint and DRA
// state only root may read.
func kubeletTree(t *testing.T) string {
	t.Helper()
	root := sockDir(t)
	os.Chmod(root, 0o755)
	kd := filepath.Join(root, "var/lib/kubelet")
	dp := filepath.Join(kd, "device-plugins")
	pr := filepath.Join(kd, "pod-resources")
	reg := filepath.Join(kd, "plugins_registry")
	for _, d := range []string{dp, pr, reg, filepath.Join(kd, "plugins/gpu.example.com"), filepath.Join(root, "sys"), filepath.Join(root, "proc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(kd, "dra_manager_state"), []byte(`{"Data":"{}","Checksum":0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{filepath.Join(dp, "kubelet.sock"), filepath.Join(dp, "nvidia-gpu.sock"), filepath.Join(pr, "kubelet.sock"), filepath.Join(reg, "gpu.example.com-reg.sock")} {
		l, err := net.Listen("unix", s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		os.Chmod(s, 0o600) // root's only, as the kubelet's are
	}
	if err := os.WriteFile(filepath.Join(dp, "kubelet_internal_checkpoint"), []byte(`{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

// nvidiaTree is a root (traversable by others) with one H100 bound to
// nvidia, its module loaded, and nothing else: no driver libraries, no
// /dev, and AER counters only root may read.
func nvidiaTree(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "adgpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	sys := "/sys/devices/pci0000:00/0000:17:00.0"
	testutil.WriteTree(t, root, map[string]string{
		sys + "/vendor": "0x10de\n", sys + "/device": "0x2330\n", sys + "/class": "0x030200\n",
		sys + "/aer_dev_correctable":       "RxErr 0\nTOTAL_ERR_COR 0\n",
		"/sys/bus/pci/drivers/nvidia/bind": "",
		"/sys/module/nvidia/initstate":     "live\n",
		"/sys/module/nvidia/version":       "550.54.15\n",
		"/proc/driver/nvidia/version":      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
		"/etc/cdi/broken.yaml":             "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\n",
	}, map[string]string{
		"/sys/bus/pci/devices/0000:17:00.0":  "../../../devices/pci0000:00/0000:17:00.0",
		sys + "/driver":                      "../../../bus/pci/drivers/nvidia",
		"/sys/bus/pci/drivers/nvidia/module": "../../../../module/nvidia",
	}, "")
	os.Chmod(filepath.Join(root, sys, "aer_dev_correctable"), 0o600)
	os.Chmod(filepath.Join(root, "etc/cdi/broken.yaml"), 0o600)
	return root
}

// nouveauTree is nvidiaTree with the GPU bound to nouveau.
func nouveauTree(t *testing.T) string {
	t.Helper()
	root := nvidiaTree(t)
	link := filepath.Join(root, "sys/devices/pci0000:00/0000:17:00.0/driver")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers/nouveau"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../bus/pci/drivers/nouveau", link); err != nil {
		t.Fatal(err)
	}
	return root
}

// asNobody runs the accel-doctor binary bin as uid 65534 from a copy
// others may execute, once with accel-doctor-kubelet beside it and once
// without, and adds its report.
func asNobody(t *testing.T, w *notRunWalk, bin string, args ...string) {
	t.Helper()
	for _, helper := range []bool{true, false} {
		dir, err := os.MkdirTemp("", "adnobody")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		names := []string{"accel-doctor"}
		if helper {
			names = append(names, KubeletBinary)
		}
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(bin), n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(filepath.Join(dir, "accel-doctor"), append(args, "-o", "json")...)
		cmd.Env = []string{"PATH=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err = cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run as nobody: %v", err)
		}
		w.json(fmt.Sprintf("as nobody (helper %v): %s", helper, strings.Join(args, " ")), out.String(), stderr.String(), code)
	}
}

// openCopy copies the tree src into a directory others may read.
func openCopy(t *testing.T, src string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "adcopy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		} else if err == nil {
			os.Chmod(p, 0o644)
		}
		return nil
	})
	return dir
}

func abs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// corpusDir is the corpus of real captures, "" when this checkout has
// none.
func corpusDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "corpus")
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return dir
}

func runcUsable() bool {
	if os.Geteuid() != 0 {
		return false
	}
	_, err := exec.LookPath("runc")
	_, berr := os.Stat("/bin/busybox")
	return err == nil && berr == nil
}

// waitStopped waits until runc says the container has stopped.
func waitStopped(t *testing.T, id string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		out, _ := exec.Command("runc", "state", id).Output()
		if bytes.Contains(out, []byte(`"status": "stopped"`)) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("container %s did not stop", id)
}
