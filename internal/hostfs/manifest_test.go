package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// majorMinor is what dev_show writes (drivers/base/core.c: "%u:%u\n")
// and a /dev/char link is named: decimal digits, a colon, decimal digits.
var majorMinor = regexp.MustCompile(`^[0-9]+:[0-9]+$`)

// FuzzParseMajorMinor asserts of the "MAJOR:MINOR" parser (sysfs `dev`
// files, /dev/char and /dev/block names, manifest entries):
//   - it succeeds only on two decimal numbers around one colon (blanks
//     around them allowed: a `dev` file ends in a newline), and on every
//     such pair that a dev_t holds;
//   - what it gives is a Linux dev_t's: a 12-bit major, a 20-bit minor
//     (kdev_t.h), that packs into a dev_t and unpacks to itself (MKDEV,
//     MAJOR, MINOR of x/sys/unix);
//   - the pair, written back as the kernel writes it (Node.Dev), parses
//     to itself (round trip);
//   - anything else is an error, never a panic.
func FuzzParseMajorMinor(f *testing.F) {
	for _, s := range []string{"195:0\n", "195:255", "226:128\n", "511:0", "4095:1048575", "4096:0", "0:1048576", "1:2:3", ":", "-1:0", "+1:0", " 8:0 ", "１:2"} {
		f.Add(s)
	}
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "hosts", "*", "sys", "devices", "virtual", "*", "*", "dev"))
	for _, p := range paths[:min(3, len(paths))] {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, b := range testutil.CorpusSeeds(f, "ghw/linux-amd64-accel-nvidia.tar.gz", func(p string) bool { return strings.HasSuffix(p, "/dev") }) {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		maj, min, err := ParseMajorMinor(s)
		form := majorMinor.MatchString(strings.TrimSpace(s))
		if err != nil {
			if form {
				var a, b uint64
				if _, serr := fmt.Sscanf(strings.TrimSpace(s), "%d:%d", &a, &b); serr == nil && a < 1<<12 && b < 1<<20 {
					t.Fatalf("%q refused: %v", s, err)
				}
			}
			return
		}
		if !form {
			t.Fatalf("%q is not MAJOR:MINOR, and parsed as %d:%d", s, maj, min)
		}
		if maj >= 1<<12 || min >= 1<<20 {
			t.Fatalf("%q: %d:%d is out of a dev_t's range", s, maj, min)
		}
		dev := unix.Mkdev(maj, min)
		if unix.Major(dev) != maj || unix.Minor(dev) != min {
			t.Fatalf("%d:%d packs into %#x, which unpacks to %d:%d", maj, min, dev, unix.Major(dev), unix.Minor(dev))
		}
		back := Node{Major: maj, Minor: min}.Dev()
		if m2, n2, err := ParseMajorMinor(back); err != nil || m2 != maj || n2 != min {
			t.Fatalf("%d:%d written as %q parsed back as %d:%d, %v", maj, min, back, m2, n2, err)
		}
	})
}
