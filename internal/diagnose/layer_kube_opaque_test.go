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
		fail       bool
	}{
		{"its node removed", "/dev/fpga3", true},
		{"its node there", "/dev/nvidia0", false},
		{"a place the tree does not show", "/dev/xyz/fpga3", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newKubeNode(t, h)
			n.serve(kubelet.KubeletSocketName, false, n.t0)
			n.serve("example.com-fpga.sock", true, n.t0.Add(time.Second))
			n.checkpoint(&kubelet.Checkpoint{
				Entries: []kubelet.Allocation{{PodUID: "p-1", Container: "c", Resource: "example.com/fpga", DeviceIDs: []string{"fpga-3"},
					Response: &kubelet.AllocSummary{DeviceNodes: []string{c.node}}}},
				Registered: map[string][]string{"example.com/fpga": {"fpga-3"}},
			}, n.t0.Add(5*time.Second), false)
			got, fs := kubeFindings(t, n, c.name)
			if (got["KUBELET_CHECKPOINT_ABSENT_DEVICE FAIL"] == 1) != c.fail {
				t.Fatalf("got %v", kubeKeys(got))
			}
			for _, f := range fs {
				if f.Code == "KUBELET_CHECKPOINT_ABSENT_DEVICE" && !strings.Contains(evidenceText(f), c.node) {
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

func evidenceText(f report.Finding) string {
	var b strings.Builder
	for _, e := range f.Evidence {
		b.WriteString(e.Path + ": " + e.Value + "\n")
	}
	return b.String()
}
