package devnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

const nodeManifest = `/dev/nvidia0 c 195:0 0666 0:0
/dev/nvidia1 c 195:1 0666 0:0
/dev/nvidia2 c 195:2 0600 0:0
/dev/nvidiactl c 195:255 0666 0:0
/dev/char/195:0 l ../nvidia0
/dev/char/195:2 l ../nvidia9
/dev/char/195:255 l /dev/nvidiactl
/dev/dri/by-path/pci-0000:03:00.0-render l ../renderD128
/dev/dri/renderD128 c 226:128 0660 0:109
/dev/char/226:128 l ../dri/by-path/pci-0000:03:00.0-render
/dev/kfd f 0666 0:0
`

func TestStatNode(t *testing.T) {
	root := hostfs.MustNew(tree(t, nil, nil, nodeManifest))
	tests := []struct {
		path                         string
		exists, char, link, pointsAt bool
		dev                          string
	}{
		{path: "/dev/nvidia0", exists: true, char: true, link: true, pointsAt: true, dev: "195:0"},
		{path: "/dev/nvidia1", exists: true, char: true, dev: "195:1"},
		{path: "/dev/nvidia2", exists: true, char: true, link: true, dev: "195:2"}, // link points elsewhere
		{path: "/dev/nvidiactl", exists: true, char: true, link: true, pointsAt: true, dev: "195:255"},
		// The link goes through another alias and still reaches the node.
		{path: "/dev/dri/renderD128", exists: true, char: true, link: true, pointsAt: true, dev: "226:128"},
		{path: "/dev/kfd", exists: true},
		{path: "/dev/nvidia-uvm"},
	}
	for _, tt := range tests {
		s := StatNode(root, tt.path)
		if s.Err != nil {
			t.Errorf("%s: Err = %v", tt.path, s.Err)
		}
		if s.Exists != tt.exists || s.IsChar() != tt.char {
			t.Errorf("%s: exists %v char %v; want %v %v", tt.path, s.Exists, s.IsChar(), tt.exists, tt.char)
			continue
		}
		if !tt.char {
			if s.CharLink != nil {
				t.Errorf("%s: CharLink %+v for a non-char node", tt.path, s.CharLink)
			}
			continue
		}
		if s.Node.Dev() != tt.dev {
			t.Errorf("%s: dev %s, want %s", tt.path, s.Node.Dev(), tt.dev)
		}
		if s.CharLink == nil || s.CharLink.Present != tt.link || s.CharLink.PointsAtNode != tt.pointsAt {
			t.Errorf("%s: CharLink %+v; want present %v pointing at the node %v", tt.path, s.CharLink, tt.link, tt.pointsAt)
		}
	}
	if s := StatNode(root, "/dev/nvidia2"); s.CharLink.Resolved != "/dev/nvidia9" {
		t.Errorf("/dev/char/195:2 resolved to %q, want /dev/nvidia9", s.CharLink.Resolved)
	}
}

// TestStatNodeRealUnregisteredMajor makes a real char node whose major no
// driver holds on this kernel and checks that it is stat'ed as a real node
// (not from a manifest) and that /proc/devices does not know its major.
func TestStatNodeRealUnregisteredMajor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root (CAP_MKNOD)")
	}
	f, err := os.Open("/proc/devices")
	if err != nil {
		t.Skipf("no /proc/devices: %v", err)
	}
	pd, err := ParseProcDevices(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// 234-254 is the kernel's dynamic char major range
	// (CHRDEV_MAJOR_DYN_END..CHRDEV_MAJOR_HASH_SIZE-1, fs/char_dev.c);
	// pick one no driver holds now.
	major := uint32(0)
	for m := uint32(254); m >= 234; m-- {
		if !pd.CharRegistered(m) {
			major = m
			break
		}
	}
	if major == 0 {
		t.Skip("every dynamic char major 234-254 is registered here")
	}
	dir := tree(t, nil, nil, "")
	node := filepath.Join(dir, "dev", "accel", "accel0")
	if err := os.MkdirAll(filepath.Dir(node), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(node, unix.S_IFCHR|0o660, int(unix.Mkdev(major, 7))); err != nil {
		if strings.Contains(err.Error(), "not permitted") {
			t.Skipf("mknod refused here (no CAP_MKNOD or nodev): %v", err)
		}
		t.Fatal(err)
	}
	root := hostfs.MustNew(dir)
	s := StatNode(root, "/dev/accel/accel0")
	if !s.IsChar() || s.Node.FromManifest {
		t.Fatalf("real node: %+v; want a char node not from the manifest", s)
	}
	if s.Node.Major != major || s.Node.Minor != 7 {
		t.Errorf("real node dev %s, want %d:7", s.Node.Dev(), major)
	}
	if s.CharLink == nil || s.CharLink.Present {
		t.Errorf("CharLink %+v; want absent", s.CharLink)
	}
	if pd.CharRegistered(s.Node.Major) {
		t.Errorf("major %d registered; the test picked it as unregistered", major)
	}
}
