//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package probe

// The request numbers, as the UAPI headers define them, evaluated for a
// 64-bit asm-generic ABI (see IOC). TestIoctlNumbers recomputes each one.
const (
	ioctlsSupported = true

	// DRM_IOCTL_VERSION = DRM_IOWR(0x00, struct drm_version), DRM_IOCTL_BASE
	// 'd' (include/uapi/drm/drm.h); 64-byte struct.
	drmIoctlVersion = 0xc0406400
	// VIDIOC_QUERYCAP = _IOR('V', 0, struct v4l2_capability)
	// (include/uapi/linux/videodev2.h); 104-byte struct.
	vidiocQuerycap = 0x80685600
	// VFIO_GET_API_VERSION = _IO(VFIO_TYPE, VFIO_BASE + 0),
	// VFIO_CHECK_EXTENSION = _IO(VFIO_TYPE, VFIO_BASE + 1),
	// VFIO_GROUP_GET_STATUS = _IO(VFIO_TYPE, VFIO_BASE + 3), VFIO_TYPE ';'
	// and VFIO_BASE 100 (include/uapi/linux/vfio.h). _IO: the argument
	// travels in the register, or as a pointer whose size the header does
	// not encode (the struct's argsz carries it).
	vfioGetAPIVersion  = 0x3b64
	vfioCheckExtension = 0x3b65
	vfioGroupGetStatus = 0x3b67
	// AMDKFD_IOC_GET_VERSION = AMDKFD_IOR(0x01, struct
	// kfd_ioctl_get_version_args), AMDKFD_IOCTL_BASE 'K'
	// (include/uapi/linux/kfd_ioctl.h); 8-byte struct.
	amdkfdIocGetVersion = 0x80084b01
)
