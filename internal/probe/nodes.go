package probe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Kind is the family of an accelerator node, told by its name under /dev.
type Kind string

const (
	KindNVIDIA        Kind = "nvidia"         // nvidiaN, nvidiactl, nvidia-uvm, nvidia-modeset, nvidia-nvswitchN
	KindNVIDIACap     Kind = "nvidia-cap"     // nvidia-caps/nvidia-capN (MIG and fabric capabilities)
	KindDRM           Kind = "drm"            // dri/cardN, dri/renderDN
	KindAccel         Kind = "accel"          // accel/accelN (drivers/accel: Gaudi, NPUs)
	KindKFD           Kind = "kfd"            // kfd (AMD compute)
	KindVideo         Kind = "video"          // videoN (V4L2: decoders, encoders, cameras)
	KindVFIOContainer Kind = "vfio-container" // vfio/vfio
	KindVFIOGroup     Kind = "vfio-group"     // vfio/N
	KindVFIODevice    Kind = "vfio-device"    // vfio/devices/vfioN (the VFIO device cdev)
)

// scanDirs are the directories under /dev that accelerator nodes live in
// and the names matched there (path.Match patterns). Only direct children
// are taken: dri/by-path and the like hold links to the same nodes.
var scanDirs = []struct {
	dir      string
	patterns []string
}{
	{"", []string{"nvidia*", "kfd", "video*"}},
	{"nvidia-caps", []string{"*"}},
	{"dri", []string{"card*", "renderD*", "controlD*"}},
	{"accel", []string{"accel*"}},
	{"vfio", []string{"*"}},
	{"vfio/devices", []string{"vfio*"}},
}

// Patterns lists the globs the scan covers, relative to the /dev
// directory ("nvidia*", "dri/renderD*", ...), for the report.
func Patterns() []string {
	var out []string
	for _, d := range scanDirs {
		for _, p := range d.patterns {
			out = append(out, path.Join(d.dir, p))
		}
	}
	return out
}

// KindOf names the kind of the node at rel, a path relative to the /dev
// directory; ok is false for a name no probe knows.
func KindOf(rel string) (Kind, bool) {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	switch dir {
	case "":
		switch {
		case strings.HasPrefix(base, "nvidia"):
			return KindNVIDIA, true
		case base == "kfd":
			return KindKFD, true
		case strings.HasPrefix(base, "video"):
			return KindVideo, true
		}
	case "nvidia-caps":
		return KindNVIDIACap, true
	case "dri":
		if strings.HasPrefix(base, "card") || strings.HasPrefix(base, "renderD") || strings.HasPrefix(base, "controlD") {
			return KindDRM, true
		}
	case "accel":
		if strings.HasPrefix(base, "accel") {
			return KindAccel, true
		}
	case "vfio":
		if base == "vfio" {
			return KindVFIOContainer, true
		}
		if base != "" && strings.Trim(base, "0123456789") == "" {
			return KindVFIOGroup, true
		}
		// /dev/vfio/noiommu-N: a group of a device bound in no-IOMMU mode.
		if strings.HasPrefix(base, "noiommu-") {
			return KindVFIOGroup, true
		}
	case "vfio/devices":
		if strings.HasPrefix(base, "vfio") {
			return KindVFIODevice, true
		}
	}
	return "", false
}

// Access is the access each kind's user space asks for: read-write for
// all but the NVIDIA capability nodes, which nvidia-modprobe makes 0400
// and the driver library opens read-only.
func (k Kind) Access() Access {
	if k == KindNVIDIACap {
		return Read
	}
	return ReadWrite
}

// NodeProbe is what one accelerator node in this process's /dev did.
type NodeProbe struct {
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
	// Target is where Path points when it is a symbolic link.
	Target string `json:"target,omitempty"`
	// Open is the open with the kind's access (see Kind.Access).
	Open Result `json:"open"`
	// IsChar: the opened file is a character device. An open that
	// succeeds on a regular file or a directory under a device's name
	// (an empty file bind-mounted over /dev/nvidia0) proves nothing.
	IsChar bool `json:"is_char"`
	// Ioctl is the kind's ioctl on the open node, or why it was not made.
	Ioctl Ioctl `json:"ioctl"`
}

