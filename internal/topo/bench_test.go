package topo

import (
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// BenchmarkTopo is `topo --matrix`'s work on the largest fixture,
// hgx-h100x8-vfio (68 functions, whole config spaces): scan the
// inventory, read every bridge's config space, build the tree and the
// matrix. Goal: <= 10 ms.
//
//	go test -run XXX -bench Topo -benchmem ./internal/topo
func BenchmarkTopo(b *testing.B) {
	root := hostfs.MustNew(hosts + "hgx-h100x8-vfio")
	for b.Loop() {
		tree, inv, err := Read(root, Options{LocalCPUs: true})
		if err != nil || len(inv.Devices) != 68 {
			b.Fatalf("%v: %d functions", err, len(inv.Devices))
		}
		if m := tree.Matrix(); len(m.Devices) != 10 {
			b.Fatalf("%d devices", len(m.Devices))
		}
	}
}

// BenchmarkBuild is the tree and the matrix alone, from a scanned
// inventory, without the config reads (a nil root).
func BenchmarkBuild(b *testing.B) {
	inv, err := pci.Scan(hostfs.MustNew(hosts + "hgx-h100x8-vfio"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Build(nil, inv, Options{}).Matrix()
	}
}

// BenchmarkTopoVECapture is the same work on hwloc's capture of the
// 8-VectorEngine host (28 functions), the tree bench/main.go runs
// `accel-doctor topo` and `lspci -tv` over as whole processes: the whole
// inventory (check's scan), the fields topo shows (its scan), and topo's
// work. The goal for topo's own work (this, plus rendering) is <= 2 ms.
func BenchmarkTopoVECapture(b *testing.B) {
	dir := testutil.Unpack(b, filepath.Join(testutil.CorpusDir(b), "hwloc", "linux", "32intel64-2p8co2t+8ve.tar.bz2"))
	root := hostfs.MustNew(dir)
	b.Run("Scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := pci.Scan(root); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ScanFields", func(b *testing.B) {
		for b.Loop() {
			if _, err := pci.ScanFields(root, Fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Read+Matrix", func(b *testing.B) {
		for b.Loop() {
			tree, _, err := Read(root, Options{LocalCPUs: true})
			if err != nil {
				b.Fatal(err)
			}
			tree.Matrix()
		}
	})
}
