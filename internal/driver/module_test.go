package driver

import (
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
		{"nvidia", Module{Name: "nvidia", Present: true, InitState: ptr("live"), Version: ptr("550.54.15"), SrcVersion: ptr("A1B2C3")}},
		{"amdgpu", Module{Name: "amdgpu", Present: true, InitState: ptr("live")}},
		{"i915", Module{Name: "i915", Present: true, BuiltIn: true}},
		{"vfio-pci", Module{Name: "vfio_pci", Present: true, InitState: ptr("going")}},
		{"xe", Module{Name: "xe"}},
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
