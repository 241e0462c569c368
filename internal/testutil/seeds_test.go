package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CorpusSeeds reads a ttar archive's files as UnpackTTAR writes them:
// the same contents, in path order, those over the seed bound left out.
func TestCorpusSeedsAgreeWithUnpack(t *testing.T) {
	const rel = "procfs/fixtures.ttar"
	dir := CorpusDir(t)
	if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
		t.Skipf("%s is not in the corpus", rel)
	}
	status := func(p string) bool { return strings.HasSuffix(p, "/status") }
	seeds := CorpusSeeds(t, rel, status)
	tree := UnpackTTAR(t, filepath.Join(dir, rel))
	var want [][]byte
	err := filepath.WalkDir(tree, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !status(p) {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && len(b) <= maxSeed {
			want = append(want, b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seeds) == 0 || len(seeds) != len(want) {
		t.Fatalf("%d seeds, %d files unpacked", len(seeds), len(want))
	}
	for i := range want {
		if !bytes.Equal(seeds[i], want[i]) {
			t.Errorf("seed %d: %q, unpacked %q", i, seeds[i], want[i])
		}
	}
}
