package deviceplugin

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// `accel-doctor plugin serve` (our plugin, as a process) against the
// kubelet's device manager. The node is Kubelet.Root: the plugin runs with
// --root ROOT, its devices are char nodes made with mknod under
// ROOT/dev/accel (the numbers of /dev/null, 1:3: a real node, harmless to
// open), and its CDI spec directory is ROOT/cdi, so that nothing is
// written outside the test's directory (the host's /var/run/cdi is never
// touched).

const (
	oursResource    = "example.com/accel"
	oursCDIResource = "example.com/accel-cdi"
)

// oursConfig: example.com/accel answers with DeviceSpecs (and the IDs in
// ACCEL_VISIBLE_DEVICES), example.com/accel-cdi with CDI names.
const oursConfig = `cdiSpecDir: /cdi
resources:
- name: example.com/accel
  selector: {deviceNodes: ["/dev/accel/accel*"]}
  container: {deviceIDsEnv: ACCEL_VISIBLE_DEVICES}
- name: example.com/accel-cdi
  selector: {deviceNodes: ["/dev/accelc/accel*"]}
  container: {deviceIDsEnv: ACCEL_VISIBLE_DEVICES}
  cdi: {vendor: example.com, class: accel}
`

// mknod makes ROOT/rel a char node 1:3 (what /dev/null is).
func mknod(t testing.TB, root, rel string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod %s: %v", p, err)
	}
}

// nodeOf is the node of a device ID of ours: the path below /dev with /
// as _ (docs/device-plugin.md), here one directory deep.
func nodeOf(id string) string { return "/dev/" + strings.Replace(id, "_", "/", 1) }

func rmnod(t testing.TB, root, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(root, rel)); err != nil {
		t.Fatal(err)
	}
}

