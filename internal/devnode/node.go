package devnode

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// NodeState is what a stat of a device node path shows. It never opens
// the node.
type NodeState struct {
	Path   string
	Exists bool
	// Node is the stat of what Path names, symlinks followed inside the
	// root; valid when Exists.
	Node hostfs.Node
	// Symlink is true when Path itself is a symlink (LinkTarget as
	// written); Node then describes the target.
	Symlink    bool
	LinkTarget string
	// Err is a stat error other than "not there" (permission, a dangling
	// link loop); Exists is false with it.
	Err error
	// CharLink is the /dev/char/MAJOR:MINOR link of a char node; nil when
	// the node is not a char device.
	CharLink *CharLink
}

// IsChar reports whether the node exists and is a char device.
func (s NodeState) IsChar() bool { return s.Exists && s.Node.Type == hostfs.TypeChar }

// CharLink is the state of /dev/char/MAJOR:MINOR for a char node. udev
// creates these links (50-udev-default.rules and udev's own node handling);
// nodes made by hand or by nvidia-modprobe have none. systemd resolves
// DeviceAllow=/dev/char/M:m through them (src/core/cgroup.c).
type CharLink struct {
	Path    string // "/dev/char/195:0"
	Present bool
	Target  string // as written, "../nvidia0"
	// Resolved is the host path the link names after resolving a relative
	// target against /dev/char ("/dev/nvidia0"); "" when not a link.
	Resolved string
	// PointsAtNode: Resolved is the node's path, or the link resolves to a
	// char node with the same major:minor (an alias path such as
	// /dev/dri/by-path/... still reaches the same device).
	PointsAtNode bool
	Err          error // a read error other than "not there"
}

// CharLinkPath is the /dev/char link udev makes for a char device number.
func CharLinkPath(major, minor uint32) string {
	return fmt.Sprintf("/dev/char/%d:%d", major, minor)
}

// StatNode describes the node at p (a host path under /dev) and, for a
// char node, its /dev/char link.
func StatNode(root *hostfs.Root, p string) NodeState {
	p = path.Clean(p)
	s := NodeState{Path: p}
	l, err := root.Lstat(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.Err = err
		}
		return s
	}
	if l.Type == hostfs.TypeSymlink {
		s.Symlink, s.LinkTarget = true, l.Target
		n, err := root.Stat(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.Err = err
			}
			return s
		}
		l = n
	}
	s.Exists, s.Node = true, l
	if l.Type == hostfs.TypeChar {
		cl := statCharLink(root, p, l.Major, l.Minor)
		s.CharLink = &cl
	}
	return s
}

func statCharLink(root *hostfs.Root, node string, major, minor uint32) CharLink {
	cl := CharLink{Path: CharLinkPath(major, minor)}
	l, err := root.Lstat(cl.Path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			cl.Err = err
		}
		return cl
	}
	cl.Present = true
	if l.Type != hostfs.TypeSymlink {
		// A node itself at /dev/char/M:m is unusual but serves systemd just
		// as well when it is the same device.
		cl.PointsAtNode = l.Type == hostfs.TypeChar && l.Major == major && l.Minor == minor
		return cl
	}
	cl.Target = l.Target
	t := l.Target
	if !strings.HasPrefix(t, "/") {
		t = path.Join("/dev/char", t)
	}
	cl.Resolved = path.Clean(t)
	if cl.Resolved == node {
		cl.PointsAtNode = true
		return cl
	}
	if n, err := root.Stat(cl.Path); err == nil {
		cl.PointsAtNode = n.Type == hostfs.TypeChar && n.Major == major && n.Minor == minor
	} else if !errors.Is(err, fs.ErrNotExist) {
		cl.Err = err
	}
	return cl
}
