package devnode

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// tree builds a host tree in a temp dir: files maps host paths to content,
// links host paths to symlink targets, and manifest (one entry a line, the
// hostfs manifest format) describes device nodes the tree cannot hold.
func tree(t *testing.T, files, links map[string]string, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	testutil.WriteTree(t, dir, files, links, manifest)
	return dir
}
