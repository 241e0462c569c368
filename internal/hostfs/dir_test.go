package hostfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirTree is a tree with every kind of entry a Dir reads by name: files,
// a file past the limit, links inside, links that climb out (and stay in),
// links to links through "..", dangling and looping links, a directory, a
// link to a directory, and manifest entries.
func dirTree(t *testing.T) (dir string, manifest *Manifest) {
	t.Helper()
	dir, _ = hostileRoot(t)
	tree(t, dir, map[string]string{
		"sys/bus/pci/drivers/nvidia/bind":         "",
		"sys/bus/pci/drivers/ice/bind":            "",
		"sys/drv/alias/x":                         "",
		"sys/dev/f/vendor":                        "0x10de\n",
		"sys/dev/f/empty":                         "",
		"sys/dev/f/big":                           strings.Repeat("x", 100),
		"sys/dev/f/sub/file":                      "deeper\n",
		"sys/dev/f/to-vendor":                     "->vendor",
		"sys/dev/f/to-hostname":                   "->/etc/hostname",
		"sys/dev/f/climb":                         "->../../../../../../../etc/hostname",
		"sys/dev/f/driver":                        "->../../bus/pci/drivers/nvidia",
		"sys/dev/f/driver-abs":                    "->/sys/bus/pci/drivers/ice",
		"sys/dev/f/driver-dangling":               "->../../bus/pci/drivers/gone",
		"sys/dev/f/driver-via-link":               "->../link-to-drivers/../drivers/nvidia",
		"sys/dev/link-to-drivers":                 "->../bus/pci/drivers/nvidia",
		"sys/dev/f/driver-chain":                  "->to-driver",
		"sys/dev/f/to-driver":                     "->driver",
		"sys/dev/f/driver-file":                   "->vendor",
		"sys/dev/f/loop":                          "->loop2",
		"sys/dev/f/loop2":                         "->loop",
		"sys/dev/f/to-manifest":                   "->/dev/nvidia0",
		"sys/dev/f/outside":                       "->../../../../../../../../outside/secret",
		"sys/dev/f/subdir-link":                   "->sub",
		"sys/dev/f/iommu_group":                   "->../../kernel/iommu_groups/7",
		"sys/kernel/iommu_groups/7/devices/.keep": "",
	})
	m, err := ParseManifest(strings.NewReader("/dev/nvidia0 c 195:0 0666 0:0\n/sys/dev/f/manifest-link l /dev/nvidia0\n/sys/dev/f/manifest-dir d 0755 0:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// dirNames is every name the tests ask a Dir about.
func dirNames(t *testing.T, r *Root, p string) []string {
	names, err := r.ReadDir(p)
	if err != nil {
		t.Fatal(err)
	}
	return append(names, "absent", ".", "..", "", "sub/file", "/vendor", "a/../vendor")
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestDirAnswersAsTheRoot: for every entry of a hostile directory, and
// names that are not entries, a Dir's ReadFileLimit, Readlink and
// StatResolve give what the Root's ReadFileLimit, Readlink, Stat and
// Resolve give of the joined path, byte for byte and error for error; and
// its listing is ReadDir's, manifest entries merged. On both resolvers, on
// a tree with and without a manifest and while a snapshot records.
func TestDirAnswersAsTheRoot(t *testing.T) {
	onDirTrees(t, func(t *testing.T, r *Root) { compareDir(t, r, "/sys/dev/f", 64) })
}

// onDirTrees runs f on dirTree's tree, on both resolvers: without a
// manifest, with one, and with one while a snapshot records.
func onDirTrees(t *testing.T, f func(t *testing.T, r *Root)) {
	bothResolvers(t, func(t *testing.T) {
		dir, m := dirTree(t)
		for _, c := range []struct {
			name   string
			root   *Root
			record bool
		}{
			{"tree", MustNew(dir), false},
			{"manifest", MustNew(dir, WithManifest(m)), false},
			{"recording", MustNew(dir, WithManifest(m)), true},
		} {
			t.Run(c.name, func(t *testing.T) {
				if c.record {
					c.root.Record()
				}
				f(t, c.root)
			})
		}
	})
}

// compareDir checks a Dir of p against the root, reads limited to limit.
func compareDir(t *testing.T, r *Root, p string, limit int64) {
	t.Helper()
	d, err := r.OpenDir(p)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want, err := r.ReadDir(p)
	if err != nil || !slices.Equal(d.Names(), want) {
		t.Errorf("Names() = %q, ReadDir = %q, %v", d.Names(), want, err)
	}
	for _, name := range dirNames(t, r, p) {
		full := path.Join(p, name)
		wb, werr := r.ReadFileLimit(full, limit)
		b, err := d.ReadFileLimit(name, limit)
		if !bytes.Equal(b, wb) || errText(err) != errText(werr) {
			t.Errorf("ReadFileLimit(%q) = %q, %v; the root says %q, %v", name, b, err, wb, werr)
		}
		b, err = d.ReadAttr(name, limit)
		if !bytes.Equal(b, wb) || errText(err) != errText(werr) {
			t.Errorf("ReadAttr(%q) = %q, %v; the root says %q, %v", name, b, err, wb, werr)
		}
		l, err := d.Readlink(name)
		wl, werr := r.Readlink(full)
		if l != wl || errText(err) != errText(werr) {
			t.Errorf("Readlink(%q) = %q, %v; the root says %q, %v", name, l, err, wl, werr)
		}
		n, res, err := d.StatResolve(name)
		wn, werr := r.Stat(full)
		wres := ""
		if werr == nil && wn.Type == TypeDir {
			if hp, err := r.Resolve(full); err == nil {
				wres = hp
			}
		}
		if werr != nil {
			wn = Node{}
		}
		if n != wn || res != wres || errText(err) != errText(werr) {
			t.Errorf("StatResolve(%q) = %+v, %q, %v; Stat and Resolve say %+v, %q, %v", name, n, res, err, wn, wres, werr)
		}
	}
}

// TestDirRecordsAsTheRoot: a snapshot taken while a Dir reads holds what
// it holds when the Root's own methods read the same paths.
func TestDirRecordsAsTheRoot(t *testing.T) {
	dir, m := dirTree(t)
	byRoot, byDir := MustNew(dir, WithManifest(m)), MustNew(dir, WithManifest(m))
	recRoot, recDir := byRoot.Record(), byDir.Record()
	const p = "/sys/dev/f"
	if _, err := byRoot.ReadDir(p); err != nil {
		t.Fatal(err)
	}
	d, err := byDir.OpenDir(p)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range dirNames(t, byRoot, p) {
		full := path.Join(p, name)
		byRoot.ReadFileLimit(full, 64)
		d.ReadFileLimit(name, 64)
		byRoot.Readlink(full)
		d.Readlink(name)
		if n, err := byRoot.Stat(full); err == nil && n.Type == TypeDir {
			byRoot.Resolve(full)
		}
		d.StatResolve(name)
	}
	if fmt.Sprint(recRoot.paths) != fmt.Sprint(recDir.paths) {
		t.Errorf("recorded paths differ:\nroot %v\ndir  %v", recRoot.paths, recDir.paths)
	}
	if fmt.Sprint(recRoot.nodes) != fmt.Sprint(recDir.nodes) {
		t.Errorf("recorded nodes differ:\nroot %v\ndir  %v", recRoot.nodes, recDir.nodes)
	}
}

// TestDirOpensNothingButAFile: a FIFO, a socket or a device node in a
// directory is ErrNotRegular from a Dir and never opened (no IN_OPEN), on
// a tree and on the live root, as from the Root (TestNothingButAFileIsOpened).
func TestDirOpensNothingButAFile(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		dir := t.TempDir()
		dev := filepath.Join(dir, "dev")
		if err := os.Mkdir(dev, 0o755); err != nil {
			t.Fatal(err)
		}
		ns := nodes(t, dev)
		w := newWatch(t, dev)
		for _, c := range []struct {
			name string
			root *Root
			dev  string
		}{
			{"tree", MustNew(dir), "/dev"},
			{"live", MustNew("/"), dev},
		} {
			d, err := c.root.OpenDir(c.dev)
			if err != nil {
				t.Fatal(err)
			}
			for name := range ns {
				if _, err := d.ReadFileLimit(name, 1<<20); !errors.Is(err, ErrNotRegular) {
					t.Errorf("%s: ReadFileLimit(%s): %v, want ErrNotRegular", c.name, name, err)
				}
				if _, err := d.Readlink(name); !errors.Is(err, unix.EINVAL) {
					t.Errorf("%s: Readlink(%s): %v, want EINVAL", c.name, name, err)
				}
				if n, _, err := d.StatResolve(name); err != nil || n.Type == TypeRegular || n.Type == TypeDir {
					t.Errorf("%s: StatResolve(%s) = %v, %v", c.name, name, n.Type, err)
				}
			}
			d.Close()
		}
		// OpenDir opens the directory itself: an event without a name.
		if got := slices.DeleteFunc(w.opened(), func(n string) bool { return n == "" }); len(got) != 0 {
			t.Errorf("opened where a file was expected: %q", got)
		}
	})
}

// TestDirOnAKernelTree: a Dir on sysfs and procfs reads their files
// directly (the kernel-tree rule), on the live root and on a root that is
// not the live one but holds the same mounts (/proc/self/root: what a pod
// sees of /host), and answers as the Root does.
func TestDirOnAKernelTree(t *testing.T) {
	if !kernelTrees() {
		t.Skip("/sys or /proc is not the kernel's here")
	}
	for _, c := range []struct {
		name string
		root *Root
	}{
		{"live", MustNew("/")},
		{"host-root", MustNew("/proc/self/root")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "host-root" && c.root.IsLive() {
				t.Fatal("/proc/self/root is taken for the live root")
			}
			for _, p := range []string{"/sys/devices/system/cpu", "/proc/sys/kernel"} {
				d, err := c.root.OpenDir(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{"online", "possible", "ostype", "absent"} {
					if _, listed := d.entry(name); !listed && name != "absent" {
						continue
					}
					wb, werr := c.root.ReadFileLimit(path.Join(p, name), 1<<16)
					b, err := d.ReadFileLimit(name, 1<<16)
					if !bytes.Equal(b, wb) || errText(err) != errText(werr) {
						t.Errorf("%s/%s: %q, %v; the root says %q, %v", p, name, b, err, wb, werr)
					}
					// One read of a sysfs attribute has it all.
					b, err = d.ReadAttr(name, 1<<16)
					if !bytes.Equal(b, wb) || errText(err) != errText(werr) {
						t.Errorf("ReadAttr %s/%s: %q, %v; the root says %q, %v", p, name, b, err, wb, werr)
					}
				}
				if !d.fsKnown || !d.kern || d.sysfs != strings.HasPrefix(p, "/sys/") {
					t.Errorf("%s: read as kernel tree %v, sysfs %v", p, d.kern, d.sysfs)
				}
				d.Close()
			}
		})
	}
}

// TestReadStopsAtTheSizeFstatGave: a file whose fstat size is exact is
// read in one read(2); a kernel attribute that says 4096 (or 0) whatever
// it holds, and a file that grew, are read to EOF.
func TestReadStopsAtTheSizeFstatGave(t *testing.T) {
	for _, c := range []struct {
		name          string
		chunks        []string
		size          int64
		want          string
		wantReads     int
		wantTooLarge  bool
		limitOverride int64
	}{
		{"exact", []string{"0x10de\n"}, 7, "0x10de\n", 1, false, 0},
		{"sysfs text", []string{"0x10de\n"}, 4096, "0x10de\n", 2, false, 0},
		{"procfs", []string{"a\n", "b\n"}, 0, "a\nb\n", 3, false, 0},
		{"grew", []string{"0x10de\n", "more"}, 6, "0x10de\nmore", 3, false, 0},
		{"shrank", []string{"0x1"}, 7, "0x1", 2, false, 0},
		{"over the limit", []string{strings.Repeat("x", 20)}, 20, "", 0, true, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &chunkReader{chunks: c.chunks}
			limit := int64(1 << 20)
			if c.limitOverride > 0 {
				limit = c.limitOverride
			}
			n, whole := int64(512), int64(0)
			if c.size > 0 && c.size < limit {
				n, whole = c.size+1, c.size
			}
			b, err := readAllLimit(r, n, limit+1, whole)
			if c.wantTooLarge {
				if int64(len(b)) <= limit {
					t.Errorf("read %d bytes of a file over the limit %d", len(b), limit)
				}
				return
			}
			if err != nil || string(b) != c.want || r.reads != c.wantReads {
				t.Errorf("read %q, %v in %d reads; want %q in %d", b, err, r.reads, c.want, c.wantReads)
			}
		})
	}
}

// chunkReader returns one chunk per Read, then EOF.
type chunkReader struct {
	chunks []string
	reads  int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	c.reads++
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// TestParseDirents: a getdents64 buffer as the kernel lays it out, and
// broken ones, which are errors.
func TestParseDirents(t *testing.T) {
	buf := dirent64(1, unix.DT_DIR, ".")
	buf = append(buf, dirent64(2, unix.DT_DIR, "..")...)
	buf = append(buf, dirent64(3, unix.DT_REG, "vendor")...)
	buf = append(buf, dirent64(0, unix.DT_REG, "deleted")...)
	buf = append(buf, dirent64(4, unix.DT_LNK, "driver")...)
	got, err := parseDirents(buf, nil)
	want := []dirent{{"vendor", unix.DT_REG}, {"driver", unix.DT_LNK}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseDirents = %v, %v; want %v", got, err, want)
	}
	for _, bad := range [][]byte{buf[:5], append(dirent64(3, unix.DT_REG, "x")[:18:18], 0xff)} {
		if _, err := parseDirents(bad, nil); err == nil {
			t.Errorf("parseDirents(%x): no error", bad)
		}
	}
	// A record length below the header or past the buffer.
	short := dirent64(3, unix.DT_REG, "x")
	binary.NativeEndian.PutUint16(short[unsafe.Offsetof(unix.Dirent{}.Reclen):], 4)
	if _, err := parseDirents(short, nil); err == nil {
		t.Error("a record length of 4: no error")
	}
	long := dirent64(3, unix.DT_REG, "x")
	binary.NativeEndian.PutUint16(long[unsafe.Offsetof(unix.Dirent{}.Reclen):], 200)
	if _, err := parseDirents(long, nil); err == nil {
		t.Error("a record length past the buffer: no error")
	}
}

// dirent64 lays out one struct linux_dirent64, padded to 8 bytes.
func dirent64(ino uint64, typ uint8, name string) []byte {
	off := int(unsafe.Offsetof(unix.Dirent{}.Name))
	n := (off + len(name) + 1 + 7) &^ 7
	b := make([]byte, n)
	binary.NativeEndian.PutUint64(b[unsafe.Offsetof(unix.Dirent{}.Ino):], ino)
	binary.NativeEndian.PutUint16(b[unsafe.Offsetof(unix.Dirent{}.Reclen):], uint16(n))
	b[unsafe.Offsetof(unix.Dirent{}.Type)] = typ
	copy(b[off:], name)
	return b
}

// FuzzParseDirents: any buffer gives entries or an error, never a panic,
// and every entry is a name that is one path component.
func FuzzParseDirents(f *testing.F) {
	f.Add(append(dirent64(3, unix.DT_REG, "vendor"), dirent64(4, unix.DT_LNK, "driver")...))
	f.Add(dirent64(1, unix.DT_DIR, "."))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseDirents(b, nil)
		if err != nil {
			return
		}
		for _, e := range got {
			if e.name == "" || e.name == "." || e.name == ".." || strings.IndexByte(e.name, 0) >= 0 {
				t.Errorf("entry %q", e.name)
			}
		}
	})
}

