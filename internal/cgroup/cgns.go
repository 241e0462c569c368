package cgroup

// Cgroup namespaces (cgroup_namespaces(7)).
//
// The kernel writes every cgroup path relative to the cgroup namespace of
// the thread that reads it, not of the process it describes: the third
// field of /proc/PID/cgroup (proc_cgroup_show, kernel/cgroup/cgroup.c:
// cgroup_path_ns_locked against current->nsproxy->cgroup_ns) and the root
// field of a cgroup mount in any mountinfo (cgroup_show_path, same file:
// current_cgns_cgroup_from_root). A cgroup outside the reader's namespace
// root R gets one leading "/.." per level climbed from R to the common
// ancestor (kernfs_path_from_node, fs/kernfs/dir.c). Measured on this
// project's VM, a target in adtest-x/y read from a namespace rooted at
// adtest-x/z shows "0::/../y", and the whole-hierarchy cgroup2 and devices
// mounts show root "/../..".
//
// So "/../y" means parent(R)/y, and a mount root "/../.." means R's
// grandparent: both are exact, but only relative to R, whose own names the
// text does not say. A path and a mount root can be joined lexically only
// when they climb the same number of levels: then the unknown part of R
// cancels. Otherwise (accel-doctor in a pod with --root /host: the host's
// whole hierarchy is shown as "/../../..", every host cgroup as
// "/../../../kubepods/...") the only exact answer is to read both again
// in a namespace where they are absolute. That is what Locate does: on a
// locked OS thread it joins the cgroup namespace of PID 1 of the root's
// procfs (the host's init), or of kthreadd (PID 2; kernel threads run in
// the kernel's initial cgroup namespace, init_nsproxy in kernel/nsproxy.c)
// when PID 1's cannot be opened, and reads the target's cgroup file and
// the mountinfo there. Measured here: the re-read shows
// "0::/adtest-x/y" and mount roots "/", and costs one short-lived thread:
// 0.17 ms against 0.07 ms for Locate as shown (`go test -bench Locate
// ./internal/cgroup`, as root), paid only when a path needs it. PID 1 of
// this VM refuses
// ptrace access, so opening /proc/1/ns/cgroup gives EACCES even to root;
// kthreadd answers.
//
// Joining needs CAP_SYS_ADMIN (a privileged pod has it). Without it, or
// when neither namespace file opens, the hierarchy is not located and the
// error says why: no directory that might be another cgroup is judged.
// The other way, finding R in a mount of the whole hierarchy by the inode
// of our own namespace-root mount, needs that mount (a pod has one at
// /sys/fs/cgroup, a shell under `unshare -C` does not), a walk over every
// cgroup down to R's depth, and a rule for when we are not at R ourselves;
// it is not done.

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// maxCgroupPath is PATH_MAX (include/uapi/linux/limits.h): the buffer the
// kernel renders a cgroup path into; it never writes a longer one.
const maxCgroupPath = 4096

// ErrAboveNamespace is returned when a cgroup path and the root of the
// mount it must be found in climb a different number of levels above the
// cgroup namespace they were read in: where they meet depends on names
// the kernel did not write.
var ErrAboveNamespace = errors.New("both are relative to a cgroup namespace root whose place in the hierarchy is not known")

// nsPath is a cgroup path as the kernel writes it for a reader: up leading
// ".." components (levels above the reader's namespace root), then names.
type nsPath struct {
	up    int
	names []string
}

