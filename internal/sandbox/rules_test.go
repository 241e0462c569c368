package sandbox

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
)

func sbRule(t testing.TB, s string, allow bool) config.Rule {
	t.Helper()
	r, err := cgroup.ParseRuleFlag(s, allow)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRuleString(t *testing.T) {
	if r := sbRule(t, "c 1:3 r", false); r.Allow || RuleString(r) != "deny c 1:3 r" {
		t.Errorf("deny rule: %+v %q", r, RuleString(r))
	}
	if s := RuleString(sbRule(t, "a *:* rwm", true)); s != "allow a" {
		t.Errorf("RuleString(a) = %q", s)
	}
}

// FuzzRuleFlagValid: every rule the flag parser accepts is one the
// sandbox can apply.
func FuzzRuleFlagValid(f *testing.F) {
	for _, s := range []string{"a", "c 195:* rw", "b 8:0 r", "c *:* m", "a *:* rwm", "c 1:3 rwm", "c 1:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := cgroup.ParseRuleFlag(s, false)
		if err != nil {
			return
		}
		if err := validateRule(r); err != nil {
			t.Fatalf("ParseRuleFlag(%q) accepted a rule the sandbox rejects: %v", s, err)
		}
	})
}

func TestSandboxAllows(t *testing.T) {
	rules := []config.Rule{
		sbRule(t, "c 1:* rw", true),
		sbRule(t, "c 1:5 w", false),
		sbRule(t, "b *:* m", true),
	}
	tests := []struct {
		def   Default
		typ   byte
		maj   int64
		min   int64
		perms string
		want  bool
	}{
		{DefaultDeny, 'c', 1, 3, "rw", true},
		{DefaultDeny, 'c', 1, 3, "m", false},
		{DefaultDeny, 'c', 1, 5, "r", true},
		{DefaultDeny, 'c', 1, 5, "w", false}, // the later deny wins
		{DefaultDeny, 'c', 1, 5, "rw", false},
		{DefaultDeny, 'b', 1, 3, "r", false},
		{DefaultDeny, 'b', 9, 9, "m", true},
		{DefaultAllow, 'c', 2, 0, "rwm", true},
		{DefaultAllow, 'c', 1, 5, "w", false},
	}
	for _, tc := range tests {
		if got := Allows(tc.def, rules, tc.typ, tc.maj, tc.min, tc.perms); got != tc.want {
			t.Errorf("default %s, %c %d:%d %s = %v, want %v", tc.def, tc.typ, tc.maj, tc.min, tc.perms, got, tc.want)
		}
	}
	// An 'a' rule overrides everything before it.
	after := append(append([]config.Rule{}, rules...), sbRule(t, "a", false))
	if Allows(DefaultAllow, after, 'c', 1, 3, "r") {
		t.Error("deny a after allow c 1:* rw: 1:3 r allowed")
	}
}

func TestSandboxV1Plan(t *testing.T) {
	t.Run("expressible", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:3 rw", true), sbRule(t, "c 195:* rwm", true), sbRule(t, "c 1:3 w", false)}
		plan, warn, err := v1Plan(DefaultDeny, rules)
		if err != nil {
			t.Fatal(err)
		}
		want := []V1Write{{"devices.deny", "a"}, {"devices.allow", "c 1:3 rw"},
			{"devices.allow", "c 195:* rwm"}, {"devices.deny", "c 1:3 w"}}
		if diff := cmp.Diff(want, plan); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}
		if len(warn) != 0 {
			t.Errorf("warnings: %q", warn)
		}
	})
	t.Run("deny inside a wider allow", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:* rw", true), sbRule(t, "c 1:5 w", false)}
		_, _, err := v1Plan(DefaultDeny, rules)
		if err == nil || !strings.Contains(err.Error(), "c 1:5 w they deny it but the v1 devices controller would allow it") {
			t.Errorf("err = %v, want the v1 limitation named", err)
		}
	})
	t.Run("allow inside a wider deny", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:* rw", false), sbRule(t, "c 1:3 r", true)}
		if _, _, err := v1Plan(DefaultAllow, rules); err == nil {
			t.Error("no error")
		}
	})
	t.Run("multi-bit warning", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:* r", true), sbRule(t, "c 1:3 w", true)}
		_, warn, err := v1Plan(DefaultDeny, rules)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"cgroup v1: c 1:3 rw is denied, unlike the rules' bit-by-bit reading (the v1 controller needs one rule granting every bit of an access)"}
		if diff := cmp.Diff(want, warn); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
	})
	t.Run("a resets", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:3 r", true), sbRule(t, "a", false), sbRule(t, "c 1:5 r", true)}
		plan, _, err := v1Plan(DefaultAllow, rules)
		if err != nil {
			t.Fatal(err)
		}
		want := []V1Write{{"devices.allow", "a"}, {"devices.allow", "c 1:3 r"}, {"devices.deny", "a"}, {"devices.allow", "c 1:5 r"}}
		if diff := cmp.Diff(want, plan); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}
	})
}
