package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Checkpoint 3: what the runtime really applied to a container's init
// process, read from the host through /proc/PID without entering the
// container. ReadApplied returns facts, each with the path it was read from
// and how the read went; the comparisons with what was asked for
// (applied_compare.go) are mechanical, and the judgement is the diagnose
// layer's.

// Applied is what a container's init process was given.
type Applied struct {
	PID int
	// Process is the stat of /proc/PID: ReadGone when the process exited.
	Process ProcRead

	Status     ProcStatus
	StatusRead ProcRead
	Limits     ProcLimits
	LimitsRead ProcRead
	UserNS     UserNS
	LSM        LSMLabel
	Mounts     MountTable // /proc/PID/mountinfo: mount points as the container sees them
	MountsRead ProcRead
	Dev        DevView
	// Paths holds the expected nodes' and mounts' container paths, stat'ed
	// as open(2) resolves them (links followed inside the container).
	Paths map[string]DevEntry
	Env   EnvNames
	// HostMounts is the host's mount table (/proc/1/mountinfo), read when
	// mounts are expected, to identify their sources (Sources).
	HostMounts     MountTable
	HostMountsRead ProcRead
	Sources        map[string]HostSource
}

// DevEntry is one path as the process sees it.
type DevEntry struct {
	Path string   // as the process sees it: "/dev/nvidia0"
	Read ProcRead // the stat through /proc/PID/root
	// Node is what the stat said: type, major:minor, mode, and owner and
	// group as the reader's user namespace sees them (Node.Path is the
	// host path /proc/PID/root/...; Target a link's text).
	Node hostfs.Node
	// Owner and Group are Node's owner and group as the container sees
	// them.
	Owner, Group IDView
	// Mount is the mount that holds the path in the process's mount
	// namespace; nil when the mount table was not read.
	Mount *mountinfo.Info
}

// OnNodev reports whether the entry's mount has nodev, under which open(2)
// of any device node on it fails with EACCES before the mode, the device
// cgroup or an LSM is asked (fs/namei.c may_open -> may_open_dev). A mount
// of a file system made inside a user namespace other than the initial
// one is nodev too without showing it (SB_I_NODEV, fs/super.c
// alloc_super), which mountinfo cannot tell: runc bind-mounts nodes from
// the host in user-namespaced containers for that reason.
func (e DevEntry) OnNodev() (nodev, known bool) {
	if e.Mount == nil {
		return false, false
	}
	return HasOption(e.Mount, "nodev"), true
}

// String is the entry's evidence line.
func (e DevEntry) String() string {
	if !e.Read.OK() {
		return e.Path + ": " + e.Read.String()
	}
	n := e.Node
	s := fmt.Sprintf("%s: %s", e.Path, n.Type)
	switch n.Type {
	case hostfs.TypeChar, hostfs.TypeBlock:
		s += " " + n.Dev()
	case hostfs.TypeSymlink:
		s += " -> " + n.Target
	}
	s += fmt.Sprintf(" mode %s, owner %s, group %s", n.ModeString(), e.Owner, e.Group)
	if e.Mount != nil {
		s += "; " + MountString(e.Mount)
	}
	return s
}

// DevView is the process's /dev, walked without following links: every
// node, link and directory, down to maxDevDepth levels, at most
// maxDevEntries entries. /dev/shm and /dev/mqueue are not descended into:
// they hold shared memory and message queues, never nodes a runtime puts
// there.
type DevView struct {
	Read       ProcRead   // the listing of /dev itself
	Entries    []DevEntry // sorted by path
	ListErrors []ProcRead // subdirectories that could not be listed
	Truncated  bool       // the walk stopped at maxDevEntries
}

const (
	maxDevEntries = 4096
	maxDevDepth   = 4 // /dev/a/b/c is listed; its subdirectories are not
)

var skipDevDirs = map[string]bool{"/dev/shm": true, "/dev/mqueue": true}

// Lookup returns the entry at path p.
func (v DevView) Lookup(p string) (DevEntry, bool) {
	i := sort.Search(len(v.Entries), func(i int) bool { return v.Entries[i].Path >= p })
	if i < len(v.Entries) && v.Entries[i].Path == p {
		return v.Entries[i], true
	}
	return DevEntry{}, false
}

