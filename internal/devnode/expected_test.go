package devnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const (
	sysNV0  = "/sys/devices/pci0000:00/0000:17:00.0"
	sysNV1  = "/sys/devices/pci0000:00/0000:18:00.0"
	sysAMD  = "/sys/devices/pci0000:00/0000:03:00.0"
	sysVFIO = "/sys/devices/pci0000:00/0000:65:00.0"
	sysNPU  = "/sys/devices/pci0000:00/0000:a0:00.0"
)

func expectTree(t *testing.T) *hostfs.Root {
	t.Helper()
	dir := tree(t, map[string]string{
		"/proc/devices": "Character devices:\n 10 misc\n195 nvidia-frontend\n226 drm\n235 nvidia-caps\n236 nvidia-uvm\n" +
			"240 kfd\n243 vfio\n261 accel\n\nBlock devices:\n  8 sd\n",
		"/proc/driver/nvidia/gpus/0000:17:00.0/information": "Model: \t\t NVIDIA H100\nBus Location: \t 0000:17:00.0\nDevice Minor: \t 3\n",
		"/proc/driver/nvidia/capabilities/mig/config":       "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n",
		sysNV0 + "/drm/card1/dev":                           "226:1\n",
		sysNV0 + "/drm/renderD129/dev":                      "226:129\n",
		sysNV1 + "/vendor":                                  "0x10de\n",
		sysAMD + "/drm/card0/dev":                           "226:0\n",
		sysAMD + "/drm/card0-DP-1/status":                   "connected\n",
		sysAMD + "/drm/renderD128/dev":                      "226:128\n",
		"/sys/class/kfd/kfd/dev":                            "240:0\n",
		sysVFIO + "/vendor":                                 "0x10de\n",
		"/sys/kernel/iommu_groups/12/type":                  "DMA\n",
		"/sys/class/vfio/12/dev":                            "243:0\n",
		sysNPU + "/vendor":                                  "0x8086\n",
		"/sys/devices/virtual/accel/accel1/dev":             "261:1\n",
		sysNPU + "/accel/accel0/dev":                        "261:0\n",
	}, map[string]string{
		"/sys/bus/pci/devices/0000:17:00.0": "../../../devices/pci0000:00/0000:17:00.0",
		sysVFIO + "/iommu_group":            "../../../kernel/iommu_groups/12",
		"/sys/class/accel/accel0":           "../../devices/pci0000:00/0000:a0:00.0/accel/accel0",
		sysNPU + "/accel/accel0/device":     "../../../0000:a0:00.0",
		"/sys/class/accel/accel1":           "../../devices/virtual/accel/accel1",
	}, "")
	return hostfs.MustNew(dir)
}

