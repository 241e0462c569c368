package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
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
			args := splitArgs(m[1])
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

// splitArgs splits like a shell, for the simple quoting remediations use.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	quote := rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote == 0 && r == ' ':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
