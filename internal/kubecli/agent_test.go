package kubecli

import (
	"strings"
	"testing"
)

// The agent refuses at start what it could never work with, with exit 2
// and the reason: no node name, a root with nothing to examine, an
// interval too short, an address it cannot listen on. (Its runs against a
// real API server are e2e/agent's.)
func TestAgentUsageErrors(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", "../../testdata/hosts/demo-h100x8-faults", "agent", "--metrics-only"}, "--node-name is empty"},
		{[]string{"--root", "../../testdata/hosts/demo-h100x8-faults", "agent", "--metrics-only", "--node-name", "n", "--interval", "10ms"}, "--interval"},
		{[]string{"--root", empty, "agent", "--metrics-only", "--node-name", "n"}, empty},
		{[]string{"--root", "../../testdata/hosts/demo-h100x8-faults", "agent", "--metrics-only", "--node-name", "n", "--metrics-address", "256.0.0.1:1"}, "--metrics-address"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

// Its help says what it writes.
func TestAgentHelpSaysWhatItWrites(t *testing.T) {
	stdout, _, code := run(t, "agent", "--help")
	if code != 0 || !strings.Contains(stdout, "WHAT IT WRITES: its own node's status") || !strings.Contains(stdout, "annotations") {
		t.Errorf("agent --help (exit %d) does not say what it writes:\n%s", code, stdout)
	}
}
