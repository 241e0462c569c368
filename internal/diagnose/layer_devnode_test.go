package diagnose

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

const (
	bdfNV  = "0000:17:00.0"
	bdfAMD = "0000:03:00.0"
	sysAMD = "/sys/devices/pci0000:00/0000:03:00.0"
)

// goodNodesHost: an NVIDIA GPU (minor 0) and an AMD GPU with every node
// in place, udev-style /dev/char links, and the usual modes.
func goodNodesHost() *l23Tree {
	tr := goodNVIDIAHost()
	tr.files["/proc/driver/nvidia/gpus/"+bdfNV+"/information"] = "Model: \t\t NVIDIA H100\nBus Location: \t " + bdfNV + "\nDevice Minor: \t 0\n"
	tr.files["/proc/devices"] = "Character devices:\n  1 mem\n 10 misc\n195 nvidia-frontend\n226 drm\n236 nvidia-uvm\n240 kfd\n\nBlock devices:\n  8 sd\n"
	tr.pciDev(bdfAMD, "0x1002", "0x740f", "0x038000", "amdgpu")
	tr.files["/sys/module/amdgpu/initstate"] = "live\n"
	tr.files[sysAMD+"/drm/card0/dev"] = "226:0\n"
	tr.files[sysAMD+"/drm/renderD128/dev"] = "226:128\n"
	tr.files["/sys/class/kfd/kfd/dev"] = "240:0\n"
	for p, f := range map[string]string{
		"/dev/nvidia0":          "c 195:0 0666 0:0",
		"/dev/nvidiactl":        "c 195:255 0666 0:0",
		"/dev/nvidia-modeset":   "c 195:254 0666 0:0",
		"/dev/nvidia-uvm":       "c 236:0 0666 0:0",
		"/dev/nvidia-uvm-tools": "c 236:1 0666 0:0",
		"/dev/dri/card0":        "c 226:0 0660 0:44",
		"/dev/dri/renderD128":   "c 226:128 0660 0:109",
		"/dev/kfd":              "c 240:0 0660 0:109",
		"/dev/char/195:0":       "l ../nvidia0",
		"/dev/char/195:255":     "l ../nvidiactl",
		"/dev/char/195:254":     "l ../nvidia-modeset",
		"/dev/char/236:0":       "l ../nvidia-uvm",
		"/dev/char/236:1":       "l ../nvidia-uvm-tools",
		"/dev/char/226:0":       "l ../dri/card0",
		"/dev/char/226:128":     "l ../dri/renderD128",
		"/dev/char/240:0":       "l ../kfd",
	} {
		tr.manifest[p] = f
	}
	return tr
}

var goodNodeFindings = []string{
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/dri/card0",
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/dri/renderD128",
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/kfd",
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/nvidia-modeset",
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/nvidia-uvm",
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/nvidia-uvm-tools",
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/nvidia0",
	"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/nvidiactl",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/dri/card0",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/dri/renderD128",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/kfd",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/nvidia-modeset",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/nvidia-uvm",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/nvidia-uvm-tools",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/nvidia0",
	"devnode.mode DEVNODE_MODE_OK PASS /dev/nvidiactl",
	"devnode.present DEVNODE_OK PASS /dev/dri/card0",
	"devnode.present DEVNODE_OK PASS /dev/dri/renderD128",
	"devnode.present DEVNODE_OK PASS /dev/kfd",
	"devnode.present DEVNODE_OK PASS /dev/nvidia-modeset",
	"devnode.present DEVNODE_OK PASS /dev/nvidia-uvm",
	"devnode.present DEVNODE_OK PASS /dev/nvidia-uvm-tools",
	"devnode.present DEVNODE_OK PASS /dev/nvidia0",
	"devnode.present DEVNODE_OK PASS /dev/nvidiactl",
}

