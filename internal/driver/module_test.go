package driver

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

func ptr(s string) *string { return &s }

func TestReadModule(t *testing.T) {
	dir := tree(t, map[string]string{
		"/sys/module/nvidia/initstate":   "live\n",
		"/sys/module/nvidia/version":     "550.54.15\n",
		"/sys/module/nvidia/srcversion":  "A1B2C3\n",
		"/sys/module/amdgpu/initstate":   "live\n",
		"/sys/module/i915/parameters/x":  "1\n",
		"/sys/module/vfio_pci/initstate": "going\n",
	}, map[string]string{
		"/sys/bus/pci/drivers/vfio-pci/module": "../../../../module/vfio_pci",
		"/sys/bus/pci/drivers/nvidia/module":   "../../../../module/nvidia",
	})
	root := hostfs.MustNew(dir)
	tests := []struct {
		driver string
		want   Module
	}{
		{"nvidia", Module{Name: "nvidia", Present: true, InitState: ptr("live"), Version: ptr("550.54.15"), SrcVersion: ptr("A1B2C3"), Source: "/sys/module/nvidia"}},
		{"amdgpu", Module{Name: "amdgpu", Present: true, InitState: ptr("live"), Source: "/sys/module/amdgpu"}},
		{"i915", Module{Name: "i915", Present: true, BuiltIn: true, Source: "/sys/module/i915"}},
		{"vfio-pci", Module{Name: "vfio_pci", Present: true, InitState: ptr("going"), Source: "/sys/module/vfio_pci"}},
		{"xe", Module{Name: "xe", Missing: "no /sys/module/xe and no /proc/modules under this root"}},
	}
	for _, tt := range tests {
		got, err := ReadDriverModule(root, tt.driver)
		if err != nil {
			t.Errorf("ReadDriverModule(%s): %v", tt.driver, err)
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("ReadDriverModule(%s) (-want +got):\n%s", tt.driver, d)
		}
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if _, err := ReadDriverModule(root, bad); err == nil {
			t.Errorf("ReadDriverModule(%q): no error", bad)
		}
	}
}

// TestReadModuleProcModules: a capture with /proc/modules but without
// /sys/module still says which modules are loaded.
func TestReadModuleProcModules(t *testing.T) {
	dir := tree(t, map[string]string{
		ProcModulesPath: "nvidia_uvm 1384448 0 - Live 0x0000000000000000 (POE)\n" +
			"nvidia 56455168 2 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n" +
			"amdgpu 12255232 0 - Loading 0x0000000000000000\n" +
			"garbage\n",
	}, nil)
	root := hostfs.MustNew(dir)
	m, err := ReadModule(root, "nvidia")
	if d := cmp.Diff(Module{Name: "nvidia", Present: true, InitState: ptr("live"), Source: ProcModulesPath}, m); d != "" {
		t.Errorf("nvidia (-want +got):\n%s", d)
	}
	// The garbage line is reported, the good lines are kept.
	if err == nil || !strings.Contains(err.Error(), "the first line 4") {
		t.Errorf("err = %v", err)
	}
	if m, _ := ReadModule(root, "amdgpu"); m.InitState == nil || *m.InitState != "coming" {
		t.Errorf("amdgpu loading: %+v", m)
	}
	if m, _ := ReadModule(root, "xe"); m.Present || !strings.Contains(m.Missing, "does not list xe") {
		t.Errorf("xe: %+v", m)
	}
}

func FuzzParseProcModules(f *testing.F) {
	f.Add([]byte("nvidia 56455168 2 nvidia_uvm, Live 0x0 (POE)\n"))
	f.Add([]byte("a - - Live\nb 1 - - Unloading 0x0\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		mods, err := ParseProcModules(b)
		for name, m := range mods {
			if name == "" || m.Name != name || !procModuleState[m.State] {
				t.Fatalf("bad entry %q: %+v (err %v)", name, m, err)
			}
		}
	})
}
