package probe

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestIoctlNumbers recomputes every request number from the header's
// definition (_IO/_IOR/_IOWR, the type letter, the number and the size of
// the struct) and checks the struct sizes against the UAPI layouts.
func TestIoctlNumbers(t *testing.T) {
	if !ioctlsSupported {
		t.Skip("no ioctl numbers on this architecture")
	}
	sizes := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		// 3 ints, 4 bytes of padding, 3 x (size_t, pointer).
		{"struct drm_version", unsafe.Sizeof(drmVersion{}), 64},
		// 16 + 32 + 32 bytes, 3 + 3 u32.
		{"struct v4l2_capability", unsafe.Sizeof(v4l2Capability{}), 104},
		{"struct vfio_group_status", unsafe.Sizeof(vfioGroupStatus{}), 8},
		{"struct kfd_ioctl_get_version_args", unsafe.Sizeof(kfdGetVersionArgs{}), 8},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("%s: %d bytes, the UAPI header says %d", s.name, s.got, s.want)
		}
	}
	nums := []struct {
		name string
		lit  uint32
		enc  uint32
	}{
		{"DRM_IOCTL_VERSION", drmIoctlVersion, IOC(IOCRead|IOCWrite, 'd', 0x00, uint32(unsafe.Sizeof(drmVersion{})))},
		{"VIDIOC_QUERYCAP", vidiocQuerycap, IOC(IOCRead, 'V', 0, uint32(unsafe.Sizeof(v4l2Capability{})))},
		{"VFIO_GET_API_VERSION", vfioGetAPIVersion, IOC(IOCNone, ';', 100+0, 0)},
		{"VFIO_CHECK_EXTENSION", vfioCheckExtension, IOC(IOCNone, ';', 100+1, 0)},
		{"VFIO_GROUP_GET_STATUS", vfioGroupGetStatus, IOC(IOCNone, ';', 100+3, 0)},
		{"AMDKFD_IOC_GET_VERSION", amdkfdIocGetVersion, IOC(IOCRead, 'K', 0x01, uint32(unsafe.Sizeof(kfdGetVersionArgs{})))},
	}
	for _, n := range nums {
		if n.lit != n.enc {
			t.Errorf("%s: literal %#x, encoding gives %#x", n.name, n.lit, n.enc)
		}
	}
	// Two well-known values, as strace and the headers' users print them.
	if drmIoctlVersion != 0xc0406400 || vidiocQuerycap != 0x80685600 {
		t.Errorf("DRM_IOCTL_VERSION %#x, VIDIOC_QUERYCAP %#x", drmIoctlVersion, vidiocQuerycap)
	}
}

func TestClassifyIoctl(t *testing.T) {
	for en, want := range map[unix.Errno]IoctlClass{
		0: Answered, unix.ENOTTY: NotThatDriver, unix.EINVAL: Rejected, unix.EFAULT: Rejected,
		unix.ENODEV: DeviceGone, unix.ENXIO: DeviceGone, unix.EIO: IOError, unix.EPERM: IoctlDenied,
		unix.EACCES: IoctlDenied, unix.EBUSY: IoctlBusy, unix.EAGAIN: IoctlOther,
	} {
		if got := classifyIoctl(en); got != want {
			t.Errorf("%s: %s, want %s", unix.ErrnoName(en), got, want)
		}
	}
}

