package probe

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ioctls that prove a driver answers, one per device kind. Each is
// read-only on the driver's side: it reports a version or a status and
// changes no state of the device (a DRM master, a VFIO container, a KFD
// queue are never set up).
//
// The request numbers are the kernel's _IOC encoding
// (include/uapi/asm-generic/ioctl.h): dir<<30 | size<<16 | type<<8 | nr,
// with _IOC_NONE 0, _IOC_WRITE 1, _IOC_READ 2 and a 14-bit size. That is
// the layout of x86-64, arm64, riscv64 and loong64; powerpc, mips and sparc
// use other direction bits, and the struct sizes below are those of a
// 64-bit ABI, so ioctl_numbers.go builds only for those four (elsewhere the
// ioctl step is NOT_RUN). TestIoctlNumbers checks every literal against the
// encoding and the size of its Go struct.

// IOC encodes an ioctl request number as asm-generic/ioctl.h's _IOC does.
func IOC(dir, typ, nr, size uint32) uint32 {
	return dir<<30 | size<<16 | typ<<8 | nr
}

// The direction bits of IOC (asm-generic/ioctl.h).
const (
	IOCNone  = 0
	IOCWrite = 1
	IOCRead  = 2
)

// drmVersion is struct drm_version (include/uapi/drm/drm.h): three ints,
// then three (size_t length, char * buffer) pairs. On a 64-bit ABI the
// first size_t is 8-aligned, so 4 bytes of padding follow the ints: 64
// bytes in all. The kernel (drivers/gpu/drm/drm_ioctl.c drm_version,
// drm_copy_field) copies at most each length into each buffer and writes
// the full length of the string back.
type drmVersion struct {
	Major, Minor, Patch int32
	_                   [4]byte
	NameLen             uint64
	Name                *byte
	DateLen             uint64
	Date                *byte
	DescLen             uint64
	Desc                *byte
}

// v4l2Capability is struct v4l2_capability
// (include/uapi/linux/videodev2.h): 104 bytes, no pointers.
type v4l2Capability struct {
	Driver       [16]byte
	Card         [32]byte
	BusInfo      [32]byte
	Version      uint32
	Capabilities uint32
	DeviceCaps   uint32
	Reserved     [3]uint32
}

// vfioGroupStatus is struct vfio_group_status (include/uapi/linux/vfio.h).
// The caller sets argsz to the size it knows; the kernel refuses a smaller
// one with EINVAL (drivers/vfio/group.c vfio_group_ioctl_get_status).
type vfioGroupStatus struct {
	Argsz uint32
	Flags uint32
}

// kfdGetVersionArgs is struct kfd_ioctl_get_version_args
// (include/uapi/linux/kfd_ioctl.h).
type kfdGetVersionArgs struct {
	Major uint32
	Minor uint32
}

// Values from include/uapi/linux/vfio.h.
const (
	// VFIOAPIVersion is VFIO_API_VERSION, what VFIO_GET_API_VERSION
	// returns on every kernel since VFIO was merged.
	VFIOAPIVersion = 0

	vfioGroupFlagsViable       = 1 << 0 // VFIO_GROUP_FLAGS_VIABLE
	vfioGroupFlagsContainerSet = 1 << 1 // VFIO_GROUP_FLAGS_CONTAINER_SET
)

// VFIOExtensions are the VFIO_CHECK_EXTENSION arguments asked about, in
// the order vfio.h numbers them: the IOMMU models a user can select with
// VFIO_SET_IOMMU, and the no-IOMMU mode. With CONFIG_IOMMUFD_VFIO_CONTAINER
// the /dev/vfio/vfio node is iommufd's compatibility container
// (drivers/iommu/iommufd/vfio_compat.c), which answers for type1 and
// type1v2 in the same way.
var VFIOExtensions = []struct {
	ID   uintptr
	Name string
}{
	{1, "VFIO_TYPE1_IOMMU"},
	{2, "VFIO_SPAPR_TCE_IOMMU"},
	{3, "VFIO_TYPE1v2_IOMMU"},
	{7, "VFIO_SPAPR_TCE_v2_IOMMU"},
	{8, "VFIO_NOIOMMU_IOMMU"},
}

// KFDIoctlMajorVersion is KFD_IOCTL_MAJOR_VERSION (kfd_ioctl.h): the ABI
// user space (ROCt/libhsakmt) requires; a different major is unusable.
const KFDIoctlMajorVersion = 1

// IoctlClass is what an ioctl's outcome says about the node's driver.
type IoctlClass string

