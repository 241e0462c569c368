package diagnose

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

const nvVersion550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"

// goodNVIDIAHost: one H100 bound to nvidia, module 550.54.15 loaded, the
// same version of libcuda and libnvidia-ml installed.
func goodNVIDIAHost() *l23Tree {
	tr := newL23Tree()
	tr.pciDev("0000:17:00.0", "0x10de", "0x2330", "0x030200", "nvidia")
	tr.links["/sys/bus/pci/drivers/nvidia/module"] = "../../../../module/nvidia"
	tr.files["/sys/module/nvidia/initstate"] = "live\n"
	tr.files["/sys/module/nvidia/version"] = "550.54.15\n"
	tr.files["/proc/driver/nvidia/version"] = nvVersion550
	lib := "/usr/lib/x86_64-linux-gnu/"
	tr.files[lib+"libcuda.so.550.54.15"] = "ELF"
	tr.files[lib+"libnvidia-ml.so.550.54.15"] = "ELF"
	tr.links[lib+"libcuda.so.1"] = "libcuda.so.550.54.15"
	tr.links[lib+"libnvidia-ml.so.1"] = "libnvidia-ml.so.550.54.15"
	return tr
}

func TestDriverLayer(t *testing.T) {
	lib := "/usr/lib/x86_64-linux-gnu/"
	tests := []struct {
		name   string
		change func(tr *l23Tree)
		want   []string
	}{{
		name: "good NVIDIA host",
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
		},
	}, {
		name: "libcuda from another release",
		change: func(tr *l23Tree) {
			delete(tr.files, lib+"libcuda.so.550.54.15")
			tr.files[lib+"libcuda.so.560.35.03"] = "ELF"
			tr.links[lib+"libcuda.so.1"] = "libcuda.so.560.35.03"
		},
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
			"driver.nvidia-libs DRIVER_LIBRARY_MISMATCH FAIL host",
		},
	}, {
		name: "no user-space libraries on the host",
		change: func(tr *l23Tree) {
			for _, p := range []string{"libcuda.so.550.54.15", "libnvidia-ml.so.550.54.15"} {
				delete(tr.files, lib+p)
			}
			delete(tr.links, lib+"libcuda.so.1")
			delete(tr.links, lib+"libnvidia-ml.so.1")
		},
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_UNKNOWN NOT_RUN host",
			"driver.nvidia-libs DRIVER_LIBRARY_UNKNOWN NOT_RUN host",
		},
	}, {
		name:   "procfs version missing on a tree",
		change: func(tr *l23Tree) { delete(tr.files, "/proc/driver/nvidia/version") },
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:17:00.0",
			"driver.nvidia-libs DRIVER_NVIDIA_PROC_MISSING NOT_RUN host",
		},
	}, {
		name: "nouveau on the GPU",
		change: func(tr *l23Tree) {
			tr.links["/sys/devices/pci0000:00/0000:17:00.0/driver"] = "../../../bus/pci/drivers/nouveau"
			tr.files["/sys/bus/pci/drivers/nouveau/bind"] = ""
			tr.files["/sys/module/nouveau/initstate"] = "live\n"
		},
		want: []string{
			"driver.bound DRIVER_NOUVEAU FAIL 0000:17:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:17:00.0",
		},
	}, {
		// A host shows driver links (its root port binds pcieport): the
		// GPU without one is unbound, while nvidia.ko is loaded and no
		// kernel log says more.
		name: "no driver",
		change: func(tr *l23Tree) {
			delete(tr.links, "/sys/devices/pci0000:00/0000:17:00.0/driver")
			tr.pciDev("0000:00:01.0", "0x8086", "0x347a", "0x060400", "pcieport")
		},
		want: []string{"driver.bound DRIVER_NOT_CLAIMED FAIL 0000:17:00.0"},
	}, {
		// A capture that kept no driver links at all says nothing about
		// the binding: NOT_RUN, not FAIL.
		name:   "capture without driver links",
		change: func(tr *l23Tree) { delete(tr.links, "/sys/devices/pci0000:00/0000:17:00.0/driver") },
		want:   []string{"driver.bound DRIVER_UNKNOWN NOT_RUN 0000:17:00.0"},
	}, {
		// hwloc's POWER9 capture: no driver link, but the NVIDIA driver's
		// procfs entry for the GPU.
		name: "no driver link, NVIDIA procfs entry",
		change: func(tr *l23Tree) {
			delete(tr.links, "/sys/devices/pci0000:00/0000:17:00.0/driver")
			tr.files["/proc/driver/nvidia/gpus/0000:17:00.0/numa_status"] = "Node: 255\n"
		},
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
		},
	}, {
		// A capture with /proc/modules but no /sys/module still shows
		// the module loaded; one still loading is a WARN.
		name: "module only in /proc/modules",
		change: func(tr *l23Tree) {
			delete(tr.files, "/sys/module/nvidia/initstate")
			delete(tr.files, "/sys/module/nvidia/version")
			delete(tr.links, "/sys/bus/pci/drivers/nvidia/module")
			tr.files["/proc/modules"] = "nvidia 56455168 2 nvidia_uvm, Live 0x0000000000000000 (POE)\n"
		},
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
		},
	}, {
		name: "module loading, from /proc/modules",
		change: func(tr *l23Tree) {
			delete(tr.files, "/sys/module/nvidia/initstate")
			delete(tr.files, "/sys/module/nvidia/version")
			delete(tr.links, "/sys/bus/pci/drivers/nvidia/module")
			tr.files["/proc/modules"] = "nvidia 56455168 2 - Loading 0x0000000000000000\n"
		},
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_NOT_LIVE WARN 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
		},
	}, {
		name: "no module list at all",
		change: func(tr *l23Tree) {
			delete(tr.files, "/sys/module/nvidia/initstate")
			delete(tr.files, "/sys/module/nvidia/version")
			delete(tr.links, "/sys/bus/pci/drivers/nvidia/module")
		},
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.module DRIVER_MODULE_UNKNOWN NOT_RUN 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
		},
	}, {
		name: "driver link loops",
		change: func(tr *l23Tree) {
			tr.links["/sys/devices/pci0000:00/0000:17:00.0/driver"] = "driver"
		},
		want: []string{"driver.bound DRIVER_UNKNOWN NOT_RUN 0000:17:00.0"},
	}, {
		name: "mixed host: vfio, amdgpu without version, built-in i915, module going",
		change: func(tr *l23Tree) {
			tr.pciDev("0000:65:00.0", "0x10de", "0x2330", "0x030200", "vfio-pci")
			tr.links["/sys/bus/pci/drivers/vfio-pci/module"] = "../../../../module/vfio_pci"
			tr.files["/sys/module/vfio_pci/initstate"] = "live\n"
			tr.pciDev("0000:03:00.0", "0x1002", "0x740f", "0x038000", "amdgpu")
			tr.files["/sys/module/amdgpu/initstate"] = "live\n"
			tr.pciDev("0000:00:02.0", "0x8086", "0x56c0", "0x030000", "i915")
			tr.files["/sys/module/i915/parameters/enable_guc"] = "3\n"
			tr.files["/sys/module/nvidia/initstate"] = "going\n"
		},
		want: []string{
			"driver.bound DRIVER_BOUND PASS 0000:00:02.0",
			"driver.bound DRIVER_BOUND PASS 0000:03:00.0",
			"driver.bound DRIVER_BOUND PASS 0000:17:00.0",
			"driver.bound DRIVER_VFIO_BOUND WARN 0000:65:00.0",
			"driver.module DRIVER_MODULE_BUILTIN PASS 0000:00:02.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:03:00.0",
			"driver.module DRIVER_MODULE_LOADED PASS 0000:65:00.0",
			"driver.module DRIVER_MODULE_NOT_LIVE WARN 0000:17:00.0",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
			"driver.nvidia-libs DRIVER_LIBRARY_MATCH PASS host",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := goodNVIDIAHost()
			if tt.change != nil {
				tt.change(tr)
			}
			rep := l23Run(t, tr.build(t), driverChecks())
			if d := cmp.Diff(tt.want, l23Findings(rep)); d != "" {
				t.Errorf("findings (-want +got):\n%s", d)
			}
		})
	}
}

