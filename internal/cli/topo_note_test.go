package cli

import (
	"strings"
	"testing"
)

// TestTopoSnapshotNoteBlamesTheCapture: the demo is a capture whose
// bridges kept 64 bytes of config space; topo says the capture was taken
// without CAP_SYS_ADMIN and to take it again as root, not that whoever
// reads it now lacks the capability.
func TestTopoSnapshotNoteBlamesTheCapture(t *testing.T) {
	for _, args := range [][]string{{"topo", "--snapshot", "demo"}, {"topo", "--snapshot", "demo", "--matrix"}, {"topo", "--snapshot", "demo", "-o", "json"}} {
		out, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(out, "bridge role(s) told by their place in the chain: the capture holds only the first 64 bytes of config space: it was taken without CAP_SYS_ADMIN") ||
			!strings.Contains(out, "take it again as root") ||
			strings.Contains(out, "not readable without CAP_SYS_ADMIN") || strings.Contains(out, "run accel-doctor as root") {
			t.Errorf("%v:\n%s", args, out)
		}
	}
}
