package cli

import (
	"bytes"
	"fmt"
	"os"

	"github.com/accel-doctor/accel-doctor/internal/demo"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// openHost opens what a diagnosis reads: a snapshot (a file, or "demo" for
// the built-in scenario) or the --root directory. The three go through the
// same readers; the source string says which it was.
func (g *globals) openHost(snapshot string) (root *hostfs.Root, source string, cleanup func(), err error) {
	cleanup = func() {}
	if snapshot != "" && g.rootSet {
		return nil, "", cleanup, usageErr("--root and --snapshot both name what to read: give one (a snapshot holds its own root)")
	}
	switch snapshot {
	case "":
		root, err = hostfs.New(g.root)
		if err != nil {
			return nil, "", cleanup, usageErr("%v", err)
		}
		if root.IsLive() {
			host, _ := os.Hostname()
			return root, fmt.Sprintf("live host %s", host), cleanup, nil
		}
		return root, fmt.Sprintf("host root %s", root.Dir()), cleanup, nil
	case "demo":
		catchSignals() // the unpacked tree is removed on a signal, even half unpacked
		root, cleanup, err = hostfs.OpenSnapshot(bytes.NewReader(demo.Archive()))
		if err != nil {
			return nil, "", func() {}, fmt.Errorf("built-in demo: %w", err)
		}
		return root, "built-in demo snapshot: " + demo.Description, atExit(cleanup), nil
	}
	// Checked before it is opened: a FIFO or a device is refused, never
	// opened (a FIFO would block open until a writer came).
	catchSignals()
	root, cleanup, err = hostfs.OpenSnapshotFile(snapshot)
	if err != nil {
		return nil, "", func() {}, usageErr("%v", err) // it starts with the path
	}
	cleanup = atExit(cleanup)
	src := "snapshot " + snapshot
	if m, ok := root.ReadSnapshotMeta(); ok {
		src += fmt.Sprintf(" (captured %s from %s)", m.Created.Format("2006-01-02 15:04 MST"), m.Source)
	}
	return root, src, cleanup, nil
}

// removeUnpacked removes every snapshot directory of this process,
// including one still being unpacked when a signal ends the process;
// final (the process is exiting on a signal) also keeps any other from
// being started.
func removeUnpacked(final bool) {
	if final {
		hostfs.StopUnpacking()
		return
	}
	hostfs.RemoveUnpacked()
}

// snapshotName is what a report calls the root of a snapshot: the archive,
// not the temporary directory it was unpacked to ("" for a --root).
func snapshotName(snapshot string) string {
	if snapshot == "" {
		return ""
	}
	return "snapshot:" + snapshot
}
