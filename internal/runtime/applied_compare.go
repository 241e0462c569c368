package runtime

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Mechanical comparisons of what checkpoint 2 expects with what the
// process has: present, missing, different, or unknown (with the read
// state that kept us from looking). They decide nothing about severity or
// cause; the diagnose layer does, with the facts attached.

// CheckOutcome is what a comparison found.
type CheckOutcome uint8

const (
	CheckPresent   CheckOutcome = iota // there, as expected
	CheckMissing                       // not there, conclusively
	CheckDifferent                     // there, but not as expected (Diffs)
	CheckUnknown                       // could not look (State says why)
)

func (o CheckOutcome) String() string {
	return [...]string{"present", "missing", "different", "unknown"}[o]
}

// AppliedCheck is one comparison.
type AppliedCheck struct {
	Kind    string // "node", "mount" or "env"
	Subject string // the container path or the variable's name
	Outcome CheckOutcome
	State   ReadState // ReadOK, or why the outcome is CheckUnknown
	// Read is, for CheckUnknown, the read that failed (its host path
	// and error).
	Read ProcRead
	// Diffs says what differs, one line each ("major:minor 195:1, want
	// 195:0").
	Diffs    []string
	Evidence []string
	// Entry is what is at a node's or mount's container path (nil when it
	// was not read); Mount is the mount at a mount's path, or the one
	// holding a node.
	Entry *DevEntry
	Mount *mountinfo.Info
	// SourceVerified: a present mount's source was identified as the
	// expected host path (false: only the mount point was checked,
	// Evidence says why).
	SourceVerified bool
}

// Compare runs every check want implies, in order: nodes, mounts, env.
func (a *Applied) Compare(want Expected) []AppliedCheck {
	var out []AppliedCheck
	for _, n := range want.Nodes {
		out = append(out, a.CheckNode(n))
	}
	for _, m := range want.Mounts {
		out = append(out, a.CheckMount(m))
	}
	for _, e := range want.Env {
		out = append(out, a.CheckEnv(e))
	}
	return out
}

// entry returns what was read at container path p: the stat of an
// expected path, else the /dev walk's lstat.
func (a *Applied) entry(p string) (DevEntry, bool) {
	p = path.Clean("/" + p)
	if e, ok := a.Paths[p]; ok {
		return e, true
	}
	return a.Dev.Lookup(p)
}

func unknown(c AppliedCheck, r ProcRead) AppliedCheck {
	c.Outcome, c.State, c.Read = CheckUnknown, r.State, r
	c.Evidence = append(c.Evidence, r.String())
	return c
}

// CheckNode compares an expected node with what the process sees at its
// path (links followed, as open does). Present or different, the check
// carries the entry: its mount (OnNodev), its owner as the container sees
// it, and ModeCheck's decision for a read-write open are in the evidence.
func (a *Applied) CheckNode(w ExpectedNode) AppliedCheck {
	c := AppliedCheck{Kind: "node", Subject: path.Clean("/" + w.Path), State: ReadOK}
	e, ok := a.entry(c.Subject)
	if !ok {
		return unknown(c, ProcRead{Path: a.rootPath(c.Subject), State: ReadNotCaptured,
			Err: fmt.Errorf("not read: ReadApplied was not given %s", c.Subject)})
	}
	c.Entry = &e
	switch e.Read.State {
	case ReadOK:
	case ReadAbsent:
		c.Outcome = CheckMissing
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: nothing at this path in the process's root (%s)", c.Subject, e.Read))
		return c
	default:
		return unknown(c, e.Read)
	}
	n := e.Node
	if n.Type != w.Type {
		c.Diffs = append(c.Diffs, fmt.Sprintf("type %s, want %s", n.Type, w.Type))
	}
	if (w.Type == hostfs.TypeChar || w.Type == hostfs.TypeBlock) && n.Type == w.Type && (n.Major != w.Major || n.Minor != w.Minor) {
		c.Diffs = append(c.Diffs, fmt.Sprintf("major:minor %s, want %d:%d", n.Dev(), w.Major, w.Minor))
	}
	if w.Mode != nil && n.Mode.Perm() != w.Mode.Perm() {
		c.Diffs = append(c.Diffs, fmt.Sprintf("mode %s, want %04o", n.ModeString(), uint32(w.Mode.Perm())))
	}
	for _, id := range []struct {
		what string
		want *uint32
		got  IDView
	}{{"owner", w.UID, e.Owner}, {"group", w.GID, e.Group}} {
		switch {
		case id.want == nil:
		case !id.got.Known:
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s as the container sees it not known (want %d): the user namespace's map was not read", id.what, *id.want))
		case id.got.Inside != *id.want:
			c.Diffs = append(c.Diffs, fmt.Sprintf("%s %d inside the container, want %d", id.what, id.got.Inside, *id.want))
		}
	}
	c.Evidence = append(c.Evidence, e.String())
	c.Mount = e.Mount
	if n.Type == hostfs.TypeChar || n.Type == hostfs.TypeBlock {
		if nodev, known := e.OnNodev(); known && nodev {
			c.Evidence = append(c.Evidence, fmt.Sprintf("mount %d at %s is nodev: open gives EACCES (fs/namei.c may_open)", e.Mount.ID, e.Mount.Mountpoint))
		} else if !known {
			c.Evidence = append(c.Evidence, "the mount holding it: "+a.MountsRead.String())
		}
		c.Evidence = append(c.Evidence, a.ModeCheck(e, MayRW).String())
	}
	c.Outcome = CheckPresent
	if len(c.Diffs) > 0 {
		c.Outcome = CheckDifferent
	}
	return c
}

