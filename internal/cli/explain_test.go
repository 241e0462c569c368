package cli

import (
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
)

// explain knows every code a command can print: check's catalog and
// plugin test's, each once.
func TestExplainKnowsEveryCode(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range allCodes(nil) {
		if seen[c.Code] {
			t.Errorf("%s is in two catalogs", c.Code)
		}
		seen[c.Code] = true
	}
	for _, c := range deviceplugin.Codes {
		out, _, code := run(t, "explain", strings.ToLower(c.Code))
		if code != 0 || !strings.HasPrefix(out, c.Code+"  (layer 6") {
			t.Errorf("explain %s: exit %d, %q", c.Code, code, out)
		}
	}
	if _, ok := diagnose.LookupCode("KUBELET_PLUGIN_SOCKET_STALE"); !ok {
		t.Error("layer 6's codes are not in check's catalog")
	}
}

// The command lines accel-doctor hands to accel-doctor-kube before its
// own commands see them: plugin mock/test with --dra, global flags first
// or not; nothing else.
func TestWantsKube(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"plugin", "mock", "--dra", "--driver", "x"}, true},
		{[]string{"--root", "/host", "plugin", "test", "--dra=true"}, true},
		{[]string{"plugin", "mock", "--mode", "healthy"}, false},
		{[]string{"check", "--dra"}, false},
		{[]string{"plugin"}, false},
	} {
		if got := wantsKube(c.args); got != c.want {
			t.Errorf("%q: %v, want %v", c.args, got, c.want)
		}
	}
}