// startOurs starts a kubelet and `plugin serve` over n nodes of each
// resource, and waits until the manager counts them all healthy.
func startOurs(t testing.TB, n int) (*harness.Kubelet, *harness.Proc) {
	t.Helper()
	k := harness.Start(t, harness.Options{})
	for i := range n {
		mknod(t, k.Root, "dev/accel/accel"+string(rune('0'+i)))
		mknod(t, k.Root, "dev/accelc/accel"+string(rune('0'+i)))
	}
	cfg := filepath.Join(k.Root, "plugin.yaml")
	if err := os.WriteFile(cfg, []byte(oursConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.AccelDoctor(t) // built before the clock starts
	start := time.Now()
	p := harness.StartAccelDoctor(t, "--root", k.Root, "plugin", "serve", "--config", cfg, "--device-plugin-dir", k.Dir)
	t.Cleanup(func() {
		if code := p.Stop(); code != 0 {
			t.Errorf("plugin serve: exit %d after SIGTERM, want 0", code)
		}
		if err := k.WaitPluginsGone(context.Background()); err != nil {
			t.Error(err)
		}
	})
	for _, r := range []string{oursResource, oursCDIResource} {
		if _, err := k.WaitCount(ctx(t), r, int64(n), int64(n)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("plugin serve started -> both resources registered, %d/%d: %v", n, n, time.Since(start))
	return k, p
}

// Capacity and allocatable as the manager computes them; a node removed
// makes its device Unhealthy (capacity stays, allocatable drops) and a pod
// that needs it is rejected with the manager's words; the node made again
// brings it back.
func TestOursHealthFollowsNodes(t *testing.T) {
	k, _ := startOurs(t, 2)
	devs := k.Manager().GetAllocatableDevices(klog.Background())[oursResource]
	var ids []string
	for id := range devs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"accel_accel0", "accel_accel1"}) {
		t.Fatalf("GetAllocatableDevices[%s]: %v, want accel_accel0, accel_accel1", oursResource, ids)
	}

	rmnod(t, k.Root, "dev/accel/accel1")
	d, err := k.WaitCount(ctx(t), oursResource, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node removed -> manager counts 2/1: %v", d)
	res := k.Admit(ctx(t), harness.Pod("two", oursResource, 2))
	wantRejected(t, res.Admit, res.Reason, res.Message,
		"Allocate failed due to requested number of devices unavailable for example.com/accel. Requested: 2, Available: 1, which is unexpected")

	mknod(t, k.Root, "dev/accel/accel1")
	if d, err = k.WaitCount(ctx(t), oursResource, 2, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("node made again -> manager counts 2/2: %v", d)
	if res := k.Admit(ctx(t), harness.Pod("two-again", oursResource, 2)); !res.Admit {
		t.Fatalf("admit after the node came back: %s: %s", res.Reason, res.Message)
	}
	checkClean(t, k)
}

// Allocate through the manager (admission, then the container's creation):
// what the runtime is told is our DeviceSpec (the node, at the same path,
// rw) and the IDs in the configured variable, for the device the manager
// chose; the checkpoint records it.
func TestOursAllocateDeviceSpecs(t *testing.T) {
	k, _ := startOurs(t, 2)
	pod := harness.Pod("one", oursResource, 1)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	opts, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	cp := readCheckpoint(t, k)
	if len(cp.Data.PodDeviceEntries) != 1 || len(cp.Data.PodDeviceEntries[0].DeviceIDs["-1"]) != 1 {
		// A node device outside any PCI function has no NUMA node: the
		// plugin sends no TopologyInfo and the manager files it under -1.
		t.Fatalf("checkpoint entries: %+v, want one device under NUMA -1", cp.Data.PodDeviceEntries)
	}
	id := cp.Data.PodDeviceEntries[0].DeviceIDs["-1"][0]
	node := nodeOf(id)
	if len(opts.Devices) != 1 || opts.Devices[0].PathOnHost != node || opts.Devices[0].PathInContainer != node || opts.Devices[0].Permissions != "rw" {
		t.Fatalf("devices for the runtime: %+v, want %s at %s rw", opts.Devices, node, node)
	}
	if len(opts.Envs) != 1 || opts.Envs[0].Name != "ACCEL_VISIBLE_DEVICES" || opts.Envs[0].Value != id {
		t.Fatalf("envs for the runtime: %+v, want ACCEL_VISIBLE_DEVICES=%s", opts.Envs, id)
	}
	if len(opts.CDIDevices) != 0 {
		t.Fatalf("CDI devices in DeviceSpecs mode: %+v", opts.CDIDevices)
	}
	checkClean(t, k)
}

// CDI mode: the runtime is told our CDI device names, and the spec that
// resolves them is in the configured directory under the node's root (not
// in the host's /var/run/cdi).
func TestOursAllocateCDI(t *testing.T) {
	k, _ := startOurs(t, 2)
	pod := harness.Pod("one", oursCDIResource, 2)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	opts, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range opts.CDIDevices {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"example.com/accel=accelc_accel0", "example.com/accel=accelc_accel1"}) || len(opts.Devices) != 0 {
		t.Fatalf("for the runtime: CDI %v, devices %+v; want the two CDI names and no DeviceSpec", names, opts.Devices)
	}
	spec := filepath.Join(k.Root, "cdi", "accel-doctor-example.com-accel.json")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Kind    string
		Devices []struct {
			Name           string
			ContainerEdits struct{ DeviceNodes []struct{ Path string } }
		}
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v\n%s", spec, err, b)
	}
	var specNames []string
	for _, d := range s.Devices {
		if len(d.ContainerEdits.DeviceNodes) != 1 || d.ContainerEdits.DeviceNodes[0].Path != nodeOf(d.Name) {
			t.Errorf("CDI device %s: nodes %+v", d.Name, d.ContainerEdits.DeviceNodes)
		}
		specNames = append(specNames, s.Kind+"="+d.Name)
	}
	slices.Sort(specNames)
	if !slices.Equal(specNames, names) {
		t.Fatalf("%s declares %v, Allocate named %v", spec, specNames, names)
	}
	if _, err := os.Lstat("/var/run/cdi/accel-doctor-example.com-accel.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the host's /var/run/cdi has our spec: %v", err)
	}
	checkClean(t, k)
}

// A kubelet restart: the new manager wipes our sockets; the plugin serves
// and registers each resource again, and the allocatable comes back. The
// pod admitted before keeps its device; check finds no stale socket (the
// plugin's sockets are newer than the new kubelet.sock, or registered).
func TestOursKubeletRestart(t *testing.T) {
	k, p := startOurs(t, 2)
	pod := harness.Pod("one", oursResource, 1)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	before, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	regs := p.Count("REGISTERED " + oursResource + " ")
	start := time.Now()
	k.Restart()
	for _, r := range []string{oursResource, oursCDIResource} {
		if _, err := k.WaitCount(ctx(t), r, 2, 2); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("manager restarted -> both resources re-registered, 2/2: %v", time.Since(start))
	if _, err := p.WaitLine(ctx(t), "REGISTERED "+oursResource+" ", regs+1); err != nil {
		t.Fatal(err)
	}
	after, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Devices) != 1 || after.Devices[0] != before.Devices[0] {
		t.Fatalf("after the restart the container gets %+v, before %+v", after.Devices, before.Devices)
	}
	if res := k.Admit(ctx(t), harness.Pod("next", oursResource, 1)); !res.Admit {
		t.Fatalf("a new pod after re-registration: %s: %s", res.Reason, res.Message)
	}
	checkClean(t, k)
}

// `plugin test --device-plugin-socket` (as a process) against our plugin while the
// manager is connected to it too: a second client of ListAndWatch and
// Allocate finds no defect, and the manager's view is unchanged.
func TestOursPluginTestBesideTheManager(t *testing.T) {
	k, _ := startOurs(t, 2)
	sock := filepath.Join(k.Dir, "accel-doctor-example.com_accel.sock")
	cmd := exec.Command(harness.AccelDoctor(t), "--root", k.Root, "plugin", "test", "--device-plugin-socket", sock, "--timeout", "5s", "--watch", "300ms", "-o", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plugin test --device-plugin-socket %s: %v\n%s", sock, err, out)
	}
	var rep struct{ Findings []harness.Finding }
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]string{}
	for _, f := range rep.Findings {
		got[f.Code] = f.Status
		if f.Status == "FAIL" || f.Status == "WARN" {
			t.Errorf("plugin test finds %s %s: %s", f.Status, f.Code, f.Summary)
		}
	}
	for _, c := range []string{"PLUGIN_OPTIONS_OK", "PLUGIN_DEVICES_LISTED", "PLUGIN_ALLOCATE_OK"} {
		if got[c] != "PASS" {
			t.Errorf("%s: %q, want PASS\n%s", c, got[c], out)
		}
	}
	if cp, al := k.Capacity().Count(oursResource); cp != 2 || al != 2 {
		t.Fatalf("after plugin test the manager counts %d/%d, want 2/2", cp, al)
	}
}

