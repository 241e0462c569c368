package runtime

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// A runc container's table as the host reads /proc/PID/mountinfo: the
// rootfs (an ext4 directory at "/"), /proc, a /dev tmpfs with a node
// mknod'ed in it, a bind-mounted library (a file), a bind-mounted node on
// a nodev mount, a mount point with a space in it, and a /dev/pts.
const mountsContainer = `594 498 254:0 /tmp/b/rootfs / ro,relatime master:1 - ext4 /dev/vda rw
595 594 0:58 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
596 594 0:59 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
597 596 0:60 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
598 594 254:0 /tmp/b/host/libfake.so.1 /usr/lib/libfake.so.1 ro,relatime master:1 - ext4 /dev/vda rw
599 596 254:0 /tmp/b/accel-nd0 /dev/accel-nd0 rw,nosuid,nodev,relatime master:1 - ext4 /dev/vda rw
600 594 0:61 / /mnt/with\040space rw,relatime shared:7 master:2 - tmpfs my\134src rw
`

func TestParseMountInfo(t *testing.T) {
	got, err := ParseMountInfo([]byte(mountsContainer))
	if err != nil {
		t.Fatal(err)
	}
	want := []*mountinfo.Info{
		{ID: 594, Parent: 498, Major: 254, Minor: 0, Root: "/tmp/b/rootfs", Mountpoint: "/", Options: "ro,relatime", Optional: "master:1", FSType: "ext4", Source: "/dev/vda", VFSOptions: "rw"},
		{ID: 600, Parent: 594, Major: 0, Minor: 61, Root: "/", Mountpoint: "/mnt/with space", Options: "rw,relatime", Optional: "shared:7 master:2", FSType: "tmpfs", Source: `my\src`, VFSOptions: "rw"},
	}
	testutil.CheckParse(t, []*mountinfo.Info{got[0], got[6]}, nil, want, false)
	if len(got) != 7 {
		t.Fatalf("%d mounts", len(got))
	}

	for _, tc := range []struct{ path, mount string }{
		{"/dev/null", "/dev"},
		{"/dev/pts/0", "/dev/pts"},
		{"/dev/accel-nd0", "/dev/accel-nd0"},
		{"/usr/lib/libfake.so.1", "/usr/lib/libfake.so.1"},
		{"/usr/lib/other.so", "/"},
		{"/", "/"},
		{"/devices", "/"},
		{"/mnt/with space/x", "/mnt/with space"},
	} {
		if m := got.Holding(tc.path); m == nil || m.Mountpoint != tc.mount {
			t.Errorf("Holding(%s) = %v, want the mount at %s", tc.path, m, tc.mount)
		}
	}
	if m := got.Holding("/dev/accel-nd0"); !HasOption(m, "nodev") || HasOption(got.Holding("/dev/null"), "nodev") {
		t.Error("nodev: per-mount options")
	}
	if got.At("/usr/lib") != nil || got.At("/usr/lib/libfake.so.1") == nil {
		t.Error("At")
	}
	// The host's table identifies a bind's source: the file system and
	// the path within it.
	host, err := ParseMountInfo([]byte("27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n" +
		"40 27 0:33 / /tmp rw shared:2 - tmpfs tmpfs rw\n" +
		"41 27 254:0 /srv/lib /opt/lib rw shared:1 - ext4 /dev/vda rw\n"))
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"/tmp/b/host/libfake.so.1": "0:33 /b/host/libfake.so.1",
		"/usr/lib/libcuda.so.1":    "254:0 /usr/lib/libcuda.so.1",
		"/opt/lib/x.so":            "254:0 /srv/lib/x.so",
		"/opt/lib":                 "254:0 /srv/lib",
		"/":                        "254:0 /",
	} {
		dev, root, ok := host.SourceOf(p)
		if !ok || dev+" "+root != want {
			t.Errorf("SourceOf(%s) = %s %s %v, want %s", p, dev, root, ok, want)
		}
	}
}

