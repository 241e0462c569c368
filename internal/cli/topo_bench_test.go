package cli

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
	"github.com/accel-doctor/accel-doctor/internal/topo"
)

// BenchmarkTopoChecks is `topo`'s work in process, drawn as text, over
// the tree bench/main.go times it on (hwloc's 8-VectorEngine capture)
// and the demo's fixture: the tree alone (--check=false) and with the
// checks of layers 1-3 that mark it (the default).
//
//	go test -run XXX -bench TopoChecks ./internal/cli
func BenchmarkTopoChecks(b *testing.B) {
	ve := testutil.Unpack(b, filepath.Join(testutil.CorpusDir(b), "hwloc", "linux", "32intel64-2p8co2t+8ve.tar.bz2"))
	for _, r := range []struct{ name, dir string }{{"8-VE", ve}, {"demo", hosts + "demo-h100x8-faults"}} {
		root := hostfs.MustNew(r.dir)
		b.Run(r.name+"/tree", func(b *testing.B) {
			for b.Loop() {
				tree, inv, err := topo.Read(root, topo.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := writeTopo(io.Discard, "text", false, tree, inv, r.name, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(r.name+"/checked", func(b *testing.B) {
			for b.Loop() {
				tree, inv, chk, err := checkedTopo(root, topo.Options{}, r.name)
				if err != nil {
					b.Fatal(err)
				}
				if err := writeTopo(io.Discard, "text", false, tree, inv, r.name, chk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
