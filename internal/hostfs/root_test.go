package hostfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// tree writes files ("path": "content") and symlinks ("path": "->target")
// under dir.
func tree(t testing.TB, dir string, entries map[string]string) {
	t.Helper()
	files, links := map[string]string{}, map[string]string{}
	for p, c := range entries {
		if target, ok := strings.CutPrefix(c, "->"); ok {
			links[p] = target
		} else {
			files[p] = c
		}
	}
	testutil.WriteTree(t, dir, files, links, "")
}

// TestManifestRelMatchesManifestPath: testutil spells the manifest path
// out because it imports no package of this module.
func TestManifestRelMatchesManifestPath(t *testing.T) {
	if want := "/" + testutil.ManifestRel; ManifestPath != want {
		t.Errorf("ManifestPath = %q; testutil.ManifestRel gives %q", ManifestPath, want)
	}
}

func TestReadsStayInsideRoot(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"sys/devices/pci0000:00/0000:00:02.0/vendor": "0x10de\n",
		"sys/bus/pci/devices/0000:00:02.0":           "->../../../devices/pci0000:00/0000:00:02.0",
		"etc/hostname":                               "fixture\n",
		"escape/abs":                                 "->/etc/hostname",
		"escape/up":                                  "->../../../../../../../etc/hostname",
	})
	r := MustNew(dir)
	v, err := r.ReadString("/sys/bus/pci/devices/0000:00:02.0/vendor")
	if err != nil || v != "0x10de" {
		t.Fatalf("vendor = %q, %v", v, err)
	}
	// Absolute and climbing links resolve inside the root, never on the
	// machine running the test.
	for _, p := range []string{"/escape/abs", "/escape/up"} {
		v, err := r.ReadString(p)
		if err != nil || v != "fixture" {
			t.Errorf("%s = %q, %v; want the root's own /etc/hostname", p, v, err)
		}
	}
	got, err := r.Resolve("/sys/bus/pci/devices/0000:00:02.0")
	if err != nil || got != "/sys/devices/pci0000:00/0000:00:02.0" {
		t.Errorf("Resolve = %q, %v", got, err)
	}
	if _, err := r.ReadFile("relative/path"); err == nil {
		t.Error("a relative host path was accepted")
	}
}

func TestHostileTree(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"sys/bus/pci/devices/loop-a": "->loop-b",
		"sys/bus/pci/devices/loop-b": "->loop-a",
		"sys/bus/pci/devices/self":   "->self/x",
	})
	big := filepath.Join(dir, "sys/big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse 1 GiB
		t.Fatal(err)
	}
	f.Close()
	fifo := filepath.Join(dir, "sys/fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	r := MustNew(dir)
	start := time.Now()
	if _, err := r.ReadFile("/sys/bus/pci/devices/loop-a/vendor"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("loop: err = %v, want ELOOP", err)
	}
	if _, err := r.ReadFile("/sys/bus/pci/devices/self"); err == nil {
		t.Error("self loop: no error")
	}
	if _, err := r.ReadFile("/sys/big"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("1 GiB file: err = %v, want ErrTooLarge", err)
	}
	if _, err := r.ReadFile("/sys/fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("fifo: err = %v, want ErrNotRegular", err)
	}
	if _, err := r.Stat("/sys/bus/pci/devices/loop-a"); err == nil {
		t.Error("Stat of a loop: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hostile reads took %v", d) // a hang guard, not a speed goal
	}
}

