package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

func TestFindBinding(t *testing.T) {
	const sys = "/sys/devices/pci0000:00/0000:17:00.0"
	loop := errors.New("stat " + sys + "/driver: too many levels of symbolic links")
	tests := []struct {
		name  string
		files map[string]string
		f     Function
		state BindState
		drv   string
		via   string
		why   string // a part of Why
	}{
		{"driver link", nil, Function{Link: "nvidia", LinksInTree: true}, Bound, "nvidia", ViaLink, ""},
		{"no link, host shows links", nil, Function{LinksInTree: true}, Unbound, "", "", "no driver link"},
		{"no link, capture without links", nil, Function{}, BindUnknown, "", "", "the capture holds no driver links"},
		{"loop, nothing else", nil, Function{LinkErr: loop, LinksInTree: true}, BindUnknown, "", "", sys + "/driver: too many levels"},
		{"NVIDIA procfs", map[string]string{"/proc/driver/nvidia/gpus/0000:17:00.0/numa_status": "Node: 255\n"},
			Function{}, Bound, "nvidia", ViaNVProc, ""},
		{"loop, NVIDIA procfs decides", map[string]string{"/proc/driver/nvidia/gpus/0000:17:00.0/information": "Model: x\n"},
			Function{LinkErr: loop, LinksInTree: true}, Bound, "nvidia", ViaNVProc, ""},
		{"uevent", map[string]string{sys + "/uevent": "PCI_CLASS=30000\nDRIVER=amdgpu\nPCI_ID=1002:6758\n"},
			Function{LinksInTree: true}, Bound, "amdgpu", ViaUevent, ""},
		{"uevent without DRIVER", map[string]string{sys + "/uevent": "PCI_CLASS=30000\n"},
			Function{LinksInTree: true}, Unbound, "", "", "no driver link"},
		{"DRM card", map[string]string{sys + "/drm/card0/dev": "226:0\n", sys + "/drm/card0-DP-1/status": "x"},
			Function{}, Bound, "", ViaDRM, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{sys + "/class": "0x030000\n"}
			for k, v := range tt.files {
				files[k] = v
			}
			root := hostfs.MustNew(tree(t, files, nil))
			tt.f.Address, tt.f.SysfsPath = "0000:17:00.0", sys
			b := FindBinding(root, tt.f)
			if b.State != tt.state || b.Driver != tt.drv || b.Via != tt.via || !strings.Contains(b.Why, tt.why) {
				t.Errorf("got %+v", b)
			}
			if b.State == Bound && b.Source == "" {
				t.Errorf("bound without a source: %+v", b)
			}
			if b.Via != ViaLink && b.State == Bound && len(b.Notes) == 0 {
				t.Errorf("the driver link's state is not noted: %+v", b)
			}
		})
	}
}
