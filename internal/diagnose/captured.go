package diagnose

import (
	"path"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Absent is not broken. On a host, /dev/nvidiactl missing is a finding; in
// a capture that never looked under /dev (ghw's and hwloc's sysfs trees
// hold none) it says nothing about the machine. Every check that would
// conclude from an absence asks captureGap first, and says NOT_RUN with
// its answer when the root could not have shown the path.

// captureGap says, when root cannot show p, what the capture lacks ("the
// capture holds no /dev"); ok is false when the root covers p (p is
// there, or its absence is the host's: hostfs.Root.Covers).
func captureGap(root *hostfs.Root, p string) (string, bool) {
	if root.Covers(p) {
		return "", false
	}
	dir := path.Dir(path.Clean(p))
	if treeHas(root, dir) {
		// A recorded snapshot that never asked about p.
		return "the capture did not record " + p, true
	}
	// Name the highest directory on the way to p that the tree lacks.
	missing := dir
	for d := path.Dir(dir); d != "/" && !treeHas(root, d); d = path.Dir(d) {
		missing = d
	}
	return "the capture holds no " + missing, true
}

// treeHas reports whether the tree holds the directory d, really or
// through its device manifest.
func treeHas(root *hostfs.Root, d string) bool {
	_, err := root.ReadDir(d)
	return err == nil
}