// parseNSPath reads a kernel-written cgroup path. Anything the kernel does
// not write is an error: a relative path, an empty, "." or ".." component
// after a name (a cgroup cannot be named "." or ".."), a path longer than
// PATH_MAX.
func parseNSPath(s string) (nsPath, error) {
	if len(s) > maxCgroupPath {
		return nsPath{}, fmt.Errorf("%d bytes: longer than PATH_MAX (%d), which the kernel never writes", len(s), maxCgroupPath)
	}
	if !strings.HasPrefix(s, "/") {
		return nsPath{}, fmt.Errorf("%q is not absolute", s)
	}
	var p nsPath
	if s == "/" {
		return p, nil
	}
	for i, part := range strings.Split(s[1:], "/") {
		switch {
		case part == ".." && len(p.names) == 0:
			p.up++
		case part == "" || part == "." || part == "..":
			return nsPath{}, fmt.Errorf("%q: component %d is %q, which the kernel does not write", s, i+1, part)
		default:
			p.names = append(p.names, part)
		}
	}
	return p, nil
}

func (p nsPath) String() string {
	parts := make([]string, 0, p.up+len(p.names))
	for range p.up {
		parts = append(parts, "..")
	}
	return "/" + strings.Join(append(parts, p.names...), "/")
}

// mapPath maps a cgroup path onto a mount of its hierarchy whose root
// field is mountRoot, both as the same reader's cgroup namespace wrote
// them, and returns the directory under the mount point.
func mapPath(mountPoint, mountRoot, cgPath string) (string, error) {
	if mountPoint == "" {
		return "", errors.New("hierarchy not mounted")
	}
	mr, err := parseNSPath(mountRoot)
	if err != nil {
		return "", fmt.Errorf("mount root: %w", err)
	}
	cp, err := parseNSPath(cgPath)
	if err != nil {
		return "", fmt.Errorf("cgroup path: %w", err)
	}
	if mr.up != cp.up {
		return "", fmt.Errorf("%.80s climbs %d level(s) above the reader's cgroup namespace root, the mount root %.80s %d: %w",
			cgPath, cp.up, mountRoot, mr.up, ErrAboveNamespace)
	}
	if len(cp.names) < len(mr.names) {
		return "", fmt.Errorf("%.80s (mount root %.80s): %w", cgPath, mountRoot, ErrOutsideMount)
	}
	for i, n := range mr.names {
		if cp.names[i] != n {
			return "", fmt.Errorf("%.80s (mount root %.80s): %w", cgPath, mountRoot, ErrOutsideMount)
		}
	}
	return path.Join(append([]string{mountPoint}, cp.names[len(mr.names):]...)...), nil
}

// Place is where a target is in one hierarchy.
type Place struct {
	// Shown is the path as accel-doctor's own cgroup namespace shows it
	// ("/../y"); for a --cgroup target, the path given.
	Shown string
	// Path is the path in the namespace the mounts were read in (the
	// hierarchy's own path after a re-read in the initial namespace);
	// empty when not located.
	Path string
	// Dir is the cgroup's directory under the host root.
	Dir string
	// Err says why the target was not located in this hierarchy.
	Err error

	climbs bool // the path or the mount root climbs above the reader's root
}

// Location is where a target is in the hierarchies that decide device
// access.
type Location struct {
	Mounts *Mounts
	V1, V2 Place // V1 is the devices controller's hierarchy
	// Via names the cgroup namespace the paths and mounts were read again
	// in, when the ones accel-doctor's own namespace showed climbed above
	// its root; "" when they were used as shown.
	Via string
}

// The captures a snapshot keeps for cgroup-namespace resolution (hostfs
// Capture), so that a replay joins the same paths the same way.
const (
	capMountinfoSource = "cgroupns/mountinfo-source" // which mountinfo was read
	capInitialDir      = "cgroupns/initial"          // what the initial namespace showed
	capInitialVia      = capInitialDir + "/via"
	capInitialError    = capInitialDir + "/error" // why it could not be read
	capInitialMounts   = capInitialDir + "/mountinfo"
)

// The mountinfo files Locate reads (proc_pid_mountinfo(5)).
const (
	selfMountinfo = "/proc/self/mountinfo"
	initMountinfo = "/proc/1/mountinfo"
)

