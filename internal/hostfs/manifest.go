package hostfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// ManifestPath is where a tree keeps the description of device nodes that
// it cannot hold itself (host-absolute, inside the root).
const ManifestPath = "/.accel-doctor/devices.manifest"

// manifestHeader starts every manifest this package writes; the parser
// accepts files without it.
const manifestHeader = "# accel-doctor device manifest v1"

// maxManifestEntries bounds what a manifest may describe.
const maxManifestEntries = 1 << 16

// ParseManifest reads a device manifest. One entry a line:
//
//	/dev/nvidia0      c 195:0 0666 0:0
//	/dev/sda          b 8:0   0660 0:6
//	/dev/dri          d       0755 0:0
//	/dev/char/195:0   l ../nvidia0
//
// Fields are the host path, the type (c char, b block, d dir, l symlink, f
// regular file), major:minor for c and b, the octal permission bits and
// uid:gid; a symlink has its target instead. '#' starts a comment.
func ParseManifest(r io.Reader) (*Manifest, error) {
	m := NewManifest()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	ln := 0
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, err := parseManifestLine(line)
		if err != nil {
			return nil, fmt.Errorf("manifest line %d: %w", ln, err)
		}
		if _, dup := m.entries[n.Path]; dup {
			return nil, fmt.Errorf("manifest line %d: %s listed twice", ln, n.Path)
		}
		if len(m.entries) >= maxManifestEntries {
			return nil, fmt.Errorf("manifest line %d: more than %d entries", ln, maxManifestEntries)
		}
		m.put(n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return m, nil
}

func parseManifestLine(line string) (Node, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return Node{}, fmt.Errorf("want 'PATH TYPE ...', got %q", line)
	}
	p := f[0]
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
		return Node{}, fmt.Errorf("path %q is not a clean absolute path", p)
	}
	n := Node{Path: p, FromManifest: true}
	rest := f[2:]
	switch f[1] {
	case "c", "b":
		if f[1] == "c" {
			n.Type = TypeChar
		} else {
			n.Type = TypeBlock
		}
		if len(rest) != 3 {
			return Node{}, fmt.Errorf("%s: want 'MAJOR:MINOR MODE UID:GID'", p)
		}
		maj, min, err := ParseMajorMinor(rest[0])
		if err != nil {
			return Node{}, fmt.Errorf("%s: %w", p, err)
		}
		n.Major, n.Minor = maj, min
		rest = rest[1:]
	case "d":
		n.Type = TypeDir
	case "f":
		n.Type = TypeRegular
	case "l":
		n.Type = TypeSymlink
		if len(rest) != 1 || rest[0] == "" {
			return Node{}, fmt.Errorf("%s: a symlink wants exactly one target", p)
		}
		n.Target = rest[0]
		n.Mode = 0o777
		return n, nil
	default:
		return Node{}, fmt.Errorf("%s: unknown type %q (want c, b, d, f or l)", p, f[1])
	}
	if len(rest) != 2 {
		return Node{}, fmt.Errorf("%s: want 'MODE UID:GID'", p)
	}
	mode, err := strconv.ParseUint(rest[0], 8, 32)
	if err != nil || mode > 0o7777 {
		return Node{}, fmt.Errorf("%s: bad mode %q", p, rest[0])
	}
	n.Mode = fs.FileMode(mode & 0o777)
	if mode&0o4000 != 0 {
		n.Mode |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		n.Mode |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		n.Mode |= fs.ModeSticky
	}
	uid, gid, ok := strings.Cut(rest[1], ":")
	if !ok {
		return Node{}, fmt.Errorf("%s: owner %q is not UID:GID", p, rest[1])
	}
	u, err1 := strconv.ParseUint(uid, 10, 32)
	g, err2 := strconv.ParseUint(gid, 10, 32)
	if err1 != nil || err2 != nil {
		return Node{}, fmt.Errorf("%s: owner %q is not numeric UID:GID", p, rest[1])
	}
	n.UID, n.GID = uint32(u), uint32(g)
	return n, nil
}

// ParseMajorMinor parses "MAJOR:MINOR" as sysfs "dev" files and
// /dev/char link names write it.
func ParseMajorMinor(s string) (uint32, uint32, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not MAJOR:MINOR", s)
	}
	maj, err1 := strconv.ParseUint(a, 10, 32)
	min, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%q is not MAJOR:MINOR", s)
	}
	// Linux dev_t: 12-bit major, 20-bit minor (include/linux/kdev_t.h).
	if maj >= 1<<12 || min >= 1<<20 {
		return 0, 0, fmt.Errorf("%q is out of range for a Linux dev_t", s)
	}
	return uint32(maj), uint32(min), nil
}

// Manifest describes device nodes (and the directories and links around
// them) of a tree that cannot hold real ones.
type Manifest struct {
	entries map[string]Node
	// children indexes the entries' paths by parent directory
	// (path.Dir), so that a listing costs what the directory holds, not
	// what the whole manifest does: every ReadDir asks.
	children map[string]map[string]struct{}
}

// NewManifest returns an empty manifest.
func NewManifest() *Manifest {
	return &Manifest{entries: map[string]Node{}, children: map[string]map[string]struct{}{}}
}

// Add puts n in the manifest, replacing an entry with the same path.
func (m *Manifest) Add(n Node) {
	n.FromManifest = true
	m.put(n)
}

func (m *Manifest) put(n Node) {
	m.entries[n.Path] = n
	dir := path.Dir(n.Path)
	c := m.children[dir]
	if c == nil {
		c = map[string]struct{}{}
		m.children[dir] = c
	}
	c[n.Path] = struct{}{}
}

// Remove drops the entry for p, if any.
func (m *Manifest) Remove(p string) {
	if _, ok := m.entries[p]; !ok {
		return
	}
	delete(m.entries, p)
	dir := path.Dir(p)
	if c := m.children[dir]; c != nil {
		delete(c, p)
		if len(c) == 0 {
			delete(m.children, dir)
		}
	}
}

// Lookup returns the entry for the host path p.
func (m *Manifest) Lookup(p string) (Node, bool) {
	if m == nil {
		return Node{}, false
	}
	n, ok := m.entries[p]
	return n, ok
}

// Children lists the names of the entries directly under dir, sorted.
func (m *Manifest) Children(dir string) []string {
	if m == nil {
		return nil
	}
	c := m.children[dir]
	if len(c) == 0 {
		return nil
	}
	out := make([]string, 0, len(c))
	for p := range c {
		out = append(out, path.Base(p))
	}
	sort.Strings(out)
	return out
}

// Len is the number of entries.
func (m *Manifest) Len() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
}

// Format writes the manifest in the form ParseManifest reads, sorted by
// path so that fixtures diff cleanly.
func (m *Manifest) Format() []byte {
	var b bytes.Buffer
	b.WriteString(manifestHeader + "\n")
	paths := make([]string, 0, len(m.entries))
	for p := range m.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		n := m.entries[p]
		switch n.Type {
		case TypeSymlink:
			fmt.Fprintf(&b, "%s l %s\n", p, n.Target)
		case TypeChar, TypeBlock:
			fmt.Fprintf(&b, "%s %s %d:%d %04o %d:%d\n", p, n.Type.letter(), n.Major, n.Minor, n.permBits(), n.UID, n.GID)
		default:
			fmt.Fprintf(&b, "%s %s %04o %d:%d\n", p, n.Type.letter(), n.permBits(), n.UID, n.GID)
		}
	}
	return b.Bytes()
}