// Nodes returns the character and block devices of the view.
func (v DevView) Nodes() []DevEntry {
	var out []DevEntry
	for _, e := range v.Entries {
		if e.Read.OK() && (e.Node.Type == hostfs.TypeChar || e.Node.Type == hostfs.TypeBlock) {
			out = append(out, e)
		}
	}
	return out
}

// HostSource is how an expected mount's host path shows as a bind mount's
// source (MountTable.SourceOf), from the host's mount table.
type HostSource struct {
	Path     string // as asked
	Resolved string // with its links resolved on the host
	Dev      string // major:minor of the file system that holds it
	Root     string // its path within that file system
	Read     ProcRead
}

// Expected is what checkpoint 2 says the process should have.
type Expected struct {
	Nodes  []ExpectedNode
	Mounts []ExpectedMount
	Env    []string // variable names
}

// ExpectedNode is a device node the process should see.
type ExpectedNode struct {
	Path         string          // as the container sees it
	Type         hostfs.FileType // TypeChar or TypeBlock (TypeFIFO: numbers not compared)
	Major, Minor uint32
	Mode         *fs.FileMode // permission bits asked for (the spec's fileMode); nil: not compared
	UID, GID     *uint32      // owner and group as the container should see them; nil: not compared
}

// ExpectedMount is a host path that should be bind-mounted at a container
// path (a driver library, a CDI mount).
type ExpectedMount struct {
	HostPath, ContainerPath string
}

// ReadApplied reads what process pid was given, through root: the live
// host, a host at --root with its live /proc, a snapshot or a tree. Paths
// named in want (nodes, mount points) are stat'ed inside the process, and
// mount sources identified on the host. Every part carries its own read
// state; nothing is left out because another part failed.
//
// A snapshot being recorded keeps what its files cannot: the /dev walk
// and the stats through the process's root, the environment's names (the
// file itself is never archived) and the LSM labels, under the capture
// name CaptureName(pid). The last ReadApplied of a pid in a recording
// wins; pass the union of what is expected.
func ReadApplied(root *hostfs.Root, pid int, want Expected) *Applied {
	pr := &procReader{root: root, pid: pid}
	a := &Applied{PID: pid, Paths: map[string]DevEntry{}, Sources: map[string]HostSource{}}
	procDir := fmt.Sprintf("/proc/%d", pid)
	_, err := root.Stat(procDir)
	a.Process = pr.result(procDir, err)
	if errors.Is(err, fs.ErrNotExist) && a.Process.State == ReadAbsent {
		a.Process.State = ReadGone
	}
	pr.gone = a.Process.State == ReadGone

	b, r := pr.read("status", smallProcLimit)
	if r.OK() {
		st, err := ParseProcStatus(b)
		a.Status = st
		if err != nil {
			r = pr.result(r.Path, fmt.Errorf("%s: %w", r.Path, err))
		}
	}
	a.StatusRead = r
	zombie := a.StatusRead.OK() && a.Status.Zombie()

	b, r = pr.read("limits", smallProcLimit)
	if r.OK() {
		l, err := ParseProcLimits(b)
		a.Limits = l
		if err != nil {
			r = pr.result(r.Path, fmt.Errorf("%s: %w", r.Path, err))
		}
	}
	a.LimitsRead = r

	a.UserNS = pr.readUserNS()
	a.Mounts, a.MountsRead = pr.readMounts(pr.path("mountinfo"), zombie)
	if len(want.Mounts) > 0 {
		a.HostMounts, a.HostMountsRead = pr.readMounts("/proc/1/mountinfo", false)
		for _, m := range want.Mounts {
			a.Sources[m.HostPath] = pr.hostSource(m.HostPath, a.HostMounts, a.HostMountsRead)
		}
	}

	pr.readInProcess(a, want, zombie)
	ix := a.Mounts.index()
	for i := range a.Dev.Entries {
		a.annotate(&a.Dev.Entries[i], ix)
	}
	for p, e := range a.Paths {
		a.annotate(&e, ix)
		a.Paths[p] = e
	}
	return a
}

// annotate adds what the maps and the mount table say of an entry.
func (a *Applied) annotate(e *DevEntry, ix mountIndex) {
	if !e.Read.OK() {
		return
	}
	e.Owner, e.Group = a.UserNS.Owner(e.Node.UID), a.UserNS.Group(e.Node.GID)
	if a.MountsRead.OK() {
		e.Mount = ix.holding(e.Path)
	}
}