// mountinfoSource is the mount table whose mount points are paths under
// the root. /proc/self/mountinfo lists the reader's own mount namespace,
// its mount points relative to the reader's own root: right for the live
// "/". Under --root /host in a pod it is the pod's table (mount points
// such as /host/sys/fs/cgroup, and the pod's private cgroup mount), and
// without hostPID "self" does not even resolve in the host's procfs. The
// table whose mount points are paths under /host is the host init's:
// /proc/1/mountinfo of the root's procfs (procfs shows the PID namespace
// it was mounted in, so PID 1 there is the host's init whatever ours is;
// show_mountinfo writes mount points relative to that task's root,
// fs/proc_namespace.c). A capture replays the file it was taken with.
func mountinfoSource(root *hostfs.Root) string {
	src := ""
	switch {
	case root.IsLive():
		src = selfMountinfo
	case root.LiveProc():
		src = initMountinfo
	default:
		if b, ok := root.Captured(capMountinfoSource); ok && (string(b) == selfMountinfo || string(b) == initMountinfo) {
			return string(b)
		}
		if root.Exists(selfMountinfo) || !root.Exists(initMountinfo) {
			return selfMountinfo
		}
		return initMountinfo
	}
	root.Capture(capMountinfoSource, []byte(src))
	return src
}

// procCgroupPath is the cgroup file of a PID target (Target.Self: the
// reading process).
func procCgroupPath(t Target) string {
	if t.Self {
		return "/proc/self/cgroup"
	}
	return "/proc/" + strconv.Itoa(t.PID) + "/cgroup"
}

// Locate finds the target's directory in the v1 devices hierarchy and in
// cgroup2, resolving paths shown relative to accel-doctor's own cgroup
// namespace (see the top of this file). A hierarchy that cannot be
// located has its Place.Err; the error is for what stops both: no
// mountinfo, no cgroup mount, no cgroup file, or neither hierarchy
// located.
func Locate(root *hostfs.Root, target Target) (*Location, error) {
	pidTarget := target.PID > 0 || target.Self
	if !pidTarget && !strings.HasPrefix(target.Cgroup, "/") {
		return nil, fmt.Errorf("target: want a PID or an absolute cgroup path, have %q", target.Cgroup)
	}
	src := mountinfoSource(root)
	mb, err := root.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var cb []byte
	if pidTarget {
		if cb, err = root.ReadFile(procCgroupPath(target)); err != nil {
			return nil, err
		}
	}
	loc, err := place(src, mb, cb, target)
	if err != nil {
		return nil, err
	}
	// A join that needs names must be read again; one that is sound as
	// shown is read again too when it climbs, so that the evidence names
	// the cgroup by its own path, but stands when the re-read fails.
	var nsErr error
	if climbing(loc) {
		again, err := locateInitial(root, src, target)
		switch {
		case err == nil:
			// What accel-doctor's own namespace showed stays as the
			// evidence of what was resolved.
			again.V1.Shown, again.V2.Shown = loc.V1.Shown, loc.V2.Shown
			loc = again
		case needsNames(loc):
			nsErr = fmt.Errorf("reading again in the initial cgroup namespace failed: %w", err)
		}
	}
	v1, v2 := loc.Mounts.DevicesV1 != "", loc.Mounts.Unified != ""
	if (!v1 || loc.V1.Err != nil) && (!v2 || loc.V2.Err != nil) {
		le := &LocateError{Target: target}
		if v1 {
			le.Errs = append(le.Errs, fmt.Errorf("v1 devices: %w", loc.V1.Err))
		}
		if v2 {
			le.Errs = append(le.Errs, fmt.Errorf("cgroup2: %w", loc.V2.Err))
		}
		if nsErr != nil {
			le.Errs = append(le.Errs, nsErr)
		}
		return nil, le
	}
	for _, pl := range []*Place{&loc.V1, &loc.V2} {
		if nsErr != nil && errors.Is(pl.Err, ErrAboveNamespace) {
			pl.Err = fmt.Errorf("%w; %v", pl.Err, nsErr)
		}
	}
	return loc, nil
}