func TestDriverLibraryMismatchEvidence(t *testing.T) {
	tr := goodNVIDIAHost()
	lib := "/usr/lib/x86_64-linux-gnu/"
	tr.files[lib+"libnvidia-ml.so.535.104.05"] = "ELF"
	tr.links[lib+"libnvidia-ml.so.1"] = "libnvidia-ml.so.535.104.05"
	rep := l23Run(t, tr.build(t), driverChecks())
	for _, f := range rep.Findings {
		if f.Code != CodeDriverLibraryMismatch {
			continue
		}
		text := f.Summary
		for _, ev := range f.Evidence {
			text += "\n" + ev.Path + " " + ev.Value
		}
		for _, want := range []string{"Driver/library version mismatch", "550.54.15", "535.104.05",
			"/proc/driver/nvidia/version", lib + "libnvidia-ml.so.1", lib + "libnvidia-ml.so.535.104.05"} {
			if !strings.Contains(text, want) {
				t.Errorf("mismatch finding lacks %q:\n%s", want, text)
			}
		}
		if f.Remediation == "" {
			t.Error("mismatch finding has no remediation")
		}
		return
	}
	t.Fatalf("no %s finding in %v", CodeDriverLibraryMismatch, l23Findings(rep))
}

func TestDriverModuleVersionEvidence(t *testing.T) {
	rep := l23Run(t, goodNVIDIAHost().build(t), driverChecks())
	for _, f := range rep.Findings {
		if f.Code == CodeDriverModuleLoaded {
			if !strings.Contains(f.Summary, "550.54.15") || len(f.Evidence) == 0 || f.Evidence[0].Value != "550.54.15" {
				t.Errorf("module finding lacks the version: %+v", f)
			}
			if f.Status != report.Pass {
				t.Errorf("status %s", f.Status)
			}
			return
		}
	}
	t.Fatal("no module finding")
}