func (a *Applied) rootPath(p string) string { return fmt.Sprintf("/proc/%d/root%s", a.PID, p) }

// CheckMount looks for a mount at the container path and, when the host
// path's source was identified, compares the mount's device and root with
// it: a bind of the expected file shows the same major:minor and the same
// path within its file system.
func (a *Applied) CheckMount(w ExpectedMount) AppliedCheck {
	c := AppliedCheck{Kind: "mount", Subject: path.Clean("/" + w.ContainerPath), State: ReadOK}
	if !a.MountsRead.OK() && len(a.Mounts) == 0 {
		return unknown(c, a.MountsRead)
	}
	if e, ok := a.entry(c.Subject); ok {
		c.Entry = &e
	}
	m := a.Mounts.At(c.Subject)
	if m == nil {
		if !a.MountsRead.OK() {
			// Lines that did not parse may hold it.
			return unknown(c, a.MountsRead)
		}
		c.Outcome = CheckMissing
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: no mount at %s (host path %s)", a.MountsRead.Path, c.Subject, w.HostPath))
		if c.Entry != nil {
			switch c.Entry.Read.State {
			case ReadOK:
				c.Evidence = append(c.Evidence, fmt.Sprintf("%s exists in the container (%s), but is not a mount of the host path", c.Subject, c.Entry.Node.Type))
			case ReadAbsent:
				c.Evidence = append(c.Evidence, c.Subject+" does not exist in the container")
			}
		}
		return c
	}
	c.Mount = m
	c.Evidence = append(c.Evidence, MountString(m))
	src, ok := a.Sources[w.HostPath]
	switch {
	case !ok:
		c.Evidence = append(c.Evidence, "source not verified: ReadApplied was not given the host path "+w.HostPath)
	case !src.Read.OK():
		c.Evidence = append(c.Evidence, fmt.Sprintf("source not verified: host path %s: %s", w.HostPath, src.Read))
	default:
		c.SourceVerified = true
		want := fmt.Sprintf("%s root %s", src.Dev, src.Root)
		got := fmt.Sprintf("%s root %s", Dev(m), m.Root)
		c.Evidence = append(c.Evidence, fmt.Sprintf("host path %s (resolved %s) is %s by %s", w.HostPath, src.Resolved, want, src.Read.Path))
		if got != want {
			c.Diffs = append(c.Diffs, fmt.Sprintf("mounted from %s, want %s", got, want))
		}
	}
	c.Outcome = CheckPresent
	if len(c.Diffs) > 0 {
		c.Outcome = CheckDifferent
	}
	return c
}

// CheckEnv says whether the variable is set in the process's environment.
// Values are never read out: a set variable's value is not compared.
func (a *Applied) CheckEnv(name string) AppliedCheck {
	c := AppliedCheck{Kind: "env", Subject: name, State: ReadOK}
	if !a.Env.Read.OK() {
		return unknown(c, a.Env.Read)
	}
	if a.Env.Has(name) {
		c.Outcome = CheckPresent
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s is set (its value is never kept)", a.Env.Read.Path, name))
		return c
	}
	c.Outcome = CheckMissing
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s is not set (%d variables set)", a.Env.Read.Path, name, len(a.Env.Names)))
	return c
}

// ExpectedFromSpec is what an OCI spec itself asks the runtime for: its
// linux.devices, its bind mounts, and its environment's names. (CDI edits
// and the NVIDIA hook's additions are checkpoint 2's to resolve; CRI
// runtimes write CDI edits into the spec before the runtime sees it.)
func ExpectedFromSpec(s *specs.Spec) Expected {
	var w Expected
	if s == nil {
		return w
	}
	if s.Linux != nil {
		for _, d := range s.Linux.Devices {
			n := ExpectedNode{Path: d.Path, Major: uint32(d.Major), Minor: uint32(d.Minor), UID: d.UID, GID: d.GID}
			switch d.Type {
			case "c", "u":
				n.Type = hostfs.TypeChar
			case "b":
				n.Type = hostfs.TypeBlock
			case "p":
				n.Type = hostfs.TypeFIFO
			default:
				continue
			}
			if d.FileMode != nil {
				m := fs.FileMode(*d.FileMode).Perm()
				n.Mode = &m
			}
			w.Nodes = append(w.Nodes, n)
		}
	}
	for _, m := range s.Mounts {
		if m.Type == "bind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
			w.Mounts = append(w.Mounts, ExpectedMount{HostPath: m.Source, ContainerPath: m.Destination})
		}
	}
	if s.Process != nil {
		seen := map[string]bool{}
		for _, e := range s.Process.Env {
			name, _, _ := strings.Cut(e, "=")
			if name != "" && !seen[name] {
				seen[name] = true
				w.Env = append(w.Env, name)
			}
		}
	}
	return w
}
