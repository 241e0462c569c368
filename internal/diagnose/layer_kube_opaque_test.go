package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// A plugin with IDs of its own naming: the device node its
// AllocateResponse gave the container (kept in the checkpoint) is what
// the host shows of the device. Gone from /dev: the allocation is of an
// absent device; there: nothing wrong; a place the tree does not show:
// unknown, never absent.
func TestOpaqueDeviceGoneByItsNode(t *testing.T) {
	h, _ := fixture.ByName(fixture.NameNVIDIAx8)
	for _, c := range []struct {
		name, node string
		mounts     []string
		fail       bool
	}{
		{"its node removed", "/dev/fpga3", nil, true},
		{"its node there", "/dev/nvidia0", nil, false},
		{"a place the tree does not show", "/dev/xyz/fpga3", nil, false},
		// A plugin that gives files, not nodes (Kubernetes' sample
		// device plugin mounts /tmp/<ID>): its mount source is the
		// device.
		{"its mount source removed", "", []string{"/dev/fpga-3.img"}, true},
		{"its mount source there", "", []string{"/dev/nvidia0"}, false},
		{"its mount source where the tree does not show", "", []string{"/dev/xyz/fpga-3.img"}, false},
		// With a node given, mounts may be the driver's shared files:
		// the node is the device, and it is there.
		{"its node there, a mount gone", "/dev/nvidia0", []string{"/dev/fpga-3.img"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newKubeNode(t, h)
			n.serve(kubelet.KubeletSocketName, false, n.t0)
			n.serve("example.com-fpga.sock", true, n.t0.Add(time.Second))
			n.checkpoint(&kubelet.Checkpoint{
				Entries: []kubelet.Allocation{{PodUID: "p-1", Container: "c", Resource: "example.com/fpga", DeviceIDs: []string{"fpga-3"},
					Response: &kubelet.AllocSummary{DeviceNodes: nonEmpty(c.node), Mounts: c.mounts}}},
				Registered: map[string][]string{"example.com/fpga": {"fpga-3"}},
			}, n.t0.Add(5*time.Second), false)
			got, fs := kubeFindings(t, n, c.name)
			if (got["KUBELET_CHECKPOINT_ABSENT_DEVICE FAIL"] == 1) != c.fail {
				t.Fatalf("got %v", kubeKeys(got))
			}
			for _, f := range fs {
				if f.Code == "KUBELET_CHECKPOINT_ABSENT_DEVICE" && !strings.Contains(evidenceText(f), c.node+strings.Join(c.mounts, "")) {
					t.Errorf("evidence does not name the node: %+v", f.Evidence)
				}
			}
		})
	}
}

// One socket whose resource its name does not tell weakens only what it
// could change: dead, it serves nothing and the orphan resource is the
// FAIL; answering, it may be the plugin, and the orphan is NOT_RUN
// naming it (before, either silenced every resource).
func TestUnknownSocketWeakensOnlyWhatItCouldChange(t *testing.T) {
	h, _ := fixture.ByName(fixture.NameNVIDIAx8)
	for _, c := range []struct {
		name string
		live bool
		want string
	}{
		{"a dead socket of unknown resource", false, "KUBELET_RESOURCE_NO_PLUGIN FAIL"},
		{"an answering socket of unknown resource", true, "KUBELET_RESOURCE_NO_PLUGIN NOT_RUN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newKubeNode(t, h)
			n.serve(kubelet.KubeletSocketName, false, n.t0)
			if c.live {
				n.serve("vendor-x.sock", true, n.t0.Add(time.Second))
			} else {
				n.dead("vendor-x.sock", n.t0.Add(time.Second))
			}
			n.checkpoint(&kubelet.Checkpoint{Registered: map[string][]string{"example.com/fpga": {"fpga-0"}}}, n.t0.Add(5*time.Second), false)
			got, fs := kubeFindings(t, n, c.name)
			if got[c.want] != 1 {
				t.Fatalf("want %s; got %v", c.want, kubeKeys(got))
			}
			for _, f := range fs {
				if f.Code == "KUBELET_RESOURCE_NO_PLUGIN" && f.Status == report.NotRun && !strings.Contains(f.Reason, "vendor-x.sock") {
					t.Errorf("reason %q does not name the socket", f.Reason)
				}
			}
		})
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func evidenceText(f report.Finding) string {
	var b strings.Builder
	for _, e := range f.Evidence {
		b.WriteString(e.Path + ": " + e.Value + "\n")
	}
	return b.String()
}

// Sockets of unknown naming that PodResources accounts for (each live
// socket is one resource's; a resource allocatable with no socket of its
// naming is served by one of them) leave none to serve an orphan: the
// orphan is the FAIL again. One more unknown socket than that: NOT_RUN.
func TestUnknownSocketsAccountedForByPodResources(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	sock := func(name string) *kubelet.Socket {
		return &kubelet.Socket{Name: name, Type: "socket", Dial: kubelet.Dial{Method: "GetDevicePluginOptions", Answer: kubelet.Answered}}
	}
	for _, c := range []struct {
		name    string
		sockets []*kubelet.Socket
		want    report.Status
	}{
		{"one unknown socket, one resource it serves", []*kubelet.Socket{sock("dp.1700000000.sock")}, report.Fail},
		{"two unknown sockets, one resource accounted", []*kubelet.Socket{sock("dp.1700000000.sock"), sock("dp.1700000001.sock")}, report.NotRun},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &kubelet.Node{Dir: "/var/lib/kubelet/device-plugins", CheckpointPath: "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
				Kubelet: &kubelet.Socket{Name: kubelet.KubeletSocketName, ModTime: t0}, CheckpointModTime: t0.Add(time.Minute), Plugins: c.sockets,
				Checkpoint: &kubelet.Checkpoint{ChecksumOK: true, Registered: map[string][]string{"nvidia.com/gpu": {"GPU-x"}, "example.com/resource": {"Dev-1"}}},
				PodResources: &kubelet.PodResources{Allocatable: kubelet.Dial{Answer: kubelet.Answered},
					Devices: []kubelet.ResourceDevices{{Resource: "example.com/resource", DeviceIDs: []string{"Dev-1"}}}}}
			out := &Out{check: &Check{ID: "kube.node", Layer: report.LayerKube}}
			judgeOrphanResources(out, n)
			var got []string
			for _, f := range out.findings {
				got = append(got, f.Code+" "+f.Subject+" "+string(f.Status))
			}
			want := "KUBELET_RESOURCE_NO_PLUGIN nvidia.com/gpu " + string(c.want)
			if len(got) != 1 || got[0] != want {
				t.Errorf("got %q, want [%s]", got, want)
			}
		})
	}
}