// LocateError: the target could be placed in none of the hierarchies
// that apply; Errs says why for each (errors.Is sees through them:
// ErrAboveNamespace, a permission error, a path the root lacks).
type LocateError struct {
	Target Target
	Errs   []error
}

func (e *LocateError) Error() string {
	why := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		why[i] = err.Error()
	}
	return fmt.Sprintf("%s: not located: %s", e.Target, strings.Join(why, "; "))
}

func (e *LocateError) Unwrap() []error { return e.Errs }

// ErrNoHierarchy: the mount table read mounts no cgroup hierarchy.
var ErrNoHierarchy = errors.New("no cgroup hierarchy is mounted")

// place maps the target onto the mounts, all as one reader wrote them.
func place(src string, mountinfo, procCgroup []byte, target Target) (*Location, error) {
	m, err := ParseMounts(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	m.Source = src
	if m.Mode == ModeUnknown {
		return nil, fmt.Errorf("%s: %w", src, ErrNoHierarchy)
	}
	loc := &Location{Mounts: m}
	if procCgroup == nil {
		p, err := cgroupFlagPath(target.Cgroup)
		if err != nil {
			return nil, err
		}
		loc.V1.Shown, loc.V2.Shown = p, p
	} else {
		entries, err := ParseProcCgroup(procCgroup)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", procCgroupPath(target), err)
		}
		var ok bool
		if loc.V1.Shown, ok = DevicesPath(entries); !ok {
			loc.V1.Err = fmt.Errorf("%s has no devices line", procCgroupPath(target))
		}
		if loc.V2.Shown, ok = UnifiedPath(entries); !ok {
			loc.V2.Err = fmt.Errorf("%s has no 0:: line", procCgroupPath(target))
		}
	}
	for _, h := range []struct {
		pl          *Place
		point, root string
		name        string
	}{{&loc.V1, m.DevicesV1, m.DevicesV1Root, "v1 devices"}, {&loc.V2, m.Unified, m.UnifiedRoot, "cgroup2"}} {
		if h.point == "" || h.pl.Err != nil {
			continue
		}
		h.pl.climbs = climbs(h.root) || climbs(h.pl.Shown)
		if h.pl.Dir, h.pl.Err = mapPath(h.point, h.root, h.pl.Shown); h.pl.Err == nil {
			h.pl.Path = h.pl.Shown
		}
	}
	return loc, nil
}

// cgroupFlagPath checks a --cgroup path: a path in the hierarchy as the
// mounts are read (on a host, from the hierarchy's root). ".." has no
// meaning there and is refused rather than cleaned away.
func cgroupFlagPath(s string) (string, error) {
	for _, part := range strings.Split(s, "/") {
		if part == ".." {
			return "", fmt.Errorf("cgroup path %q: \"..\" is not allowed; give the path from the hierarchy's root", s)
		}
	}
	s = path.Clean(s)
	if _, err := parseNSPath(s); err != nil {
		return "", fmt.Errorf("cgroup path: %w", err)
	}
	return s, nil
}

// climbs reports whether a kernel-written path starts above the reader's
// cgroup namespace root.
func climbs(s string) bool { return s == "/.." || strings.HasPrefix(s, "/../") }

func climbing(loc *Location) bool { return loc.V1.climbs || loc.V2.climbs }

func needsNames(loc *Location) bool {
	return errors.Is(loc.V1.Err, ErrAboveNamespace) || errors.Is(loc.V2.Err, ErrAboveNamespace)
}

