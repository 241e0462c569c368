package hostfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tgz gzips raw tar bytes.
func tgz(raw []byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write(raw)
	gz.Close()
	return buf.Bytes()
}

// archiveOf writes headers (and data for regular files: "x" repeated to
// Size) as a .tar.gz.
func archiveOf(hs ...*tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		if h.Format == 0 {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return tgz(buf.Bytes())
}

// rawBlock is a 512-byte tar header written by hand, for what
// archive/tar's writer refuses to write (sparse entries, chains of
// special headers, directories with data). magic is "ustar\x0000" (POSIX)
// or "ustar  \x00" (GNU).
func rawBlock(name string, typ byte, size int64, magic string, extra func(b []byte)) []byte {
	b := make([]byte, 512)
	copy(b[0:], name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], "00000000000\x00")
	b[156] = typ
	copy(b[257:], magic)
	if extra != nil {
		extra(b)
	}
	for i := 148; i < 156; i++ {
		b[i] = ' '
	}
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

const posix, gnu = "ustar\x0000", "ustar  \x00"

func padded(b []byte) []byte {
	if n := len(b) % 512; n != 0 {
		b = append(b, make([]byte, 512-n)...)
	}
	return b
}

func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3
	for {
		s := fmt.Sprintf("%d %s=%s\n", n, k, v)
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

// paxEntry is an 'x' header with records, then a header of its own.
func paxEntry(records string, next []byte) []byte {
	out := rawBlock("PaxHeaders/x", 'x', int64(len(records)), posix, nil)
	out = append(out, padded([]byte(records))...)
	return append(out, next...)
}

var endOfArchive = make([]byte, 1024)

// limitErr asserts err is a LimitError on bound.
func limitErr(t *testing.T, err error, bound string) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != bound {
		t.Errorf("err = %v; want the bound on %s", err, bound)
		return
	}
	if !strings.Contains(err.Error(), bound) {
		t.Errorf("the error does not name its bound: %v", err)
	}
}

// sizeOfTree counts the regular files under dir and their bytes.
func sizeOfTree(t *testing.T, dir string) (files int, bytes int64) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			files++
			bytes += fi.Size()
		}
		return nil
	})
	return files, bytes
}

// TestUnpackRefusesSparseEntries: a sparse entry, of either GNU kind, is
// refused before a byte of it is written (a 273-byte archive used to write
// 250 MiB of zeros into RAM-backed /dev/shm).
func TestUnpackRefusesSparseEntries(t *testing.T) {
	const realSize = 250 << 20
	// PAX, GNU format 1.0: the map is in the data; the logical size is
	// realsize.
	pax1 := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", "big") + paxRecord("GNU.sparse.realsize", fmt.Sprint(realSize))
	sparse1 := paxEntry(pax1, append(rawBlock("GNUSparseFile.0/big", '0', 512, posix, nil), padded([]byte("1\n0\n0\n"))...))
	// PAX, GNU format 0.1: the map in a record.
	pax01 := paxRecord("GNU.sparse.numblocks", "1") + paxRecord("GNU.sparse.map", "0,0") +
		paxRecord("GNU.sparse.size", fmt.Sprint(realSize))
	sparse01 := paxEntry(pax01, rawBlock("big", '0', 0, posix, nil))
	// Old GNU: type 'S', the map in the header, realsize at offset 483.
	old := rawBlock("big", 'S', 0, gnu, func(b []byte) {
		copy(b[386:], fmt.Sprintf("%011o\x00", 0)) // offset
		copy(b[398:], fmt.Sprintf("%011o\x00", 0)) // numbytes
		copy(b[483:], fmt.Sprintf("%011o\x00", realSize))
	})
	for name, raw := range map[string][]byte{"pax 1.0": sparse1, "pax 0.1": sparse01, "old gnu": old} {
		dir := t.TempDir()
		arch := tgz(append(raw, endOfArchive...))
		err := UnpackSnapshot(bytes.NewReader(arch), dir)
		if !errors.Is(err, ErrSparse) {
			t.Errorf("%s (%d bytes): err = %v, want ErrSparse", name, len(arch), err)
		}
		if n, b := sizeOfTree(t, dir); n != 0 || b != 0 {
			t.Errorf("%s: wrote %d files, %d bytes", name, n, b)
		}
	}
}