// ModeCheck is the kernel's discretionary check of an open of e with
// access want by the init process (see ModeDecision).
func (a *Applied) ModeCheck(e DevEntry, want Access) ModeDecision {
	if !e.Read.OK() {
		return ModeDecision{By: e.Read.String()}
	}
	return modeDecision(e.Node, e.Owner, e.Group, &a.Status, a.StatusRead, want)
}

func (pr *procReader) readMounts(p string, zombie bool) (MountTable, ProcRead) {
	if zombie {
		return nil, pr.result(p, fmt.Errorf("%s: %w", p, errZombie))
	}
	b, r := pr.read(p, mountInfoLimit)
	if !r.OK() {
		return nil, r
	}
	t, err := ParseMountInfo(b)
	if err != nil {
		// The lines that parsed stand; the read says some did not.
		return t, pr.result(p, fmt.Errorf("%s: %w", p, err))
	}
	return t, r
}

// hostSource identifies host path p as a mount source.
func (pr *procReader) hostSource(p string, host MountTable, hostRead ProcRead) HostSource {
	s := HostSource{Path: p}
	clean := path.Clean("/" + p)
	// Stat first: a snapshot then holds the file (as a placeholder), so
	// that Resolve replays.
	if _, err := pr.root.Stat(clean); err != nil {
		s.Read = pr.result(clean, err)
		return s
	}
	res, err := pr.root.Resolve(clean)
	if err != nil {
		s.Read = pr.result(clean, err)
		return s
	}
	s.Resolved = res
	if !hostRead.OK() && len(host) == 0 {
		s.Read = hostRead
		return s
	}
	dev, root, ok := host.SourceOf(res)
	if !ok {
		s.Read = pr.result(hostRead.Path, fmt.Errorf("%s: %w", hostRead.Path, malformed("no root mount")))
		return s
	}
	s.Dev, s.Root, s.Read = dev, root, ProcRead{Path: hostRead.Path, State: ReadOK}
	return s
}

// CaptureName is where a snapshot keeps what ReadApplied read of pid
// through the process's root and of its environment (hostfs.Capture).
func CaptureName(pid int) string { return fmt.Sprintf("runtime/applied/%d.json", pid) }

// readInProcess fills the parts read through the process's root and from
// its memory: from a snapshot's capture, else from the live procfs or a
// tree's /proc/PID/root (and a recording takes what was read).
func (pr *procReader) readInProcess(a *Applied, want Expected, zombie bool) {
	paths := wantedPaths(want)
	if !pr.root.LiveProc() {
		if b, ok := pr.root.Captured(CaptureName(pr.pid)); ok {
			pr.fromCapture(a, b, paths)
			return
		}
	}
	if zombie {
		gone := func(p string) ProcRead { return pr.result(p, fmt.Errorf("%s: %w", p, errZombie)) }
		a.Dev.Read = gone(pr.path("root/dev"))
		a.Env.Read = gone(pr.path("environ"))
		for _, p := range paths {
			a.Paths[p] = DevEntry{Path: p, Read: gone(pr.path("root" + p))}
		}
	} else {
		a.Dev = pr.walkDev()
		for _, p := range paths {
			n, err := pr.root.StatInProcess(pr.pid, p)
			a.Paths[p] = DevEntry{Path: p, Node: n, Read: pr.result(pr.path("root"+p), err)}
		}
		a.Env = pr.readEnv()
	}
	a.LSM = pr.readLSM()
	// Outside a recording this does nothing.
	pr.root.Capture(CaptureName(pr.pid), captureOf(a))
}

func wantedPaths(want Expected) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		p = path.Clean("/" + p)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, n := range want.Nodes {
		add(n.Path)
	}
	for _, m := range want.Mounts {
		add(m.ContainerPath)
	}
	return out
}