// ScanNodes finds every accelerator node under dev (a /dev directory) and
// probes each: open with its kind's access, then the kind's ioctl, then
// close. errs lists the directories that could not be read (a missing
// subdirectory is not an error; a missing dev is).
//
// The probes run on the calling goroutine, one after another, and start
// no other: a caller that changed the credentials, root or namespaces of
// its OS thread (internal/enter) gets every open and ioctl made from that
// thread.
func ScanNodes(dev string) (nodes []NodeProbe, errs []string) {
	seen := map[string]bool{}
	for _, d := range scanDirs {
		dir := filepath.Join(dev, d.dir)
		ents, err := os.ReadDir(dir)
		if err != nil {
			// A missing subdirectory is a host without that kind; a
			// missing /dev is nothing to examine.
			if d.dir == "" || !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err.Error())
			}
			continue
		}
		for _, e := range ents {
			if !matchAny(d.patterns, e.Name()) {
				continue
			}
			rel := path.Join(d.dir, e.Name())
			kind, ok := KindOf(rel)
			if !ok || e.IsDir() {
				continue
			}
			p := filepath.Join(dev, rel)
			if seen[p] {
				continue
			}
			seen[p] = true
			nodes = append(nodes, ProbeNode(p, kind))
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Path < nodes[j].Path })
	return nodes, errs
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// ProbeNode opens one node with its kind's access, makes the kind's ioctl
// on it and closes it.
func ProbeNode(p string, kind Kind) NodeProbe {
	n := NodeProbe{Path: p, Kind: kind}
	if t, err := os.Readlink(p); err == nil {
		n.Target = t
	}
	fd, r := openNode(p, kind.Access())
	n.Open = r
	n.Ioctl = Ioctl{Name: kind.ioctlName()}
	if fd < 0 {
		n.Ioctl.NotRun, n.Ioctl.Skip = fmt.Sprintf("the open failed (%s)", failure(r)), SkipOpenFailed
		return n
	}
	defer unix.Close(fd)
	n.IsChar = strings.HasPrefix(r.Node, "c ")
	if !n.IsChar {
		n.Ioctl.NotRun, n.Ioctl.Skip = fmt.Sprintf("not a character device (%s)", fileType(r.Node)), SkipNotChar
		return n
	}
	switch kind {
	case KindDRM, KindAccel:
		n.Ioctl = DRMIoctlVersion(fd)
	case KindVideo:
		n.Ioctl = V4L2QueryCap(fd)
	case KindKFD:
		n.Ioctl = KFDGetVersion(fd)
	case KindVFIOContainer:
		n.Ioctl = VFIOContainerProbe(fd)
	case KindVFIOGroup:
		n.Ioctl = VFIOGroupProbe(fd)
	case KindNVIDIA:
		n.Ioctl.NotRun, n.Ioctl.Skip = "the NVIDIA driver's ioctls are its private interface; the CUDA and NVML steps use them", SkipByDesign
	case KindNVIDIACap:
		n.Ioctl.NotRun, n.Ioctl.Skip = "a capability node is only opened: the open is the check (the driver library does no more)", SkipByDesign
	case KindVFIODevice:
		n.Ioctl.NotRun, n.Ioctl.Skip = "a VFIO device cdev answers nothing before it is bound to an iommufd (VFIO_DEVICE_BIND_IOMMUFD), which this probe does not do", SkipByDesign
	}
	return n
}

// ioctlName is the ioctl a kind gets, "" when it gets none.
func (k Kind) ioctlName() string {
	switch k {
	case KindDRM, KindAccel:
		return "DRM_IOCTL_VERSION"
	case KindVideo:
		return "VIDIOC_QUERYCAP"
	case KindKFD:
		return "AMDKFD_IOC_GET_VERSION"
	case KindVFIOContainer:
		return "VFIO_GET_API_VERSION"
	case KindVFIOGroup:
		return "VFIO_GROUP_GET_STATUS"
	}
	return ""
}

func failure(r Result) string {
	if r.ErrnoName != "" {
		return r.ErrnoName
	}
	return r.Message
}

func fileType(node string) string {
	switch node {
	case "-":
		return "a regular file"
	case "d":
		return "a directory"
	case "p":
		return "a FIFO"
	case "s":
		return "a socket"
	}
	if strings.HasPrefix(node, "b ") {
		return "a block device " + strings.TrimPrefix(node, "b ")
	}
	return "type " + node
}
