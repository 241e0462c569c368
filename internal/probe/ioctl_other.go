//go:build !(linux && (amd64 || arm64 || riscv64 || loong64))

package probe

// On other architectures the ioctl step is NOT_RUN (ErrArchUnsupported):
// their _IOC direction bits or struct layouts differ from those encoded in
// ioctl_numbers.go.
const (
	ioctlsSupported = false

	drmIoctlVersion     = 0
	vidiocQuerycap      = 0
	vfioGetAPIVersion   = 0
	vfioCheckExtension  = 0
	vfioGroupGetStatus  = 0
	amdkfdIocGetVersion = 0
)