// replace returns the good findings with the ones for the given
// check+subject swapped for repl (nil repl: dropped).
func replaceFindings(drop []string, add ...string) []string {
	var out []string
	for _, f := range goodNodeFindings {
		keep := true
		for _, d := range drop {
			if strings.HasPrefix(f, strings.Fields(d)[0]) && strings.HasSuffix(f, " "+strings.Fields(d)[1]) {
				keep = false
			}
		}
		if keep {
			out = append(out, f)
		}
	}
	out = append(out, add...)
	return sortedCopy(out)
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestDevnodeLayer(t *testing.T) {
	tests := []struct {
		name   string
		change func(tr *l23Tree)
		want   []string
	}{{
		name: "good host",
		want: goodNodeFindings,
	}, {
		name:   "nvidia-uvm missing",
		change: func(tr *l23Tree) { delete(tr.manifest, "/dev/nvidia-uvm") },
		want: replaceFindings([]string{"devnode. /dev/nvidia-uvm"},
			"devnode.present DEVNODE_MISSING FAIL /dev/nvidia-uvm"),
	}, {
		name:   "optional nvidia-modeset missing",
		change: func(tr *l23Tree) { delete(tr.manifest, "/dev/nvidia-modeset") },
		want: replaceFindings([]string{"devnode. /dev/nvidia-modeset"},
			"devnode.present DEVNODE_MISSING WARN /dev/nvidia-modeset"),
	}, {
		name:   "empty file where /dev/nvidia0 should be",
		change: func(tr *l23Tree) { tr.manifest["/dev/nvidia0"] = "f 0644 0:0" },
		want: replaceFindings([]string{"devnode. /dev/nvidia0"},
			"devnode.present DEVNODE_NOT_CHAR FAIL /dev/nvidia0"),
	}, {
		name: "stale nvidia-uvm major after a reload",
		change: func(tr *l23Tree) {
			tr.files["/proc/devices"] = strings.Replace(tr.files["/proc/devices"], "236 nvidia-uvm", "237 nvidia-uvm", 1)
		},
		want: replaceFindings([]string{"devnode.present /dev/nvidia-uvm", "devnode.present /dev/nvidia-uvm-tools"},
			"devnode.present DEVNODE_MAJOR_UNREGISTERED FAIL /dev/nvidia-uvm",
			"devnode.present DEVNODE_WRONG_DEVNUM FAIL /dev/nvidia-uvm",
			"devnode.present DEVNODE_WRONG_DEVNUM WARN /dev/nvidia-uvm-tools"),
	}, {
		name: "render node number differs from sysfs",
		change: func(tr *l23Tree) {
			tr.manifest["/dev/dri/renderD128"] = "c 226:129 0660 0:109"
			tr.manifest["/dev/char/226:129"] = "l ../dri/renderD128"
		},
		want: replaceFindings([]string{"devnode.present /dev/dri/renderD128"},
			"devnode.present DEVNODE_WRONG_DEVNUM FAIL /dev/dri/renderD128"),
	}, {
		name: "nvidia driver unloaded, nodes left behind",
		change: func(tr *l23Tree) {
			tr.files["/proc/devices"] = strings.Replace(tr.files["/proc/devices"], "195 nvidia-frontend\n", "", 1)
		},
		want: replaceFindings([]string{"devnode.present /dev/nvidia0", "devnode.present /dev/nvidiactl", "devnode.present /dev/nvidia-modeset"},
			"devnode.present DEVNODE_MAJOR_UNREGISTERED FAIL /dev/nvidia0"),
	}, {
		name: "restrictive modes",
		change: func(tr *l23Tree) {
			tr.manifest["/dev/nvidiactl"] = "c 195:255 0660 0:0"
			tr.manifest["/dev/dri/renderD128"] = "c 226:128 0660 0:0"
			tr.manifest["/dev/kfd"] = "c 240:0 0666 0:0"
		},
		want: replaceFindings([]string{"devnode.mode /dev/nvidiactl", "devnode.mode /dev/dri/renderD128"},
			"devnode.mode DEVNODE_MODE WARN /dev/nvidiactl",
			"devnode.mode DEVNODE_MODE WARN /dev/dri/renderD128"),
	}, {
		name: "nodes made by nvidia-modprobe: no /dev/char links",
		change: func(tr *l23Tree) {
			delete(tr.manifest, "/dev/char/195:0")
			tr.manifest["/dev/char/195:255"] = "l ../nvidia0"
		},
		want: replaceFindings([]string{"devnode.char-link /dev/nvidia0", "devnode.char-link /dev/nvidiactl"},
			"devnode.char-link DEVNODE_NO_CHAR_LINK WARN /dev/nvidia0",
			"devnode.char-link DEVNODE_NO_CHAR_LINK WARN /dev/nvidiactl"),
	}, {
		name: "nouveau bound: the GPU's nodes are skipped, shared AMD nodes checked",
		change: func(tr *l23Tree) {
			tr.links["/sys/devices/pci0000:00/"+bdfNV+"/driver"] = "../../../bus/pci/drivers/nouveau"
			tr.files["/sys/bus/pci/drivers/nouveau/bind"] = ""
			tr.files["/sys/devices/pci0000:00/"+bdfNV+"/drm/card1/dev"] = "226:1\n"
			tr.files["/sys/devices/pci0000:00/"+bdfNV+"/drm/renderD129/dev"] = "226:129\n"
		},
		want: []string{
			"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/dri/card0",
			"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/dri/renderD128",
			"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/kfd",
			"devnode.mode DEVNODE_MODE_OK PASS /dev/dri/card0",
			"devnode.mode DEVNODE_MODE_OK PASS /dev/dri/renderD128",
			"devnode.mode DEVNODE_MODE_OK PASS /dev/kfd",
			"devnode.present DEVNODE_OK PASS /dev/dri/card0",
			"devnode.present DEVNODE_OK PASS /dev/dri/renderD128",
			"devnode.present DEVNODE_OK PASS /dev/kfd",
			"devnode.present DEVNODE_SKIPPED NOT_RUN /dev/dri/card1",
			"devnode.present DEVNODE_SKIPPED NOT_RUN /dev/dri/renderD129",
		},
	}, {
		// Unbound: no driver link and, as on a real host, no NVIDIA
		// procfs entry for the GPU either. nvidia.ko is still loaded, so
		// its shared nodes are there, held by its major; the GPU's own
		// node follows from the layer-2 finding.
		name: "no driver on the NVIDIA GPU",
		change: func(tr *l23Tree) {
			delete(tr.links, "/sys/devices/pci0000:00/"+bdfNV+"/driver")
			delete(tr.files, "/proc/driver/nvidia/gpus/"+bdfNV+"/information")
		},
		want: []string{
			"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/dri/card0",
			"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/dri/renderD128",
			"devnode.char-link DEVNODE_CHAR_LINK_OK PASS /dev/kfd",
			"devnode.mode DEVNODE_MODE_OK PASS /dev/dri/card0",
			"devnode.mode DEVNODE_MODE_OK PASS /dev/dri/renderD128",
			"devnode.mode DEVNODE_MODE_OK PASS /dev/kfd",
			"devnode.present DEVNODE_MISSING FAIL " + bdfNV,
			"devnode.present DEVNODE_OK PASS /dev/dri/card0",
			"devnode.present DEVNODE_OK PASS /dev/dri/renderD128",
			"devnode.present DEVNODE_OK PASS /dev/kfd",
			"devnode.present DEVNODE_OK PASS /dev/nvidia-uvm",
			"devnode.present DEVNODE_OK PASS /dev/nvidiactl",
		},
	}, {
		name:   "NVIDIA information file missing",
		change: func(tr *l23Tree) { delete(tr.files, "/proc/driver/nvidia/gpus/"+bdfNV+"/information") },
		want: replaceFindings([]string{"devnode. /dev/nvidia0"},
			"devnode.present DEVNODE_UNKNOWN NOT_RUN "+bdfNV),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := goodNodesHost()
			if tt.change != nil {
				tt.change(tr)
			}
			rep := l23Run(t, tr.build(t), driverChecks(), devnodeChecks())
			if d := cmp.Diff(sortedCopy(tt.want), l23Findings(rep, "devnode.")); d != "" {
				t.Errorf("findings (-want +got):\n%s", d)
			}
		})
	}
}