// walkDev lists the process's /dev breadth first.
func (pr *procReader) walkDev() DevView {
	var v DevView
	hp := func(p string) string { return pr.path("root" + p) }
	if meta, ok := pr.root.ReadSnapshotMeta(); ok && !meta.Tree {
		// A recorded snapshot without this process's capture: its
		// manifest may hold some nodes other readers stat'ed, never the
		// whole listing.
		v.Read = pr.result(hp("/dev"), fmt.Errorf("%s: %w", hp("/dev"), errNotCaptured))
		return v
	}
	queue := []string{"/dev"}
	for len(queue) > 0 && !v.Truncated {
		dir := queue[0]
		queue = queue[1:]
		names, err := pr.root.ReadDirInProcess(pr.pid, dir)
		if err != nil {
			if dir == "/dev" {
				v.Read = pr.result(hp(dir), err)
				return v
			}
			v.ListErrors = append(v.ListErrors, pr.result(hp(dir), err))
			continue
		}
		if dir == "/dev" {
			v.Read = ProcRead{Path: hp(dir), State: ReadOK}
		}
		for _, name := range names {
			p := dir + "/" + name
			n, err := pr.root.LstatInProcess(pr.pid, p)
			e := DevEntry{Path: p, Node: n, Read: pr.result(hp(p), err)}
			if err == nil && n.Type == hostfs.TypeDir && strings.Count(p, "/") < maxDevDepth && !skipDevDirs[p] {
				queue = append(queue, p)
			}
			v.Entries = append(v.Entries, e)
			if len(v.Entries) >= maxDevEntries {
				v.Truncated = true
				break
			}
		}
	}
	sort.Slice(v.Entries, func(i, j int) bool { return v.Entries[i].Path < v.Entries[j].Path })
	return v
}

// readEnv reads the environment's names; the bytes, values and all, are
// cleared once the names are cut out, and the file itself is never put in
// a snapshot (hostfs keeps /proc/*/environ out of every archive).
func (pr *procReader) readEnv() EnvNames {
	b, r := pr.read("environ", environLimit)
	e := EnvNames{Read: r}
	if r.OK() {
		e.Names, e.Malformed = ParseEnvironNames(b)
	}
	clear(b)
	return e
}

// The capture: what a snapshot holds of ReadApplied's reads through the
// process's root and of its environment.
type appliedCapture struct {
	Format int           `json:"format"`
	Dev    capturedDev   `json:"dev"`
	Paths  []capturedEnt `json:"paths,omitempty"`
	Env    capturedEnv   `json:"env"`
	LSM    [2]capturedLb `json:"lsm"` // attr/current, attr/apparmor/current
}

type capturedRead struct {
	State string `json:"state"`
	Err   string `json:"error,omitempty"`
}

type capturedEnt struct {
	Path   string       `json:"path"`
	Read   capturedRead `json:"read"`
	Type   string       `json:"type,omitempty"`
	Major  uint32       `json:"major,omitempty"`
	Minor  uint32       `json:"minor,omitempty"`
	Mode   uint32       `json:"mode,omitempty"`
	UID    uint32       `json:"uid,omitempty"`
	GID    uint32       `json:"gid,omitempty"`
	Target string       `json:"target,omitempty"`
}

type capturedDev struct {
	Read       capturedRead  `json:"read"`
	Entries    []capturedEnt `json:"entries,omitempty"`
	ListErrors []capturedEnt `json:"list_errors,omitempty"`
	Truncated  bool          `json:"truncated,omitempty"`
}

type capturedEnv struct {
	Read      capturedRead `json:"read"`
	Names     []string     `json:"names,omitempty"`
	Malformed int          `json:"malformed,omitempty"`
}

type capturedLb struct {
	Read  capturedRead `json:"read"`
	Label string       `json:"label,omitempty"`
}

const captureFormat = 1

func capRead(r ProcRead) capturedRead {
	c := capturedRead{State: r.State.String()}
	if r.Err != nil {
		c.Err = r.Err.Error()
	}
	return c
}

func capEnt(e DevEntry) capturedEnt {
	c := capturedEnt{Path: e.Path, Read: capRead(e.Read)}
	if e.Read.OK() {
		n := e.Node
		c.Type, c.Major, c.Minor, c.Mode, c.UID, c.GID, c.Target = n.Type.String(), n.Major, n.Minor, uint32(n.Mode), n.UID, n.GID, n.Target
	}
	return c
}

