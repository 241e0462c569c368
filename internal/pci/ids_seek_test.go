package pci

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func vendorFilter(vs []uint16) Filter {
	set := map[uint16]bool{}
	for _, v := range vs {
		set[v] = true
	}
	return Filter{Vendor: func(v uint16) bool { return set[v] }, Seek: vs}
}

func sameIDs(t *testing.T, what string, a, b *IDs) {
	t.Helper()
	if d := cmp.Diff(a, b, cmp.AllowUnexported(IDs{}, idVendor{}, idDevice{}, idClass{}, idSubclass{})); d != "" {
		t.Fatalf("%s: seek and full parse differ:\n%s", what, d)
	}
}

// Seeking a few vendors' blocks gives exactly what parsing the whole file
// with the same filter gives, on the host's real pci.ids, for vendors at
// both ends of the file, big blocks (Intel, NVIDIA, AMD) and random sets.
func TestSeekIDsMatchesFullParse(t *testing.T) {
	b, err := os.ReadFile("/usr/share/misc/pci.ids")
	if err != nil {
		t.Skipf("no pci.ids on this machine: %v", err)
	}
	full, _ := parseIDs(b, Filter{})
	var all []uint16
	for v := range full.vendors {
		all = append(all, v)
	}
	sets := [][]uint16{{0x0001}, {0xffff}, {0x8086}, {0x10de, 0x1002, 0x8086}, {0x1af4, 0x1b36}}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		n := 1 + r.IntN(8)
		var s []uint16
		for j := 0; j < n; j++ {
			s = append(s, all[r.IntN(len(all))])
		}
		sets = append(sets, s)
	}
	for _, s := range sets {
		f := vendorFilter(s)
		want, werr := parseIDs(b, f)
		got, gerr, ok := seekIDs(b, s, f)
		if !ok {
			if _, in := full.vendors[s[0]]; in || len(s) > 1 {
				t.Errorf("%04x: seek gave up on a sorted file", s)
			}
			continue
		}
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%04x: errors differ: %v / %v", s, werr, gerr)
		}
		sameIDs(t, "vendors", want, got)
	}
}

// A vendor the file lacks, or a file out of order, never yields a wrong
// answer: seek gives up (and LoadIDs parses the whole file) or finds the
// exact line.
func TestSeekIDsGivesUpRatherThanGuess(t *testing.T) {
	unsorted := []byte("10de  NVIDIA\n\t2330  GH100\n1002  AMD\n\t740f  MI210\n8086  Intel\nC 00  Unclassified\nC 03  Display\n")
	for _, v := range []uint16{0x10de, 0x1002, 0x8086, 0x1234} {
		f := vendorFilter([]uint16{v})
		got, _, ok := seekIDs(unsorted, []uint16{v}, f)
		if !ok {
			continue
		}
		want, _ := parseIDs(unsorted, f)
		sameIDs(t, "unsorted", want, got)
	}
	if _, _, ok := seekIDs([]byte("10de  NVIDIA\n"), []uint16{0x10de}, Filter{}); ok {
		t.Error("no class section: seek should give up")
	}
}

func FuzzSeekIDs(f *testing.F) {
	f.Add([]byte("0001  A\n\t0001  d\n10de  NVIDIA\n\t2330  GH100\n\t\t10de 16c1  SXM5\nC 00  U\nC 03  D\n\t00  VGA\n"), uint16(0x10de))
	f.Add([]byte("\nC 00  \n\n\t\t\n"), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, v uint16) {
		seekIDs(b, []uint16{v}, vendorFilter([]uint16{v}))
	})
}

func BenchmarkLoadHostIDs(b *testing.B) {
	data, err := os.ReadFile("/usr/share/misc/pci.ids")
	if err != nil {
		b.Skip(err)
	}
	// A VM's vendors, and those of hwloc's 8-VectorEngine capture (the
	// topo bench), where three searches cross Intel's block.
	for _, host := range []struct {
		name string
		vs   []uint16
		devs map[uint32]bool
	}{
		{"vm", []uint16{0x1af4, 0x1b36, 0x8086}, map[uint32]bool{0x1af41000: true, 0x1b360100: true, 0x80861237: true}},
		{"8ve", []uint16{0x10b5, 0x15b3, 0x1bcf, 0x8086}, map[uint32]bool{0x80862030: true, 0x80862032: true, 0x808637c0: true,
			0x808637d2: true, 0x10b59797: true, 0x1bcf001c: true, 0x15b31013: true}},
	} {
		for _, mode := range []string{"full", "seek"} {
			b.Run(host.name+"/"+mode, func(b *testing.B) {
				f := vendorFilter(host.vs)
				// As Scan filters: only the host's vendor:device pairs.
				f.Device = func(v, d uint16) bool { return host.devs[uint32(v)<<16|uint32(d)] }
				if mode == "full" {
					f.Seek = nil
				}
				for b.Loop() {
					parseMapped(data, f)
				}
			})
		}
	}
}

// The seeker's remembered walks answer as a fresh walk does, for probes
// anywhere: inside a remembered stretch, at its ends, past the bound a
// walk had, on the host's pci.ids and on a small file with a block at its
// end.
func TestVendorSeekerAnswersAsAWalk(t *testing.T) {
	small := []byte("0001  A\n\t0001  d\n\t\t0001 0001  s\n# c\n10de  NVIDIA\n\t2330  GH100\n8086  Intel\n\t0d57  x\n\t1234  y")
	files := [][]byte{small}
	if b, err := os.ReadFile("/usr/share/misc/pci.ids"); err == nil {
		files = append(files, b)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, b := range files {
		s := &vendorSeeker{b: b}
		for i := 0; i < 20000; i++ {
			pos := r.IntN(len(b) + 1)
			hi := pos + r.IntN(len(b)+1-pos)
			if i%3 == 0 && len(s.spans) > 0 {
				// Probe at and around a remembered walk.
				sp := s.spans[r.IntN(len(s.spans))]
				pos = min(len(b), max(0, sp.from+r.IntN(5)-2))
				if r.IntN(2) == 0 {
					pos = min(len(b), max(0, sp.at+r.IntN(5)-2))
				}
				hi = min(len(b), pos+r.IntN(len(b)+1-pos))
			}
			at, id, ok := nextVendor(b, pos, hi)
			gat, gid, gok := s.next(pos, hi)
			if ok != gok || ok && (at != gat || id != gid) {
				t.Fatalf("next(%d, %d) = %d, %04x, %v; a walk gives %d, %04x, %v", pos, hi, gat, gid, gok, at, id, ok)
			}
		}
	}
}