const (
	// Answered: the driver implemented the request and answered it.
	Answered IoctlClass = "ANSWERED"
	// NotThatDriver is ENOTTY: the driver behind the node does not know
	// the request, so it is not a driver of this kind (a 1:3 node named
	// renderD128, a DRM node under /dev/video0). Every DRM driver
	// answers DRM_IOCTL_VERSION (drivers/gpu/drm/drm_ioctl.c, core
	// table), every V4L2 driver VIDIOC_QUERYCAP (v4l2-ioctl.c), every
	// VFIO container VFIO_GET_API_VERSION.
	NotThatDriver IoctlClass = "NOT_THAT_DRIVER"
	// Rejected is EINVAL or EFAULT: the driver is of this kind but refused
	// the argument, an ABI mismatch between this probe and the kernel.
	Rejected IoctlClass = "REJECTED"
	// DeviceGone is ENODEV (or ENXIO): the driver is bound but its device
	// went away (drm_dev_enter fails on an unplugged device with ENODEV;
	// a GPU that fell off the bus).
	DeviceGone IoctlClass = "DEVICE_GONE"
	// IOError is EIO: the driver talked to the hardware and it failed.
	IOError IoctlClass = "IO_ERROR"
	// IoctlDenied is EPERM or EACCES: the driver (or an LSM's
	// file_ioctl hook) refused this caller.
	IoctlDenied IoctlClass = "DENIED"
	// IoctlBusy is EBUSY.
	IoctlBusy IoctlClass = "BUSY"
	// IoctlOther is any other errno, reported verbatim.
	IoctlOther IoctlClass = "OTHER"
)

// classifyIoctl maps an ioctl errno to its class.
func classifyIoctl(en unix.Errno) IoctlClass {
	switch en {
	case 0:
		return Answered
	case unix.ENOTTY:
		return NotThatDriver
	case unix.EINVAL, unix.EFAULT:
		return Rejected
	case unix.ENODEV, unix.ENXIO:
		return DeviceGone
	case unix.EIO:
		return IOError
	case unix.EPERM, unix.EACCES:
		return IoctlDenied
	case unix.EBUSY:
		return IoctlBusy
	}
	return IoctlOther
}

// Ioctl is the outcome of one ioctl on an open node.
type Ioctl struct {
	Name    string `json:"name"`    // "DRM_IOCTL_VERSION"
	Request string `json:"request"` // its number, "0xc0406400"
	// Errno is 0 when the driver answered.
	Errno     unix.Errno `json:"errno"`
	ErrnoName string     `json:"errno_name,omitempty"`
	Class     IoctlClass `json:"class,omitempty"`
	Message   string     `json:"message,omitempty"`
	// NotRun is why the ioctl was not made; Class is empty then. Skip
	// is the same, typed.
	NotRun string `json:"not_run,omitempty"`
	Skip   Skip   `json:"skip,omitempty"`
	// What the driver answered; one of these is set when Class is
	// Answered.
	DRM       *DRMVersion      `json:"drm,omitempty"`
	V4L2      *V4L2Caps        `json:"v4l2,omitempty"`
	VFIO      *VFIOContainer   `json:"vfio,omitempty"`
	VFIOGroup *VFIOGroupStatus `json:"vfio_group,omitempty"`
	KFD       *KFDVersion      `json:"kfd,omitempty"`
}

func newIoctl(name string, req uint32) Ioctl {
	return Ioctl{Name: name, Request: fmt.Sprintf("%#x", req)}
}

func (c *Ioctl) setErr(err error) {
	var en unix.Errno
	if !errors.As(err, &en) {
		c.Class, c.Message = IoctlOther, err.Error()
		return
	}
	c.Errno, c.ErrnoName, c.Message, c.Class = en, unix.ErrnoName(en), en.Error(), classifyIoctl(en)
}

// DRMVersion is DRM_IOCTL_VERSION's answer.
type DRMVersion struct {
	Name  string `json:"name"` // the driver: "i915", "amdgpu", "nvidia-drm", "habanalabs"
	Major int32  `json:"major"`
	Minor int32  `json:"minor"`
	Patch int32  `json:"patchlevel"`
	Date  string `json:"date,omitempty"`
	Desc  string `json:"desc,omitempty"`
}

