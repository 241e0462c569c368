package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Access is the access a probe asks for, in the device cgroup's letters.
type Access string

const (
	Read      Access = "r"
	Write     Access = "w"
	ReadWrite Access = "rw"
	// Mknod is the 'm' access: creating a node (see MknodNode).
	Mknod Access = "m"
)

// openFlags maps an open access to its O_ACCMODE flag.
func (a Access) openFlags() (int, error) {
	switch a {
	case Read:
		return unix.O_RDONLY, nil
	case Write:
		return unix.O_WRONLY, nil
	case ReadWrite:
		return unix.O_RDWR, nil
	}
	return 0, fmt.Errorf("access %q cannot be probed with open", string(a))
}

// ParseAccess accepts "r", "w", "rw" (or "wr") and "m".
func ParseAccess(s string) (Access, error) {
	switch s {
	case "r", "w", "rw", "m":
		return Access(s), nil
	case "wr":
		return ReadWrite, nil
	}
	return "", fmt.Errorf("unknown access %q (want r, w, rw or m)", s)
}

// Class is the layer an errno points at.
type Class string

const (
	OK Class = "OK"
	// CgroupDenied is EPERM: the device cgroup (v1 list or v2 program).
	CgroupDenied Class = "CGROUP_DENIED"
	// PermissionDenied is EACCES: file mode, nodev mount or LSM.
	PermissionDenied Class = "PERMISSION_DENIED"
	// NoDriver is ENXIO or ENODEV on a device node: nothing registered
	// behind its major:minor.
	NoDriver Class = "NO_DRIVER"
	// NotPresent is ENOENT (or ENOTDIR on the way to it).
	NotPresent Class = "NOT_PRESENT"
	// Busy is EBUSY: the driver allows one opener at a time and someone
	// holds it (a VFIO group open in a VM's QEMU, drivers/vfio/group.c).
	Busy Class = "BUSY"
	// Other is any other errno, reported verbatim.
	Other Class = "OTHER"
)

// Result is the outcome of one probe.
type Result struct {
	Path   string `json:"path"`
	Access Access `json:"access"`
	// Node is the node's type and number as stat saw it ("c 195:0"), empty
	// when it could not be stat'ed. For MknodNode it is the node asked for.
	Node string `json:"node,omitempty"`
	// Errno is 0 when the open (or mknod) succeeded.
	Errno unix.Errno `json:"errno"`
	// ErrnoName is the symbolic name ("EPERM"), empty when Errno is 0.
	ErrnoName string `json:"errno_name,omitempty"`
	Class     Class  `json:"class"`
	// Message is the error text, or a note on a success.
	Message string `json:"message,omitempty"`
}

// OpenNode opens path with acc (Read, Write or ReadWrite) and closes it at
// once. O_NONBLOCK keeps a FIFO or a modem-like driver from waiting,
// O_NOCTTY keeps a tty from becoming our controlling terminal; nothing is
// read, written or ioctl'd.
func OpenNode(path string, acc Access) Result {
	fd, r := openNode(path, acc)
	if fd >= 0 {
		unix.Close(fd)
	}
	return r
}

// openNode is OpenNode without the close: fd is -1 when the open failed.
func openNode(path string, acc Access) (int, Result) {
	r := Result{Path: path, Access: acc}
	flags, err := acc.openFlags()
	if err != nil {
		r.Errno, r.Class, r.Message = unix.EINVAL, Other, err.Error()
		r.ErrnoName = unix.ErrnoName(unix.EINVAL)
		return -1, r
	}
	fd, err := unix.Open(path, flags|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			r.Node = nodeString(st.Mode, st.Rdev)
		}
		r.Class = OK
		return fd, r
	}
	var st unix.Stat_t
	isDev := false
	if unix.Stat(path, &st) == nil {
		r.Node = nodeString(st.Mode, st.Rdev)
		m := st.Mode & unix.S_IFMT
		isDev = m == unix.S_IFCHR || m == unix.S_IFBLK
	}
	r.setErr(err, isDev)
	return -1, r
}

func (r *Result) setErr(err error, isDev bool) {
	var en unix.Errno
	if !errors.As(err, &en) {
		r.Class, r.Message = Other, err.Error()
		return
	}
	r.Errno, r.ErrnoName, r.Message = en, unix.ErrnoName(en), en.Error()
	r.Class = classify(en, isDev)
}

// classify maps an errno to its class. ENXIO on something that is not a
// device node (a FIFO opened for writing with no reader, fs/fifo.c) is not
// a missing driver.
func classify(en unix.Errno, isDev bool) Class {
	switch en {
	case 0:
		return OK
	case unix.EPERM:
		return CgroupDenied
	case unix.EACCES:
		return PermissionDenied
	case unix.ENXIO, unix.ENODEV:
		if isDev {
			return NoDriver
		}
		return Other
	case unix.ENOENT, unix.ENOTDIR:
		return NotPresent
	case unix.EBUSY:
		return Busy
	}
	return Other
}

// nodeString formats a stat mode and rdev as "c 1:3"; other file types
// get their type only ("p", "-", "d", ...).
func nodeString(mode uint32, rdev uint64) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return fmt.Sprintf("c %d:%d", unix.Major(rdev), unix.Minor(rdev))
	case unix.S_IFBLK:
		return fmt.Sprintf("b %d:%d", unix.Major(rdev), unix.Minor(rdev))
	case unix.S_IFIFO:
		return "p"
	case unix.S_IFDIR:
		return "d"
	case unix.S_IFREG:
		return "-"
	case unix.S_IFLNK:
		return "l"
	case unix.S_IFSOCK:
		return "s"
	}
	return "?"
}

// MknodNode probes the 'm' access: it creates a private temporary
// directory, makes a node of type typ ('c' or 'b') and major:minor in it,
// and removes both. EPERM comes from the device cgroup
// (security/device_cgroup.c devcgroup_inode_mknod) but also from a missing
// CAP_MKNOD (fs/namei.c vfs_mknod), which is why Compare wants a baseline.
// The temporary directory is made under dir ("" for os.TempDir()).
func MknodNode(dir string, typ byte, major, minor uint32) Result {
	r := Result{Access: Mknod, Node: fmt.Sprintf("%c %d:%d", typ, major, minor)}
	var mode uint32
	switch typ {
	case 'c':
		mode = unix.S_IFCHR
	case 'b':
		mode = unix.S_IFBLK
	default:
		r.Errno, r.ErrnoName, r.Class = unix.EINVAL, "EINVAL", Other
		r.Message = fmt.Sprintf("node type %q: want 'c' or 'b'", typ)
		return r
	}
	tmp, err := os.MkdirTemp(dir, "accel-doctor-mknod-")
	if err != nil {
		r.Class, r.Message = Other, err.Error()
		return r
	}
	defer os.RemoveAll(tmp)
	r.Path = filepath.Join(tmp, "node")
	if err := unix.Mknod(r.Path, mode|0o600, int(unix.Mkdev(major, minor))); err != nil {
		r.setErr(err, true)
		// A mknod that failed is never a driver question.
		if r.Class == NoDriver {
			r.Class = Other
		}
		return r
	}
	r.Class = OK
	return r
}
