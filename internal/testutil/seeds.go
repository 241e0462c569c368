package testutil

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// maxSeed bounds one seed taken from the corpus: a fuzz target's seeds are
// what each execution starts from, and the files a parser reads (sysfs
// attributes, /proc files, config.json) are a few KiB.
const maxSeed = 64 << 10

// corpusPath is CorpusDir without the skip: false where the corpus is
// absent.
func corpusPath() (string, bool) {
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..") // internal/testutil -> repository
	dir := filepath.Join(repo, "..", "shared", "corpus")
	_, err := os.Stat(dir)
	return dir, err == nil
}

// CorpusSeeds returns, in path order, the contents of the files of the
// corpus archive rel (a .ttar, .tar.gz or .tar.bz2, relative to CorpusDir)
// or of the plain file rel, whose path inside the archive matches. It is
// for fuzz targets' seed corpora: the archive is read in memory (nothing is
// unpacked or written), files over 64 KiB are left out, and where the
// corpus is absent it returns nil without skipping, so that a fuzz target
// keeps the repository's own seeds on a fresh clone. A corpus file that
// cannot be read fails the test.
func CorpusSeeds(t testing.TB, rel string, match func(path string) bool) [][]byte {
	t.Helper()
	dir, ok := corpusPath()
	if !ok {
		return nil
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	switch {
	case strings.HasSuffix(rel, ".ttar"):
		err = ttarFiles(b, match, files)
	case strings.HasSuffix(rel, ".tar.gz"), strings.HasSuffix(rel, ".tar.bz2"):
		var r io.Reader
		if r, err = decompress(rel, b); err == nil {
			err = tarFiles(r, match, files)
		}
	default:
		if len(b) <= maxSeed {
			files[rel] = b
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		out = append(out, files[n])
	}
	return out
}

func tarFiles(r io.Reader, match func(string) bool, out map[string][]byte) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || h.Size > maxSeed || !match(h.Name) {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		out[h.Name] = b
	}
}

// ttarFiles reads the files of a ttar archive (UnpackTTAR says the format).
func ttarFiles(b []byte, match func(string) bool, out map[string][]byte) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	for sc.Scan() {
		name, ok := strings.CutPrefix(sc.Text(), "Path: ")
		if !ok || !sc.Scan() {
			continue
		}
		if !strings.HasPrefix(sc.Text(), "Lines: ") {
			continue // a symlink
		}
		data, err := ttarLines(sc.Text(), func() (string, bool) { ok := sc.Scan(); return sc.Text(), ok })
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if len(data) <= maxSeed && match(name) {
			out[name] = data
		}
	}
	return sc.Err()
}
