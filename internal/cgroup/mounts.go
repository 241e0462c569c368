package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Mode is how the host mounts its cgroup hierarchies.
type Mode int

const (
	ModeUnknown Mode = iota // no cgroup mount found
	ModeV1                  // only v1 hierarchies
	ModeV2                  // only the unified (cgroup2) hierarchy
	ModeHybrid              // v1 controllers and a cgroup2 mount (systemd "hybrid")
)

func (m Mode) String() string {
	switch m {
	case ModeV1:
		return "v1"
	case ModeV2:
		return "v2"
	case ModeHybrid:
		return "hybrid"
	}
	return "unknown"
}

// Mounts is where the cgroup hierarchies that matter for devices are mounted.
type Mounts struct {
	Mode Mode
	// DevicesV1 is the mount point of the v1 devices controller ("" when it
	// is not mounted); DevicesV1Root is the part of the hierarchy that mount
	// shows (mountinfo field 4), written relative to the reader's cgroup
	// namespace: "/" on a host, the container's own cgroup inside a
	// container without a cgroup namespace, "/../.." for the whole
	// hierarchy read from a namespace two levels down (see cgns.go).
	DevicesV1     string
	DevicesV1Root string
	// Unified is the cgroup2 mount point ("" when none) and UnifiedRoot the
	// part of the hierarchy it shows.
	Unified     string
	UnifiedRoot string
	// Source is the mountinfo these were read from (see mountinfoSource).
	Source string
}

// MountinfoPath is the mountinfo of the live root. A root that is a host
// mounted elsewhere is read through its init's /proc/1/mountinfo instead:
// Mounts.Source says which file was read.
const MountinfoPath = selfMountinfo

// ParseMounts reads proc_pid_mountinfo(5) text and finds the cgroup mounts.
// When a hierarchy is mounted more than once, the mount showing the widest
// part of it wins (the root that climbs most levels, then the one with
// fewest names), then the first.
func ParseMounts(b []byte) (*Mounts, error) {
	infos, err := mountinfo.GetMountsFromReader(bytes.NewReader(b), func(i *mountinfo.Info) (skip, stop bool) {
		return i.FSType != "cgroup" && i.FSType != "cgroup2", false
	})
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	m := &Mounts{}
	v1 := false
	var bestV1, bestV2 nsPath
	better := func(curPoint string, cur, root nsPath) bool {
		return curPoint == "" || root.up > cur.up || (root.up == cur.up && len(root.names) < len(cur.names))
	}
	for _, i := range infos {
		if !strings.HasPrefix(i.Mountpoint, "/") {
			return nil, fmt.Errorf("mountinfo: cgroup mount %q is not absolute", i.Mountpoint)
		}
		root, err := parseNSPath(i.Root)
		if err != nil {
			return nil, fmt.Errorf("mountinfo: cgroup mount %q: root: %w", i.Mountpoint, err)
		}
		switch i.FSType {
		case "cgroup2":
			if better(m.Unified, bestV2, root) {
				m.Unified, m.UnifiedRoot, bestV2 = path.Clean(i.Mountpoint), root.String(), root
			}
		case "cgroup":
			v1 = true
			// The controllers are in the super options ("rw,devices").
			if slices.Contains(strings.Split(i.VFSOptions, ","), "devices") && better(m.DevicesV1, bestV1, root) {
				m.DevicesV1, m.DevicesV1Root, bestV1 = path.Clean(i.Mountpoint), root.String(), root
			}
		}
	}
	switch {
	case v1 && m.Unified != "":
		m.Mode = ModeHybrid
	case v1:
		m.Mode = ModeV1
	case m.Unified != "":
		m.Mode = ModeV2
	}
	return m, nil
}

// ReadMounts detects the cgroup mounts from the root's mount table: the
// live host's /proc/self/mountinfo, or the init's of a host mounted at the
// root (see mountinfoSource).
func ReadMounts(root *hostfs.Root) (*Mounts, error) {
	src := mountinfoSource(root)
	b, err := root.ReadFile(src)
	if err != nil {
		return nil, err
	}
	m, err := ParseMounts(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	m.Source = src
	return m, nil
}

// ErrOutsideMount is returned when a cgroup path is not visible through the
// mount (it lies outside the part of the hierarchy the mount shows).
var ErrOutsideMount = errors.New("cgroup path is outside the mounted part of the hierarchy")

// DevicesDir maps a v1 devices cgroup path (as /proc/PID/cgroup writes it
// for the same reader as the mountinfo) to its directory under the host
// root. A path the mount root cannot be joined with lexically is
// ErrAboveNamespace: Locate resolves those.
func (m *Mounts) DevicesDir(cgPath string) (string, error) {
	d, err := mapPath(m.DevicesV1, m.DevicesV1Root, cgPath)
	if err != nil {
		return "", fmt.Errorf("v1 devices: %w", err)
	}
	return d, nil
}

// UnifiedDir maps a cgroup2 path to its directory under the host root, as
// DevicesDir does.
func (m *Mounts) UnifiedDir(cgPath string) (string, error) {
	d, err := mapPath(m.Unified, m.UnifiedRoot, cgPath)
	if err != nil {
		return "", fmt.Errorf("cgroup2: %w", err)
	}
	return d, nil
}

// ProcCgroup is one line of /proc/PID/cgroup (cgroups(7)):
// "hierarchy-ID:controller-list:cgroup-path"; the v2 line is "0::/path".
type ProcCgroup struct {
	HierarchyID int
	Controllers []string // empty for the v2 line; "name=systemd" kept as is
	Path        string
}

// ParseProcCgroup parses /proc/PID/cgroup.
func ParseProcCgroup(b []byte) ([]ProcCgroup, error) {
	var out []ProcCgroup
	for n, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		// The path may itself hold ':'; only the first two separate fields.
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %q: want hierarchy-ID:controllers:path", n+1, line)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil || id < 0 {
			return nil, fmt.Errorf("line %d: hierarchy ID %q is not a number", n+1, f[0])
		}
		if !strings.HasPrefix(f[2], "/") {
			return nil, fmt.Errorf("line %d: cgroup path %q is not absolute", n+1, f[2])
		}
		e := ProcCgroup{HierarchyID: id, Path: f[2]}
		if f[1] != "" {
			e.Controllers = strings.Split(f[1], ",")
		}
		out = append(out, e)
	}
	return out, nil
}

// DevicesPath returns the v1 devices controller's path of a process.
func DevicesPath(entries []ProcCgroup) (string, bool) {
	for _, e := range entries {
		if e.HierarchyID != 0 && slices.Contains(e.Controllers, "devices") {
			return e.Path, true
		}
	}
	return "", false
}

// UnifiedPath returns the cgroup2 path of a process (the "0::" line).
func UnifiedPath(entries []ProcCgroup) (string, bool) {
	for _, e := range entries {
		if e.HierarchyID == 0 && len(e.Controllers) == 0 {
			return e.Path, true
		}
	}
	return "", false
}

// ReadProcCgroup reads /proc/PID/cgroup under the root.
func ReadProcCgroup(root *hostfs.Root, pid int) ([]ProcCgroup, error) {
	if pid < 0 {
		return nil, fmt.Errorf("pid %d is not valid", pid)
	}
	p := fmt.Sprintf("/proc/%d/cgroup", pid)
	if pid == 0 {
		p = "/proc/self/cgroup" // the reading process (Target.Self)
	}
	b, err := root.ReadFile(p)
	if err != nil {
		return nil, err
	}
	e, err := ParseProcCgroup(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return e, nil
}
