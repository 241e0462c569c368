package cli

import (
	"regexp"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// TestRemediationCommandsExist: every `accel-doctor ...` command that a
// catalog entry names (in its explanation or its fix) is a command of this
// binary, with flags it has: each is run with --help, which parses the
// flags and runs nothing.
func TestRemediationCommandsExist(t *testing.T) {
	span := regexp.MustCompile("`accel-doctor ([^`]*)`")
	n := 0
	for _, c := range diagnose.Codes() {
		for _, m := range span.FindAllStringSubmatch(c.Explain+"\n"+c.Remediation, -1) {
			args := testutil.SplitArgs(m[1])
			_, stderr, code := run(t, append(args, "--help")...)
			if code != 0 {
				t.Errorf("%s names `accel-doctor %s`, which does not parse: %s", c.Code, m[1], stderr)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no accel-doctor command found in the catalog: the pattern is wrong")
	}
}
