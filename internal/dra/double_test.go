package dra

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
)

func registered(m map[string][]string) *kubelet.Checkpoint {
	return &kubelet.Checkpoint{Format: kubelet.FormatV2, ChecksumOK: true, Registered: m}
}

// Planted: the device plugin registered GPU 0 by UUID, and the DRA
// driver's claim spec injects /dev/nvidia0, which the NVIDIA driver says
// is that GPU.
func TestDoubleAdvertisedNVIDIA(t *testing.T) {
	dn := newDRANode(t)
	n := read(t, dn.dir, Options{DevicePluginCheckpoint: registered(map[string][]string{"nvidia.com/gpu": {gpuUUID0, gpuUUID1}})})
	if len(n.Double) != 1 {
		t.Fatalf("double %+v", n.Double)
	}
	d := n.Double[0]
	if d.Resource != "nvidia.com/gpu" || d.DeviceID != gpuUUID0 || d.Driver != driverName || d.CDIDevice != cdiID0 || d.Key != "node:/dev/nvidia0" {
		t.Errorf("%+v", d)
	}
	if !strings.Contains(d.DriverBy, "ml/train-gpu") || !strings.Contains(d.Evidence, "Device Minor 0") {
		t.Errorf("evidence %q / %q", d.DriverBy, d.Evidence)
	}
}

// Healthy: the device plugin has GPU 1, the DRA driver GPU 0.
func TestDoubleNotAdvertised(t *testing.T) {
	dn := newDRANode(t)
	n := read(t, dn.dir, Options{DevicePluginCheckpoint: registered(map[string][]string{"nvidia.com/gpu": {gpuUUID1}, "example.com/fpga": {}})})
	if len(n.Double) != 0 || n.DoubleNotRun != "" {
		t.Errorf("double %+v (%s)", n.Double, n.DoubleNotRun)
	}
}

// The checkpoint the kubelet v1.37.2 wrote (internal/kubelet's testdata)
// read from the node itself: it registers GPU 0.
func TestDoubleFromRealCheckpoint(t *testing.T) {
	dn := newDRANode(t)
	b, err := os.ReadFile(filepath.Join("..", "kubelet", "testdata", "checkpoints", "kubelet-v1.37.2.json"))
	if err != nil {
		t.Skipf("internal/kubelet's fixture: %v", err)
	}
	write(t, filepath.Join(dn.kdir, "device-plugins", kubelet.CheckpointName), string(b))
	n := read(t, dn.dir, Options{})
	if len(n.Double) != 1 || n.Double[0].DeviceID != gpuUUID0 {
		t.Errorf("double %+v (%s)", n.Double, n.DoubleNotRun)
	}
}

// An Intel-style ID (card1-0) and a DRA spec found by its vendor name
// that injects the render node of the same PCI function.
func TestDoubleAdvertisedDRM(t *testing.T) {
	dn := newDRANode(t)
	for _, name := range []string{"card1", "renderD129"} {
		p := filepath.Join(dn.dir, "sys/class/drm", name)
		os.MkdirAll(p, 0o755)
		if err := os.Symlink("../../../devices/pci0000:80/0000:80:01.0/"+bdf1, filepath.Join(p, "device")); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dn.dir, "etc/cdi/gpu.example.com.yaml"), `cdiVersion: 0.6.0
kind: gpu.example.com/gpu
devices:
- name: gpu-1
  containerEdits:
    deviceNodes:
    - path: /dev/dri/renderD129
`)
	n := read(t, dn.dir, Options{DevicePluginCheckpoint: registered(map[string][]string{"gpu.intel.com/xe": {"card1-0"}})})
	if len(n.Double) != 1 || n.Double[0].Key != "pci:"+bdf1 || n.Double[0].CDIDevice != "gpu.example.com/gpu=gpu-1" ||
		!strings.Contains(n.Double[0].DriverBy, "vendor") {
		t.Errorf("double %+v", n.Double)
	}
}

// The checkpoint cannot be read: not checked, never "not doubled".
func TestDoubleNotChecked(t *testing.T) {
	dn := newDRANode(t)
	write(t, filepath.Join(dn.kdir, "device-plugins", kubelet.CheckpointName), "{garbage")
	if n := read(t, dn.dir, Options{}); n.DoubleNotRun == "" || len(n.Double) != 0 {
		t.Errorf("garbage checkpoint: %+v (%q)", n.Double, n.DoubleNotRun)
	}
	// A snapshot never holds the file.
	live := hostfs.MustNew(dn.dir)
	rec := live.Record()
	if _, err := Read(context.Background(), live, Options{RPC: grpccall.Caller{}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := live.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	n, err := Read(context.Background(), snap, Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if n.DoubleNotRun == "" {
		t.Errorf("a snapshot without the checkpoint was judged: %+v", n.Double)
	}
}

// Opaque IDs (the device-plugin mock's) match by equality with a DRA
// device's env list; bare indexes never do.
func TestDoubleAdvertisedOpaque(t *testing.T) {
	dn := newDRANode(t)
	write(t, filepath.Join(dn.dir, "etc/cdi/k8s.gpu.example.com-claim_x.json"),
		`{"cdiVersion":"0.6.0","kind":"k8s.gpu.example.com/claim","devices":[{"name":"x-mock-1","containerEdits":{"env":["MOCK_VISIBLE_DEVICES=mock-1"]}}]}`)
	n := read(t, dn.dir, Options{DevicePluginCheckpoint: registered(map[string][]string{"fake.example.com/gpu": {"mock-0", "mock-1", "0"}})})
	if len(n.Double) != 1 || n.Double[0].DeviceID != "mock-1" || n.Double[0].Key != "id:mock-1" {
		t.Errorf("double %+v", n.Double)
	}
}

// A CDI directory that cannot be read: not checked.
func TestDoubleCDIUnreadable(t *testing.T) {
	dn := newDRANode(t)
	os.RemoveAll(filepath.Join(dn.dir, "etc/cdi"))
	write(t, filepath.Join(dn.dir, "etc/cdi"), "a file where the directory should be")
	n := read(t, dn.dir, Options{DevicePluginCheckpoint: registered(map[string][]string{"nvidia.com/gpu": {gpuUUID0}})})
	if n.DoubleNotRun == "" || len(n.Double) != 0 {
		t.Errorf("double %+v (%q)", n.Double, n.DoubleNotRun)
	}
}