// TestUnpackCutsHeaderChains: a chain of PAX headers or of GNU long-name
// headers (archive/tar applies each to the next entry and returns none of
// them) is cut while it is read, at the bound on one entry's headers.
// Before the bound, a 4.4 MB chain cost 9 s: archive/tar reads such a chain
// in milliseconds; the time went to the unpacker's per-entry walk of every
// ancestor (noLinkAbove's lstats, 75% of the CPU in a profile, and
// MkdirAll's, 17%) for the deep names the chain carried.
func TestUnpackCutsHeaderChains(t *testing.T) {
	rec := paxRecord("comment", strings.Repeat("a", 400))
	var pax, long []byte
	for len(pax) < 4_400_000 {
		pax = append(pax, rawBlock("x", 'x', int64(len(rec)), posix, nil)...)
		pax = append(pax, padded([]byte(rec))...)
	}
	name := strings.Repeat("a/", 2000)
	for len(long) < 4_400_000 {
		long = append(long, rawBlock("././@LongLink", 'L', int64(len(name)), gnu, nil)...)
		long = append(long, padded([]byte(name))...)
	}
	for kind, raw := range map[string][]byte{"pax": pax, "gnu long name": long} {
		raw = append(raw, rawBlock("f", '0', 0, posix, nil)...)
		err := UnpackSnapshot(bytes.NewReader(tgz(append(raw, endOfArchive...))), t.TempDir())
		t.Run(kind, func(t *testing.T) { limitErr(t, err, "header bytes per entry") })
	}
}

// TestUnpackBounds: each bound refuses an archive past it with an error
// naming it. The bounds are made small here so that each case is cheap.
func TestUnpackBounds(t *testing.T) {
	small := unpackLimits{archiveBytes: 64 << 10, fileBytes: 1000, writeBytes: 4 * 4096, entries: 8,
		entryHeader: 16 << 10, headerBytes: 8 << 10, depth: 4, nameBytes: 100}
	files := func(n int, size int64) []*tar.Header {
		var hs []*tar.Header
		for i := 0; i < n; i++ {
			hs = append(hs, &tar.Header{Name: fmt.Sprintf("f%d", i), Typeflag: tar.TypeReg, Size: size, Mode: 0o644})
		}
		return hs
	}
	noise := make([]byte, 100<<10)
	rand.Read(noise)
	cases := []struct {
		name, bound string
		arch        []byte
	}{
		{"entries", "entries", archiveOf(files(9, 0)...)},
		{"directories count as entries", "entries", archiveOf(&tar.Header{Name: "a/b/c/d", Typeflag: tar.TypeReg}, &tar.Header{Name: "e/f/g/h", Typeflag: tar.TypeReg}, &tar.Header{Name: "i", Typeflag: tar.TypeReg})},
		{"bytes per file", "bytes per file", archiveOf(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 1001})},
		{"bytes written, in pages", "bytes written (in 4 KiB pages)", archiveOf(files(5, 1)...)},
		{"header bytes", "header bytes", archiveOf(files(8, 0)...)}, // 8 x 1.5 KiB of PAX-format headers
		{"depth", "path depth", archiveOf(&tar.Header{Name: "a/b/c/d/e", Typeflag: tar.TypeDir})},
		{"name", "bytes of a name", archiveOf(&tar.Header{Name: strings.Repeat("n", 101), Typeflag: tar.TypeReg})},
		{"link target", "bytes of a link target", archiveOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: strings.Repeat("t", 101)})},
		{"archive bytes", "archive bytes (compressed)", archiveOf(&tar.Header{Name: "noise", Typeflag: tar.TypeReg, Size: int64(len(noise))})},
	}
	// The noise entry needs its own content: incompressible.
	{
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "noise", Typeflag: tar.TypeReg, Size: int64(len(noise)), Format: tar.FormatPAX})
		tw.Write(noise)
		tw.Close()
		cases[len(cases)-1].arch = tgz(buf.Bytes())
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lim := small
			if c.bound == "header bytes" {
				// Headers alone: PAX records on every entry.
				var hs []*tar.Header
				for i := 0; i < 8; i++ {
					hs = append(hs, &tar.Header{Name: fmt.Sprintf("f%d", i), Typeflag: tar.TypeReg,
						PAXRecords: map[string]string{"comment": strings.Repeat("c", 1000)}})
				}
				c.arch = archiveOf(hs...)
				lim.entries = 100
			}
			if c.bound == "archive bytes (compressed)" {
				lim.fileBytes, lim.writeBytes = 1<<20, 1<<20
			}
			err := unpackInto(bytes.NewReader(c.arch), t.TempDir(), lim, nil)
			limitErr(t, err, c.bound)
		})
	}
	// At the real bounds, cases that cost nothing to build.
	limitErr(t, UnpackSnapshot(bytes.NewReader(archiveOf(&tar.Header{Name: strings.Repeat("d/", 129), Typeflag: tar.TypeDir})), t.TempDir()), "path depth")
	limitErr(t, UnpackSnapshot(bytes.NewReader(archiveOf(&tar.Header{Name: strings.Repeat("n", 256), Typeflag: tar.TypeReg})), t.TempDir()), "bytes of a name component")
	limitErr(t, UnpackSnapshot(bytes.NewReader(archiveOf(&tar.Header{Name: strings.Repeat("d/", 2000) + "f", Typeflag: tar.TypeReg})), t.TempDir()), "path depth")
	// A header that claims 17 MiB is refused before its data is read.
	big := rawBlock("big", '0', 17<<20, posix, nil)
	limitErr(t, UnpackSnapshot(bytes.NewReader(tgz(big)), t.TempDir()), "bytes per file")
}