// DRMIoctlVersion asks a DRM (or compute-accelerator, drivers/accel) node
// for its driver's name and version. drm_ioctl.c allows it on every node
// type without authentication (DRM_RENDER_ALLOW).
func DRMIoctlVersion(fd int) Ioctl {
	c := newIoctl("DRM_IOCTL_VERSION", drmIoctlVersion)
	if !ioctlsSupported {
		return unsupportedArch(c)
	}
	name, date, desc := make([]byte, 64), make([]byte, 64), make([]byte, 256)
	v := drmVersion{
		NameLen: uint64(len(name)), Name: &name[0],
		DateLen: uint64(len(date)), Date: &date[0],
		DescLen: uint64(len(desc)), Desc: &desc[0],
	}
	_, _, en := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(drmIoctlVersion), uintptr(unsafe.Pointer(&v)))
	runtime.KeepAlive(name)
	runtime.KeepAlive(date)
	runtime.KeepAlive(desc)
	if en != 0 {
		c.setErr(en)
		return c
	}
	c.Class = Answered
	c.DRM = &DRMVersion{
		Name: cField(name, v.NameLen), Major: v.Major, Minor: v.Minor, Patch: v.Patch,
		Date: cField(date, v.DateLen), Desc: cField(desc, v.DescLen),
	}
	return c
}

// cField is a string the kernel copied into buf, n being the full length
// it reported (which may exceed the buffer: drm_copy_field truncates).
func cField(buf []byte, n uint64) string {
	if n < uint64(len(buf)) {
		buf = buf[:n]
	}
	return cString(buf)
}

// cString cuts a fixed-size C char array at its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

// V4L2Caps is VIDIOC_QUERYCAP's answer.
type V4L2Caps struct {
	Driver  string `json:"driver"`
	Card    string `json:"card"`
	BusInfo string `json:"bus_info"`
	// Version is the driver's KERNEL_VERSION as "6.8.0".
	Version string `json:"version"`
	// Capabilities are the whole physical device's, DeviceCaps this
	// node's (valid when V4L2_CAP_DEVICE_CAPS is set); as hex and as
	// names.
	Capabilities string   `json:"capabilities"`
	DeviceCaps   string   `json:"device_caps,omitempty"`
	Names        []string `json:"names,omitempty"` // of DeviceCaps, else Capabilities
}

// v4l2CapNames are the V4L2_CAP_* bits of videodev2.h that say what a
// node is for (a decoder is a memory-to-memory device).
var v4l2CapNames = []struct {
	bit  uint32
	name string
}{
	{0x00000001, "VIDEO_CAPTURE"},
	{0x00000002, "VIDEO_OUTPUT"},
	{0x00001000, "VIDEO_CAPTURE_MPLANE"},
	{0x00002000, "VIDEO_OUTPUT_MPLANE"},
	{0x00004000, "VIDEO_M2M_MPLANE"},
	{0x00008000, "VIDEO_M2M"},
	{0x00800000, "META_CAPTURE"},
	{0x01000000, "READWRITE"},
	{0x04000000, "STREAMING"},
	{0x08000000, "META_OUTPUT"},
	{0x10000000, "TOUCH"},
	{0x20000000, "IO_MC"},
}

const v4l2CapDeviceCaps = 0x80000000 // V4L2_CAP_DEVICE_CAPS

// V4L2QueryCap asks a video4linux node what it is.
func V4L2QueryCap(fd int) Ioctl {
	c := newIoctl("VIDIOC_QUERYCAP", vidiocQuerycap)
	if !ioctlsSupported {
		return unsupportedArch(c)
	}
	var v v4l2Capability
	_, _, en := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(vidiocQuerycap), uintptr(unsafe.Pointer(&v)))
	if en != 0 {
		c.setErr(en)
		return c
	}
	c.Class = Answered
	c.V4L2 = decodeV4L2(&v)
	return c
}

func decodeV4L2(v *v4l2Capability) *V4L2Caps {
	caps := &V4L2Caps{
		Driver: cString(v.Driver[:]), Card: cString(v.Card[:]), BusInfo: cString(v.BusInfo[:]),
		Version:      fmt.Sprintf("%d.%d.%d", v.Version>>16, (v.Version>>8)&0xff, v.Version&0xff),
		Capabilities: fmt.Sprintf("%#08x", v.Capabilities),
	}
	bits := v.Capabilities
	if v.Capabilities&v4l2CapDeviceCaps != 0 {
		caps.DeviceCaps = fmt.Sprintf("%#08x", v.DeviceCaps)
		bits = v.DeviceCaps
	}
	for _, n := range v4l2CapNames {
		if bits&n.bit != 0 {
			caps.Names = append(caps.Names, n.name)
		}
	}
	return caps
}

// VFIOContainer is what /dev/vfio/vfio answered.
type VFIOContainer struct {
	APIVersion int `json:"api_version"`
	// Extensions are the VFIOExtensions the container supports
	// (VFIO_CHECK_EXTENSION returned > 0).
	Extensions []string `json:"extensions"`
	// ExtensionErrors are checks that failed with an errno.
	ExtensionErrors []string `json:"extension_errors,omitempty"`
}

