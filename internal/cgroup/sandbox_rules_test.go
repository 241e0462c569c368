package cgroup

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups/devices/config"
)

func sbRule(t testing.TB, s string, allow bool) config.Rule {
	t.Helper()
	r, err := ParseRuleFlag(s, allow)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseRuleFlag(t *testing.T) {
	w := int64(config.Wildcard)
	tests := []struct {
		in   string
		want config.Rule
	}{
		{"a", config.Rule{Type: 'a', Major: w, Minor: w, Permissions: "rwm", Allow: true}},
		{" a  *:*  rwm ", config.Rule{Type: 'a', Major: w, Minor: w, Permissions: "rwm", Allow: true}},
		{"c 195:* rw", config.Rule{Type: 'c', Major: 195, Minor: w, Permissions: "rw", Allow: true}},
		{"b 8:0 r", config.Rule{Type: 'b', Major: 8, Minor: 0, Permissions: "r", Allow: true}},
		{"c *:* m", config.Rule{Type: 'c', Major: w, Minor: w, Permissions: "m", Allow: true}},
		{"c 1:3 mwr", config.Rule{Type: 'c', Major: 1, Minor: 3, Permissions: "rwm", Allow: true}},
		{"c 4095:1048575 w", config.Rule{Type: 'c', Major: 4095, Minor: 1048575, Permissions: "w", Allow: true}},
	}
	for _, tc := range tests {
		got, err := ParseRuleFlag(tc.in, true)
		if err != nil {
			t.Errorf("ParseRuleFlag(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseRuleFlag(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	if r := sbRule(t, "c 1:3 r", false); r.Allow || SandboxRuleString(r) != "deny c 1:3 r" {
		t.Errorf("deny rule: %+v %q", r, SandboxRuleString(r))
	}
	if s := SandboxRuleString(sbRule(t, "a *:* rwm", true)); s != "allow a" {
		t.Errorf("SandboxRuleString(a) = %q", s)
	}
	for _, bad := range []string{"", "x", "a 1:3 r", "a *:*", "c", "c 1:3", "c 1 r", "c 1:3 rx", "c 1:3 rr",
		"c -1:3 r", "c 4096:0 r", "c 1:1048576 r", "c 1:+3 r", "c 1:3 r extra", "cc 1:3 r", "c 1:3 ",
		"p 1:3 r", "c :3 r", "c 99999999999999999999:0 r"} {
		if r, err := ParseRuleFlag(bad, true); err == nil {
			t.Errorf("ParseRuleFlag(%q) = %+v, want an error", bad, r)
		}
	}
}

// FuzzParseRuleFlag: never panics, and every accepted rule is valid for the
// generator and survives a round trip through its cgroup string.
func FuzzParseRuleFlag(f *testing.F) {
	for _, s := range []string{"a", "c 195:* rw", "b 8:0 r", "c *:* m", "a *:* rwm", "c 1:3 rwm", "c 1:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRuleFlag(s, false)
		if err != nil {
			return
		}
		if err := genValidateRule(r); err != nil {
			t.Fatalf("ParseRuleFlag(%q) accepted a rule the generator rejects: %v", s, err)
		}
		back, err := ParseRuleFlag(r.CgroupString(), false)
		if err != nil || back != r {
			t.Fatalf("round trip of %q via %q: %+v, %v", s, r.CgroupString(), back, err)
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
		def   SandboxDefault
		typ   byte
		maj   int64
		min   int64
		perms string
		want  bool
	}{
		{SandboxDefaultDeny, 'c', 1, 3, "rw", true},
		{SandboxDefaultDeny, 'c', 1, 3, "m", false},
		{SandboxDefaultDeny, 'c', 1, 5, "r", true},
		{SandboxDefaultDeny, 'c', 1, 5, "w", false}, // the later deny wins
		{SandboxDefaultDeny, 'c', 1, 5, "rw", false},
		{SandboxDefaultDeny, 'b', 1, 3, "r", false},
		{SandboxDefaultDeny, 'b', 9, 9, "m", true},
		{SandboxDefaultAllow, 'c', 2, 0, "rwm", true},
		{SandboxDefaultAllow, 'c', 1, 5, "w", false},
	}
	for _, tc := range tests {
		if got := SandboxAllows(tc.def, rules, tc.typ, tc.maj, tc.min, tc.perms); got != tc.want {
			t.Errorf("default %s, %c %d:%d %s = %v, want %v", tc.def, tc.typ, tc.maj, tc.min, tc.perms, got, tc.want)
		}
	}
	// An 'a' rule overrides everything before it.
	after := append(append([]config.Rule{}, rules...), sbRule(t, "a", false))
	if SandboxAllows(SandboxDefaultAllow, after, 'c', 1, 3, "r") {
		t.Error("deny a after allow c 1:* rw: 1:3 r allowed")
	}
}

func TestSandboxV1Plan(t *testing.T) {
	t.Run("expressible", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:3 rw", true), sbRule(t, "c 195:* rwm", true), sbRule(t, "c 1:3 w", false)}
		plan, warn, err := sandboxV1Plan(SandboxDefaultDeny, rules)
		if err != nil {
			t.Fatal(err)
		}
		want := []SandboxWrite{{"devices.deny", "a"}, {"devices.allow", "c 1:3 rw"},
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
		_, _, err := sandboxV1Plan(SandboxDefaultDeny, rules)
		if err == nil || !strings.Contains(err.Error(), "c 1:5 w they deny it but the v1 devices controller would allow it") {
			t.Errorf("err = %v, want the v1 limitation named", err)
		}
	})
	t.Run("allow inside a wider deny", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:* rw", false), sbRule(t, "c 1:3 r", true)}
		if _, _, err := sandboxV1Plan(SandboxDefaultAllow, rules); err == nil {
			t.Error("no error")
		}
	})
	t.Run("multi-bit warning", func(t *testing.T) {
		rules := []config.Rule{sbRule(t, "c 1:* r", true), sbRule(t, "c 1:3 w", true)}
		_, warn, err := sandboxV1Plan(SandboxDefaultDeny, rules)
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
		plan, _, err := sandboxV1Plan(SandboxDefaultAllow, rules)
		if err != nil {
			t.Fatal(err)
		}
		want := []SandboxWrite{{"devices.allow", "a"}, {"devices.allow", "c 1:3 r"}, {"devices.deny", "a"}, {"devices.allow", "c 1:5 r"}}
		if diff := cmp.Diff(want, plan); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}
	})
}