// TestUnpackRefusesMalformedEntries: entries a snapshot never holds.
func TestUnpackRefusesMalformedEntries(t *testing.T) {
	outside := t.TempDir()
	for name, arch := range map[string][]byte{
		"directory with data": tgz(append(rawBlock("d/", '5', 100<<20, posix, nil), endOfArchive...)),
		"hard link":           archiveOf(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "x"}),
		"fifo":                archiveOf(&tar.Header{Name: "p", Typeflag: tar.TypeFifo}),
		"char device":         archiveOf(&tar.Header{Name: "c", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}),
		"file twice":          archiveOf(&tar.Header{Name: "f", Typeflag: tar.TypeReg}, &tar.Header{Name: "f", Typeflag: tar.TypeReg}),
		"file over a directory": archiveOf(&tar.Header{Name: "d/", Typeflag: tar.TypeDir},
			&tar.Header{Name: "d", Typeflag: tar.TypeReg}),
		"directory through a file": archiveOf(&tar.Header{Name: "f", Typeflag: tar.TypeReg},
			&tar.Header{Name: "f/x", Typeflag: tar.TypeReg}),
		"directory over a link": archiveOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside},
			&tar.Header{Name: "l/", Typeflag: tar.TypeDir}),
		"deep through a link": archiveOf(&tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: outside},
			&tar.Header{Name: "a/l/b/c/d", Typeflag: tar.TypeReg}),
		"climbing link target": archiveOf(&tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../../.."},
			&tar.Header{Name: "a/l/x", Typeflag: tar.TypeReg}),
		"empty link target": archiveOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: ""}),
	} {
		if err := UnpackSnapshot(bytes.NewReader(arch), t.TempDir()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("unpack wrote outside its directory: %v", ents)
	}
}

