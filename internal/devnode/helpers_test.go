package devnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// tree builds a host tree in a temp dir: files maps host paths to content,
// links host paths to symlink targets, and manifest (one entry a line, the
// hostfs manifest format) describes device nodes the tree cannot hold.
func tree(t *testing.T, files, links map[string]string, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(p, c string) {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range files {
		write(p, c)
	}
	for p, target := range links {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	if manifest != "" {
		write(hostfs.ManifestPath, manifest)
	}
	return dir
}
