package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Real device nodes made with mknod under a temp "dev": removing one
// makes its device Unhealthy on ListAndWatch at once (fsnotify on the
// directory, no rescan: the rescan interval is an hour), making it again
// makes it Healthy, and a new node matching the glob is a new device.
func TestHealthFollowsDeviceNodes(t *testing.T) {
	needRoot(t)
	host := shortDir(t)
	for _, n := range []string{"accel0", "accel1", "accel2"} {
		mknodChar(t, filepath.Join(host, "dev/accel", n))
	}
	cfg := &Config{RescanInterval: Duration(3600e9), Resources: []ResourceConfig{{Name: "example.com/accel",
		Selector: Selector{DeviceNodes: []string{"/dev/accel/accel*"}}, Container: ContainerEdits{DeviceIDsEnv: "ACCEL_IDS"}}}}
	kdir := shortDir(t)
	p, evs := runPlugin(t, kdir, cfg, fixtureRoot(t, host))
	evs.wait(t, EventServing, 1)
	c := client(t, p.Socket("example.com/accel"))
	s, err := c.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	devs := recvUntil(t, s, "3 healthy nodes", func(d []*pluginapi.Device) bool {
		return len(d) == 3 && healthOf(d, "accel_accel1") == pluginapi.Healthy
	})
	if devs[0].Topology != nil {
		t.Errorf("a node without a sysfs device got a NUMA node: %v", devs[0].Topology)
	}
	if err := os.Remove(filepath.Join(host, "dev/accel/accel1")); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, s, "accel1 Unhealthy", func(d []*pluginapi.Device) bool { return healthOf(d, "accel_accel1") == pluginapi.Unhealthy })
	mknodChar(t, filepath.Join(host, "dev/accel/accel1"))
	recvUntil(t, s, "accel1 Healthy again", func(d []*pluginapi.Device) bool { return healthOf(d, "accel_accel1") == pluginapi.Healthy })
	mknodChar(t, filepath.Join(host, "dev/accel/accel3"))
	recvUntil(t, s, "a fourth device", func(d []*pluginapi.Device) bool {
		return healthOf(d, "accel_accel3") == pluginapi.Healthy && len(d) == 4
	})

	// A node that disappears and its directory with it: the watch on
	// /dev sees the directory come back, and then the node.
	if err := os.RemoveAll(filepath.Join(host, "dev/accel")); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, s, "all Unhealthy", func(d []*pluginapi.Device) bool {
		for _, x := range d {
			if x.Health != pluginapi.Unhealthy {
				return false
			}
		}
		return len(d) == 4
	})
	mknodChar(t, filepath.Join(host, "dev/accel/accel0"))
	recvUntil(t, s, "accel0 back", func(d []*pluginapi.Device) bool { return healthOf(d, "accel_accel0") == pluginapi.Healthy })
}