func TestExpectedNodesForCgroupLayer(t *testing.T) {
	e := NewEnv(goodNodesHost().build(t), Options{})
	var got []string
	for _, n := range e.ExpectedNodes() {
		got = append(got, n.Path+" "+n.Dev()+" "+strings.Join(n.Subjects, ","))
	}
	want := []string{
		"/dev/dri/card0 226:0 " + bdfAMD,
		"/dev/dri/renderD128 226:128 " + bdfAMD,
		"/dev/kfd 240:0 " + bdfAMD,
		"/dev/nvidia-modeset 195:254 " + bdfNV,
		"/dev/nvidia-uvm 236:0 " + bdfNV,
		"/dev/nvidia-uvm-tools 236:1 " + bdfNV,
		"/dev/nvidia0 195:0 " + bdfNV,
		"/dev/nvidiactl 195:255 " + bdfNV,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestDevnodeFindingNamesDevice(t *testing.T) {
	tr := goodNodesHost()
	delete(tr.manifest, "/dev/nvidia0")
	rep := l23Run(t, tr.build(t), driverChecks(), devnodeChecks())
	for _, f := range rep.Findings {
		if f.Code == CodeDevnodeMissing && f.Subject == "/dev/nvidia0" {
			if f.Status != report.Fail || !strings.Contains(f.Summary, bdfNV) || f.Remediation == "" {
				t.Errorf("missing-node finding: %+v", f)
			}
			return
		}
	}
	t.Fatalf("no DEVNODE_MISSING for /dev/nvidia0: %v", l23Findings(rep))
}
