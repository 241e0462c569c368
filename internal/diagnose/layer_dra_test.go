package diagnose

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

const draNodes = "../dra/testdata/nodes/"

// draFindings runs layer 6 over a DRA node tree and keeps kube.dra's
// findings as "CODE STATUS".
func draFindings(t *testing.T, tree string) map[string]int {
	t.Helper()
	root, err := hostfs.New(draNodes + tree)
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, tree, Options{Layers: []report.Layer{report.LayerKube}})
	got := map[string]int{}
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			got[f.Code+" "+string(f.Status)]++
		}
	}
	return got
}

// The planted faults (a claim prepared before a reboot whose CDI spec was
// in the tmpfs; a GPU advertised by the device plugin and a DRA driver),
// the healthy node (the kubelet's own state file: no FAIL or WARN), and
// a tree where the kubelet's directories were not captured (nothing
// judged: the kubelet check says NOT_RUN).
func TestDRALayer(t *testing.T) {
	for _, c := range []struct {
		tree string
		want []string
	}{
		// A tree cannot hold sockets: no driver is registered in any of
		// them, so the claims' driver is "not registered" (WARN) in each;
		// the registration cases run on real sockets in internal/dra.
		{"dra-reboot", []string{"DRA_CLAIM_CDI_UNRESOLVED FAIL", "DRA_STATE_FROM_EARLIER_BOOT PASS", "DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
		{"dra-double", []string{"DRA_DOUBLE_ADVERTISED WARN", "DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
		{"dra-healthy", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
	} {
		t.Run(c.tree, func(t *testing.T) {
			got := draFindings(t, c.tree)
			for _, w := range c.want {
				if got[w] == 0 {
					t.Errorf("no %s; got %v", w, got)
				}
			}
			for k := range got {
				if !contains(c.want, k) && (len(k) > 5 && (k[len(k)-4:] == "FAIL" || k[len(k)-4:] == "WARN")) {
					t.Errorf("unexpected %s", k)
				}
			}
		})
	}
	root, err := hostfs.New("../../testdata/hosts/nvidia-h100x8")
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, "nvidia-h100x8", Options{Layers: []report.Layer{report.LayerKube}})
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			t.Errorf("a tree without the kubelet's directories: %s %s", f.Code, f.Status)
		}
		if f.Check == "kube.node" && f.Status != report.NotRun {
			t.Errorf("kube.node on a tree without the kubelet: %s %s", f.Code, f.Status)
		}
	}
}
