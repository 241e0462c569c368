package enter

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// cgroupDir is where one of the target's cgroups is on this host.
type cgroupDir struct {
	Line CgroupLine
	V2   bool
	// Dir is the cgroup's directory, "" when it could not be placed.
	Dir string
	Err error
}

// Name is how the report names the hierarchy.
func (c cgroupDir) Name() string {
	if c.V2 {
		return "cgroup2"
	}
	return strings.Join(c.Line.Controllers, ",")
}

// placeCgroups maps each line of the target's /proc/PID/cgroup onto the
// cgroup mounts of accel-doctor's own mount table (mountinfo text). A
// path is placed under a mount whose root (mountinfo field 4) is a prefix
// of it; a v1 hierarchy is the cgroup mount whose super options name all
// of the line's controllers. A path that climbs ("/../..": accel-doctor is
// in a cgroup namespace below the target's cgroup) cannot be placed.
func placeCgroups(lines []CgroupLine, mi []byte) ([]cgroupDir, error) {
	mounts, err := mountinfo.GetMountsFromReader(bytes.NewReader(mi), func(m *mountinfo.Info) (skip, stop bool) {
		return m.FSType != "cgroup" && m.FSType != "cgroup2", false
	})
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	var out []cgroupDir
	for _, l := range lines {
		c := cgroupDir{Line: l, V2: l.ID == 0 && len(l.Controllers) == 0}
		if strings.HasPrefix(l.Path, "/..") {
			c.Err = fmt.Errorf("the path %s climbs above accel-doctor's cgroup namespace: run accel-doctor in the host's cgroup namespace", l.Path)
			out = append(out, c)
			continue
		}
		for _, m := range mounts {
			if c.V2 != (m.FSType == "cgroup2") {
				continue
			}
			if !c.V2 {
				opts := strings.Split(m.VFSOptions, ",")
				all := true
				for _, want := range l.Controllers {
					all = all && slices.Contains(opts, want)
				}
				if !all {
					continue
				}
			}
			rel, ok := under(m.Root, l.Path)
			if !ok {
				continue
			}
			c.Dir = path.Join(m.Mountpoint, rel)
			break
		}
		if c.Dir == "" && c.Err == nil {
			c.Err = fmt.Errorf("no %s mount here shows %s", c.Name(), l.Path)
		}
		out = append(out, c)
	}
	return out, nil
}

// under is p relative to root when p is root or below it.
func under(root, p string) (string, bool) {
	root, p = path.Clean(root), path.Clean(p)
	if root == "/" {
		return p, true
	}
	if p == root {
		return "/", true
	}
	if strings.HasPrefix(p, root+"/") {
		return p[len(root):], true
	}
	return "", false
}

// decidesDevices reports whether a hierarchy takes part in device access
// (the v1 devices controller, and cgroup2 with its BPF programs): failing
// to join one of those would make the probe's answer another cgroup's.
func (c cgroupDir) decidesDevices() bool {
	return c.V2 || slices.Contains(c.Line.Controllers, "devices")
}
