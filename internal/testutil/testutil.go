// Package testutil holds helpers shared by tests: locating the corpus of
// real captures beside the repository, unpacking its archives and writing
// small host trees. It is imported only from _test.go files, and imports
// no package of this module, so that any package's internal tests may use
// it without an import cycle.
package testutil

import (
	"archive/tar"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

// ManifestRel is hostfs.ManifestPath relative to a tree's root. It is
// spelled out here because testutil imports no package of this module;
// a hostfs test checks that the two agree.
const ManifestRel = ".accel-doctor/devices.manifest"

// WriteTree writes files (path -> content) and symlinks (path -> target)
// under dir, creating parent directories, and, when manifest is not
// empty, the device manifest at ManifestRel. Paths may be host-absolute
// ("/sys/...") or relative; both land under dir. Files are written before
// links, and the manifest last. It fails the test on any error.
func WriteTree(t testing.TB, dir string, files, links map[string]string, manifest string) {
	t.Helper()
	mk := func(p string) string {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	for p, c := range files {
		if err := os.WriteFile(mk(p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		if err := os.Symlink(target, mk(p)); err != nil {
			t.Fatal(err)
		}
	}
	if manifest != "" {
		if err := os.WriteFile(mk(ManifestRel), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// CorpusDir is the corpus of real captures beside the repository:
// ../shared/corpus.
func CorpusDir(t testing.TB) string {
	t.Helper()
	dir, ok := corpusPath()
	if !ok {
		t.Skipf("corpus of real captures not present at %s (a fresh clone has no ../shared)", dir)
	}
	return dir
}

// Unpack extracts a .tar.gz or .tar.bz2 of the corpus, keeping symlinks
// as they are (absolute or relative), and returns the directory that holds
// sys/bus/pci ("" where there is none). The tree is unpacked once per
// archive's content, into internal/testbin's cache directory, and shared
// by every test, test binary and run that asks: creating the ten thousand
// files and symlinks of a sysfs capture costs tens of seconds on this
// project's ext4 disks, and every reader is read-only. A test must not
// change the tree it gets (copy it first).
func Unpack(t testing.TB, archive string) string {
	t.Helper()
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := testbin.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	dst := filepath.Join(cache, "corpus", hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(dst); err != nil {
		// Unpacked beside and renamed into place: a reader never sees a
		// half tree, and of two test binaries unpacking at once, the
		// second's rename fails and its copy goes.
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dst), ".unpack-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		unpackInto(t, archive, b, tmp)
		if err := os.Rename(tmp, dst); err != nil {
			if _, serr := os.Stat(dst); serr != nil {
				t.Fatal(err)
			}
		}
	}
	return pciRoot(dst)
}

func unpackInto(t testing.TB, archive string, b []byte, dst string) {
	t.Helper()
	r, err := decompress(archive, b)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.Symlink(h.Linkname, p)
			}
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var out *os.File
				if out, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
					_, err = io.Copy(out, io.LimitReader(tr, 64<<20))
					out.Close()
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pciRoot is the directory under dst that holds sys/bus/pci, "" where none
// does.
func pciRoot(dst string) string {
	var root string
	_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || root != "" {
			return filepath.SkipDir
		}
		if d.IsDir() && filepath.Base(p) == "pci" && filepath.Base(filepath.Dir(p)) == "bus" && filepath.Base(filepath.Dir(filepath.Dir(p))) == "sys" {
			root = filepath.Dir(filepath.Dir(filepath.Dir(p)))
			return filepath.SkipAll
		}
		return nil
	})
	return root
}

// LockSandboxTests serialises tests that create sandbox cgroups, across
// packages and test processes (go test runs packages in parallel), so that
// a test counting leftover sandboxes sees only its own. The lock is held
// until the test ends.
func LockSandboxTests(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "accel-doctor-sandbox-test.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// CheckParse judges one case of a parser's table test: an error exactly
// when one is wanted, and otherwise the wanted value (cmp.Diff).
func CheckParse[T any](t testing.TB, got T, err error, want T, wantErr bool) {
	t.Helper()
	if (err != nil) != wantErr {
		t.Fatalf("err = %v, wantErr %v", err, wantErr)
	}
	if wantErr {
		return
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// decompress reads the tar stream of a .tar.gz or .tar.bz2 archive's bytes.
func decompress(archive string, b []byte) (io.Reader, error) {
	switch {
	case strings.HasSuffix(archive, ".tar.gz"):
		return gzip.NewReader(bytes.NewReader(b))
	case strings.HasSuffix(archive, ".tar.bz2"):
		return bzip2.NewReader(bytes.NewReader(b)), nil
	}
	return nil, fmt.Errorf("unknown archive %s", archive)
}
