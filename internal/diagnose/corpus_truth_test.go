package diagnose

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const truthDir = "../../testdata/corpus-truth"

// corpusGoldens are the captures whose text report is kept in
// testdata/golden, beside the reports of our own fixtures.
var corpusGoldens = map[string]string{
	"ghw/linux-amd64-accel-nvidia.tar.gz":    "corpus-ghw-p100.txt",
	"hwloc/linux/nvidiagpunumanodes.tar.bz2": "corpus-hwloc-power9-6xv100.txt",
}

// truthRow is one line of a truth table (testdata/corpus-truth/README.md).
type truthRow struct {
	address, ids, class, kind, driver, numa, link, source string
	line                                                  int
}

type truthTable struct {
	file, capture string
	healthy       bool
	rows          []truthRow
}

func readTruth(t *testing.T, file string) truthTable {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tt := truthTable{file: filepath.Base(file)}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# capture: "); ok {
			tt.capture = v
		}
		if v, ok := strings.CutPrefix(line, "# healthy: "); ok {
			tt.healthy = strings.HasPrefix(v, "yes")
		}
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "address\t") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) != 8 {
			t.Fatalf("%s:%d: %d columns, want 8", file, n, len(c))
		}
		tt.rows = append(tt.rows, truthRow{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], n})
	}
	if err := sc.Err(); err != nil || tt.capture == "" {
		t.Fatalf("%s: %v, capture %q", file, err, tt.capture)
	}
	return tt
}

// TestCorpusTruth runs the full check over every capture of the corpus
// that holds a PCI tree: no check may crash; what the readers find must be
// what the capture's own independent evidence says (the truth tables);
// the capture of a working machine has no FAIL; and two captures keep
// golden reports.
func TestCorpusTruth(t *testing.T) {
	dir := testutil.CorpusDir(t)
	files, _ := filepath.Glob(filepath.Join(truthDir, "*.tsv"))
	tables := map[string]truthTable{}
	for _, f := range files {
		tt := readTruth(t, f)
		tables[tt.capture] = tt
	}
	var archives []string
	for _, pat := range []string{"ghw/*.tar.gz", "hwloc/linux/*.tar.bz2", "nfd/*.tar.gz", "procfs/*.tar.gz"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		archives = append(archives, m...)
	}
	if len(archives) < 10 {
		t.Fatalf("only %d archives in the corpus", len(archives))
	}
	for _, a := range archives {
		rel, _ := filepath.Rel(dir, a)
		rel = filepath.ToSlash(rel)
		t.Run(rel, func(t *testing.T) {
			tree := testutil.Unpack(t, a)
			if tree == "" {
				if _, ok := tables[rel]; ok {
					t.Fatal("a truth table for a capture without sys/bus/pci")
				}
				t.Skip("no sys/bus/pci in this capture")
			}
			tt, ok := tables[rel]
			if !ok {
				t.Fatalf("no truth table in %s for this capture with a PCI tree", truthDir)
			}
			delete(tables, rel)
			e := NewEnv(hostfs.MustNew(tree), Options{})
			rep := runFixtureEnv(t, e, rel)
			checkTruth(t, e, tt)
			if tt.healthy {
				for _, f := range rep.Findings {
					if f.Status == report.Fail {
						t.Errorf("a working machine's capture has a FAIL: %s %s: %s", f.Code, f.Subject, f.Summary)
					}
				}
			}
			if g, ok := corpusGoldens[rel]; ok {
				goldenText(t, g, rep)
			}
		})
	}
	for c := range tables {
		t.Errorf("truth table for %s, which is not in the corpus", c)
	}
}

// checkTruth asserts every row of a table against the readers, and that
// the accelerators found are exactly the table's.
func checkTruth(t *testing.T, e *Env, tt truthTable) {
	t.Helper()
	inv, err := e.PCI()
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, r := range tt.rows {
		if r.kind != "-" {
			want = append(want, r.address)
		}
		a, err := pci.ParseAddress(r.address)
		d := inv.Lookup(a)
		if err != nil || d == nil {
			t.Errorf("%s:%d: %s not found by the scan (%v)", tt.file, r.line, r.address, err)
			continue
		}
		for _, msg := range truthDiffs(e, d, r) {
			t.Errorf("%s:%d: %s: %s (source: %s)", tt.file, r.line, r.address, msg, r.source)
		}
	}
	for _, d := range e.Accelerators() {
		got = append(got, d.Address.String())
	}
	if !slices.Equal(want, got) {
		t.Errorf("%s: accelerators %v, want %v", tt.file, got, want)
	}
}

// truthDiffs compares one function with its row.
func truthDiffs(e *Env, d *pci.Device, r truthRow) []string {
	var out []string
	diff := func(what, got, want string) {
		if got != want {
			out = append(out, fmt.Sprintf("%s %q, the capture's evidence says %q", what, got, want))
		}
	}
	if r.ids == "-" {
		if !strings.Contains(d.IDString(), "????") {
			out = append(out, "ids "+d.IDString()+" read where the capture holds none")
		}
	} else {
		diff("ids", d.IDString(), r.ids)
	}
	diff("class", fmt.Sprintf("%04x", d.Class>>8), r.class)
	kind, ok := e.accelKind(d)
	if !ok {
		kind = "-"
	}
	diff("kind", kind, r.kind)
	if r.driver != "-" {
		diff("driver", bindingWord(e.Binding(d)), r.driver)
	}
	if r.numa != "-" {
		got := "absent"
		if n := e.reportNUMA(d); n != nil {
			got = strconv.Itoa(*n)
		} else if d.NUMANode != nil {
			got = strconv.Itoa(*d.NUMANode)
		}
		diff("NUMA node", got, r.numa)
	}
	if r.link != "-" {
		diff("link", hwlocBandwidth(d.Link), r.link)
	}
	return out
}

// bindingWord is a binding in the truth tables' words.
func bindingWord(b driver.Binding) string {
	switch {
	case b.State == driver.BindUnknown:
		return "unknown"
	case b.State == driver.Unbound:
		return "none"
	case b.Driver == "":
		return "bound"
	}
	return b.Driver
}

// hwlocBandwidth prints a trained link as hwloc does (GB/s, two decimals):
// transfers per second times lanes, less the line encoding (8b/10b up to
// 5 GT/s, 128b/130b from 8 GT/s, PCIe 3.0 spec 4.2), over 8 bits.
func hwlocBandwidth(l pci.Link) string {
	if l.CurrentSpeed == nil || l.CurrentWidth == nil || !l.CurrentSpeed.Known() {
		return "unknown"
	}
	enc := 128.0 / 130
	if l.CurrentSpeed.MTps <= 5000 {
		enc = 8.0 / 10
	}
	gbs := float64(l.CurrentSpeed.MTps) * float64(*l.CurrentWidth) * enc / 8 / 1000
	return fmt.Sprintf("%.2fGB/s", gbs)
}