// TestUnpackIsLinearInDepth: 2,000 nested directories (47 s before) unpack
// with the depth bound lifted, each entry made from its parent's fd; at the
// real bound they are refused at level 129.
func TestUnpackIsLinearInDepth(t *testing.T) {
	var hs []*tar.Header
	name := ""
	for i := 0; i < 2000; i++ {
		name += "a/"
		hs = append(hs, &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	hs = append(hs, &tar.Header{Name: name + "f", Typeflag: tar.TypeReg, Size: 3})
	arch := archiveOf(hs...)
	limitErr(t, UnpackSnapshot(bytes.NewReader(arch), t.TempDir()), "path depth")
	// mkdir on this machine's disk-backed /tmp costs 1 ms whatever the
	// depth; tmpfs keeps the test short.
	parent := ""
	if shmFits("/dev/shm", defaultLimits) {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "hostfs-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	lim := defaultLimits
	lim.depth = 4096
	if err := unpackInto(bytes.NewReader(arch), dir, lim, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, name, "f")); err != nil || string(b) != "xxx" {
		t.Errorf("the deepest file: %q, %v", b, err)
	}
}

// TestOpenSnapshotWantsADescription: a .tar.gz without
// /.accel-doctor/snapshot.json, or with one that is not a description, is
// not a snapshot; its unpack directory is removed.
func TestOpenSnapshotWantsADescription(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	for name, c := range map[string]struct {
		arch []byte
		want error
	}{
		"no description": {archiveOf(&tar.Header{Name: "sys/x", Typeflag: tar.TypeReg, Size: 1}), ErrNotSnapshot},
		"not json":       {archiveOf(&tar.Header{Name: ".accel-doctor/snapshot.json", Typeflag: tar.TypeReg, Size: 3}), nil},
		"format 0":       {withMeta(`{"tool":"x"}`), nil},
	} {
		_, _, err := OpenSnapshot(bytes.NewReader(c.arch))
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) != 0 {
		t.Errorf("refused snapshots left %d directories behind", len(ents))
	}
	r, cleanup, err := OpenSnapshot(bytes.NewReader(withMeta(`{"format":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if m, ok := r.ReadSnapshotMeta(); !ok || m.Format != 1 {
		t.Errorf("meta = %+v, %v", m, ok)
	}
}

func withMeta(js string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: ".accel-doctor/snapshot.json", Typeflag: tar.TypeReg, Size: int64(len(js)), Mode: 0o444})
	tw.Write([]byte(js))
	tw.Close()
	return tgz(buf.Bytes())
}

// TestTreeArchiveIsASnapshotJudgedLikeATree: WriteTreeArchive's archive
// carries a description that says it is a tree, is the same bytes every
// time, and replays with tree coverage (a missing /dev is "not captured").
func TestTreeArchiveIsASnapshotJudgedLikeATree(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"sys/bus/pci/devices/x":          "->../../../devices/x",
		"sys/devices/x/vendor":           "0x10de\n",
		".accel-doctor/devices.manifest": "/dev2/a c 1:3 0666 0:0\n",
	})
	var a, b bytes.Buffer
	meta := SnapshotMeta{Tool: "test", Source: "a tree", Created: time.Now(), SelfPID: 7} // both dropped: a tree archive is reproducible
	if err := WriteTreeArchive(dir, &a, meta); err != nil {
		t.Fatal(err)
	}
	if err := WriteTreeArchive(dir, &b, meta); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two archives of one tree differ")
	}
	r, cleanup, err := OpenSnapshot(&a)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	m, ok := r.ReadSnapshotMeta()
	want := SnapshotMeta{Format: TreeFormat, Tree: true, Tool: "test", Source: "a tree", Files: 2, Nodes: 1}
	if !ok || m != want {
		t.Errorf("meta = %+v, want %+v", m, want)
	}
	if r.Covers("/dev/nvidia0") || !r.Covers("/sys/devices/x/absent") {
		t.Error("a tree archive is not judged like a tree")
	}
	// A tree that holds a description of its own is refused.
	tree(t, dir, map[string]string{".accel-doctor/snapshot.json": "{}"})
	if err := WriteTreeArchive(dir, &bytes.Buffer{}, meta); err == nil {
		t.Error("a tree with its own snapshot.json was archived")
	}
}

// fuzzScratch is a directory for one fuzzing process, removed when it
// ends: under /dev/shm when that is a writable tmpfs, else t.TempDir.
func fuzzScratch(f *testing.F) string {
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) != nil || st.Type != unix.TMPFS_MAGIC || unix.Access("/dev/shm", unix.W_OK) != nil {
		return f.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "accel-doctor-fuzz-")
	if err != nil {
		return f.TempDir()
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// FuzzUnpackSnapshot: whatever the bytes, an unpack ends (no hang, no
// panic), writes nothing outside its directory, creates nothing but
// directories, links and regular files, and stays within its bounds.
func FuzzUnpackSnapshot(f *testing.F) {
	f.Add(archiveOf(&tar.Header{Name: "sys/x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(archiveOf(&tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/"}, &tar.Header{Name: "a/x", Typeflag: tar.TypeReg}))
	f.Add(archiveOf(&tar.Header{Name: "a/b/c/", Typeflag: tar.TypeDir}, &tar.Header{Name: "a/b/c/d", Typeflag: tar.TypeReg, Size: 10}))
	f.Add(withMeta(`{"format":2}`))
	f.Add(tgz(paxEntry(paxRecord("GNU.sparse.map", "0,0")+paxRecord("GNU.sparse.numblocks", "1"), append(rawBlock("s", '0', 0, posix, nil), endOfArchive...))))
	f.Add(tgz(append(rawBlock("d/", '5', 1<<20, posix, nil), endOfArchive...)))
	lim := unpackLimits{archiveBytes: 1 << 20, fileBytes: 4096, writeBytes: 16 * 4096, entries: 64,
		entryHeader: 16 << 10, headerBytes: 256 << 10, depth: 16, nameBytes: 1024}
	// One directory for the process, on tmpfs where there is one (as
	// OpenSnapshot prefers it): a t.TempDir per input cost 20 to 40 ms of
	// ext4 directory creation and removal, which was all of an execution.
	// Each input gets a fresh root beside a directory that must stay
	// empty, and its root is removed before the next.
	base := fuzzScratch(f)
	dir, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}()
		_ = unpackInto(bytes.NewReader(b), dir, lim, nil)
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("wrote outside: %v", ents)
		}
		n := 0
		var pages int64
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return nil
			}
			n++
			var st unix.Stat_t
			unix.Lstat(p, &st)
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				if st.Size > lim.fileBytes {
					t.Fatalf("%s: %d bytes", p, st.Size)
				}
				pages += pageBytes(st.Size)
			case unix.S_IFDIR, unix.S_IFLNK:
			default:
				t.Fatalf("%s: mode %o", p, st.Mode)
			}
			return nil
		})
		if n > lim.entries || pages > lim.writeBytes {
			t.Fatalf("%d entries, %d bytes in pages", n, pages)
		}
	})
}