// monitorOver makes a monitor over a copy of a fixture host without
// running its loop: the test drives it with replayed uevents.
func monitorOver(t *testing.T, fixture string, cfg *Config) (string, *Monitor, func() map[string]*Device) {
	t.Helper()
	host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts", fixture))
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[string]*Device{}
	m, err := NewMonitor(fixtureRoot(t, host), cfg, testLogger(t), func(_ int, devs []*Device) {
		mu.Lock()
		defer mu.Unlock()
		last = map[string]*Device{}
		for _, d := range devs {
			last[d.ID] = d
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.watcher.Close() })
	return host, m, func() map[string]*Device {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// The uevents the kernel sends when a GPU is unbound from its driver,
// bound again, and removed (lib/kobject_uevent.c; the device's DEVPATH
// in the 8 x H100 fixture), as recorded from a live host and replayed.
const (
	gpuPath      = "/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"
	ueventUnbind = "unbind@" + gpuPath + "\x00ACTION=unbind\x00DEVPATH=" + gpuPath + "\x00SUBSYSTEM=pci\x00PCI_CLASS=30200\x00PCI_ID=10DE:2330\x00PCI_SLOT_NAME=0000:18:00.0\x00SEQNUM=5102\x00"
	ueventBind   = "bind@" + gpuPath + "\x00ACTION=bind\x00DEVPATH=" + gpuPath + "\x00SUBSYSTEM=pci\x00DRIVER=nvidia\x00PCI_SLOT_NAME=0000:18:00.0\x00SEQNUM=5103\x00"
	ueventRemove = "remove@" + gpuPath + "\x00ACTION=remove\x00DEVPATH=" + gpuPath + "\x00SUBSYSTEM=pci\x00PCI_SLOT_NAME=0000:18:00.0\x00SEQNUM=5104\x00"
	ueventAdd    = "add@" + gpuPath + "\x00ACTION=add\x00DEVPATH=" + gpuPath + "\x00SUBSYSTEM=pci\x00PCI_SLOT_NAME=0000:18:00.0\x00SEQNUM=5105\x00"
	// Unrelated: a network interface appearing.
	ueventNet = "add@/devices/virtual/net/veth1\x00ACTION=add\x00DEVPATH=/devices/virtual/net/veth1\x00SUBSYSTEM=net\x00INTERFACE=veth1\x00IFINDEX=9\x00SEQNUM=5106\x00"
)

// A driver-bound sysfs tree (8 x H100 bound to nvidia): unbinding a GPU
// (its driver link removed, the kernel's unbind uevent replayed) makes
// it Unhealthy, binding it again Healthy, removing its sysfs entry
// Unhealthy again; an unrelated uevent causes no re-evaluation.
func TestHealthFollowsUeventsOnSysfsFixture(t *testing.T) {
	cfg := &Config{Resources: []ResourceConfig{{Name: "example.com/gpu", Selector: Selector{PCI: &PCISelector{Vendor: "10de", Class: "0302", Drivers: []string{"nvidia"}}}}}}
	host, m, last := monitorOver(t, "nvidia-h100x8", cfg)
	devs := last()
	if len(devs) != 8 {
		t.Fatalf("%d GPUs discovered, want 8", len(devs))
	}
	g := devs["0000:18:00.0"]
	if g.Health != pluginapi.Healthy || g.NUMA != 0 || g.HostBridge != "pci0000:15" || len(g.Bridges) != 3 {
		t.Fatalf("0000:18:00.0: %+v", g)
	}
	if len(g.Nodes) != 1 || g.Nodes[0].Path != "/dev/nvidia0" {
		t.Errorf("0000:18:00.0's own nodes: %+v, want /dev/nvidia0", g.Nodes)
	}
	shared := []string{}
	for _, n := range g.Shared {
		shared = append(shared, n.Path)
	}
	if strings.Join(shared, ",") != "/dev/nvidia-uvm,/dev/nvidiactl" {
		t.Errorf("shared nodes %v, want nvidia-uvm and nvidiactl", shared)
	}
	if devs["0000:9a:00.0"].NUMA != 1 {
		t.Errorf("0000:9a:00.0 NUMA %d, want 1", devs["0000:9a:00.0"].NUMA)
	}

	dev := filepath.Join(host, "sys", gpuPath)
	drv, err := os.Readlink(filepath.Join(dev, "driver"))
	if err != nil {
		t.Fatal(err)
	}
	replay := func(msg string, wantKick bool) {
		t.Helper()
		if err := m.HandleUevent([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := m.drain(); got != wantKick {
			t.Fatalf("uevent %q: re-evaluated %t, want %t", strings.SplitN(msg, "\x00", 2)[0], got, wantKick)
		}
	}
	replay(ueventNet, false)

	os.Remove(filepath.Join(dev, "driver"))
	replay(ueventUnbind, true)
	if d := last()["0000:18:00.0"]; d.Health != pluginapi.Unhealthy || !strings.Contains(d.Reason, "no driver") {
		t.Fatalf("after unbind: %s %q", d.Health, d.Reason)
	}
	if d := last()["0000:19:00.0"]; d != nil {
		t.Fatalf("a non-GPU function is listed: %+v", d)
	}
	if err := os.Symlink(drv, filepath.Join(dev, "driver")); err != nil {
		t.Fatal(err)
	}
	replay(ueventBind, true)
	if d := last()["0000:18:00.0"]; d.Health != pluginapi.Healthy {
		t.Fatalf("after bind: %s %q", d.Health, d.Reason)
	}

	// Bound to another driver than the config allows.
	os.Remove(filepath.Join(dev, "driver"))
	if err := os.Symlink("../../../../../../bus/pci/drivers/vfio-pci", filepath.Join(dev, "driver")); err != nil {
		t.Fatal(err)
	}
	replay(ueventBind, true)
	if d := last()["0000:18:00.0"]; d.Health != pluginapi.Unhealthy || !strings.Contains(d.Reason, "bound to vfio-pci") {
		t.Fatalf("bound to vfio-pci: %s %q", d.Health, d.Reason)
	}
	os.Remove(filepath.Join(dev, "driver"))
	os.Symlink(drv, filepath.Join(dev, "driver"))
	replay(ueventBind, true)

	bus := filepath.Join(host, "sys/bus/pci/devices/0000:18:00.0")
	target, _ := os.Readlink(bus)
	os.Remove(bus)
	replay(ueventRemove, true)
	if d := last()["0000:18:00.0"]; d == nil || d.Health != pluginapi.Unhealthy || !strings.Contains(d.Reason, "sysfs entry") {
		t.Fatalf("after remove: %+v", d)
	}
	os.Symlink(target, bus)
	replay(ueventAdd, true)
	if d := last()["0000:18:00.0"]; d.Health != pluginapi.Healthy {
		t.Fatalf("after add: %s %q", d.Health, d.Reason)
	}
}

// A required node missing (the fixture's manifest lacks /dev/nvidia3
// once removed) makes that GPU alone Unhealthy; nvidiactl missing makes
// every GPU Unhealthy.
func TestHealthNeedsTheNodes(t *testing.T) {
	host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/nvidia-h100x8"))
	mp := filepath.Join(host, hostfs.ManifestPath)
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := hostfs.ParseManifest(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Resources: []ResourceConfig{{Name: "example.com/gpu", Selector: Selector{PCI: &PCISelector{Vendor: "10de", Class: "0302"}}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	eval := func() map[string]*Device {
		devs, err := discover(fixtureRoot(t, host, hostfs.WithManifest(mf)), &cfg.Resources[0])
		if err != nil {
			t.Fatal(err)
		}
		evaluate(fixtureRoot(t, host, hostfs.WithManifest(mf)), &cfg.Resources[0], devs)
		out := map[string]*Device{}
		for _, d := range devs {
			out[d.ID] = d
		}
		return out
	}
	mf.Remove("/dev/nvidia3")
	got := eval()
	unhealthy := 0
	for id, d := range got {
		if d.Health != pluginapi.Healthy {
			unhealthy++
			if !strings.Contains(d.Reason, "/dev/nvidia3") {
				t.Errorf("%s unhealthy for %q", id, d.Reason)
			}
		}
	}
	if unhealthy != 1 {
		t.Errorf("%d GPUs unhealthy without /dev/nvidia3, want 1", unhealthy)
	}
	mf.Remove("/dev/nvidiactl")
	for id, d := range eval() {
		if d.Health == pluginapi.Healthy {
			t.Errorf("%s Healthy without /dev/nvidiactl", id)
		}
	}
}
