package runtime

import (
	"fmt"
	"math/bits"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// isCapField is what the kernel can print for a capability set: 1 to 16
// hex digits (render_cap_t prints exactly 16; fewer are accepted).
func isCapField(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// FuzzParseCapSet asserts of the /proc/PID/status capability parser:
//   - it succeeds exactly on 1 to 16 hex digits (no sign, no 0x, no
//     blanks: anything else is an error, never a panic);
//   - the set it gives, printed as the kernel prints it (%016x), parses
//     back to itself, and is the input itself up to case and leading zeros;
//   - Names names each set bit once, and CapSetOf of the known names plus
//     the bits named CAP_<n> gives the set back.
func FuzzParseCapSet(f *testing.F) {
	for _, s := range []string{"0000000000000000", "00000000a80425fb", "0000003fffffffff", "000001ffffffffff", "ffffffffffffffff", "", "0x10", "-1", "fffffffffffffffff", " 1"} {
		f.Add(s)
	}
	for _, b := range testutil.CorpusSeeds(f, "procfs/fixtures.ttar", func(p string) bool { return strings.HasSuffix(p, "/status") && strings.Contains(p, "/proc/") }) {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(k, "Cap") {
				f.Add(strings.TrimSpace(v))
			}
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCapSet(s)
		if (err == nil) != isCapField(s) {
			t.Fatalf("ParseCapSet(%q) = %v, %v", s, c, err)
		}
		if err != nil {
			return
		}
		printed := fmt.Sprintf("%016x", uint64(c))
		if back, err := ParseCapSet(printed); err != nil || back != c {
			t.Fatalf("%q: printed %s, parsed back %v, %v", s, printed, back, err)
		}
		if !strings.HasSuffix(printed, strings.ToLower(strings.TrimLeft(s, "0"))) {
			t.Fatalf("%q parsed as %s", s, printed)
		}
		names := c.Names()
		if len(names) != bits.OnesCount64(uint64(c)) || !strings.HasPrefix(c.String(), printed+" (") {
			t.Fatalf("%s: names %v, String %q", printed, names, c.String())
		}
		got, unknown := CapSetOf(names)
		for _, n := range unknown {
			var b int
			if _, err := fmt.Sscanf(n, "CAP_%d", &b); err != nil || b < 0 || b > 63 || got.Has(b) {
				t.Fatalf("%s: unknown name %q", printed, n)
			}
			got |= 1 << b
		}
		if got != c {
			t.Fatalf("%s: the names %v give %016x", printed, names, uint64(got))
		}
	})
}