func TestDecodeAnswers(t *testing.T) {
	var v v4l2Capability
	copy(v.Driver[:], "hantro-vpu\x00junk")
	copy(v.Card[:], "nxp,imx8mq-vpu-g1-dec")
	copy(v.BusInfo[:], "platform:hantro-vpu")
	v.Version = 6<<16 | 8<<8 | 12
	v.Capabilities = 0x84204000
	v.DeviceCaps = 0x04204000
	got := decodeV4L2(&v)
	want := &V4L2Caps{Driver: "hantro-vpu", Card: "nxp,imx8mq-vpu-g1-dec", BusInfo: "platform:hantro-vpu",
		Version: "6.8.12", Capabilities: "0x84204000", DeviceCaps: "0x04204000",
		Names: []string{"VIDEO_M2M_MPLANE", "STREAMING"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("v4l2 (-want +got):\n%s", d)
	}
	if g := decodeVFIOGroup(1); !g.Viable || g.ContainerSet {
		t.Errorf("flags 1: %+v", g)
	}
	if g := decodeVFIOGroup(2); g.Viable || !g.ContainerSet {
		t.Errorf("flags 2: %+v", g)
	}
	if s := cField([]byte("amdgpu\x00\x00"), 6); s != "amdgpu" {
		t.Errorf("cField %q", s)
	}
	// drm_copy_field reports the full length of a truncated string.
	if s := cField([]byte("abcd"), 9); s != "abcd" {
		t.Errorf("truncated cField %q", s)
	}
	if (&VFIOContainer{Extensions: []string{"VFIO_NOIOMMU_IOMMU"}}).HasIOMMUModel() {
		t.Error("no-IOMMU alone counted as an IOMMU model")
	}
	if !(&VFIOContainer{Extensions: []string{"VFIO_TYPE1v2_IOMMU"}}).HasIOMMUModel() {
		t.Error("type1v2 not counted")
	}
}

// TestIoctlsOnTheWrongDriver makes each kind's ioctl on /dev/null's
// driver (1:3, drivers/char/mem.c has no ioctl): the kernel answers
// ENOTTY for every one (fs/ioctl.c vfs_ioctl), which the probe reads as
// "not a driver of this kind". No accelerator driver is loaded here; the
// answered path runs on a machine with the device (bench/gpu-probe.sh).
func TestIoctlsOnTheWrongDriver(t *testing.T) {
	if !ioctlsSupported {
		t.Skip("no ioctl numbers on this architecture")
	}
	fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skip(err)
	}
	defer unix.Close(fd)
	for _, f := range []func(int) Ioctl{DRMIoctlVersion, V4L2QueryCap, VFIOContainerProbe, VFIOGroupProbe, KFDGetVersion} {
		c := f(fd)
		if c.Errno != unix.ENOTTY || c.Class != NotThatDriver || c.NotRun != "" {
			t.Errorf("%s on /dev/null: %+v, want ENOTTY", c.Name, c)
		}
	}
}

func TestKindOf(t *testing.T) {
	for rel, want := range map[string]Kind{
		"nvidia0": KindNVIDIA, "nvidiactl": KindNVIDIA, "nvidia-uvm": KindNVIDIA, "nvidia-caps/nvidia-cap1": KindNVIDIACap,
		"dri/renderD128": KindDRM, "dri/card0": KindDRM, "accel/accel0": KindAccel, "kfd": KindKFD,
		"video0": KindVideo, "vfio/vfio": KindVFIOContainer, "vfio/42": KindVFIOGroup, "vfio/noiommu-0": KindVFIOGroup,
		"vfio/devices/vfio0": KindVFIODevice,
	} {
		if got, ok := KindOf(rel); !ok || got != want {
			t.Errorf("%s: %q %v, want %q", rel, got, ok, want)
		}
	}
	for _, rel := range []string{"dri/by-path", "vfio/devices", "accel/x", "sda", "vfio/1a"} {
		if k, ok := KindOf(rel); ok {
			t.Errorf("%s: kind %q, want none", rel, k)
		}
	}
}

