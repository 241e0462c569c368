package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// A process's mounts, from /proc/PID/mountinfo. Mount points there are
// relative to the process's own root (fs/proc_namespace.c show_mountinfo
// prints seq_path_root against the root the reader of the file captured
// from the task, and skips mounts outside it), so they are the paths the
// container sees. A bind mount shows the path it was taken from, within
// its file system, in the root field, and that file system's device number
// in major:minor: a bind of the host's /usr/lib/x/libcuda.so.1 from an ext4
// on 254:1 mounted at / shows root "/usr/lib/x/libcuda.so.1", 254:1, in
// every mount namespace. That is what identifies a mount's source.
//
// The entries are moby/sys/mountinfo's Info. Its own reader does not fit
// here: its line scanner stops the whole table at a line over 64 KiB (an
// overlay mount's lowerdir list of a few hundred image layers runs past
// that) and it takes an unparsable number as 0; this parser keeps every
// line that parses and names each one that does not.

// MountTable is a process's mount table, in the file's order.
type MountTable []*mountinfo.Info

// ParseMountInfo parses /proc/PID/mountinfo: per line the mount ID, parent
// ID, major:minor, root, mount point, mount options, optional fields up to
// a "-", then the file system type, source and super block options
// (proc(5)). Root, mount point, type and source have space, tab, newline
// and backslash escaped as \ooo (fs/proc_namespace.c, seq_escape with
// " \t\n\\"). A line that does not parse is left out and named in the
// error (ErrMalformed); the rest stand.
func ParseMountInfo(b []byte) (MountTable, error) {
	var t MountTable
	var errs []error
	bad := 0
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		m, err := parseMountLine(string(line))
		if err != nil {
			if bad < maxLineErrors {
				errs = append(errs, fmt.Errorf("mountinfo line %d: %w", i+1, err))
			}
			bad++
			continue
		}
		t = append(t, m)
	}
	if bad > maxLineErrors {
		errs = append(errs, fmt.Errorf("%w: %d more lines", ErrMalformed, bad-maxLineErrors))
	}
	return t, errors.Join(errs...)
}

func parseMountLine(line string) (*mountinfo.Info, error) {
	f := strings.Split(line, " ")
	if len(f) < 10 {
		return nil, malformed("%d fields: %q", len(f), short(line))
	}
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) != sep+4 {
		return nil, malformed("no '-' followed by type, source and options: %q", short(line))
	}
	m := &mountinfo.Info{Options: f[5], Optional: strings.Join(f[6:sep], " "), VFSOptions: f[sep+3]}
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil || m.ID < 0 {
		return nil, malformed("mount ID %q", short(f[0]))
	}
	if m.Parent, err = strconv.Atoi(f[1]); err != nil || m.Parent < 0 {
		return nil, malformed("parent ID %q", short(f[1]))
	}
	maj, min, ok := strings.Cut(f[2], ":")
	if m.Major, err = strconv.Atoi(maj); !ok || err != nil || m.Major < 0 {
		return nil, malformed("major:minor %q", short(f[2]))
	}
	if m.Minor, err = strconv.Atoi(min); err != nil || m.Minor < 0 {
		return nil, malformed("major:minor %q", short(f[2]))
	}
	for _, x := range []struct {
		dst  *string
		src  string
		what string
	}{{&m.Root, f[3], "root"}, {&m.Mountpoint, f[4], "mount point"}, {&m.FSType, f[sep+1], "type"}, {&m.Source, f[sep+2], "source"}} {
		if *x.dst, err = unescapeMount(x.src); err != nil {
			return nil, malformed("%s %q: %v", x.what, short(x.src), err)
		}
	}
	if !strings.HasPrefix(m.Mountpoint, "/") || !strings.HasPrefix(m.Root, "/") {
		return nil, malformed("root %q or mount point %q is not absolute", short(m.Root), short(m.Mountpoint))
	}
	return m, nil
}