func TestExpected(t *testing.T) {
	root := expectTree(t)
	devs := []Device{
		{Address: "0000:17:00.0", Vendor: 0x10de, Driver: "nvidia"}, // SysfsPath resolved from /sys/bus/pci/devices
		{Address: "0000:18:00.0", Vendor: 0x10de, Driver: "nvidia", SysfsPath: sysNV1},
		{Address: "0000:03:00.0", Vendor: 0x1002, Driver: "amdgpu", SysfsPath: sysAMD},
		{Address: "0000:65:00.0", Vendor: 0x10de, Driver: "vfio-pci", SysfsPath: sysVFIO},
		{Address: "0000:a0:00.0", Vendor: 0x8086, Driver: "intel_vpu", SysfsPath: sysNPU},
		{Address: "0000:b0:00.0", Vendor: 0x8086, Driver: "", SysfsPath: "/sys/devices/pci0000:00/0000:b0:00.0"},
	}
	x := Expected(root, devs)
	nv := []string{"0000:17:00.0", "0000:18:00.0"}
	type row struct {
		Path, Kind, Dev string
		MajorOnly       bool
		Subjects        []string
		Shared          bool
		Required        bool
	}
	var got []row
	for _, n := range x.Nodes {
		if n.Type != hostfs.TypeChar {
			t.Errorf("%s: type %s, want char", n.Path, n.Type)
		}
		if n.Why == "" || n.DevSource == "" {
			t.Errorf("%s: Why %q DevSource %q; both must say something", n.Path, n.Why, n.DevSource)
		}
		got = append(got, row{n.Path, n.Kind, n.Dev(), n.MajorOnly, n.Subjects, n.Shared, n.Required})
	}
	want := []row{
		{"/dev/accel/accel0", KindAccel, "261:0", false, []string{"0000:a0:00.0"}, false, true},
		{"/dev/dri/card0", KindDRMCard, "226:0", false, []string{"0000:03:00.0"}, false, false},
		{"/dev/dri/card1", KindDRMCard, "226:1", false, []string{"0000:17:00.0"}, false, false},
		{"/dev/dri/renderD128", KindDRMRender, "226:128", false, []string{"0000:03:00.0"}, false, true},
		{"/dev/dri/renderD129", KindDRMRender, "226:129", false, []string{"0000:17:00.0"}, false, false},
		{"/dev/kfd", KindKFD, "240:0", false, []string{"0000:03:00.0"}, true, true},
		{"/dev/nvidia-caps/nvidia-cap1", KindNVIDIACap, "235:1", false, nv, true, false},
		{"/dev/nvidia-modeset", KindNVIDIAModeset, "195:254", false, nv, true, false},
		{"/dev/nvidia-uvm", KindNVIDIAUVM, "236:0", false, nv, true, true},
		{"/dev/nvidia-uvm-tools", KindNVIDIAUVMTools, "236:1", false, nv, true, false},
		{"/dev/nvidia3", KindNVIDIAGPU, "195:3", false, []string{"0000:17:00.0"}, false, true},
		{"/dev/nvidiactl", KindNVIDIACtl, "195:255", false, nv, true, true},
		{"/dev/vfio/12", KindVFIOGroup, "243:0", false, []string{"0000:65:00.0"}, true, true},
		{"/dev/vfio/vfio", KindVFIOContainer, "10:196", false, []string{"0000:65:00.0"}, true, true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("nodes (-want +got):\n%s", d)
	}
	// The second GPU has no information file: its own node is unknown,
	// reported as its error, and it still shares the common nodes.
	if len(x.Errors) != 1 || x.Errors[0].Address != "0000:18:00.0" || !errors.Is(x.Errors[0], fs.ErrNotExist) {
		t.Errorf("Errors = %v; want one ErrNotExist for 0000:18:00.0", x.Errors)
	}
	wantCovered := map[string]bool{"0000:17:00.0": true, "0000:18:00.0": true, "0000:03:00.0": true, "0000:65:00.0": true, "0000:a0:00.0": true}
	if d := cmp.Diff(wantCovered, x.Covered); d != "" {
		t.Errorf("Covered (-want +got):\n%s", d)
	}
}

func TestExpectedUVMNotLoaded(t *testing.T) {
	dir := tree(t, map[string]string{
		"/proc/devices": "Character devices:\n195 nvidia\n",
		"/proc/driver/nvidia/gpus/0000:17:00.0/information": "Device Minor: 0\n",
		sysNV0 + "/vendor": "0x10de\n",
	}, nil, "")
	x := Expected(hostfs.MustNew(dir), []Device{{Address: "0000:17:00.0", Vendor: 0x10de, Driver: "nvidia", SysfsPath: sysNV0}})
	for _, n := range x.Nodes {
		if n.Path == "/dev/nvidia-uvm" {
			if n.DevKnown || !n.Required || !strings.Contains(n.DevSource, "not loaded") {
				t.Errorf("nvidia-uvm without its module: %+v; want required, devnum unknown, source saying not loaded", n)
			}
			return
		}
	}
	t.Error("/dev/nvidia-uvm not expected")
}

func TestParseCapMinor(t *testing.T) {
	for in, want := range map[string]uint32{"DeviceFileMinor: 2\nDeviceFileMode: 292\n": 2, "DeviceFileMode: 1\nDeviceFileMinor:7": 7} {
		if got, err := ParseCapMinor([]byte(in)); err != nil || got != want {
			t.Errorf("ParseCapMinor(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "DeviceFileMinor: x", "DeviceFileMinor: 99999999"} {
		if _, err := ParseCapMinor([]byte(in)); err == nil {
			t.Errorf("ParseCapMinor(%q): no error", in)
		}
	}
}

// TestExpectedCorpusDRM runs the DRM expectations over hwloc's capture of
// a machine with an integrated GPU (card0 and a legacy controlD64 node).
func TestExpectedCorpusDRM(t *testing.T) {
	tree := testutil.Unpack(t, filepath.Join(testutil.CorpusDir(t), "hwloc", "linux", "2pa-pcidomain32bits.tar.bz2"))
	if tree == "" {
		t.Fatal("corpus changed: no sys/bus/pci in the capture")
	}
	root := hostfs.MustNew(tree)
	want, err := root.ReadString("/sys/devices/pci0000:00/0000:00:02.0/drm/card0/dev")
	if err != nil {
		t.Fatalf("corpus changed: %v", err)
	}
	x := Expected(root, []Device{{Address: "0000:00:02.0", Vendor: 0x8086, Driver: "i915", SysfsPath: "/sys/devices/pci0000:00/0000:00:02.0"}})
	var paths []string
	for _, n := range x.Nodes {
		paths = append(paths, n.Path)
		if n.Path == "/dev/dri/card0" && n.Dev() != want {
			t.Errorf("card0 dev %q, want %q from sysfs", n.Dev(), want)
		}
	}
	// controlD64 is a legacy control node, not card*/renderD*; with no
	// render node the primary node is the one the device needs.
	if d := cmp.Diff([]string{"/dev/dri/card0"}, paths); d != "" {
		t.Errorf("paths (-want +got):\n%s", d)
	}
	if len(x.Nodes) == 1 && !x.Nodes[0].Required {
		t.Error("card0 without a render node should be required")
	}
}

// Without a device nothing needs /proc/devices: Expected does not read
// it, except while a snapshot records (a replay may be asked about
// devices).
func TestExpectedWithoutDevicesReadsNoProcDevices(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "proc", "devices"), []byte("Character devices:\n  1 mem\n195 nvidia-frontend\n\nBlock devices:\n  8 sd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := hostfs.MustNew(dir)
	x := Expected(root, nil)
	if !errors.Is(x.ProcDevicesErr, ErrNoDevices) || len(x.ProcDevices.Char) != 0 || len(x.Nodes) != 0 {
		t.Errorf("no devices: %v, %d char majors, %d nodes", x.ProcDevicesErr, len(x.ProcDevices.Char), len(x.Nodes))
	}
	root.Record()
	x = Expected(root, nil)
	if x.ProcDevicesErr != nil || !x.ProcDevices.CharRegistered(NVIDIAMajor) {
		t.Errorf("recording: %v, %v", x.ProcDevicesErr, x.ProcDevices.Char)
	}
}

// FuzzParseCapMinor asserts of the NVIDIA capability file parser
// (/proc/driver/nvidia/capabilities/mig/{config,monitor}):
//   - a minor it gives is one a Linux dev_t holds (below 2^20, MINORBITS);
//   - it is the decimal value of the first DeviceFileMinor line, the one a
//     reader of the file would take;
//   - "DeviceFileMinor: N", as the driver writes it, parses back to N
//     (round trip);
//   - a file without a DeviceFileMinor line, or with one whose value is no
//     minor, is an error, never a panic.
func FuzzParseCapMinor(f *testing.F) {
	// As the driver writes them (NVIDIA's MIG user guide, "Device Nodes").
	f.Add([]byte("DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n"))
	f.Add([]byte("DeviceFileMinor: 2\nDeviceFileMode: 292\nDeviceFileModify: 1\n"))
	f.Add([]byte("DeviceFileMode: 1\nDeviceFileMinor:7"))
	f.Add([]byte("DeviceFileMinor: 1048576\n"))
	f.Add([]byte("DeviceFileMinor: -1\nDeviceFileMinor: 3\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		minor, err := ParseCapMinor(b)
		var first string
		found := false
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "DeviceFileMinor" {
				first, found = strings.TrimSpace(v), true
				break
			}
		}
		if err != nil {
			if n, perr := strconv.ParseUint(first, 10, 64); found && perr == nil && n < 1<<20 {
				t.Fatalf("%q: DeviceFileMinor %q refused: %v", b, first, err)
			}
			return
		}
		if minor >= 1<<20 {
			t.Fatalf("%q: minor %d does not fit a dev_t", b, minor)
		}
		if n, perr := strconv.ParseUint(first, 10, 32); !found || perr != nil || uint32(n) != minor {
			t.Fatalf("%q: minor %d, but the first DeviceFileMinor line says %q", b, minor, first)
		}
		if back, err := ParseCapMinor(fmt.Appendf(nil, "DeviceFileMinor: %d\n", minor)); err != nil || back != minor {
			t.Fatalf("minor %d parsed back as %d, %v", minor, back, err)
		}
	})
}

// The nodes a driver would create for a device it is not bound to: the
// shared ones by path and number where known, the device's own one by its
// form only.
func TestDriverNode(t *testing.T) {
	root := expectTree(t)
	x := Expected(root, []Device{{Address: "0000:17:00.0", Vendor: 0x10de, Driver: "nvidia", Class: 0x030200, SysfsPath: sysNV0}})
	for _, c := range []struct {
		kind, path, dev string
		unnamed         bool
	}{
		{KindNVIDIACtl, "/dev/nvidiactl", "195:255", false},
		{KindNVIDIAUVM, "/dev/nvidia-uvm", "236:0", false},
		{KindKFD, "/dev/kfd", "240:0", false},
		{KindNVIDIAGPU, "/dev/nvidia<minor>", "", true},
		{KindDRMRender, "/dev/dri/renderD<minor>", "", true},
		{KindAccel, "/dev/accel/accel<minor>", "", true},
	} {
		n, ok := x.DriverNode(root, c.kind)
		if !ok || n.Path != c.path || n.Dev() != c.dev || n.Unnamed != c.unnamed || !n.Required || n.DevSource == "" || n.Why == "" {
			t.Errorf("%s: %+v", c.kind, n)
		}
	}
	if n, ok := x.DriverNode(root, KindVFIOGroup); ok {
		t.Errorf("vfio group: %+v", n)
	}
	// Without /proc/devices the dynamic major is not known, and says why.
	empty := Expected(hostfs.MustNew(t.TempDir()), []Device{{Address: "0000:17:00.0"}})
	if n, _ := empty.DriverNode(hostfs.MustNew(t.TempDir()), KindNVIDIAUVM); n.DevKnown || !strings.Contains(n.DevSource, "/proc/devices") {
		t.Errorf("uvm without /proc/devices: %+v", n)
	}
}

func TestNodesOfForm(t *testing.T) {
	root := hostfs.MustNew(tree(t, nil, nil, "/dev/nvidia0 c 195:0 0666 0:0\n/dev/nvidia12 c 195:12 0666 0:0\n/dev/nvidiactl c 195:255 0666 0:0\n/dev/nvidia-uvm c 236:0 0666 0:0\n/dev/nvidia-caps/nvidia-cap1 c 235:1 0400 0:0\n/dev/dri/renderD128 c 226:128 0660 0:109\n/dev/dri/card0 c 226:0 0660 0:44\n"))
	for kind, want := range map[string][]string{
		KindNVIDIAGPU: {"/dev/nvidia0", "/dev/nvidia12"},
		KindDRMRender: {"/dev/dri/renderD128"},
		KindAccel:     nil,
		KindKFD:       nil,
	} {
		got, err := NodesOfForm(root, kind)
		if kind == KindAccel {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("accel: %v, %v", got, err)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", kind, got, err, want)
		}
	}
}

// The class directories are read once for all devices, and each device
// still gets exactly the entries whose device link resolves to it or to
// a child of it: a V4L2 node two levels below the PCI function is that
// function's, a sibling's node is the sibling's, a virtual entry (no
// device link) is nobody's. A class directory that cannot be listed is
// an error of every device that needed it.
func TestExpectedClassNodesPerDevice(t *testing.T) {
	const (
		capA = "/sys/devices/pci0000:00/0000:c0:00.0"
		capB = "/sys/devices/pci0000:00/0000:c1:00.0"
	)
	dir := tree(t, map[string]string{
		"/proc/devices":                               "Character devices:\n 81 video4linux\n261 accel\n",
		capA + "/vendor":                              "0x1d0f\n",
		capA + "/media0/video4linux/video0/dev":       "81:0\n",
		capA + "/media0/video4linux/video1/dev":       "81:1\n",
		capB + "/video4linux/video2/dev":              "81:2\n",
		"/sys/devices/virtual/video4linux/video9/dev": "81:9\n",
		capB + "/accel/accel3/dev":                    "261:3\n",
	}, map[string]string{
		"/sys/class/video4linux/video0":            "../../devices/pci0000:00/0000:c0:00.0/media0/video4linux/video0",
		capA + "/media0/video4linux/video0/device": "../..",
		"/sys/class/video4linux/video1":            "../../devices/pci0000:00/0000:c0:00.0/media0/video4linux/video1",
		capA + "/media0/video4linux/video1/device": "../../..",
		"/sys/class/video4linux/video2":            "../../devices/pci0000:00/0000:c1:00.0/video4linux/video2",
		capB + "/video4linux/video2/device":        "../../../0000:c1:00.0",
		"/sys/class/video4linux/video9":            "../../devices/virtual/video4linux/video9",
		"/sys/class/accel/accel3":                  "../../devices/pci0000:00/0000:c1:00.0/accel/accel3",
		capB + "/accel/accel3/device":              "../..",
	}, "")
	devs := []Device{
		{Address: "0000:c0:00.0", Vendor: 0x1d0f, Driver: "capture", SysfsPath: capA},
		{Address: "0000:c1:00.0", Vendor: 0x1d0f, Driver: "capture", SysfsPath: capB},
	}
	x := Expected(hostfs.MustNew(dir), devs)
	got := map[string]string{}
	for _, n := range x.Nodes {
		got[n.Path] = strings.Join(n.Subjects, ",") + " " + n.Dev()
	}
	want := map[string]string{
		"/dev/video0":       "0000:c0:00.0 81:0",
		"/dev/video1":       "0000:c0:00.0 81:1",
		"/dev/video2":       "0000:c1:00.0 81:2",
		"/dev/accel/accel3": "0000:c1:00.0 261:3",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("nodes (-want +got):\n%s", d)
	}
	if len(x.Errors) != 0 {
		t.Errorf("Errors = %v", x.Errors)
	}

	// /sys/class/accel a file: listing it fails, for each device.
	dir = tree(t, map[string]string{"/sys/class/accel": "not a directory\n", capA + "/vendor": "0x1d0f\n", capB + "/vendor": "0x1d0f\n"}, nil, "")
	x = Expected(hostfs.MustNew(dir), devs)
	var failed []string
	for _, e := range x.Errors {
		failed = append(failed, e.Address)
	}
	if d := cmp.Diff([]string{"0000:c0:00.0", "0000:c1:00.0"}, failed); d != "" {
		t.Errorf("devices with an error (-want +got):\n%s", d)
	}
}
