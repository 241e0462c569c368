package pci

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// tree builds a fake host root in a temp dir.
type tree struct {
	t   *testing.T
	dir string
}

func newTree(t *testing.T) *tree { return &tree{t: t, dir: t.TempDir()} }

func (tr *tree) file(p, content string) {
	tr.t.Helper()
	testutil.WriteTree(tr.t, tr.dir, map[string]string{p: content}, nil, "")
}

func (tr *tree) link(p, target string) {
	tr.t.Helper()
	testutil.WriteTree(tr.t, tr.dir, nil, map[string]string{p: target}, "")
}

// dev creates a function at /sys/devices/<devPath> (e.g.
// "pci0000:00/0000:00:01.0/0000:01:00.0") with attributes; values that
// start with "->" are symlinks. It adds the /sys/bus/pci/devices link the
// way the kernel does: relative, "../../../devices/...".
func (tr *tree) dev(devPath string, attrs map[string]string) {
	tr.t.Helper()
	dir := path.Join("/sys/devices", devPath)
	if err := os.MkdirAll(filepath.Join(tr.dir, dir), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	for k, v := range attrs {
		if t, ok := strings.CutPrefix(v, "->"); ok {
			tr.link(path.Join(dir, k), t)
			continue
		}
		tr.file(path.Join(dir, k), v+"\n")
	}
	tr.link(path.Join(DevicesDir, path.Base(devPath)), "../../../devices/"+devPath)
}

// up returns the "../" prefix that climbs from a device directory back to
// /sys, for driver and iommu_group links.
func up(devPath string) string {
	return strings.Repeat("../", strings.Count(devPath, "/")+2)
}