// unescapeMount undoes the kernel's \ooo escapes.
func unescapeMount(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", errors.New("short escape")
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("escape %q", s[i:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// HasOption reports whether a mount's per-mount options (not the super
// block's) include opt: "nodev", "ro", "nosuid".
func HasOption(m *mountinfo.Info, opt string) bool {
	for o := range strings.SplitSeq(m.Options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// Dev is a mount's "major:minor".
func Dev(m *mountinfo.Info) string { return fmt.Sprintf("%d:%d", m.Major, m.Minor) }

// MountString is a mount's evidence line: "ID at MOUNTPOINT: TYPE SOURCE
// MAJ:MIN ROOT (OPTIONS)".
func MountString(m *mountinfo.Info) string {
	return fmt.Sprintf("mount %d at %s: %s %s %s root %s (%s)", m.ID, m.Mountpoint, m.FSType, m.Source, Dev(m), m.Root, m.Options)
}

// mountIndex finds mounts by mount point and children by parent.
type mountIndex struct {
	byPoint map[string][]*mountinfo.Info
}

func (t MountTable) index() mountIndex {
	ix := mountIndex{byPoint: map[string][]*mountinfo.Info{}}
	for _, m := range t {
		ix.byPoint[m.Mountpoint] = append(ix.byPoint[m.Mountpoint], m)
	}
	return ix
}

// top follows a stack of mounts at one mount point from m to the one on
// top: the mount at the same point whose parent is m, and so on.
func (ix mountIndex) top(m *mountinfo.Info) *mountinfo.Info {
	for hops := 0; hops < len(ix.byPoint[m.Mountpoint]); hops++ {
		var next *mountinfo.Info
		for _, c := range ix.byPoint[m.Mountpoint] {
			if c.Parent == m.ID && c != m {
				next = c
			}
		}
		if next == nil {
			break
		}
		m = next
	}
	return m
}

// rootMount is the mount at "/" that is not mounted on another "/" mount
// of the table, followed to the top of its stack.
func (ix mountIndex) rootMount() *mountinfo.Info {
	roots := ix.byPoint["/"]
	for _, m := range roots {
		under := false
		for _, o := range roots {
			if o.ID == m.Parent && o != m {
				under = true
			}
		}
		if !under {
			return ix.top(m)
		}
	}
	if len(roots) > 0 {
		return roots[len(roots)-1]
	}
	return nil
}

// Holding returns the mount that holds path p as the process sees it (p
// clean and absolute, no symlinks in it): from the root mount down, at
// each prefix of p the top mount whose parent is the mount reached so far.
// A mount hidden under a later mount of a parent directory is never
// returned. Nil when the table has no root mount. Each call indexes the
// table; many lookups share one index (see Applied).
func (t MountTable) Holding(p string) *mountinfo.Info { return t.index().holding(p) }

func (ix mountIndex) holding(p string) *mountinfo.Info {
	cur := ix.rootMount()
	if cur == nil {
		return nil
	}
	prefix := ""
	for part := range strings.SplitSeq(strings.Trim(path.Clean(p), "/"), "/") {
		if part == "" {
			continue
		}
		prefix += "/" + part
		var next *mountinfo.Info
		for _, m := range ix.byPoint[prefix] {
			if m.Parent == cur.ID {
				next = m
			}
		}
		if next != nil {
			cur = ix.top(next)
		}
	}
	return cur
}

// At returns the visible mount whose mount point is exactly p, or nil.
func (t MountTable) At(p string) *mountinfo.Info {
	p = path.Clean(p)
	if m := t.Holding(p); m != nil && m.Mountpoint == p {
		return m
	}
	return nil
}

// SourceOf says how host path p (clean, absolute, symlinks resolved) shows
// as a bind mount's source in any mount namespace: the device of the
// file system that holds it and its path within that file system, from
// the host's own mount table.
func (t MountTable) SourceOf(p string) (dev, root string, ok bool) {
	m := t.Holding(p)
	if m == nil {
		return "", "", false
	}
	rest := strings.TrimPrefix(path.Clean(p), m.Mountpoint)
	if m.Mountpoint == "/" {
		rest = path.Clean(p)
	}
	return Dev(m), path.Join(m.Root, rest), true
}
