package runtime

import (
	"regexp"
	"strings"
	"testing"
)

// The proposed codes are unique, complete, and name only accel-doctor
// commands that exist (the CLI's own test runs each with --help once the
// entries move into internal/diagnose).
func TestAppliedCodes(t *testing.T) {
	commands := map[string]bool{"check": true, "snapshot": true, "cgroup": true, "sandbox": true, "explain": true, "pci": true}
	span := regexp.MustCompile("`accel-doctor ([a-z]+)[^`]*`")
	seen := map[string]bool{}
	for _, c := range AppliedCodes {
		if seen[c.Code] {
			t.Errorf("%s twice", c.Code)
		}
		seen[c.Code] = true
		if !strings.HasPrefix(c.Code, "RUNTIME_") || c.Title == "" || c.Explain == "" || c.Decides == "" {
			t.Errorf("%s: incomplete", c.Code)
		}
		switch c.Status {
		case "PASS":
		case "WARN", "FAIL", "NOT_RUN":
			if c.Remediation == "" {
				t.Errorf("%s: a %s without a remediation", c.Code, c.Status)
			}
		default:
			t.Errorf("%s: status %q", c.Code, c.Status)
		}
		for _, m := range span.FindAllStringSubmatch(c.Explain+c.Remediation, -1) {
			if !commands[m[1]] {
				t.Errorf("%s names `accel-doctor %s`, not a command", c.Code, m[1])
			}
		}
	}
}