// checkClean: `accel-doctor check --layer kube` on the node, with our
// plugin registered and serving, finds nothing wrong with the kubelet's
// directory (no FAIL or WARN in layer 6).
func checkClean(t *testing.T, k *harness.Kubelet) {
	t.Helper()
	fs, raw := k.CheckKube(t)
	for _, f := range fs {
		if f.Status == "FAIL" || f.Status == "WARN" {
			t.Errorf("check --layer kube: %s %s (%s): %s\n%s", f.Status, f.Code, f.Subject, f.Summary, raw)
		}
	}
}

// A GPU that falls off the bus while a container holds it. The node is
// the repository's 8 x H100 fixture host (its sysfs and device manifest
// copied under Kubelet.Root); our plugin serves its GPUs as nvidia.com/gpu
// (PCI addresses as IDs). With one GPU allocated, its sysfs entry goes:
// the plugin marks it Unhealthy and the manager's allocatable drops; a pod
// that asks for every GPU is rejected; and check names the cause: the
// checkpoint allocates a device the node no longer has.
func TestOursGPUGoneWhileAllocated(t *testing.T) {
	k := harness.Start(t, harness.Options{})
	if out, err := exec.Command("cp", "-a", "../../testdata/hosts/nvidia-h100x8/.", k.Root).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture host: %v: %s", err, out)
	}
	cfg := filepath.Join(k.Root, "plugin.yaml")
	if err := os.WriteFile(cfg, []byte(`resources:
- name: nvidia.com/gpu
  selector: {pci: {vendor: "10de", class: "0302", drivers: [nvidia]}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.StartAccelDoctor(t, "--root", k.Root, "plugin", "serve", "--config", cfg, "--device-plugin-dir", k.Dir)
	t.Cleanup(func() {
		p.Stop()
		if err := k.WaitPluginsGone(context.Background()); err != nil {
			t.Error(err)
		}
	})
	const gpu = "nvidia.com/gpu"
	if _, err := k.WaitCount(ctx(t), gpu, 8, 8); err != nil {
		t.Fatal(err)
	}
	pod := harness.Pod("one", gpu, 1)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	opts, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	cp := readCheckpoint(t, k)
	if len(cp.Data.PodDeviceEntries) != 1 {
		t.Fatalf("checkpoint entries: %+v", cp.Data.PodDeviceEntries)
	}
	var id string
	for _, ids := range cp.Data.PodDeviceEntries[0].DeviceIDs {
		id = ids[0]
	}
	t.Logf("allocated %s; the runtime gets %d device nodes", id, len(opts.Devices))

	if err := os.Remove(filepath.Join(k.Root, "sys/bus/pci/devices", id)); err != nil {
		t.Fatal(err)
	}
	d, err := k.WaitCount(ctx(t), gpu, 8, 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sysfs entry removed -> manager counts 8/7: %v", d)
	// Available is the healthy devices less those in use (manager.go
	// devicesToAllocate): the gone GPU is in use but no longer healthy,
	// so 7 are left.
	res := k.Admit(ctx(t), harness.Pod("eight", gpu, 8))
	wantRejected(t, res.Admit, res.Reason, res.Message,
		"Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 8, Available: 7, which is unexpected")

	fs, raw := k.CheckKube(t)
	if !hasFinding(fs, "KUBELET_CHECKPOINT_ABSENT_DEVICE", "FAIL", id) {
		t.Errorf("check --layer kube: want KUBELET_CHECKPOINT_ABSENT_DEVICE FAIL naming %s\n%s", id, raw)
	}
}

// hasFinding: a finding with this code and status whose subject or
// summary mentions what (any when "").
func hasFinding(fs []harness.Finding, code, status, what string) bool {
	for _, f := range fs {
		if f.Code == code && f.Status == status && (what == "" || strings.Contains(f.Subject+" "+f.Summary, what)) {
			return true
		}
	}
	return false
}

// After a kubelet restart our plugin's socket can be older than the new
// kubelet.sock and still be the one the kubelet uses: the manager removes
// every socket (CleanupPluginDirectory) before it binds kubelet.sock
// (plugin/v1beta1/server.go Start), and the plugin, which serves again as
// soon as its socket is removed, can bind in between. It then registers
// when kubelet.sock appears. Measured here: about 1 restart in 40 under
// load, older by about 1 ms. check must not call that socket stale: the
// manager counts the plugin's devices, so it registered.
//
// The test restarts until it sees that order (at most 300 times; it
// skips if the window is never hit), then runs check.
func TestOursSocketOlderThanKubeletSockIsNotStale(t *testing.T) {
	k, _ := startOurs(t, 2)
	sock := filepath.Join(k.Dir, "accel-doctor-example.com_accel.sock")
	for i := 1; i <= 300; i++ {
		k.Restart()
		for _, r := range []string{oursResource, oursCDIResource} {
			if _, err := k.WaitCount(ctx(t), r, 2, 2); err != nil {
				t.Fatal(err)
			}
		}
		ks, err1 := os.Stat(filepath.Join(k.Dir, "kubelet.sock"))
		ps, err2 := os.Stat(sock)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if !ps.ModTime().Before(ks.ModTime()) {
			continue
		}
		t.Logf("restart %d: our socket is older than kubelet.sock by %v, and the manager counts 2/2", i, ks.ModTime().Sub(ps.ModTime()))
		fs, raw := k.CheckKube(t)
		for _, f := range fs {
			if f.Status == "FAIL" || f.Status == "WARN" {
				t.Errorf("check --layer kube: %s %s (%s): %s\n%s", f.Status, f.Code, f.Subject, f.Summary, raw)
			}
		}
		return
	}
	t.Skip("in 300 restarts our socket was never older than kubelet.sock: the window was not hit")
}
