package deviceplugin

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

const stubResource = "example.com/stub"

// wait bounds every wait on the manager: long enough for a loaded CI
// machine, never a latency target (those are logged and benchmarked).
const wait = 30 * time.Second

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return c
}

// startStub starts a kubelet and a stub plugin with n devices, and waits
// until the manager counts them all healthy.
func startStub(t testing.TB, n int) (*harness.Kubelet, *stubPlugin) {
	t.Helper()
	k := harness.Start(t, harness.Options{})
	p := newStub(t, k.Dir, stubResource, n)
	start := time.Now()
	p.run()
	t.Cleanup(func() {
		p.stop()
		if err := k.WaitPluginsGone(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if _, err := k.WaitCount(ctx(t), stubResource, int64(n), int64(n)); err != nil {
		t.Fatal(err)
	}
	t.Logf("plugin started -> registered, manager counts %d/%d: %v", n, n, time.Since(start))
	return k, p
}

// The manager serves kubelet.sock in KubeletDir, which is the test's own
// directory: the host's view of that path (the parent process's root) has
// no socket of ours.
func TestKubeletDirIsPrivate(t *testing.T) {
	k := harness.Start(t, harness.Options{})
	for _, p := range []string{filepath.Join(harness.KubeletDir, "kubelet.sock"), filepath.Join(k.Dir, "kubelet.sock")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&fs.ModeSocket == 0 {
			t.Fatalf("%s: want the manager's socket, got %v, %v", p, fi, err)
		}
	}
	host := filepath.Join("/proc", strconv.Itoa(os.Getppid()), "root", harness.KubeletDir, "kubelet.sock")
	if _, err := os.Lstat(host); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s (the path in the parent's mount namespace): want absent, got %v", host, err)
	}
}

// A plugin that registers is counted by the manager: capacity 2,
// allocatable 2; the plugin's socket and the manager's are in the
// directory.
func TestStubRegisters(t *testing.T) {
	k, p := startStub(t, 2)
	c := k.Capacity()
	if cp, al := c.Count(stubResource); cp != 2 || al != 2 || len(c.Removed) != 0 {
		t.Fatalf("want %s 2/2, nothing removed; got %v", stubResource, c)
	}
	if _, err := os.Stat(filepath.Join(k.Dir, p.endpoint)); err != nil {
		t.Fatal(err)
	}
	if n := len(k.Manager().GetAllocatableDevices(klog.Background())[stubResource]); n != 2 {
		t.Fatalf("GetAllocatableDevices: %d devices of %s, want 2", n, stubResource)
	}
}

// A device reported Unhealthy stays in the capacity and leaves the
// allocatable; a pod that asks for more than the healthy devices is
// rejected at admission with the manager's own words; the device coming
// back restores the allocatable.
func TestStubUnhealthyDropsAllocatable(t *testing.T) {
	k, p := startStub(t, 2)
	p.setHealth("stub-1", pluginapi.Unhealthy)
	d, err := k.WaitCount(ctx(t), stubResource, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Unhealthy sent -> manager counts 2/1: %v", d)

	res := k.Admit(ctx(t), harness.Pod("two", stubResource, 2))
	wantRejected(t, res.Admit, res.Reason, res.Message,
		"Allocate failed due to requested number of devices unavailable for example.com/stub. Requested: 2, Available: 1, which is unexpected")

	p.setHealth("stub-1", pluginapi.Healthy)
	if d, err = k.WaitCount(ctx(t), stubResource, 2, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("Healthy sent -> manager counts 2/2: %v", d)
}

// Allocate through the real manager: the pod is admitted, the plugin is
// asked for one device, and what the kubelet hands the runtime is the
// plugin's DeviceSpec and environment; the checkpoint records the
// allocation. A second pod that asks for more than is left is rejected.
func TestStubAllocate(t *testing.T) {
	k, p := startStub(t, 2)
	pod := harness.Pod("one", stubResource, 1)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	opts, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	allocs := p.allocs
	p.mu.Unlock()
	if len(allocs) != 1 || len(allocs[0]) != 1 {
		t.Fatalf("plugin's Allocate requests: %v, want one of one device", allocs)
	}
	id := allocs[0][0]
	if len(opts.Devices) != 1 || opts.Devices[0].PathOnHost != "/dev/null" ||
		opts.Devices[0].PathInContainer != "/dev/"+id || opts.Devices[0].Permissions != "rw" {
		t.Fatalf("devices for the runtime: %+v, want /dev/null at /dev/%s rw", opts.Devices, id)
	}
	if len(opts.Envs) != 1 || opts.Envs[0].Name != "STUB_DEVICES" || opts.Envs[0].Value != id {
		t.Fatalf("envs for the runtime: %+v", opts.Envs)
	}

	cp := readCheckpoint(t, k)
	if len(cp.Data.PodDeviceEntries) != 1 {
		t.Fatalf("checkpoint entries: %+v", cp.Data.PodDeviceEntries)
	}
	e := cp.Data.PodDeviceEntries[0]
	if e.PodUID != string(pod.UID) || e.ContainerName != "ctr" || e.ResourceName != stubResource ||
		strings.Join(e.DeviceIDs["0"], ",") != id {
		t.Fatalf("checkpoint entry %+v: want %s/ctr %s [%s] on NUMA 0", e, pod.UID, stubResource, id)
	}
	if n := len(cp.Data.RegisteredDevices[stubResource]); n != 2 {
		t.Fatalf("checkpoint registered devices: %v", cp.Data.RegisteredDevices)
	}

	res := k.Admit(ctx(t), harness.Pod("two", stubResource, 2))
	wantRejected(t, res.Admit, res.Reason, res.Message,
		"Allocate failed due to requested number of devices unavailable for example.com/stub. Requested: 2, Available: 1, which is unexpected")
}

// A kubelet restart: the manager stops, a new one wipes the directory's
// sockets (the plugin's too) and reads the checkpoint; the plugin sees
// kubelet.sock made anew, serves again and registers again, and the
// allocatable comes back. The pod admitted before keeps its device.
func TestStubKubeletRestart(t *testing.T) {
	k, p := startStub(t, 2)
	pod := harness.Pod("one", stubResource, 1)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	before, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	k.Restart()
	if _, err := k.WaitCount(ctx(t), stubResource, 2, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("manager restarted -> plugin re-registered, counted 2/2: %v", time.Since(start))
	// The manager counts the devices (ListAndWatch) as soon as it has the
	// Register request, which can be before the stub has the reply.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		regs := p.registrations
		p.mu.Unlock()
		if regs == 2 {
			break
		}
		if regs > 2 || time.Now().After(deadline) {
			t.Fatalf("registrations: %d, want 2", regs)
		}
		time.Sleep(time.Millisecond)
	}

	after, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Devices) != 1 || after.Devices[0] != before.Devices[0] {
		t.Fatalf("after the restart the container gets %+v, before %+v", after.Devices, before.Devices)
	}
	if res := k.Admit(ctx(t), harness.Pod("next", stubResource, 1)); !res.Admit {
		t.Fatalf("a new pod after re-registration: %s: %s", res.Reason, res.Message)
	}
}

// The defect users meet after a kubelet restart: a plugin that never
// registers again. Its socket is gone (the new manager wiped it), the
// manager counts the resource 0/0 (kept from the checkpoint, allocatable 0
// with capacity 0: "Insufficient example.com/stub" at the scheduler), and a
// pod bound to the node anyway is rejected with UnexpectedAdmissionError.
// The pod that held a device before keeps it: the checkpoint has its
// allocation.
func TestStubNoReregister(t *testing.T) {
	k, p := startStub(t, 2)
	p.noReregister.Store(true)
	pod := harness.Pod("one", stubResource, 1)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	if _, err := k.CreateContainer(ctx(t), pod, "ctr"); err != nil {
		t.Fatal(err)
	}

	k.Restart()
	if _, err := os.Lstat(filepath.Join(k.Dir, p.endpoint)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the plugin's socket after the restart: want wiped, got %v", err)
	}
	c := k.Capacity()
	if cp, al := c.Count(stubResource); !c.Has(stubResource) || cp != 0 || al != 0 {
		t.Fatalf("want %s 0/0 until the plugin registers; got %v", stubResource, c)
	}
	res := k.Admit(ctx(t), harness.Pod("next", stubResource, 1))
	wantRejected(t, res.Admit, res.Reason, res.Message,
		"Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/stub, which is unexpected")
	if opts, err := k.CreateContainer(ctx(t), pod, "ctr"); err != nil || len(opts.Devices) != 1 {
		t.Fatalf("the pod admitted before the restart: %+v, %v", opts, err)
	}
}

func wantRejected(t *testing.T, admit bool, reason, message, want string) {
	t.Helper()
	if admit || reason != "UnexpectedAdmissionError" || message != want {
		t.Fatalf("admission: admit %v, reason %q, message %q; want rejected, UnexpectedAdmissionError, %q", admit, reason, message, want)
	}
}

// checkpoint is the on-disk form of kubelet_internal_checkpoint as the
// manager writes it (pkg/kubelet/cm/devicemanager/checkpoint), read here
// without the kubelet's types: what a reader on a node sees.
type checkpoint struct {
	Data struct {
		PodDeviceEntries []struct {
			PodUID        string
			ContainerName string
			ResourceName  string
			DeviceIDs     map[string][]string
			AllocResp     []byte
		}
		RegisteredDevices map[string][]string
	}
	Checksum uint64
}

func readCheckpoint(t *testing.T, k *harness.Kubelet) checkpoint {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k.Dir, harness.CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatalf("%s: %v\n%s", harness.CheckpointFile, err, b)
	}
	return cp
}

// The binary the plugin scenarios will run (`accel-doctor plugin serve`,
// `plugin mock`) is built from the product module above this one and runs
// in the test's mount namespace.
func TestAccelDoctorBinary(t *testing.T) {
	harness.Start(t, harness.Options{}) // for its skip, and to run where the plugins will
	bin := harness.AccelDoctor(t)
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "accel-doctor version ") {
		t.Fatalf("%s --version: %v: %q", bin, err, out)
	}
}

// A fact of the 1.37 manager that every plugin must respect: a second
// Register from a plugin that is connected is refused ("device plugin
// already connected", manager.go PluginConnected), and that refusal makes
// the registration server drop its record of the working connection
// (plugin/v1beta1/handler.go connectClient -> deregisterClient, by socket
// path). When the plugin then dies, runClient finds no record and never
// calls PluginDisconnected: the devices stay healthy in the manager, and
// the dead endpoint blocks every later registration on that socket until
// the kubelet restarts. A plugin must therefore never repeat a Register
// the kubelet may have accepted.
func TestManagerForgetsAPluginThatRegisteredTwice(t *testing.T) {
	k, p := startStub(t, 2)
	err := p.registerOnce(ctx(t))
	if err == nil || !strings.Contains(err.Error(), "device plugin already connected: "+filepath.Join(harness.KubeletDir, p.endpoint)) {
		t.Fatalf("second Register: %v, want \"device plugin already connected\"", err)
	}
	p.stop()
	// A new instance of the plugin on the same socket is refused: the
	// manager still holds the dead endpoint (its devices are still
	// counted: 2/2 with no plugin running).
	q := newStub(t, k.Dir, stubResource, 2)
	if err := q.serve(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		q.mu.Lock()
		q.srv.Stop()
		q.mu.Unlock()
	}()
	if err := q.registerOnce(ctx(t)); err == nil || !strings.Contains(err.Error(), "device plugin already connected") {
		t.Fatalf("a new instance's Register: %v, want \"device plugin already connected\"", err)
	}
	if cp, al := k.Capacity().Count(stubResource); cp != 2 || al != 2 {
		t.Fatalf("with no plugin running the manager counts %d/%d; this test expects the stale 2/2", cp, al)
	}
	// startStub's cleanup waits for the manager to count nothing
	// allocatable, which it never will: a restart clears it.
	k.Restart()
}
