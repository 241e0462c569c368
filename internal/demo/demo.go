// Package demo holds the built-in scenario that `check --snapshot demo`
// replays: a snapshot archive of testdata/hosts/demo-h100x8-faults, an
// 8-GPU NVIDIA host with a few faults, so that a newcomer on a machine
// without accelerators sees a real diagnosis. TestDemoArchiveIsCurrent keeps
// it equal to the tree (go test ./internal/demo -update rewrites it).
package demo

import (
	_ "embed"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

//go:embed demo.tar.gz
var archive []byte

// Description names the scenario in reports (after "built-in demo
// snapshot: "); it names no repository path, which means nothing to a user
// of the binary.
const Description = "8 x NVIDIA H100 host with faults"

// Meta is what the archive's snapshot description says of it.
var Meta = hostfs.SnapshotMeta{Tool: "accel-doctor demo", Source: "built-in demo"}

// Archive returns the snapshot archive.
func Archive() []byte { return archive }
