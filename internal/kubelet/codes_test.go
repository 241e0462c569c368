package kubelet

import (
	"regexp"
	"strings"
	"testing"
)

// The proposed codes are unique, say what they are for, and their
// remediations name only commands that exist.
func TestProposedCodes(t *testing.T) {
	commands := map[string]bool{"kubectl": true, "systemctl": true, "journalctl": true, "crictl": true, "ls": true, "rm": true, "nvidia-smi": true, "accel-doctor": true}
	code := regexp.MustCompile(`^KUBELET_[A-Z0-9_]+$`)
	quoted := regexp.MustCompile("`([^`]+)`")
	seen := map[string]bool{}
	for _, c := range Codes {
		if !code.MatchString(c.Code) || seen[c.Code] {
			t.Errorf("%q: not a KUBELET_ code, or twice", c.Code)
		}
		seen[c.Code] = true
		if c.Title == "" || c.Explain == "" || c.Status == "" || c.Facts == "" {
			t.Errorf("%s: title, explanation, status or facts missing", c.Code)
		}
		if c.Status != "PASS" && c.Remediation == "" {
			t.Errorf("%s: a non-PASS code without remediation", c.Code)
		}
		for _, m := range quoted.FindAllStringSubmatch(c.Remediation, -1) {
			if f := strings.Fields(m[1]); len(f) == 0 || !commands[f[0]] {
				t.Errorf("%s: %q is not a command the remediations may name", c.Code, m[1])
			}
		}
	}
}
