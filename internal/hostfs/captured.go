package hostfs

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A missing path means two different things. On a host, /dev/nvidia0
// missing is a finding. In a capture that never looked under /dev (ghw's
// and hwloc's sysfs trees hold no /dev at all), it means nothing: the check
// that would read it could not look. Covers tells the two apart, so that
// readers return "not captured" instead of "absent" and checks say NOT_RUN
// instead of FAIL.

// NotCapturedError: the root does not show Path (Covers is false): a
// capture that did not copy it, or a pod's root that no mount gives it
// (NotGiven). It is an fs.ErrNotExist too, so that a reader that only
// asks "is it there" reads it as absent from this root.
// Why, when set, is the error's text (what the reader concluded the
// capture lacks).
type NotCapturedError struct{ Path, Why string }

func (e *NotCapturedError) Error() string {
	if e.Why != "" {
		return e.Why
	}
	return e.Path + ": not shown by this root (not captured)"
}

// Is makes errors.Is(err, fs.ErrNotExist) hold.
func (e *NotCapturedError) Is(target error) bool { return target == fs.ErrNotExist }

// CoveragePath holds, in a recorded snapshot, what the capture looked at
// beyond the files it holds: one "absent PATH" line per path the readers
// asked about that the host did not have, and one "listed DIR" line per
// directory whose whole listing was captured.
const CoveragePath = "/.accel-doctor/coverage"

// SnapshotFormat is the format WriteSnapshot writes. Format 2 adds
// CoveragePath; format 1 snapshots and tree archives (the demo) are judged
// like directory trees.
const SnapshotFormat = 2

type coverage struct {
	recorded bool            // a format-2 snapshot: the sets below are exact
	absent   map[string]bool // asked about, not on the host
	listed   map[string]bool // listing captured whole
}

// kernel file systems whose presence under a directory root means the root
// shows a running host (a host's / mounted at /host in a pod), where
// absence is as meaningful as on the live host (statfs(2) magic numbers,
// include/uapi/linux/magic.h).
var liveMagic = map[int64]bool{unix.PROC_SUPER_MAGIC: true, unix.SYSFS_MAGIC: true, unix.TMPFS_MAGIC: true}

// Covers reports whether the root could have shown p: true when p is
// present, and when p is absent on a host whose tree holding p was looked
// at. It is false only for a capture that does not cover p:
//   - the live host, and a directory root whose top-level tree (/proc,
//     /sys, /dev...) is a real kernel or tmpfs mount, cover everything
//     but, for a root assembled from mounts (a pod's /host), the paths
//     no mount under the root holds (NotGiven);
//   - a recorded snapshot covers what its readers asked about (present or
//     absent) and the children of the directories it listed;
//   - any other tree (fixtures, corpus captures, tree archives such as the
//     demo) covers p when p's parent directory is in the tree.
func (r *Root) Covers(p string) bool {
	if r.dir == "/" || r.Exists(p) {
		return true
	}
	if _, ng := r.NotGiven(p); ng {
		return false
	}
	p = path.Clean(p)
	c := r.coverage()
	if c.recorded {
		// Walk up through the missing part of p: an ancestor asked about
		// and absent, or a missing one in a directory listed whole, means
		// the host did not have p.
		for q := p; q != "/"; q = path.Dir(q) {
			if c.absent[q] || c.listed[path.Dir(q)] {
				return true
			}
			if r.Exists(path.Dir(q)) {
				break
			}
		}
		return false
	}
	if r.liveTree(p) {
		return true
	}
	parent, err := r.Stat(path.Dir(p))
	if err == nil {
		return parent.Type == TypeDir
	}
	// The manifest may describe nodes under a directory the tree lacks.
	return len(r.manifest.Children(path.Dir(p))) > 0
}

// LiveSysfs reports whether the root's /sys is a running kernel's sysfs:
// always on the live host, and for a host's sysfs seen through --root (a
// pod's /host/sys); never in a snapshot, a fixture or a capture, whose
// files copy what a reader once saw (its limits are the reader's then,
// not this process's now).
func (r *Root) LiveSysfs() bool {
	if r.live {
		return true
	}
	fd, err := r.open("/sys", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && int64(st.Type) == unix.SYSFS_MAGIC
}

// liveTree reports whether p's top-level directory under the root is a
// kernel file system (a live host's tree seen through --root).
func (r *Root) liveTree(p string) bool {
	top := "/" + strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]
	fd, err := r.open(top, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return false
	}
	return liveMagic[int64(st.Type)]
}

func (r *Root) coverage() *coverage {
	r.covOnce.Do(func() {
		r.cov = &coverage{absent: map[string]bool{}, listed: map[string]bool{}}
		m, ok := r.ReadSnapshotMeta()
		if !ok || m.Format < 2 || m.Tree {
			return
		}
		b, err := r.ReadFileLimit(CoveragePath, defaultLimits.fileBytes)
		if err != nil {
			return
		}
		r.cov.recorded = true
		parseCoverage(b, r.cov)
	})
	return r.cov
}

// parseCoverage reads CoveragePath lines; unknown lines are skipped so a
// newer writer's additions do not break an older reader.
func parseCoverage(b []byte, c *coverage) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for sc.Scan() {
		kind, p, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		switch kind {
		case "absent":
			c.absent[path.Clean(p)] = true
		case "listed":
			c.listed[path.Clean(p)] = true
		}
	}
}

// formatCoverage writes the coverage lines, sorted by the caller.
func formatCoverage(absent, listed []string) []byte {
	var b bytes.Buffer
	for _, p := range absent {
		b.WriteString("absent " + p + "\n")
	}
	for _, p := range listed {
		b.WriteString("listed " + p + "\n")
	}
	return b.Bytes()
}

// covState is embedded in Root.
type covState struct {
	covOnce sync.Once
	cov     *coverage

	mountsOnce sync.Once
	mounts     []string // mount points of this process, for NotGiven
}