// A mount hidden under a later mount of its parent directory is not the
// one that holds a path: a tmpfs mounted over /dev (its parent is the
// /dev it covers) after a node was bind-mounted into the first /dev hides
// the node's mount.
func TestMountHoldingHidden(t *testing.T) {
	tab, err := ParseMountInfo([]byte(`1 0 254:0 / / rw - ext4 /dev/vda rw
2 1 0:50 / /dev rw - tmpfs tmpfs rw
3 2 0:6 /nvidia0 /dev/nvidia0 rw - devtmpfs udev rw
4 2 0:51 / /dev rw,nodev - tmpfs tmpfs rw
`))
	if err != nil {
		t.Fatal(err)
	}
	if m := tab.Holding("/dev/nvidia0"); m == nil || m.ID != 4 {
		t.Errorf("Holding = %v, want mount 4, the /dev on top", m)
	}
	if m := tab.At("/dev/nvidia0"); m != nil {
		t.Errorf("At found the hidden mount %v", m)
	}
	// Without the covering mount, the node's own mount holds it.
	if m := tab[:3].Holding("/dev/nvidia0"); m == nil || m.ID != 3 {
		t.Errorf("Holding = %v, want mount 3", m)
	}
}

func TestParseMountInfoMalformed(t *testing.T) {
	good := "1 0 254:0 / / rw - ext4 /dev/vda rw\n"
	for name, line := range map[string]string{
		"short":            "1 0 254:0 / /",
		"no separator":     "1 0 254:0 / / rw x ext4 /dev/vda rw",
		"two after -":      "1 0 254:0 / / rw - ext4 /dev/vda",
		"five after -":     "1 0 254:0 / / rw - ext4 /dev/vda rw x y",
		"bad ID":           "x 0 254:0 / / rw - ext4 /dev/vda rw",
		"negative parent":  "1 -1 254:0 / / rw - ext4 /dev/vda rw",
		"bad major:minor":  "1 0 254 / / rw - ext4 /dev/vda rw",
		"bad minor":        "1 0 254:x / / rw - ext4 /dev/vda rw",
		"short escape":     `1 0 254:0 / /a\04 rw - ext4 /dev/vda rw`,
		"bad escape":       `1 0 254:0 / /a\999 rw - ext4 /dev/vda rw`,
		"relative point":   "1 0 254:0 / a rw - ext4 /dev/vda rw",
		"NUL in the point": "1 0 254:0 / /a\x00 rw - ext4 /dev/vda rw",
	} {
		tab, err := ParseMountInfo([]byte(good + line + "\n" + good))
		if name == "NUL in the point" {
			// The kernel escapes no NUL (a path cannot hold one): the line
			// parses with it; nothing downstream treats it as a separator.
			if err != nil || len(tab) != 3 {
				t.Errorf("%s: %d mounts, %v", name, len(tab), err)
			}
			continue
		}
		if !errors.Is(err, ErrMalformed) || len(tab) != 2 || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %d mounts, %v", name, len(tab), err)
		}
	}
	// A 64 KiB line (an overlay with hundreds of layers) parses; a table
	// of a million bad lines keeps a few errors.
	long := "2 1 0:70 / /var/lib/x rw - overlay overlay rw,lowerdir=" + strings.Repeat("/l:", 32<<10) + "\n"
	if tab, err := ParseMountInfo([]byte(good + long)); err != nil || len(tab) != 2 || len(tab[1].VFSOptions) < 64<<10 {
		t.Errorf("long line: %d mounts, %v", len(tab), err)
	}
	_, err := ParseMountInfo(bytes.Repeat([]byte("garbage\n"), 1<<20))
	if err == nil || strings.Count(err.Error(), "\n") > maxLineErrors+1 || !strings.Contains(err.Error(), "more lines") {
		t.Errorf("a million bad lines: %.200v", err)
	}
	if tab, err := ParseMountInfo(nil); err != nil || len(tab) != 0 || tab.Holding("/dev") != nil {
		t.Errorf("empty: %v %v", tab, err)
	}
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte(mountsContainer))
	f.Add([]byte("1 1 0:0 / / - - - -\n2 1 0:0 \\ / x - a b c\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := ParseMountInfo(b)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		// Lookups terminate on any table, cycles included.
		for _, p := range []string{"/", "/dev/nvidia0", "/a/b/c"} {
			if m := tab.Holding(p); m != nil && !strings.HasPrefix(p, m.Mountpoint) {
				t.Fatalf("Holding(%s) = mount at %s", p, m.Mountpoint)
			}
			tab.SourceOf(p)
		}
	})
}