// BenchmarkDirReadFile reads the attributes of one function the two ways:
// each by its whole path from the root, and by name in its open directory.
func BenchmarkDirReadFile(b *testing.B) {
	dir := b.TempDir()
	const rel = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"
	attrs := []string{"vendor", "device", "class", "numa_node", "local_cpulist", "current_link_speed"}
	for _, a := range attrs {
		p := filepath.Join(dir, rel, a)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("0x10de\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	r := MustNew(dir)
	b.Run("root", func(b *testing.B) {
		for b.Loop() {
			for _, a := range attrs {
				if _, err := r.ReadFileLimit("/"+rel+"/"+a, 1<<16); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("dir", func(b *testing.B) {
		for b.Loop() {
			d, err := r.OpenDir("/" + rel)
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range attrs {
				if _, err := d.ReadFileLimit(a, 1<<16); err != nil {
					b.Fatal(err)
				}
			}
			d.Close()
		}
	})
}

// BenchmarkDirReadFileOpen splits BenchmarkDirReadFile: one attribute by
// name in a directory held open (closed to others: a direct open), the
// same in a directory others may write (an O_PATH open and a reopen), the
// same by its whole path from the root, and the OpenDir (open, list,
// close) a Dir costs once.
func BenchmarkDirReadFileOpen(b *testing.B) {
	dir := b.TempDir()
	const rel = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"
	p := filepath.Join(dir, rel, "vendor")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("0x10de\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	r := MustNew(dir)
	d, err := r.OpenDir("/" + rel)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.Run("dir-file", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.ReadFileLimit("vendor", 1<<16); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same directory open to others' writes: each read takes the
	// O_PATH open and the reopen (closedDir).
	b.Run("open-dir-file", func(b *testing.B) {
		if err := os.Chmod(filepath.Dir(p), 0o777); err != nil {
			b.Fatal(err)
		}
		defer os.Chmod(filepath.Dir(p), 0o755)
		d, err := r.OpenDir("/" + rel)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		for b.Loop() {
			if _, err := d.ReadFileLimit("vendor", 1<<16); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("root-file", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.ReadFileLimit("/"+rel+"/vendor", 1<<16); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("opendir", func(b *testing.B) {
		for b.Loop() {
			d, err := r.OpenDir("/" + rel)
			if err != nil {
				b.Fatal(err)
			}
			d.Close()
		}
	})
}

// TestDirKernelTreeMountOverAName: a FIFO mounted over a name of a kernel
// tree (as runc mounts /dev/null over /proc/kcore) is ErrNotRegular from a
// Dir and never opened: the direct open refuses to cross into the mount,
// and the name takes the O_PATH path. In a private mount namespace of one
// thread, over a procfs mounted in a temp tree; skipped where that cannot
// be made.
func TestDirKernelTreeMountOverAName(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifos := t.TempDir()
	fifo := filepath.Join(fifos, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWatch(t, fifos)
	err := withProcMounted(t, dir, func() error {
		if err := unix.Mount(fifo, filepath.Join(dir, "proc/sys/kernel/osrelease"), "", unix.MS_BIND, ""); err != nil {
			return errSkip{err}
		}
		d, err := MustNew(dir).OpenDir("/proc/sys/kernel")
		if err != nil {
			return err
		}
		defer d.Close()
		if _, err := d.ReadFileLimit("osrelease", 1<<10); !errors.Is(err, ErrNotRegular) {
			return fmt.Errorf("ReadFileLimit over the mounted FIFO: %v, want ErrNotRegular", err)
		}
		if b, err := d.ReadFileLimit("ostype", 1<<10); err != nil || !strings.HasPrefix(string(b), "Linux") {
			return fmt.Errorf("ReadFileLimit(ostype) beside it: %q, %v", b, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.opened(); len(got) != 0 {
		t.Errorf("opened the FIFO mounted over a kernel tree's name: %q", got)
	}
}

// TestClosedDir: the directories whose listing a Dir trusts until it
// opens an entry.
func TestClosedDir(t *testing.T) {
	const me = 1000
	for _, c := range []struct {
		mode uint32
		uid  uint32
		want bool
	}{
		{unix.S_IFDIR | 0o755, 0, true},
		{unix.S_IFDIR | 0o700, me, true},
		{unix.S_IFDIR | 0o555, me, true},
		{unix.S_IFDIR | 0o775, 0, false},    // the group may write
		{unix.S_IFDIR | 0o757, 0, false},    // anyone may write
		{unix.S_IFDIR | 0o1777, 0, false},   // /tmp: sticky, still others' names
		{unix.S_IFDIR | 0o755, 1001, false}, // another user's
		{unix.S_IFREG | 0o644, 0, false},    // not a directory
		{unix.S_IFDIR | unix.S_ISGID | 0o755, me, true},
	} {
		if got := closedDir(unix.Stat_t{Mode: c.mode, Uid: c.uid}, me); got != c.want {
			t.Errorf("closedDir(mode %o, uid %d) = %v, want %v", c.mode, c.uid, got, c.want)
		}
	}
}

// TestDirStaleListing: a name listed as a regular file and replaced by a
// FIFO before it is read. In a directory others may write, the Dir does
// not trust its listing: ErrNotRegular, and the FIFO is never opened. In
// a closed one (only root and the owner could have replaced it, and the
// owner did), the listing is trusted and the direct open meets the FIFO:
// fstat refuses it, unread. The second half pins which directories take
// the direct open.
func TestDirStaleListing(t *testing.T) {
	if !openat2Works() {
		t.Skip("this kernel has no openat2: every read takes the O_PATH path")
	}
	for _, c := range []struct {
		name   string
		mode   os.FileMode
		opened bool
	}{
		{"open to others", 0o777, false},
		{"closed", 0o755, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sub := filepath.Join(dir, "d")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			var sfs unix.Statfs_t
			if err := unix.Statfs(sub, &sfs); err != nil || !localFS[int64(sfs.Type)] {
				t.Skipf("the temp directory is not on a local file system (statfs type %#x, %v)", sfs.Type, err)
			}
			if err := os.Chmod(sub, c.mode); err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(sub, "f")
			if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := MustNew(dir).OpenDir("/d")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if !slices.Contains(d.Names(), "f") {
				t.Fatalf("listing %q", d.Names())
			}
			fifo := filepath.Join(dir, "fifo")
			if err := unix.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(fifo, f); err != nil {
				t.Fatal(err)
			}
			w := newWatch(t, sub)
			if _, err := d.ReadFileLimit("f", 1<<10); !errors.Is(err, ErrNotRegular) {
				t.Errorf("ReadFileLimit(f) after the swap: %v, want ErrNotRegular", err)
			}
			got := slices.DeleteFunc(w.opened(), func(n string) bool { return n == "" })
			if opened := slices.Contains(got, "f"); opened != c.opened {
				t.Errorf("the FIFO opened: %v, want %v (events %q)", opened, c.opened, got)
			}
		})
	}
}

// TestResolveDirAnswersAsTheTwoCalls: ResolveDir of every entry of a
// hostile directory (links to directories, into the manifest, out of the
// root, dangling and looping; files; a directory), and of names that are
// not entries, gives what Resolve and then OpenDir of its answer give:
// the path, the error, the listing, and a Dir that reads as that one
// does. On both resolvers, with a manifest and while a snapshot records.
func TestResolveDirAnswersAsTheTwoCalls(t *testing.T) {
	onDirTrees(t, func(t *testing.T, r *Root) {
		names := append(dirNames(t, r, "/sys/dev/f"), "../link-to-drivers", "../../dev")
		for _, name := range names {
			p := path.Join("/sys/dev/f", name)
			wreal, werr := r.Resolve(p)
			var wd *Dir
			var wderr error
			if werr == nil {
				wd, wderr = r.OpenDir(wreal)
			}
			real, d, derr, err := r.ResolveDir(p)
			if real != wreal || errText(err) != errText(werr) || errText(derr) != errText(wderr) {
				t.Errorf("ResolveDir(%s) = %q, %v, %v; Resolve and OpenDir say %q, %v, %v", p, real, derr, err, wreal, wderr, werr)
			}
			if (d == nil) != (wd == nil) {
				t.Errorf("ResolveDir(%s): a Dir %v, OpenDir's %v", p, d != nil, wd != nil)
				continue
			}
			if d == nil {
				continue
			}
			if d.Path() != wd.Path() || !slices.Equal(d.Names(), wd.Names()) {
				t.Errorf("ResolveDir(%s): %s %q; OpenDir: %s %q", p, d.Path(), d.Names(), wd.Path(), wd.Names())
			}
			for _, n := range d.Names() {
				b, err := d.ReadFileLimit(n, 64)
				wb, werr := wd.ReadFileLimit(n, 64)
				if !bytes.Equal(b, wb) || errText(err) != errText(werr) {
					t.Errorf("ResolveDir(%s): ReadFileLimit(%s) = %q, %v; OpenDir's Dir: %q, %v", p, n, b, err, wb, werr)
				}
			}
			d.Close()
			wd.Close()
		}
	})
}

// BenchmarkResolveDir: a device's directory reached through its bus link,
// the two calls against ResolveDir's one open.
func BenchmarkResolveDir(b *testing.B) {
	dir := b.TempDir()
	const rel = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"
	tree(b, dir, map[string]string{
		rel + "/vendor":                    "0x10de\n",
		"sys/bus/pci/devices/0000:03:00.0": "->../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0",
	})
	r := MustNew(dir)
	const bus = "/sys/bus/pci/devices/0000:03:00.0"
	b.Run("Resolve+OpenDir", func(b *testing.B) {
		for b.Loop() {
			real, err := r.Resolve(bus)
			if err != nil {
				b.Fatal(err)
			}
			d, err := r.OpenDir(real)
			if err != nil {
				b.Fatal(err)
			}
			d.Close()
		}
	})
	b.Run("ResolveDir", func(b *testing.B) {
		for b.Loop() {
			_, d, derr, err := r.ResolveDir(bus)
			if err != nil || derr != nil {
				b.Fatal(err, derr)
			}
			d.Close()
		}
	})
}

// readAttrFD keeps what one read gave (an empty attribute is empty, not
// nil), goes on reading an attribute larger than its buffer (64 KiB pages
// make pages that large), and refuses one past the limit.
func TestReadAttrFD(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		size  int
		limit int64
		err   bool
	}{{0, 1 << 16, false}, {7, 1 << 16, false}, {attrBufSize - 1, 1 << 16, false}, {attrBufSize, 1 << 16, false},
		{20000, 1 << 16, false}, {20000, 10000, true}, {100, 100, false}, {101, 100, true}} {
		p := filepath.Join(dir, "attr")
		want := bytes.Repeat([]byte("x"), c.size)
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAttrFD(fd, c.limit)
		unix.Close(fd)
		switch {
		case c.err && !errors.Is(err, ErrTooLarge):
			t.Errorf("%d bytes, limit %d: %v, want ErrTooLarge", c.size, c.limit, err)
		case !c.err && (err != nil || got == nil || !bytes.Equal(got, want)):
			t.Errorf("%d bytes, limit %d: %d bytes (nil %v), %v", c.size, c.limit, len(got), got == nil, err)
		}
	}
}
