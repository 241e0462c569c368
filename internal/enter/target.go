package enter

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Status is what the probe reproduces from /proc/PID/status
// (fs/proc/array.c: task_state, task_cap, task_seccomp). The ids are as
// the reader's user namespace sees them (from_kuid_munged with the
// reader's namespace): host ids when accel-doctor runs on the host.
type Status struct {
	UID, GID   [4]uint32 // real, effective, saved, filesystem
	Groups     []uint32
	CapInh     uint64
	CapPrm     uint64
	CapEff     uint64
	CapBnd     uint64
	CapAmb     uint64
	NoNewPrivs bool
	// Seccomp is 0 (none), 1 (strict) or 2 (filter); -1 when the kernel
	// does not print it (CONFIG_SECCOMP off).
	Seccomp int
}

// ParseStatus reads the fields of /proc/PID/status that a probe needs.
// Every one of them must be there, except Seccomp and CapAmb (kernels
// before 4.3 have no ambient set); a field that does not parse is an
// error naming it.
func ParseStatus(b []byte) (*Status, error) {
	s := &Status{Seccomp: -1}
	need := map[string]bool{"Uid": false, "Gid": false, "Groups": false, "CapInh": false, "CapPrm": false,
		"CapEff": false, "CapBnd": false, "NoNewPrivs": false}
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		key, val := string(k), strings.TrimSpace(string(v))
		var err error
		switch key {
		case "Uid", "Gid":
			f := strings.Fields(val)
			if len(f) != 4 {
				return nil, fmt.Errorf("%s: %q: want 4 ids", key, val)
			}
			dst := &s.UID
			if key == "Gid" {
				dst = &s.GID
			}
			for i, x := range f {
				var n uint64
				if n, err = strconv.ParseUint(x, 10, 32); err != nil {
					break
				}
				dst[i] = uint32(n)
			}
		case "Groups":
			s.Groups = nil
			for _, x := range strings.Fields(val) {
				var n uint64
				if n, err = strconv.ParseUint(x, 10, 32); err != nil {
					break
				}
				if len(s.Groups) >= 65536 { // NGROUPS_MAX
					err = errors.New("more groups than NGROUPS_MAX")
					break
				}
				s.Groups = append(s.Groups, uint32(n))
			}
		case "CapInh":
			s.CapInh, err = strconv.ParseUint(val, 16, 64)
		case "CapPrm":
			s.CapPrm, err = strconv.ParseUint(val, 16, 64)
		case "CapEff":
			s.CapEff, err = strconv.ParseUint(val, 16, 64)
		case "CapBnd":
			s.CapBnd, err = strconv.ParseUint(val, 16, 64)
		case "CapAmb":
			s.CapAmb, err = strconv.ParseUint(val, 16, 64)
		case "NoNewPrivs":
			switch val {
			case "0", "1":
				s.NoNewPrivs = val == "1"
			default:
				err = fmt.Errorf("not 0 or 1")
			}
		case "Seccomp":
			s.Seccomp, err = strconv.Atoi(val)
			if err == nil && (s.Seccomp < 0 || s.Seccomp > 2) {
				err = fmt.Errorf("mode %d", s.Seccomp)
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v", key, val, err)
		}
		need[key] = true
	}
	var missing []string
	for _, k := range []string{"Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "NoNewPrivs"} {
		if !need[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no %s line", strings.Join(missing, ", "))
	}
	return s, nil
}

// IDMap is one line of /proc/PID/uid_map or gid_map
// (user_namespaces(7)): Size ids starting at Inside in the namespace are
// Outside.. in the reader's namespace.
type IDMap struct {
	Inside, Outside, Size uint32
}

// maxIDMapLines is the kernel's limit on a map (UID_GID_MAP_MAX_EXTENTS,
// include/linux/user_namespace.h).
const maxIDMapLines = 340

// ParseIDMap reads a uid_map or gid_map.
func ParseIDMap(b []byte) ([]IDMap, error) {
	var out []IDMap
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %q: want three numbers", i+1, line)
		}
		var v [3]uint32
		for j, x := range f {
			n, err := strconv.ParseUint(x, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("line %d: %q: %v", i+1, line, err)
			}
			v[j] = uint32(n)
		}
		if v[2] == 0 || uint64(v[0])+uint64(v[2]) > 1<<32 || uint64(v[1])+uint64(v[2]) > 1<<32 {
			return nil, fmt.Errorf("line %d: %q: an empty or overflowing range", i+1, line)
		}
		if len(out) == maxIDMapLines {
			return nil, fmt.Errorf("more than %d lines", maxIDMapLines)
		}
		e := IDMap{Inside: v[0], Outside: v[1], Size: v[2]}
		// The kernel refuses a map whose ranges overlap on either side
		// (kernel/user_namespace.c mappings_overlap).
		for _, o := range out {
			if overlap(e.Inside, e.Size, o.Inside, o.Size) || overlap(e.Outside, e.Size, o.Outside, o.Size) {
				return nil, fmt.Errorf("line %d: %q overlaps an earlier line", i+1, line)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

func overlap(a, n, b, m uint32) bool {
	return uint64(a) < uint64(b)+uint64(m) && uint64(b) < uint64(a)+uint64(n)
}

// ToInside maps an id of the reader's namespace into the namespace; ok
// is false for an id the namespace does not map.
func ToInside(m []IDMap, outside uint32) (uint32, bool) {
	for _, e := range m {
		if outside >= e.Outside && uint64(outside) < uint64(e.Outside)+uint64(e.Size) {
			return e.Inside + (outside - e.Outside), true
		}
	}
	return 0, false
}

// IsIdentity reports whether a map is the initial namespace's
// ("0 0 4294967295").
func IsIdentity(m []IDMap) bool {
	return len(m) == 1 && m[0].Inside == 0 && m[0].Outside == 0 && m[0].Size == 0xffffffff
}

// CgroupLine is one line of /proc/PID/cgroup (cgroups(7)):
// hierarchy-ID:controller-list:path; ID 0 with an empty list is cgroup2.
type CgroupLine struct {
	ID          int
	Controllers []string // "devices", "cpu", "name=systemd"; none for cgroup2
	Path        string
}

// ParseCgroupFile reads /proc/PID/cgroup.
func ParseCgroupFile(b []byte) ([]CgroupLine, error) {
	var out []CgroupLine
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok := strings.Cut(line, ":")
		ctrl, p, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 {
			return nil, fmt.Errorf("line %d: %q: want ID:CONTROLLERS:PATH", i+1, line)
		}
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("line %d: %q: hierarchy id %q", i+1, line, id)
		}
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("line %d: %q: the path is not absolute", i+1, line)
		}
		l := CgroupLine{ID: n, Path: p}
		if ctrl != "" {
			l.Controllers = strings.Split(ctrl, ",")
		}
		if n == 0 && len(l.Controllers) > 0 {
			return nil, fmt.Errorf("line %d: %q: hierarchy 0 with controllers", i+1, line)
		}
		if len(out) >= 64 {
			return nil, errors.New("more than 64 hierarchies")
		}
		out = append(out, l)
	}
	return out, nil
}

// ParseEnviron splits /proc/PID/environ (NUL-separated, as execve gave
// it) into KEY=VALUE strings; entries without '=' are dropped, as a libc
// getenv would never find them.
func ParseEnviron(b []byte) []string {
	var out []string
	for _, e := range bytes.Split(b, []byte{0}) {
		if i := bytes.IndexByte(e, '='); i > 0 {
			out = append(out, string(e))
		}
	}
	return out
}
