package pci

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// fixtureSeeds adds the first n files of the repository's host trees that
// match glob (relative to testdata/hosts) to the seed corpus.
func fixtureSeeds(f *testing.F, glob string, n int) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "testdata", "hosts", glob))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths[:min(n, len(paths))] {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
}

// corpusSeeds adds the files of a corpus archive whose path ends in one
// of names (at most n of them).
func corpusSeeds(f *testing.F, archive string, n int, names ...string) {
	f.Helper()
	seeds := testutil.CorpusSeeds(f, archive, func(p string) bool {
		for _, s := range names {
			if strings.HasSuffix(p, "/"+s) {
				return true
			}
		}
		return false
	})
	for _, b := range seeds[:min(n, len(seeds))] {
		f.Add(string(b))
	}
}

// resourceNumber is what one number of a `resource` line may be: at most
// 16 hex digits, with an optional 0x (resource_show writes "0x%016llx").
var resourceNumber = regexp.MustCompile(`^(0[xX])?[0-9a-fA-F]{1,16}$`)

// FuzzParseResources asserts of the sysfs `resource` parser:
//   - a parse that succeeds keeps one Resource per line, in order
//     (Index i on line i), at most maxResourceLines of them, and only from
//     input whose every line is three hex numbers of at most 64 bits;
//   - Size is 0 or End-Start+1;
//   - the kernel's own spelling of what was parsed parses back to it
//     (round trip);
//   - anything else, over-long input included, is an error, returned
//     without a panic.
func FuzzParseResources(f *testing.F) {
	f.Add("0x00000000fd800000 0x00000000fd803fff 0x0000000000140204\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n")
	f.Add("0x1f0 0x1f7 0x110\n0xc000 0xc00f 0x40101\n")
	f.Add("")
	f.Add("0x1 0x2\n")
	f.Add(strings.Repeat("0x0 0x0 0x0\n", maxResourceLines+1))
	fixtureSeeds(f, "*/sys/devices/*/*/*/resource", 4)
	corpusSeeds(f, "procfs/fixtures.ttar", 2, "resource")
	corpusSeeds(f, "procfs/sys-pci-drm-subset.tar.gz", 3, "resource")
	f.Fuzz(func(t *testing.T, s string) {
		res, err := ParseResources(s)
		if err != nil {
			if res != nil {
				t.Fatalf("resources %v with error %v", res, err)
			}
			return
		}
		if len(res) > maxResourceLines {
			t.Fatalf("%d resources, more than %d", len(res), maxResourceLines)
		}
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		if len(res) > 0 && len(lines) != len(res) {
			t.Fatalf("%d resources from %d lines", len(res), len(lines))
		}
		var back strings.Builder
		for i, r := range res {
			if r.Index != i {
				t.Fatalf("resource %d has index %d", i, r.Index)
			}
			if f := strings.Fields(lines[i]); len(f) != 3 || !resourceNumber.MatchString(f[0]) || !resourceNumber.MatchString(f[1]) || !resourceNumber.MatchString(f[2]) {
				t.Fatalf("line %q is not three hex numbers, and was read as %+v", lines[i], r)
			}
			if sz := r.Size(); sz != 0 && (r.End < r.Start || r.End-r.Start != sz-1) {
				t.Fatalf("%+v: size %d", r, sz)
			}
			fmt.Fprintf(&back, "0x%016x 0x%016x 0x%016x\n", r.Start, r.End, r.Flags)
		}
		again, err := ParseResources(back.String())
		if err != nil {
			t.Fatalf("%q, written back as %q: %v", s, back.String(), err)
		}
		if d := cmp.Diff(res, again); d != "" {
			t.Fatalf("round trip (-first +again):\n%s", d)
		}
	})
}

// FuzzParseAERStats asserts of the aer_dev_* and aer_rootport_total_err_*
// parser:
//   - a parse that succeeds is either a root port's total (one number, no
//     counts) or an aer_dev_* file: names without blanks, none of them a
//     TOTAL_ERR_* line, and at most 64 of them;
//   - what was parsed, written as the kernel writes it, parses back to it
//     (round trip);
//   - anything else, over-long input included, is an error, never a panic.
func FuzzParseAERStats(f *testing.F) {
	f.Add("RxErr 0\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 0\n")
	f.Add("Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nTOTAL_ERR_FATAL 0\n")
	f.Add("7\n")
	f.Add("RxErr 2\n")
	f.Add("RxErr 18446744073709551616\nTOTAL_ERR_COR 1\n")
	f.Add(strings.Repeat("X 1\n", 65) + "TOTAL_ERR_COR 65\n")
	fixtureSeeds(f, "*/sys/devices/*/*/aer_dev_*", 3)
	corpusSeeds(f, "procfs/fixtures.ttar", 3, "aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal")
	corpusSeeds(f, "procfs/sys-pci-drm-subset.tar.gz", 3, "aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseAERStats(s)
		if err != nil {
			return
		}
		if len(st.Counts) > maxAERLines {
			t.Fatalf("%d counts", len(st.Counts))
		}
		var back strings.Builder
		for _, c := range st.Counts {
			if c.Name == "" || strings.IndexFunc(c.Name, unicode.IsSpace) >= 0 || strings.HasPrefix(c.Name, "TOTAL_ERR_") {
				t.Fatalf("count named %q", c.Name)
			}
			fmt.Fprintf(&back, "%s %d\n", c.Name, c.Count)
		}
		if len(st.Counts) == 0 {
			fmt.Fprintf(&back, "%d\n", st.Total)
		} else {
			fmt.Fprintf(&back, "TOTAL_ERR_COR %d\n", st.Total)
		}
		again, err := ParseAERStats(back.String())
		if err != nil {
			t.Fatalf("%q, written back as %q: %v", s, back.String(), err)
		}
		if d := cmp.Diff(st, again); d != "" {
			t.Fatalf("round trip (-first +again):\n%s", d)
		}
	})
}

// A `resource` or aer_dev_* file of millions of lines is refused after the
// lines the kernel could have written, without splitting the rest: the
// work is bounded by the format, not by the input.
func TestResourceAndAERBoundHugeInput(t *testing.T) {
	huge := strings.Repeat("0x0 0x0 0x0\n", 1<<20) // 12 MiB, a million lines
	for name, parse := range map[string]func(string) error{
		"resource":      func(s string) error { _, err := ParseResources(s); return err },
		"aer_dev_ file": func(s string) error { _, err := ParseAERStats(s); return err },
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := parse(huge)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "more than") {
			t.Errorf("%s: a million lines: %v", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: %d bytes allocated to refuse it", name, n)
		}
	}
}
