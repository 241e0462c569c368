package deviceplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

func addr(s string) pci.Address {
	a, err := pci.ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

// gpu is a device at bdf under the given bridges (top-down).
func gpu(bdf string, numa int, host string, bridges ...string) *Device {
	a := addr(bdf)
	d := &Device{ID: bdf, PCI: &a, NUMA: numa, HostBridge: host}
	for _, b := range bridges {
		d.Bridges = append(d.Bridges, addr(b))
	}
	return d
}

func TestPreferred(t *testing.T) {
	// Two PCIe switches on NUMA 0 (two GPUs each), one on NUMA 1.
	devs := map[string]*Device{}
	for _, d := range []*Device{
		gpu("0000:03:00.0", 0, "pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0"),
		gpu("0000:04:00.0", 0, "pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0"),
		gpu("0000:13:00.0", 0, "pci0000:00", "0000:00:03.0", "0000:11:00.0", "0000:12:00.0"),
		gpu("0000:14:00.0", 0, "pci0000:00", "0000:00:03.0", "0000:11:00.0", "0000:12:01.0"),
		gpu("0000:83:00.0", 1, "pci0000:80", "0000:80:01.0", "0000:81:00.0", "0000:82:00.0"),
		gpu("0000:84:00.0", 1, "pci0000:80", "0000:80:01.0", "0000:81:00.0", "0000:82:01.0"),
	} {
		devs[d.ID] = d
	}
	all := []string{"0000:03:00.0", "0000:04:00.0", "0000:13:00.0", "0000:14:00.0", "0000:83:00.0", "0000:84:00.0"}
	cases := []struct {
		name      string
		available []string
		must      []string
		size      int
		want      []string // sorted
		wantErr   bool
	}{
		{"a pair under one switch", all, nil, 2, []string{"0000:03:00.0", "0000:04:00.0"}, false},
		{"must-include picks its switch mate", all, []string{"0000:14:00.0"}, 2, []string{"0000:13:00.0", "0000:14:00.0"}, false},
		{"must-include on NUMA 1 stays there", all, []string{"0000:84:00.0"}, 2, []string{"0000:83:00.0", "0000:84:00.0"}, false},
		{"four fit NUMA 0", all, nil, 4, []string{"0000:03:00.0", "0000:04:00.0", "0000:13:00.0", "0000:14:00.0"}, false},
		{"the switch mate taken: same NUMA next", []string{"0000:03:00.0", "0000:13:00.0", "0000:83:00.0", "0000:84:00.0"}, []string{"0000:03:00.0"}, 2, []string{"0000:03:00.0", "0000:13:00.0"}, false},
		{"must-include not offered is still taken", []string{"0000:04:00.0", "0000:83:00.0"}, []string{"0000:03:00.0"}, 2, []string{"0000:03:00.0", "0000:04:00.0"}, false},
		{"must-include equals size", all, []string{"0000:03:00.0", "0000:84:00.0"}, 2, []string{"0000:03:00.0", "0000:84:00.0"}, false},
		{"must-include over size", all, []string{"0000:03:00.0", "0000:04:00.0"}, 1, nil, true},
		{"size over available", []string{"0000:03:00.0"}, nil, 2, nil, true},
		{"unknown device", []string{"0000:99:00.0"}, nil, 1, nil, true},
		{"size 0", all, nil, 0, nil, true},
		{"duplicates in available", []string{"0000:03:00.0", "0000:03:00.0"}, nil, 2, nil, true},
	}
	for _, c := range cases {
		got, err := preferred(devs, c.available, c.must, c.size)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err %v, want error %t", c.name, err, c.wantErr)
			continue
		}
		slices.Sort(got)
		if !c.wantErr && !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// On the 8 x H100 fixture (one GPU per host bridge, four per NUMA node)
// a set of four is one NUMA node's.
func TestPreferredOnFixture(t *testing.T) {
	cfg := &Config{Resources: []ResourceConfig{{Name: "example.com/gpu", Selector: Selector{PCI: &PCISelector{Vendor: "10de", Class: "0302"}}}}}
	_, _, last := monitorOver(t, "nvidia-h100x8", cfg)
	devs := last()
	var ids []string
	for id := range devs {
		ids = append(ids, id)
	}
	got, err := preferred(devs, ids, []string{"0000:ba:00.0"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range got {
		if devs[id].NUMA != 1 {
			t.Errorf("%v: %s is on NUMA %d, not with 0000:ba:00.0 on 1", got, id, devs[id].NUMA)
		}
	}
}

func TestResourceNames(t *testing.T) {
	good := []string{"example.com/gpu", "nvidia.com/gpu", "a.b/c-d.e_f", "amd.com/gpu", "example.com/" + strings.Repeat("x", 63)}
	bad := []string{"", "gpu", "kubernetes.io/gpu", "foo.kubernetes.io/gpu", "requests.example.com/gpu", "example.com/", "/gpu",
		"example.com/gpu/0", "Example.com/gpu", "example.com/-gpu", "example.com/" + strings.Repeat("x", 64), "exa mple.com/gpu"}
	for _, n := range good {
		if err := ValidateResourceName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range bad {
		if ValidateResourceName(n) == nil {
			t.Errorf("%q accepted", n)
		}
	}
}

func TestEnvNames(t *testing.T) {
	for _, n := range []string{"A", "_X", "MY.ENV-NAME", "a1"} {
		if p := envNameProblem(n); p != "" {
			t.Errorf("%q: %s", n, p)
		}
	}
	for _, n := range []string{"", "A=B", "1A", "..X", ".", "A\x00"} {
		if envNameProblem(n) == "" {
			t.Errorf("%q accepted", n)
		}
	}
}

func TestParseConfig(t *testing.T) {
	bad := map[string]string{
		"empty":             "",
		"unknown field":     "resources:\n- name: example.com/gpu\n  selectr: {pci: {vendor: '10de'}}\n",
		"no selector":       "resources:\n- name: example.com/gpu\n",
		"both selectors":    "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}, deviceNodes: [/dev/x*]}\n",
		"bad vendor":        "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: 10de0}}\n",
		"bad name":          "resources:\n- name: gpu\n  selector: {pci: {vendor: '10de'}}\n",
		"twice":             "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n",
		"relative glob":     "resources:\n- name: example.com/gpu\n  selector: {deviceNodes: [dev/x*]}\n",
		"bad env":           "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n  container: {env: {'A=B': x}}\n",
		"bad socket":        "resources:\n- name: example.com/gpu\n  socket: ../x.sock\n  selector: {pci: {vendor: '10de'}}\n",
		"bad cdi class":     "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n  cdi: {vendor: example.com, class: 'g/pu'}\n",
		"bad duration":      "rescanInterval: soon\nresources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n",
		"short rescan":      "rescanInterval: 1ms\nresources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n",
		"bad permissions":   "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n  container: {permissions: rwx}\n",
		"relative mount":    "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n  container: {mounts: [{hostPath: lib, containerPath: /lib}]}\n",
		"not yaml":          "{{{",
		"relative cdi dir":  "cdiSpecDir: run/cdi\nresources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n",
		"pci without ids":   "resources:\n- name: example.com/gpu\n  selector: {pci: {drivers: [nvidia]}}\n",
		"bad class":         "resources:\n- name: example.com/gpu\n  selector: {pci: {class: '030'}}\n",
		"bad device id":     "resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de', devices: [x]}}\n",
		"glob syntax error": "resources:\n- name: example.com/gpu\n  selector: {deviceNodes: ['/dev/[']}\n",
	}
	for name, in := range bad {
		if _, err := ParseConfig(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, err := ParseConfig(strings.NewReader("resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10DE', class: '0302'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Resources[0]
	if r.Socket != "accel-doctor-example.com_gpu.sock" || r.Container.Permissions != "rw" || c.CDISpecDir != DefaultCDISpecDir || c.RescanInterval != Duration(DefaultRescanInterval) {
		t.Errorf("defaults: %+v %+v", c, r)
	}
	if !r.Selector.PCI.match(0x10de, 0x2330, 0x030200) || r.Selector.PCI.match(0x10de, 0x22a3, 0x068000) || r.Selector.PCI.match(0x1002, 0x740f, 0x030200) {
		t.Error("PCI selector matches wrongly")
	}
}

// The example in docs/ parses, and serves on the 8 x H100 fixture.
func TestExampleConfig(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot(t), "docs/plugin-config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ParseConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Resources) < 3 {
		t.Errorf("the example declares %d resources, want the PCI, CDI and node-glob ones", len(c.Resources))
	}
}

func TestParseUevent(t *testing.T) {
	u, err := ParseUevent([]byte(ueventBind))
	if err != nil {
		t.Fatal(err)
	}
	if u.Action != "bind" || u.DevPath != gpuPath || u.Subsystem != "pci" || u.Driver != "nvidia" || u.Env["SEQNUM"] != "5103" {
		t.Errorf("%+v", u)
	}
	for _, bad := range []string{"", "\x00", "add", "add@", "@/devices/x", "add@devices", "libudev\x00\xfe\xed\xca\xfe",
		"add@/devices/x\x00ACTION=remove\x00", "add@/devices/x\x00DEVPATH=/devices/y\x00", strings.Repeat("a", maxUevent+1)} {
		if _, err := ParseUevent([]byte(bad)); err == nil {
			t.Errorf("%q accepted", truncate(bad, 40))
		}
	}
}

func FuzzParseUevent(f *testing.F) {
	for _, s := range []string{ueventBind, ueventUnbind, ueventRemove, ueventNet, "add@/x\x00=\x00k\x00", "libudev\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := ParseUevent(b)
		if err == nil && (u.Action == "" || !strings.HasPrefix(u.DevPath, "/")) {
			t.Fatalf("accepted %q as %+v", b, u)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("resources:\n- name: example.com/gpu\n  selector: {pci: {vendor: '10de'}}\n  cdi: {vendor: example.com, class: gpu}\n"))
	f.Add([]byte("rescanInterval: 5s\nresources:\n- name: a.b/c\n  selector: {deviceNodes: ['/dev/accel/*']}\n  container: {env: {A: b}, mounts: [{hostPath: /a, containerPath: /b}]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		for _, r := range c.Resources {
			if ValidateResourceName(r.Name) != nil || r.Socket == "" {
				t.Fatalf("accepted a resource the kubelet would refuse: %+v", r)
			}
		}
	})
}

// The CDI spec a CDI resource writes parses with the CDI library,
// declares every device with its node, and resolves through internal/cdi.
func TestCDISpecWritten(t *testing.T) {
	host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/nvidia-h100x8"))
	root := fixtureRoot(t, host)
	cfg := h100Config()
	cfg.Resources[1].Container = ContainerEdits{DeviceNodes: []NodeEdit{{HostPath: "/dev/nvidia-modeset"}}, Mounts: []MountEdit{{HostPath: "/usr/bin", ContainerPath: "/usr/local/nvidia/bin", ReadOnly: true}}, Env: map[string]string{"X": "1"}}
	p, err := New(shortDir(t), cfg, Options{Root: root, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.monitor.watcher.Close()
	b, err := os.ReadFile(filepath.Join(host, "var/run/cdi", SpecFileName(cfg.Resources[1].CDI)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cdi.ParseSpec(b, "spec")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Devices) != 8 || s.Kind != "example.com/gpu" {
		t.Fatalf("spec: kind %s, %d devices", s.Kind, len(s.Devices))
	}
	var js map[string]any
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	res := cdi.Check(root, "example.com/gpu=0000:18:00.0", cdi.Options{})
	ok := false
	for _, f := range res.Facts {
		ok = ok || f.Kind == cdi.KindDeviceResolved
	}
	if !ok {
		t.Fatalf("example.com/gpu=0000:18:00.0 does not resolve: %+v", res.Facts)
	}
	if d := s.Devices[0]; d.Name != "0000:18:00.0" || len(d.ContainerEdits.DeviceNodes) != 1 || d.ContainerEdits.DeviceNodes[0].Path != "/dev/nvidia0" || d.ContainerEdits.DeviceNodes[0].Major != 195 {
		t.Errorf("first device: %+v", d)
	}
	paths := []string{}
	for _, n := range s.ContainerEdits.DeviceNodes {
		paths = append(paths, n.Path)
	}
	if strings.Join(paths, ",") != "/dev/nvidia-modeset,/dev/nvidia-uvm,/dev/nvidiactl" {
		t.Errorf("global nodes %v", paths)
	}
}

// The example's AMD resource, on the 2 x MI210 fixture: a CDI spec with
// each GPU's DRM nodes and /dev/kfd for both.
func TestExampleAMDResource(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot(t), "docs/plugin-config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.Resources = slices.DeleteFunc(c.Resources, func(r ResourceConfig) bool { return r.Name != "example.com/amdgpu" })
	host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/amd-mi210x2"))
	p, err := New(shortDir(t), c, Options{Root: fixtureRoot(t, host), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.monitor.watcher.Close()
	b, err := os.ReadFile(filepath.Join(host, "var/run/cdi/accel-doctor-example.com-amdgpu.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cdi.ParseSpec(b, "spec")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range s.Devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			got = append(got, d.Name+":"+n.Path)
		}
	}
	for _, n := range s.ContainerEdits.DeviceNodes {
		got = append(got, "all:"+n.Path)
	}
	want := "0000:41:00.0:/dev/dri/card1,0000:41:00.0:/dev/dri/renderD128,0000:c1:00.0:/dev/dri/card2,0000:c1:00.0:/dev/dri/renderD129,all:/dev/kfd"
	if strings.Join(got, ",") != want {
		t.Errorf("spec nodes:\n got %s\nwant %s", strings.Join(got, ","), want)
	}
	for _, d := range p.monitor.Devices(0) {
		if d.Health != "Healthy" {
			t.Errorf("%s: %s %s", d.ID, d.Health, d.Reason)
		}
	}
}

// TestSocketNamesReadBack holds the naming convention to what
// internal/kubelet reads back from a socket's name: check relies on it to
// tell which resource each socket serves, and so to see two instances of
// one resource.
func TestSocketNamesReadBack(t *testing.T) {
	for _, r := range []string{"example.com/gpu", "fake.example.com/a_b.c", "x/y"} {
		for name, want := range map[string]string{
			DefaultSocketName(r): "accel-doctor-" + strings.Replace(r, "/", "_", 1) + ".sock",
			MockSocketName(r, 0): "accel-doctor-mock-" + strings.Replace(r, "/", "_", 1) + ".sock",
			MockSocketName(r, 1): "accel-doctor-mock-" + strings.Replace(r, "/", "_", 1) + "@2.sock",
		} {
			if name != want {
				t.Errorf("%s: got %q, want %q", r, name, want)
			}
		}
	}
}