func TestManifestNodesAndRealNodes(t *testing.T) {
	dir := t.TempDir()
	man := `# test
/dev/nvidia0 c 195:0 0666 0:0
/dev/dri d 0755 0:0
/dev/dri/renderD128 c 226:128 0660 0:109
/dev/char/195:0 l ../nvidia0
/sys/kernel/iommu_groups d 0755 0:0
`
	tree(t, dir, map[string]string{
		".accel-doctor/devices.manifest": man,
		"dev/real-link":                  "->nvidia0",
	})
	r := MustNew(dir)
	n, err := r.Stat("/dev/char/195:0")
	if err != nil {
		t.Fatal(err)
	}
	want := Node{Path: "/dev/nvidia0", Type: TypeChar, Major: 195, Minor: 0, Mode: 0o666, FromManifest: true}
	if d := cmp.Diff(want, n); d != "" {
		t.Errorf("Stat via manifest link (-want +got):\n%s", d)
	}
	// A real link to a manifest node works too.
	if n, err := r.Stat("/dev/real-link"); err != nil || n.Major != 195 {
		t.Errorf("real link to manifest node: %+v, %v", n, err)
	}
	names, err := r.ReadDir("/dev/dri")
	if err != nil || !cmp.Equal(names, []string{"renderD128"}) {
		t.Errorf("ReadDir(/dev/dri) = %v, %v", names, err)
	}
	// A manifest directory with nothing in it is an empty directory; a
	// path the manifest does not list stays absent.
	if names, err := r.ReadDir("/sys/kernel/iommu_groups"); err != nil || len(names) != 0 {
		t.Errorf("ReadDir(empty manifest dir) = %v, %v", names, err)
	}
	if _, err := r.ReadDir("/sys/class/iommu"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir(absent) err = %v, want not-exist", err)
	}
	if _, err := r.Lstat("/dev/nvidia1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent node: err = %v, want not-exist", err)
	}

	// A real node shadows the manifest: it is stat'ed as it is.
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	if err := unix.Mknod(filepath.Join(dir, "dev/nvidia0"), unix.S_IFCHR|0o600, int(unix.Mkdev(195, 7))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	n, err = r.Stat("/dev/nvidia0")
	if err != nil || n.FromManifest || n.Minor != 7 || n.Mode != 0o600 {
		t.Errorf("real node: %+v, %v", n, err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	in := `/dev/a c 1:3 0666 0:0
/dev/b b 8:0 0660 0:6
/dev/d d 1777 0:0
/dev/l l ../a
/dev/f f 0644 10:20
`
	m, err := ParseManifest(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ParseManifest(bytes.NewReader(m.Format()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Format(), m2.Format()) {
		t.Errorf("round trip differs:\n%s\n%s", m.Format(), m2.Format())
	}
	if n, _ := m.Lookup("/dev/d"); n.Mode&fs.ModeSticky == 0 {
		t.Errorf("sticky bit lost: %v", n.Mode)
	}
	for _, bad := range []string{
		"dev/a c 1:3 0666 0:0",                         // relative
		"/dev/a x 1:3 0666 0:0",                        // bad type
		"/dev/a c 1 0666 0:0",                          // no minor
		"/dev/a c 1:3 0999 0:0",                        // bad mode
		"/dev/a c 1:3 0666 root:root",                  // names, not ids
		"/dev/a c 4096:0 0666 0:0",                     // major out of range
		"/dev/l l",                                     // no target
		"/dev/a c 1:3 0666 0:0\n/dev/a c 1:3 0666 0:0", // duplicate
		"/dev/../etc c 1:3 0666 0:0",                   // not clean
	} {
		if _, err := ParseManifest(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// Children lists a directory's entries, sorted, from a parsed manifest
// and after Add and Remove: the index by directory follows every change,
// and a directory whose last entry went lists nothing.
func TestManifestChildren(t *testing.T) {
	m, err := ParseManifest(strings.NewReader("/dev/nvidia1 c 195:1 0666 0:0\n/dev/dri d 0755 0:0\n/dev/dri/renderD128 c 226:128 0666 0:0\n/dev/nvidia0 c 195:0 0666 0:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(when, dir string, want []string) {
		t.Helper()
		if d := cmp.Diff(want, m.Children(dir)); d != "" {
			t.Errorf("%s: Children(%s) (-want +got):\n%s", when, dir, d)
		}
	}
	check("parsed", "/dev", []string{"dri", "nvidia0", "nvidia1"})
	check("parsed", "/dev/dri", []string{"renderD128"})
	check("parsed", "/dev/vfio", nil)
	m.Add(Node{Path: "/dev/vfio/vfio", Type: TypeChar, Major: 10, Minor: 196, Mode: 0o666})
	m.Add(Node{Path: "/dev/nvidia0", Type: TypeChar, Major: 195, Mode: 0o600}) // replaces
	m.Remove("/dev/dri/renderD128")
	m.Remove("/dev/absent")
	check("changed", "/dev", []string{"dri", "nvidia0", "nvidia1"})
	check("changed", "/dev/vfio", []string{"vfio"})
	check("changed", "/dev/dri", nil)
	if n, _ := m.Lookup("/dev/nvidia0"); n.Mode != 0o600 {
		t.Errorf("replaced entry: %+v", n)
	}
	var nilManifest *Manifest
	if c := nilManifest.Children("/dev"); c != nil {
		t.Errorf("nil manifest: %v", c)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add("/dev/a c 1:3 0666 0:0\n/dev/l l ../a\n")
	f.Add("# x\n/dev/d d 0755 0:0\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseManifest(strings.NewReader(s))
		if err != nil {
			return
		}
		// What parses must survive its own formatting.
		m2, err := ParseManifest(bytes.NewReader(m.Format()))
		if err != nil {
			t.Fatalf("formatted manifest does not parse: %v\n%s", err, m.Format())
		}
		if m.Len() != m2.Len() {
			t.Fatalf("round trip lost entries")
		}
	})
}

func TestSnapshotRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"sys/devices/pci0000:00/0000:00:02.0/vendor": "0x10de\n",
		"sys/devices/pci0000:00/0000:00:02.0/device": "0x2330\n",
		"sys/devices/pci0000:00/0000:00:02.0/driver": "->../../../bus/pci/drivers/nvidia",
		"sys/bus/pci/drivers/nvidia/bind":            "",
		"sys/bus/pci/devices/0000:00:02.0":           "->../../../devices/pci0000:00/0000:00:02.0",
		"proc/1/environ":                             "SECRET=1",
		"unread":                                     "not captured",
		".accel-doctor/devices.manifest":             "/dev/nvidia0 c 195:0 0666 0:0\n/dev/unused c 1:1 0600 0:0\n",
	})
	src := MustNew(dir)
	rec := src.Record()
	readAll := func(r *Root) []string {
		var out []string
		names, _ := r.ReadDir("/sys/bus/pci/devices")
		for _, n := range names {
			v, _ := r.ReadString("/sys/bus/pci/devices/" + n + "/vendor")
			l, _ := r.Readlink("/sys/bus/pci/devices/" + n + "/driver")
			out = append(out, n, v, l)
		}
		node, _ := r.Stat("/dev/nvidia0")
		_, envErr := r.ReadFile("/proc/1/environ")
		out = append(out, node.Dev(), node.ModeString(), errString(envErr))
		return out
	}
	live := readAll(src)
	var buf bytes.Buffer
	meta, err := src.WriteSnapshot(rec, &buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	if meta.Nodes != 1 {
		t.Errorf("snapshot holds %d nodes, want the 1 that was read", meta.Nodes)
	}
	snap, cleanup, err := OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	replay := readAll(snap)
	// Everything matches except the secret, which the snapshot must not hold.
	live[len(live)-1], replay[len(replay)-1] = "", errString(nil)
	if d := cmp.Diff(live, replay); d != "" {
		t.Errorf("replay differs (-live +replay):\n%s", d)
	}
	if snap.Exists("/unread") {
		t.Error("snapshot holds a file no reader read")
	}
	if snap.Exists("/proc/1/environ") {
		t.Error("snapshot holds a process environment")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return "error"
}

func TestUnpackRejectsEscapes(t *testing.T) {
	if err := UnpackSnapshot(strings.NewReader("not gzip"), t.TempDir()); err == nil {
		t.Error("garbage accepted")
	}
	outside := t.TempDir()
	for name, entries := range map[string][]*tar.Header{
		"dotdot": {{Name: "../x", Typeflag: tar.TypeReg, Mode: 0o644}},
		"through link": {
			{Name: "a", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "a/x", Typeflag: tar.TypeReg, Mode: 0o644},
		},
		"device": {{Name: "dev/sda", Typeflag: tar.TypeBlock, Devmajor: 8}},
	} {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, h := range entries {
			tw.WriteHeader(h)
		}
		tw.Close()
		gz.Close()
		if err := UnpackSnapshot(&buf, t.TempDir()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("unpack wrote outside its directory: %v", ents)
	}
}

func BenchmarkReadAttr(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < 8; i++ {
		p := filepath.Join(dir, "sys/devices/pci0000:00", "0000:00:0"+string(rune('0'+i))+".0")
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "vendor"), []byte("0x10de\n"), 0o644)
	}
	r := MustNew(dir)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.ReadString("/sys/devices/pci0000:00/0000:00:03.0/vendor"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFile reads one small attribute file: in a tree (openat2
// inside the root, fstat of the O_PATH fd, reopen through /proc/self/fd),
// on the live root by the same file's host path, and a real sysfs
// attribute of the live host.
func BenchmarkReadFile(b *testing.B) {
	dir := b.TempDir()
	const rel = "sys/devices/pci0000:00/0000:00:03.0/vendor"
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rel), []byte("0x10de\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		root *Root
		path string
	}{
		{"tree", MustNew(dir), "/" + rel},
		{"live", MustNew("/"), filepath.Join(dir, rel)},
		{"live-sysfs", MustNew("/"), "/sys/devices/system/cpu/online"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.root.ReadFile(c.path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
