package runtime

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// A container with a user namespace of its own sees file owners through
// its ID maps (/proc/PID/uid_map, gid_map). An owner outside the map shows
// inside as the overflow ID (/proc/sys/kernel/overflowuid, 65534 "nobody"
// by default: include/linux/highuid.h DEFAULT_OVERFLOWUID), and the
// namespace's root has no capability over that inode: CAP_DAC_OVERRIDE
// and CAP_DAC_READ_SEARCH apply only to inodes whose owner and group are
// both mapped (fs/namei.c generic_permission -> capable_wrt_inode_uidgid
// -> privileged_wrt_inode_uidgid). So a 0600 node owned by an unmapped
// root gives the container's root EACCES, whatever the device cgroup says.

// IDExtent is one line of an ID map: Count IDs from Inside (in the
// process's namespace) map to Count IDs from Outside (as the reader sees
// them).
type IDExtent struct {
	Inside, Outside, Count uint32
}

// IDMap is a uid_map or gid_map. An empty map (a namespace whose map was
// never written) maps nothing.
type IDMap []IDExtent

// maxIDExtents is UID_GID_MAP_MAX_EXTENTS (include/linux/user_namespace.h,
// 340 since Linux 4.15).
const maxIDExtents = 340

// ParseIDMap parses a uid_map or gid_map (kernel/user_namespace.c
// uid_m_show: "%10u %10u %10u\n" per extent). The second field is shown
// in the opener's user namespace (or its parent, when the opener is in
// the map's own namespace). The kernel never writes overlapping extents,
// a zero count, a range past 2^32 or more than 340 extents
// (map_write, mappings_overlap): each is ErrMalformed.
func ParseIDMap(b []byte) (IDMap, error) {
	var m IDMap
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, malformed("id map line %d: %d fields: %q", i+1, len(f), short(line))
		}
		var v [3]uint64
		for j := range f {
			n, err := strconv.ParseUint(f[j], 10, 32)
			if err != nil {
				return nil, malformed("id map line %d: %q: %v", i+1, short(f[j]), err)
			}
			v[j] = n
		}
		if v[2] == 0 || v[0]+v[2] > 1<<32 || v[1]+v[2] > 1<<32 {
			return nil, malformed("id map line %d: range %d %d %d", i+1, v[0], v[1], v[2])
		}
		if len(m) == maxIDExtents {
			return nil, malformed("id map: more than %d extents", maxIDExtents)
		}
		m = append(m, IDExtent{Inside: uint32(v[0]), Outside: uint32(v[1]), Count: uint32(v[2])})
	}
	if err := m.overlap(); err != nil {
		return nil, err
	}
	return m, nil
}

// overlap rejects extents whose inside or outside ranges overlap.
func (m IDMap) overlap() error {
	for _, side := range []func(IDExtent) uint32{
		func(e IDExtent) uint32 { return e.Inside },
		func(e IDExtent) uint32 { return e.Outside },
	} {
		s := append(IDMap(nil), m...)
		sort.Slice(s, func(i, j int) bool { return side(s[i]) < side(s[j]) })
		for i := 1; i < len(s); i++ {
			if uint64(side(s[i-1]))+uint64(s[i-1].Count) > uint64(side(s[i])) {
				return malformed("id map: extents overlap")
			}
		}
	}
	return nil
}

// ToInside maps an ID as the reader sees it to the process's namespace.
func (m IDMap) ToInside(outside uint32) (uint32, bool) {
	for _, e := range m {
		if outside >= e.Outside && uint64(outside) < uint64(e.Outside)+uint64(e.Count) {
			return e.Inside + (outside - e.Outside), true
		}
	}
	return 0, false
}

// IsIdentity reports whether the map is the initial namespace's
// "0 0 4294967295".
func (m IDMap) IsIdentity() bool {
	return len(m) == 1 && m[0].Inside == 0 && m[0].Outside == 0 && m[0].Count == ^uint32(0)
}

func (m IDMap) String() string {
	parts := make([]string, len(m))
	for i, e := range m {
		parts[i] = fmt.Sprintf("%d %d %d", e.Inside, e.Outside, e.Count)
	}
	return strings.Join(parts, "; ")
}