// TestScanNodes builds a /dev of test nodes on tmpfs and checks what the
// scan makes of each, errno for errno.
func TestScanNodes(t *testing.T) {
	requireRoot(t)
	if !ioctlsSupported {
		t.Skip("no ioctl numbers on this architecture")
	}
	dev := nodeDir(t, false)
	free := freeCharMajor(t)
	for _, d := range []string{"dri/by-path", "vfio/devices", "nvidia-caps", "accel"} {
		if err := os.MkdirAll(filepath.Join(dev, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// accel/ is a nodev mount: EACCES before any driver or cgroup.
	accel := filepath.Join(dev, "accel")
	if err := unix.Mount("tmpfs", accel, "tmpfs", unix.MS_NODEV|unix.MS_NOSUID, "mode=755,size=16k"); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { unix.Unmount(accel, unix.MNT_DETACH) })
	mknod(t, filepath.Join(dev, "dri/renderD128"), unix.S_IFCHR, 1, 3, 0o666)
	mknod(t, filepath.Join(dev, "dri/card0"), unix.S_IFCHR, free, 0, 0o666)
	mknod(t, filepath.Join(dev, "video0"), unix.S_IFCHR, 1, 3, 0o666)
	mknod(t, filepath.Join(dev, "kfd"), unix.S_IFCHR, 1, 5, 0o666)
	mknod(t, filepath.Join(dev, "vfio/vfio"), unix.S_IFCHR, 1, 3, 0o666)
	mknod(t, filepath.Join(dev, "vfio/12"), unix.S_IFCHR, 1, 3, 0o600)
	mknod(t, filepath.Join(dev, "nvidia-caps/nvidia-cap1"), unix.S_IFCHR, 1, 3, 0o400)
	mknod(t, filepath.Join(dev, "accel/accel0"), unix.S_IFCHR, 1, 3, 0o666)
	mknod(t, filepath.Join(dev, "sda"), unix.S_IFBLK, 8, 0, 0o600) // not an accelerator name
	if err := os.WriteFile(filepath.Join(dev, "nvidia0"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../renderD128", filepath.Join(dev, "dri/by-path/pci-0000:03:00.0-render")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dri/renderD128", filepath.Join(dev, "nvidia-link")); err != nil {
		t.Fatal(err)
	}

	nodes, errs := ScanNodes(dev)
	if len(errs) != 0 {
		t.Errorf("errors: %v", errs)
	}
	type row struct {
		Kind   Kind
		Node   string
		Open   Class
		IsChar bool
		Ioctl  string // errno name, or "not run"
	}
	got := map[string]row{}
	for _, n := range nodes {
		rel, _ := filepath.Rel(dev, n.Path)
		r := row{Kind: n.Kind, Node: n.Open.Node, Open: n.Open.Class, IsChar: n.IsChar, Ioctl: n.Ioctl.ErrnoName}
		if n.Ioctl.NotRun != "" {
			r.Ioctl = "not run"
		}
		got[rel] = r
	}
	want := map[string]row{
		"accel/accel0":            {KindAccel, "c 1:3", PermissionDenied, false, "not run"},
		"dri/card0":               {KindDRM, fmt.Sprintf("c %d:0", free), NoDriver, false, "not run"},
		"dri/renderD128":          {KindDRM, "c 1:3", OK, true, "ENOTTY"},
		"kfd":                     {KindKFD, "c 1:5", OK, true, "ENOTTY"},
		"nvidia-caps/nvidia-cap1": {KindNVIDIACap, "c 1:3", OK, true, "not run"},
		"nvidia-link":             {KindNVIDIA, "c 1:3", OK, true, "not run"},
		"nvidia0":                 {KindNVIDIA, "-", OK, false, "not run"},
		"vfio/12":                 {KindVFIOGroup, "c 1:3", OK, true, "ENOTTY"},
		"vfio/vfio":               {KindVFIOContainer, "c 1:3", OK, true, "ENOTTY"},
		"video0":                  {KindVideo, "c 1:3", OK, true, "ENOTTY"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("scan (-want +got):\n%s", d)
	}
	for _, n := range nodes {
		if n.Path == filepath.Join(dev, "nvidia-link") && n.Target != "dri/renderD128" {
			t.Errorf("link target %q", n.Target)
		}
		if n.Kind == KindNVIDIACap && n.Open.Access != Read {
			t.Errorf("capability node opened for %s", n.Open.Access)
		}
	}
}

func TestScanNodesUnreadableDir(t *testing.T) {
	dev := t.TempDir()
	if err := os.WriteFile(filepath.Join(dev, "dri"), nil, 0o644); err != nil { // a file where a directory belongs
		t.Fatal(err)
	}
	nodes, errs := ScanNodes(dev)
	if len(nodes) != 0 || len(errs) != 1 {
		t.Errorf("nodes %v, errs %v: want the one unreadable directory", nodes, errs)
	}
	if nodes, errs := ScanNodes(filepath.Join(dev, "absent")); len(nodes) != 0 || len(errs) != 1 {
		t.Errorf("missing /dev: nodes %v, errs %v", nodes, errs)
	}
}
