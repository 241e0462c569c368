package dra

import (
	"path/filepath"
	"testing"
)

// The trees of testdata/nodes (README there): each fault tree differs from
// dra-healthy by one cause and gives one kind of fact.
func TestFixtureTrees(t *testing.T) {
	for _, c := range []struct {
		tree                string
		unresolved, doubled int
		writtenBeforeBoot   bool
	}{
		{"dra-healthy", 0, 0, false},
		{"dra-reboot", 2, 0, true},
		{"dra-double", 0, 1, false},
	} {
		t.Run(c.tree, func(t *testing.T) {
			n := read(t, filepath.Join("testdata", "nodes", c.tree), Options{})
			if n.State == nil || !n.State.ChecksumOK || len(n.CDI) != 3 {
				t.Fatalf("state %+v (%s %s), cdi %+v", n.State, n.StateState, n.StateErr, n.CDI)
			}
			un := 0
			for _, d := range n.CDI {
				if d.Resolve == Unresolved {
					un++
				} else if d.Resolve != Resolved {
					t.Errorf("%s: %s", d.ID, d.Resolve)
				}
			}
			if un != c.unresolved || len(n.Double) != c.doubled || n.WrittenBeforeBoot != c.writtenBeforeBoot || n.DoubleNotRun != "" {
				t.Errorf("unresolved %d, doubled %+v (%s), before boot %v", un, n.Double, n.DoubleNotRun, n.WrittenBeforeBoot)
			}
			if c.doubled == 1 && (n.Double[0].Resource != "nvidia.com/gpu" || n.Double[0].Key != "node:/dev/nvidia0") {
				t.Errorf("double %+v", n.Double[0])
			}
			// No socket in the tree: nothing registered, nothing judged
			// dead.
			if len(n.Registrations) != 0 || len(n.DriverDirs) != 0 {
				t.Errorf("registrations %+v dirs %+v", n.Registrations, n.DriverDirs)
			}
		})
	}
}