// UserNS is the container's user namespace as the reader sees it.
type UserNS struct {
	// ID is /proc/PID/ns/user ("user:[4026532201]"); ReaderID is the
	// reading process's own (/proc/self/ns/user). When they are equal the
	// process shares our namespace and IDs need no mapping.
	ID, ReaderID         string
	IDRead, ReaderIDRead ProcRead
	UIDMap, GIDMap       IDMap
	UIDRead, GIDRead     ProcRead
	// OverflowUID and OverflowGID are what an unmapped owner shows as
	// inside; 65534 when the sysctls could not be read (OverflowRead says
	// why).
	OverflowUID, OverflowGID uint32
	OverflowRead             ProcRead
}

// DefaultOverflowID is the kernel's default overflowuid and overflowgid
// (include/linux/highuid.h DEFAULT_OVERFLOWUID).
const DefaultOverflowID = 65534

// Shared reports whether the process is in the reader's own user
// namespace (so the reader's view of IDs is the process's); known is
// false when the namespace links could not be read.
func (u *UserNS) Shared() (shared, known bool) {
	if !u.IDRead.OK() || !u.ReaderIDRead.OK() {
		return false, false
	}
	return u.ID == u.ReaderID, true
}

// IDView is an owner or group as the reader and as the container see it.
type IDView struct {
	Host   uint32 // as the reader's user namespace sees it (what stat gives us)
	Inside uint32 // as the container sees it: the overflow ID when unmapped
	Mapped bool   // the ID has a mapping in the container's namespace
	Known  bool   // the map was read (or the namespace is ours)
}

func (v IDView) String() string {
	switch {
	case !v.Known:
		return fmt.Sprintf("%d (inside: not known)", v.Host)
	case !v.Mapped:
		return fmt.Sprintf("%d (%d inside: unmapped in the container's user namespace)", v.Host, v.Inside)
	case v.Host == v.Inside:
		return strconv.FormatUint(uint64(v.Host), 10)
	}
	return fmt.Sprintf("%d (%d inside)", v.Host, v.Inside)
}

// Owner maps a node's owner (as stat gave it to us) into the container.
func (u *UserNS) Owner(uid uint32) IDView { return u.view(uid, u.UIDMap, u.UIDRead, u.OverflowUID) }

// Group maps a node's group into the container.
func (u *UserNS) Group(gid uint32) IDView { return u.view(gid, u.GIDMap, u.GIDRead, u.OverflowGID) }

func (u *UserNS) view(id uint32, m IDMap, r ProcRead, overflow uint32) IDView {
	v := IDView{Host: id}
	if shared, known := u.Shared(); known && shared {
		return IDView{Host: id, Inside: id, Mapped: true, Known: true}
	}
	if !r.OK() {
		return v
	}
	v.Known = true
	v.Inside, v.Mapped = m.ToInside(id)
	if !v.Mapped {
		v.Inside = overflow
	}
	return v
}

// readUserNS reads the namespace links, the maps and the overflow IDs.
func (pr *procReader) readUserNS() UserNS {
	u := UserNS{OverflowUID: DefaultOverflowID, OverflowGID: DefaultOverflowID}
	u.ID, u.IDRead = pr.readlink(pr.path("ns/user"))
	u.ReaderID, u.ReaderIDRead = pr.readlink("/proc/self/ns/user")
	for _, f := range []struct {
		name string
		m    *IDMap
		r    *ProcRead
	}{{"uid_map", &u.UIDMap, &u.UIDRead}, {"gid_map", &u.GIDMap, &u.GIDRead}} {
		b, r := pr.read(f.name, smallProcLimit)
		if r.OK() {
			m, err := ParseIDMap(b)
			if err != nil {
				r = pr.result(r.Path, fmt.Errorf("%s: %w", r.Path, err))
			}
			*f.m = m
		}
		*f.r = r
	}
	u.OverflowRead = ProcRead{Path: "/proc/sys/kernel/overflowuid", State: ReadOK}
	for _, f := range []struct {
		name string
		v    *uint32
	}{{"/proc/sys/kernel/overflowuid", &u.OverflowUID}, {"/proc/sys/kernel/overflowgid", &u.OverflowGID}} {
		b, r := pr.read(f.name, sysctlValueLimit)
		if r.OK() {
			n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
			if err == nil {
				*f.v = uint32(n)
			} else {
				r = pr.result(f.name, fmt.Errorf("%s: %w", f.name, malformed("%q", short(string(b)))))
			}
		}
		if !r.OK() && u.OverflowRead.OK() {
			u.OverflowRead = r // the default stays
		}
	}
	return u
}