// HasIOMMUModel reports whether some IOMMU model other than no-IOMMU is
// available: without one, VFIO_SET_IOMMU cannot succeed and no device can
// be used (no-IOMMU mode gives no DMA isolation and is not a model a
// container should depend on).
func (v *VFIOContainer) HasIOMMUModel() bool {
	for _, e := range v.Extensions {
		if e != "VFIO_NOIOMMU_IOMMU" {
			return true
		}
	}
	return false
}

// VFIOContainerProbe asks /dev/vfio/vfio for its API version, then which
// IOMMU models it offers. Neither sets anything: the fd stays an empty
// container (drivers/vfio/container.c vfio_fops_unl_ioctl).
func VFIOContainerProbe(fd int) Ioctl {
	c := newIoctl("VFIO_GET_API_VERSION", vfioGetAPIVersion)
	if !ioctlsSupported {
		return unsupportedArch(c)
	}
	v, err := unix.IoctlRetInt(fd, uint(vfioGetAPIVersion))
	if err != nil {
		c.setErr(err)
		return c
	}
	c.Class = Answered
	cont := &VFIOContainer{APIVersion: v, Extensions: []string{}}
	for _, ext := range VFIOExtensions {
		r, _, en := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(vfioCheckExtension), ext.ID)
		switch {
		case en != 0:
			cont.ExtensionErrors = append(cont.ExtensionErrors, fmt.Sprintf("%s: %s", ext.Name, unix.ErrnoName(en)))
		case int(r) > 0:
			cont.Extensions = append(cont.Extensions, ext.Name)
		}
	}
	c.VFIO = cont
	return c
}

// VFIOGroupStatus is VFIO_GROUP_GET_STATUS's answer for /dev/vfio/N.
type VFIOGroupStatus struct {
	Flags string `json:"flags"`
	// Viable: every device in the IOMMU group is bound to a VFIO driver
	// (or a driver that is safe for it); without it no device of the
	// group can be opened.
	Viable bool `json:"viable"`
	// ContainerSet: the group is attached to a container. On a group
	// fd just opened this is false; it is reported as the kernel said.
	ContainerSet bool `json:"container_set"`
}

// VFIOGroupProbe asks a VFIO group node for its status.
func VFIOGroupProbe(fd int) Ioctl {
	c := newIoctl("VFIO_GROUP_GET_STATUS", vfioGroupGetStatus)
	if !ioctlsSupported {
		return unsupportedArch(c)
	}
	st := vfioGroupStatus{Argsz: uint32(unsafe.Sizeof(vfioGroupStatus{}))}
	_, _, en := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(vfioGroupGetStatus), uintptr(unsafe.Pointer(&st)))
	if en != 0 {
		c.setErr(en)
		return c
	}
	c.Class = Answered
	c.VFIOGroup = decodeVFIOGroup(st.Flags)
	return c
}

func decodeVFIOGroup(flags uint32) *VFIOGroupStatus {
	return &VFIOGroupStatus{
		Flags:        fmt.Sprintf("%#x", flags),
		Viable:       flags&vfioGroupFlagsViable != 0,
		ContainerSet: flags&vfioGroupFlagsContainerSet != 0,
	}
}

// KFDVersion is AMDKFD_IOC_GET_VERSION's answer.
type KFDVersion struct {
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

// KFDGetVersion asks /dev/kfd (the AMD compute driver, amdkfd) for its
// ioctl interface version (drivers/gpu/drm/amd/amdkfd/kfd_chardev.c
// kfd_ioctl_get_version).
func KFDGetVersion(fd int) Ioctl {
	c := newIoctl("AMDKFD_IOC_GET_VERSION", amdkfdIocGetVersion)
	if !ioctlsSupported {
		return unsupportedArch(c)
	}
	var v kfdGetVersionArgs
	_, _, en := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(amdkfdIocGetVersion), uintptr(unsafe.Pointer(&v)))
	if en != 0 {
		c.setErr(en)
		return c
	}
	c.Class = Answered
	c.KFD = &KFDVersion{Major: v.Major, Minor: v.Minor}
	return c
}

// ErrArchUnsupported is the reason an ioctl is not made on an
// architecture whose encoding or struct layout this probe does not carry.
var ErrArchUnsupported = errors.New("the ioctl numbers are encoded for 64-bit asm-generic architectures (amd64, arm64, riscv64, loong64) only; not " + runtime.GOARCH)

func unsupportedArch(c Ioctl) Ioctl {
	c.NotRun, c.Skip = ErrArchUnsupported.Error(), SkipArch
	return c
}