func captureOf(a *Applied) []byte {
	c := appliedCapture{Format: captureFormat,
		Dev: capturedDev{Read: capRead(a.Dev.Read), Truncated: a.Dev.Truncated},
		Env: capturedEnv{Read: capRead(a.Env.Read), Names: a.Env.Names, Malformed: a.Env.Malformed},
		LSM: [2]capturedLb{{capRead(a.LSM.Current), a.LSM.CurrentLabel}, {capRead(a.LSM.AppArmor), a.LSM.AppArmorLabel}},
	}
	for _, e := range a.Dev.Entries {
		c.Dev.Entries = append(c.Dev.Entries, capEnt(e))
	}
	for _, r := range a.Dev.ListErrors {
		c.Dev.ListErrors = append(c.Dev.ListErrors, capturedEnt{Path: r.Path, Read: capRead(r)})
	}
	keys := make([]string, 0, len(a.Paths))
	for p := range a.Paths {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		c.Paths = append(c.Paths, capEnt(a.Paths[p]))
	}
	b, _ := json.Marshal(c)
	return b
}

// fromCapture fills a from a snapshot's capture. Paths the capture does
// not hold are ReadNotCaptured.
func (pr *procReader) fromCapture(a *Applied, b []byte, paths []string) {
	hp := func(p string) string { return pr.path("root" + p) }
	var c appliedCapture
	if err := json.Unmarshal(b, &c); err != nil || c.Format != captureFormat {
		bad := func(p string) ProcRead {
			return ProcRead{Path: p, State: ReadMalformed, Err: malformed("capture %s: format %d, %v", CaptureName(pr.pid), c.Format, err)}
		}
		a.Dev.Read, a.Env.Read = bad(hp("/dev")), bad(pr.path("environ"))
		a.LSM.Current, a.LSM.AppArmor = bad(pr.path("attr/current")), bad(pr.path("attr/apparmor/current"))
		for _, p := range paths {
			a.Paths[p] = DevEntry{Path: p, Read: bad(hp(p))}
		}
		return
	}
	a.Dev = DevView{Read: readOf(hp("/dev"), c.Dev.Read), Truncated: c.Dev.Truncated}
	for _, ce := range c.Dev.Entries {
		a.Dev.Entries = append(a.Dev.Entries, entOf(hp(ce.Path), ce))
	}
	sort.Slice(a.Dev.Entries, func(i, j int) bool { return a.Dev.Entries[i].Path < a.Dev.Entries[j].Path })
	for _, ce := range c.Dev.ListErrors {
		a.Dev.ListErrors = append(a.Dev.ListErrors, readOf(ce.Path, ce.Read))
	}
	held := map[string]capturedEnt{}
	for _, ce := range c.Paths {
		held[ce.Path] = ce
	}
	for _, p := range paths {
		if ce, ok := held[p]; ok {
			a.Paths[p] = entOf(hp(p), ce)
		} else {
			a.Paths[p] = DevEntry{Path: p, Read: ProcRead{Path: hp(p), State: ReadNotCaptured, Err: fmt.Errorf("%s: %w", hp(p), errNotCaptured)}}
		}
	}
	names := append([]string(nil), c.Env.Names...)
	sort.Strings(names)
	a.Env = EnvNames{Read: readOf(pr.path("environ"), c.Env.Read), Names: names, Malformed: c.Env.Malformed}
	a.LSM = LSMLabel{Current: readOf(pr.path("attr/current"), c.LSM[0].Read), CurrentLabel: c.LSM[0].Label,
		AppArmor: readOf(pr.path("attr/apparmor/current"), c.LSM[1].Read), AppArmorLabel: c.LSM[1].Label}
}

func readOf(p string, c capturedRead) ProcRead {
	r := ProcRead{Path: p, State: parseReadState(c.State)}
	if r.State != ReadOK {
		msg := c.Err
		if msg == "" {
			msg = c.State
		}
		r.Err = errors.New(msg)
	}
	return r
}

func entOf(hp string, c capturedEnt) DevEntry {
	e := DevEntry{Path: c.Path, Read: readOf(hp, c.Read)}
	if e.Read.OK() {
		e.Node = hostfs.Node{Path: hp, Type: fileTypeOf(c.Type), Major: c.Major, Minor: c.Minor, Mode: fs.FileMode(c.Mode),
			UID: c.UID, GID: c.GID, Target: c.Target}
	}
	return e
}

func fileTypeOf(s string) hostfs.FileType {
	for t := hostfs.TypeUnknown; t <= hostfs.TypeSocket; t++ {
		if t.String() == s {
			return t
		}
	}
	return hostfs.TypeUnknown
}
