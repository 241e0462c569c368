package diagnose

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

const nvidiaSpec = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
`

// cdiPluginNode is the NVIDIA fixture as a node whose device plugin runs in CDI
// mode (one pod holds nvidia.com/gpu=0, by the checkpoint), with its spec
// in /etc/cdi and containerd of the given release and configuration
// ("" for none, "dir" for one that cannot be read). plugin false leaves
// the checkpoint without CDI devices: the spec is then the node's only.
func cdiPluginNode(t *testing.T, release, config string, plugin bool) *kubeNode {
	t.Helper()
	h, _ := fixture.ByName(fixture.NameNVIDIAx8)
	n := newKubeNode(t, h)
	n.serve(kubelet.KubeletSocketName, false, n.t0)
	n.serve("nvidia-gpu.sock", true, n.t0.Add(1e9))
	alloc := kubelet.Allocation{PodUID: "p-1", Container: "cuda", Resource: "nvidia.com/gpu", DeviceIDs: []string{h100UUID(0)}}
	if plugin {
		alloc.Response = &kubelet.AllocSummary{CDIDevices: []string{"nvidia.com/gpu=0"}}
	}
	var all []string
	for m := range 8 {
		all = append(all, h100UUID(m))
	}
	n.checkpoint(&kubelet.Checkpoint{Entries: []kubelet.Allocation{alloc}, Registered: map[string][]string{"nvidia.com/gpu": all}}, n.t0.Add(5e9), false)
	files := map[string]string{
		"etc/cdi/nvidia.yaml": nvidiaSpec,
		"usr/bin/containerd":  "#!/bin/sh\n# no Go build information: the release comes from dpkg\n",
		"var/lib/dpkg/status": "Package: containerd\nStatus: install ok installed\nArchitecture: amd64\nVersion: " + release + "\n\n",
	}
	for p, s := range files {
		p = filepath.Join(n.root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(n.root, "etc/containerd/config.toml")
	switch config {
	case "":
	case "dir":
		if err := os.MkdirAll(cfg, 0o755); err != nil {
			t.Fatal(err)
		}
	default:
		if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

const cdiOn = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n  cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n"
const cdiOff = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = false\n"

// The runtime under the CDI devices a device plugin hands out: the
// planted faults (containerd 1.6, which has no CDI; 1.7 with CDI off),
// the healthy node (1.7 with CDI on: PASS, no FAIL in layer 5), a spec
// no plugin hands out (a WARN at most), and a configuration that cannot
// be read (NOT_RUN, never the FAIL).
func TestNodeCDIRuntime(t *testing.T) {
	for _, c := range []struct {
		name, release, config string
		plugin                bool
		want                  string
	}{
		{"containerd 1.6 has no CDI", "1.6.20~ds1-1", "", true, "NODE_CDI_RUNTIME_NO_CDI FAIL"},
		{"CDI off", "1.7.24~ds1-1", cdiOff, true, "NODE_CDI_RUNTIME_NO_CDI FAIL"},
		{"healthy", "1.7.24~ds1-1", cdiOn, true, "NODE_CDI_RUNTIME_OK PASS"},
		{"a spec no plugin hands out", "1.6.20~ds1-1", "", false, "NODE_CDI_RUNTIME_NO_CDI WARN"},
		{"configuration unreadable", "1.7.24~ds1-1", "dir", true, "NODE_CDI_RUNTIME_NOT_CHECKED NOT_RUN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := cdiPluginNode(t, c.release, c.config, c.plugin)
			rep := runFixture(t, n.fs, c.name, Options{})
			var got []string
			for _, f := range rep.Findings {
				if f.Layer == report.LayerRuntime {
					got = append(got, f.Code+" "+string(f.Status))
				}
			}
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("layer 5: %q, want [%s]", got, c.want)
			}
			for _, o := range rep.Verdict.Outcomes {
				if o.Layer == report.LayerRuntime && c.want == "NODE_CDI_RUNTIME_OK PASS" && o.Status != report.Pass {
					t.Errorf("layer 5 outcome %+v", o)
				}
			}
		})
	}
}