// readlink reads a link through the root (a procfs namespace link is read
// as text, never followed).
func (pr *procReader) readlink(p string) (string, ProcRead) {
	t, err := pr.root.Readlink(p)
	return t, pr.result(p, err)
}

// Access is what an open asks of a node: MayRead, MayWrite or both
// (include/linux/fs.h MAY_READ, MAY_WRITE).
type Access uint8

const (
	MayRead  Access = 4
	MayWrite Access = 2
	MayRW           = MayRead | MayWrite
)

func (a Access) String() string {
	s := ""
	if a&MayRead != 0 {
		s += "r"
	}
	if a&MayWrite != 0 {
		s += "w"
	}
	return s
}

// ModeDecision is what the kernel's discretionary check makes of an open
// of a node by the process: the mode bits against its filesystem IDs and
// groups, then the DAC capabilities (fs/namei.c generic_permission,
// acl_permission_check, capable_wrt_inode_uidgid). It comes after the
// nodev check (may_open: EACCES) and before the device cgroup (EPERM) and
// the LSMs, which it says nothing about. POSIX ACLs are not read: a node
// with an ACL (udev's uaccess tag sets one) may allow more than its mode.
type ModeDecision struct {
	Known   bool   // the credentials and the owner's mapping were read
	Allowed bool   // the mode check lets the open through
	By      string // what decided: "owner bits rw- of 0600", "CAP_DAC_OVERRIDE", ...
}

func (d ModeDecision) String() string {
	switch {
	case !d.Known:
		return "mode check: unknown (" + d.By + ")"
	case d.Allowed:
		return "mode check allows: " + d.By
	}
	return "mode check gives EACCES: " + d.By
}

// modeDecision decides an open of node n (as stat gave it to us) with the
// access want, by a process with status st in namespace u.
func modeDecision(n hostfs.Node, owner, group IDView, st *ProcStatus, stRead ProcRead, want Access) ModeDecision {
	if !stRead.OK() {
		return ModeDecision{By: "the process's credentials: " + stRead.String()}
	}
	if !owner.Known || !group.Known {
		return ModeDecision{By: "the owner's mapping in the container's user namespace was not read"}
	}
	mode := uint32(n.Mode.Perm())
	fsuid, fsgid := st.UID[3], st.GID[3]
	var bits uint32
	var class string
	switch {
	case fsuid == n.UID:
		bits, class = mode>>6&7, "owner"
	case inGroup(n.GID, fsgid, st.Groups):
		bits, class = mode>>3&7, "group"
	default:
		bits, class = mode&7, "other"
	}
	need := uint32(want) // MAY_READ 4, MAY_WRITE 2: the rwx bits' positions
	by := fmt.Sprintf("%s bits %s of %s (node %d:%d, process fsuid %d fsgid %d)", class, rwx(bits), n.ModeString(), n.UID, n.GID, fsuid, fsgid)
	if bits&need == need {
		return ModeDecision{Known: true, Allowed: true, By: by}
	}
	// The capabilities: over inodes whose owner and group are both mapped
	// in the process's namespace only.
	mapped := owner.Mapped && group.Mapped
	switch {
	case st.CapEff.Has(capDACOverride) && mapped:
		return ModeDecision{Known: true, Allowed: true, By: by + " refuse; CAP_DAC_OVERRIDE overrides"}
	case want == MayRead && st.CapEff.Has(capDACReadSearch) && mapped:
		return ModeDecision{Known: true, Allowed: true, By: by + " refuse; CAP_DAC_READ_SEARCH overrides for reading"}
	case st.CapEff.Has(capDACOverride) && !mapped:
		return ModeDecision{Known: true, By: by + " refuse, and CAP_DAC_OVERRIDE does not apply: the node's owner or group is unmapped in the container's user namespace"}
	}
	return ModeDecision{Known: true, By: by + " refuse " + want.String() + "; no CAP_DAC_OVERRIDE"}
}

const (
	capDACOverride   = 1 // CAP_DAC_OVERRIDE
	capDACReadSearch = 2 // CAP_DAC_READ_SEARCH
)

func inGroup(gid, fsgid uint32, groups []uint32) bool {
	if gid == fsgid {
		return true
	}
	for _, g := range groups {
		if g == gid {
			return true
		}
	}
	return false
}

func rwx(b uint32) string {
	s := []byte("---")
	if b&4 != 0 {
		s[0] = 'r'
	}
	if b&2 != 0 {
		s[1] = 'w'
	}
	if b&1 != 0 {
		s[2] = 'x'
	}
	return string(s)
}