// initialNamespaces are the namespace files tried, in order, for the
// re-read: the root's init (the host's own view), then kthreadd, which is
// always in the kernel's initial cgroup namespace. PID 2 is used only when
// it is kthreadd (a child of PID 0 named so): in a PID namespace that is
// not the initial one, PID 2 is an ordinary process.
func initialNamespaces(root *hostfs.Root) []struct{ file, via string } {
	out := []struct{ file, via string }{{"/proc/1/ns/cgroup", "the cgroup namespace of PID 1 (/proc/1/ns/cgroup)"}}
	if b, err := root.ReadFile("/proc/2/status"); err == nil {
		s := string(b)
		if strings.Contains(s, "Name:\tkthreadd\n") && strings.Contains(s, "\nPPid:\t0\n") {
			out = append(out, struct{ file, via string }{"/proc/2/ns/cgroup", "the initial cgroup namespace (kthreadd's, /proc/2/ns/cgroup)"})
		}
	}
	return out
}

// locateInitial reads the mountinfo and the target's cgroup file again in
// an initial cgroup namespace and places the target there. On a live
// procfs it joins the namespace (and hands a snapshot being recorded what
// it read); on a capture it uses what the capture recorded.
func locateInitial(root *hostfs.Root, src string, target Target) (*Location, error) {
	cgFile := ""
	if target.PID > 0 || target.Self {
		cgFile = procCgroupPath(target)
	}
	if !root.LiveProc() {
		return capturedInitial(root, src, cgFile, target)
	}
	var errs []string
	for _, ns := range initialNamespaces(root) {
		var mb, cb []byte
		err := root.InNamespace(ns.file, unix.CLONE_NEWCGROUP, func() error {
			var err error
			if mb, err = root.ReadFile(src); err != nil {
				return err
			}
			if cgFile != "" {
				cb, err = root.ReadFile(cgFile)
			}
			return err
		})
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		loc, err := place(src, mb, cb, target)
		if err == nil && needsNames(loc) {
			err = errors.New("paths still climb above its root")
		}
		if err != nil {
			errs = append(errs, ns.via+": "+err.Error())
			continue
		}
		loc.Via = ns.via
		if root.Recording() { // the lines are picked out only for a snapshot
			root.Capture(capInitialMounts, cgroupMountLines(mb))
		}
		if cgFile != "" {
			root.Capture(path.Join(capInitialDir, cgFile), cb)
		}
		root.Capture(capInitialVia, []byte(ns.via))
		return loc, nil
	}
	err := errors.New(strings.Join(errs, "; "))
	if len(errs) == 0 {
		err = errors.New("no namespace file to join")
	}
	root.Capture(capInitialError, []byte(err.Error()))
	return nil, err
}

// capturedInitial replays what a snapshot recorded of the initial
// namespace. Everything in it is untrusted: it goes through the same
// parsers as the live files.
func capturedInitial(root *hostfs.Root, src, cgFile string, target Target) (*Location, error) {
	mb, okM := root.Captured(capInitialMounts)
	var cb []byte
	okC := true
	if cgFile != "" {
		cb, okC = root.Captured(path.Join(capInitialDir, cgFile))
	}
	if !okM || !okC {
		if why, ok := root.Captured(capInitialError); ok {
			return nil, fmt.Errorf("when the capture was taken: %s", printable(why))
		}
		what := src
		if !okC {
			what = cgFile
		}
		return nil, fmt.Errorf("this capture holds no reading of %s from the initial cgroup namespace", what)
	}
	loc, err := place(src, mb, cb, target)
	if err != nil {
		return nil, fmt.Errorf("captured initial namespace: %w", err)
	}
	if needsNames(loc) {
		return nil, errors.New("captured initial namespace: paths still climb above its root")
	}
	loc.Via = "the initial cgroup namespace, as captured"
	if via, ok := root.Captured(capInitialVia); ok {
		loc.Via = printable(via) + ", as captured"
	}
	return loc, nil
}

// cgroupMountLines keeps the cgroup and cgroup2 lines of a mountinfo: all
// that a replay needs of the initial namespace's rendering.
func cgroupMountLines(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " - cgroup ") || strings.Contains(l, " - cgroup2 ") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n") + "\n")
}

// printable bounds captured text for a message and drops control bytes.
func printable(b []byte) string {
	if len(b) > 512 {
		b = b[:512]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, string(b))
}
