package kubelet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

func TestClassifyID(t *testing.T) {
	for id, want := range map[string][2]string{
		gpu0:                   {string(IDGPUUUID), gpu0},
		gpu0 + "::3":           {string(IDGPUUUID), gpu0},
		"MIG-" + gpu0 + "/7/0": {string(IDMIGLegacy), gpu0},
		"MIG-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0aff": {string(IDMIGUUID), "MIG-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0aff"},
		"0000:19:00.0":   {string(IDPCIAddress), "0000:19:00.0"},
		"0000:C1:00.1":   {string(IDPCIAddress), "0000:c1:00.1"},
		"card1-4":        {string(IDDRMCard), "card1"},
		"amdgpu_xcp_30":  {string(IDAMDPartition), "amdgpu_xcp_30"},
		"0":              {string(IDOpaque), ""},
		"fake-0":         {string(IDOpaque), ""},
		"19:00.0":        {string(IDOpaque), ""}, // no domain: an lspci form no plugin uses
		"GPU-not-a-uuid": {string(IDOpaque), ""},
	} {
		f, k := ClassifyID(id)
		if string(f) != want[0] || k != want[1] {
			t.Errorf("ClassifyID(%q) = %s, %q; want %s, %q", id, f, k, want[0], want[1])
		}
	}
}

// Each form is looked for where the host shows it; a tree that does not
// hold that place says unknown, never absent.
func TestHostMatch(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"sys/bus/pci/devices/0000:19:00.0", "sys/class/drm/card1", "sys/devices/platform/amdgpu_xcp_2"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	h := readHostDevices(hostfs.MustNew(dir))
	for id, want := range map[string]HostState{
		"0000:19:00.0":         HostPresent,
		"0000:1a:00.0":         HostAbsent,
		"card1-0":              HostPresent,
		"card2-0":              HostAbsent,
		"amdgpu_xcp_2":         HostPresent,
		"amdgpu_xcp_3":         HostAbsent,
		gpu0:                   HostUnknown, // no /proc/driver/nvidia in this tree: not captured
		"MIG-" + gpu0 + "/1/0": HostUnknown,
		"whatever":             HostUnknown,
	} {
		if m := h.match("r/x", id); m.Host != want {
			t.Errorf("%s: %s (%s), want %s", id, m.Host, m.Evidence, want)
		}
	}

	// A live-like tree with an NVIDIA driver listing one GPU.
	write(t, filepath.Join(dir, "proc/driver/nvidia/gpus/0000:18:00.0/information"), "GPU UUID: "+gpu0+"\n")
	h = readHostDevices(hostfs.MustNew(dir))
	for id, want := range map[string]HostState{
		gpu0:                   HostPresent,
		gpu1 + "::1":           HostAbsent,
		"MIG-" + gpu1 + "/1/0": HostAbsent,  // its parent is gone
		"MIG-" + gpu0 + "/1/0": HostUnknown, // its parent is there; the instance only NVML shows
		"MIG-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0aff": HostUnknown,
	} {
		if m := h.match("nvidia.com/gpu", id); m.Host != want {
			t.Errorf("%s: %s (%s), want %s", id, m.Host, m.Evidence, want)
		}
	}
	// A driver directory with no GPU: no MIG device can exist.
	empty := t.TempDir()
	os.MkdirAll(filepath.Join(empty, "proc/driver/nvidia/gpus"), 0o755)
	h = readHostDevices(hostfs.MustNew(empty))
	if m := h.match("nvidia.com/mig-1g.10gb", "MIG-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0aff"); m.Host != HostAbsent {
		t.Errorf("MIG on a host with no GPU: %s (%s)", m.Host, m.Evidence)
	}
}

func TestResourceFromSocketName(t *testing.T) {
	for name, want := range map[string]string{
		"nvidia-gpu.sock":           "nvidia.com/gpu",
		"nvidia-mig-1g.10gb.sock":   "nvidia.com/mig-1g.10gb",
		"gpu.intel.com-i915.sock":   "gpu.intel.com/i915",
		"gpu.intel.com-xe.sock":     "gpu.intel.com/xe",
		"amd.com_gpu":               "amd.com/gpu",
		"kubelet.sock":              "",
		"sriovNet.sock":             "",
		"accel-doctor-example.sock": "",
		// internal/deviceplugin's DefaultSocketName and MockSocketName
		"accel-doctor-example.com_gpu.sock":           "example.com/gpu",
		"accel-doctor-mock-fake.example.com_gpu.sock": "fake.example.com/gpu",
		"accel-doctor-mock-example.com_a_b.c@2.sock":  "example.com/a_b.c",
	} {
		if got, _ := resourceFromSocketName(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	v, _ := VendorPluginFor("nvidia")
	if !v.MatchesResource("nvidia.com/mig-1g.10gb") || !v.MatchesResource("nvidia.com/gpu") || v.MatchesResource("nvidia.com/mig-") ||
		v.MatchesResource("amd.com/gpu") {
		t.Errorf("MatchesResource")
	}
	seen := map[string]bool{}
	for _, v := range VendorPlugins {
		if seen[v.Driver] || len(v.Resources) == 0 || v.Source == "" {
			t.Errorf("row %+v: duplicate driver, no resource or no source", v)
		}
		seen[v.Driver] = true
	}
}
