package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Match is a container Find found, and how.
type Match struct {
	Container
	// By says what matched: "ID", "ID prefix", "init PID", "cgroup
	// member", or several of them joined by ", ".
	By string
	// Evidence says why, in a line (the PID's cgroup and the container's).
	Evidence string
}

// NotFoundError is a query no container matches.
type NotFoundError struct {
	Query  string
	Reason string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no container matches %q: %s", e.Query, e.Reason)
}

// AmbiguousError is a query more than one container matches.
type AmbiguousError struct {
	Query   string
	Matches []Match
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q matches %d containers:", e.Query, len(e.Matches))
	for i, m := range e.Matches {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s (%s, %s, by %s)", m.Ref(), m.Runtime, m.Status, m.By)
	}
	return b.String()
}

// Find looks up one container by what `accel-doctor container` is given:
// its ID, a prefix of its ID, or a PID — the container whose init process
// that is, or whose cgroups the process is in (a process exec'd into it).
// An all-digit query is tried both as a PID and as an ID prefix; two
// different answers are an AmbiguousError, as is a prefix of two IDs, or
// one ID in two containerd namespaces. No match is a NotFoundError whose
// reason says what was looked at. The []error are the sources that could
// not be read (see Containers): with them, "not found" is not conclusive.
//
// An ID query reads the state of the containers it matches only, so a
// snapshot recorded while it ran replays it.
func Find(root *hostfs.Root, query string) (Match, []error, error) {
	if err := validName(query); err != nil {
		return Match{}, nil, fmt.Errorf("container query: %w", err)
	}
	pid, perr := parsePID(query)
	isPID := perr == nil && allDigits(query)
	var want func(ns, id string) bool
	if !isPID {
		want = func(_, id string) bool { return strings.HasPrefix(id, query) }
	}
	s := newScanner(root, want)
	s.scan()
	cs, errs := s.containers(), s.errs

	var matches []Match
	exact := false
	for _, c := range cs {
		if c.ID == query {
			exact = true
		}
	}
	for _, c := range cs {
		switch {
		case c.ID == query:
			matches = append(matches, Match{Container: c, By: "ID"})
		case !exact && strings.HasPrefix(c.ID, query):
			matches = append(matches, Match{Container: c, By: "ID prefix"})
		}
	}
	reason := fmt.Sprintf("no container ID starts with %q", query)
	if isPID {
		byPID, why, perrs := findPID(root, cs, pid)
		errs = append(errs, perrs...)
		reason += "; " + why
		matches = mergeMatches(matches, byPID)
		if len(byPID) == 0 && len(matches) > 0 {
			for i := range matches {
				matches[i].Evidence = why
			}
		}
	}
	switch len(matches) {
	case 0:
		if n := len(errs); n > 0 {
			reason += fmt.Sprintf(" (and %d runtime sources could not be read)", n)
		}
		return Match{}, errs, &NotFoundError{Query: query, Reason: reason}
	case 1:
		return matches[0], errs, nil
	}
	return Match{}, errs, &AmbiguousError{Query: query, Matches: matches}
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// mergeMatches adds b to a, one Match per container.
func mergeMatches(a, b []Match) []Match {
	for _, m := range b {
		i := slices.IndexFunc(a, func(x Match) bool { return x.Ref() == m.Ref() })
		if i < 0 {
			a = append(a, m)
			continue
		}
		a[i].By = m.By + ", " + a[i].By
		a[i].Evidence = m.Evidence
	}
	return a
}

// findPID finds the containers process pid belongs to: the one it is the
// init of, else those whose init's cgroups hold it (the most specific
// when containers nest). why says what was seen when nothing matches.
func findPID(root *hostfs.Root, cs []Container, pid int) (ms []Match, why string, errs []error) {
	for _, c := range cs {
		if c.Alive() && c.PID == pid {
			ms = append(ms, Match{Container: c, By: "init PID", Evidence: fmt.Sprintf("PID %d is the container's init process (%s)", pid, c.StatusReason)})
		}
	}
	if len(ms) > 0 {
		return ms, "", nil
	}
	mine, err := readProcCgroup(root, pid)
	switch {
	case err != nil && processGone(root, pid, err):
		return nil, fmt.Sprintf("no process %d", pid), nil
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("this capture holds no /proc/%d", pid), nil
	case err != nil:
		return nil, fmt.Sprintf("the cgroups of process %d could not be read", pid), []error{err}
	}
	best := 0
	for _, c := range cs {
		if !c.Alive() || c.PID == 0 {
			continue
		}
		theirs, err := readProcCgroup(root, c.PID)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // exited since it was looked at
				errs = append(errs, err)
			}
			continue
		}
		ok, depth := within(mine, theirs)
		if !ok || depth < best {
			continue
		}
		if depth > best {
			ms, best = ms[:0], depth
		}
		ms = append(ms, Match{Container: c, By: "cgroup member",
			Evidence: fmt.Sprintf("process %d is in cgroup %s, inside %s of the container's init process %d", pid, mainPath(mine), mainPath(theirs), c.PID)})
	}
	if len(ms) == 0 {
		return nil, fmt.Sprintf("process %d (cgroup %s) is in no container's cgroup", pid, mainPath(mine)), errs
	}
	return ms, "", errs
}

// mainPath is the path to show of a process's cgroups: the unified
// hierarchy's when it is not the root, else the first other one.
func mainPath(ls []cgroupLine) string {
	for _, l := range ls {
		if l.Hier == "0:" && l.Path != "/" {
			return l.Path
		}
	}
	for _, l := range ls {
		if l.Path != "/" {
			return l.Path
		}
	}
	return "/"
}

// FindPod finds the containers of a Kubernetes pod on this node from the
// CRI annotations in their specs (PodOf); with container, only those of
// that name (a restarted container leaves its stopped predecessors). The
// workload containers come first, by name and newest first, then the
// sandbox. None is a NotFoundError.
func FindPod(root *hostfs.Root, namespace, name, container string) ([]Container, []error, error) {
	q := namespace + "/" + name
	if container != "" {
		q += " container " + container
	}
	if namespace == "" || name == "" {
		return nil, nil, fmt.Errorf("pod %q: want NAMESPACE/NAME", namespace+"/"+name)
	}
	cs, errs := Containers(root)
	var out []Container
	var others []string
	for _, c := range cs {
		if c.Pod == nil || c.Pod.Namespace != namespace || c.Pod.Name != name {
			continue
		}
		if container != "" && (c.Pod.Sandbox || c.Pod.Container != container) {
			if !c.Pod.Sandbox && !slices.Contains(others, c.Pod.Container) {
				others = append(others, c.Pod.Container)
			}
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		reason := fmt.Sprintf("no container's annotations name pod %s/%s", namespace, name)
		if len(others) > 0 {
			slices.Sort(others)
			reason = fmt.Sprintf("pod %s/%s has no container %q here; its containers: %s", namespace, name, container, strings.Join(others, ", "))
		}
		if n := len(errs); n > 0 {
			reason += fmt.Sprintf(" (and %d runtime sources could not be read)", n)
		}
		return nil, errs, &NotFoundError{Query: q, Reason: reason}
	}
	slices.SortStableFunc(out, func(a, b Container) int {
		if a.Pod.Sandbox != b.Pod.Sandbox {
			if a.Pod.Sandbox {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Pod.Container, b.Pod.Container), b.Created.Compare(a.Created))
	})
	return out, errs, nil
}
