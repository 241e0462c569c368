package runtime

import (
	"strings"
	"testing"
)

// The proposed codes are unique and complete. That the commands they name
// exist is held by internal/cli's TestRemediationCommandsExist, which runs
// each with --help (the diagnose catalog takes these entries).
func TestAppliedCodes(t *testing.T) {
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
	}
}
