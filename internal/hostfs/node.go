package hostfs

import (
	"fmt"
	"io/fs"
)

// FileType is the kind of a filesystem entry.
type FileType uint8

const (
	TypeUnknown FileType = iota
	TypeRegular
	TypeDir
	TypeSymlink
	TypeChar
	TypeBlock
	TypeFIFO
	TypeSocket
)

func (t FileType) String() string {
	switch t {
	case TypeRegular:
		return "regular file"
	case TypeDir:
		return "directory"
	case TypeSymlink:
		return "symlink"
	case TypeChar:
		return "char device"
	case TypeBlock:
		return "block device"
	case TypeFIFO:
		return "fifo"
	case TypeSocket:
		return "socket"
	}
	return "unknown"
}

func (t FileType) letter() string {
	switch t {
	case TypeChar:
		return "c"
	case TypeBlock:
		return "b"
	case TypeDir:
		return "d"
	case TypeSymlink:
		return "l"
	}
	return "f"
}

func typeOf(m fs.FileMode) FileType {
	switch {
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	case m.IsDir():
		return TypeDir
	case m&fs.ModeCharDevice != 0:
		return TypeChar
	case m&fs.ModeDevice != 0:
		return TypeBlock
	case m&fs.ModeNamedPipe != 0:
		return TypeFIFO
	case m&fs.ModeSocket != 0:
		return TypeSocket
	case m.IsRegular():
		return TypeRegular
	}
	return TypeUnknown
}

// Node is what a stat of a host path tells: type, device number, mode and
// owner. FromManifest says the entry was not really present and came from
// the tree's device manifest.
type Node struct {
	Path         string
	Type         FileType
	Major, Minor uint32
	Mode         fs.FileMode // permission bits plus setuid/setgid/sticky
	UID, GID     uint32
	Target       string // symlink target, as written
	FromManifest bool
}

// Dev is "MAJOR:MINOR", the form of sysfs "dev" files.
func (n Node) Dev() string { return fmt.Sprintf("%d:%d", n.Major, n.Minor) }

func (n Node) permBits() uint32 {
	b := uint32(n.Mode.Perm())
	if n.Mode&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if n.Mode&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if n.Mode&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// ModeString is the octal permission bits, e.g. "0666".
func (n Node) ModeString() string { return fmt.Sprintf("%04o", n.permBits()) }
