package sandbox

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
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

// tableRules parses a testutil.DeviceRuleCase's rules.
func tableRules(t testing.TB, c testutil.DeviceRuleCase) []config.Rule {
	t.Helper()
	var rules []config.Rule
	for _, s := range c.Rules {
		verb, rest, _ := strings.Cut(s, " ")
		rules = append(rules, sbRule(t, rest, verb == "allow"))
	}
	return rules
}

func TestV1Plan(t *testing.T) {
	rules := []config.Rule{sbRule(t, "c 1:3 rw", true), sbRule(t, "c 195:* rwm", true), sbRule(t, "c 1:3 w", false), sbRule(t, "a", true)}
	want := []V1Write{{"devices.deny", "a"}, {"devices.allow", "c 1:3 rw"},
		{"devices.allow", "c 195:* rwm"}, {"devices.deny", "c 1:3 w"}, {"devices.allow", "a"}}
	if diff := cmp.Diff(want, v1Plan(DefaultDeny, rules)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

func TestPolicy(t *testing.T) {
	parse := func(ss ...string) []config.Rule {
		var rules []config.Rule
		for _, s := range ss {
			verb, rest, _ := strings.Cut(s, " ")
			rules = append(rules, sbRule(t, rest, verb == "allow"))
		}
		return rules
	}
	for _, tc := range []struct {
		name  string
		def   Default
		rules []string
		err   string   // part of the error, "" for none
		warn  []string // parts of the warnings, in order
	}{
		{name: "plain", def: DefaultDeny, rules: []string{"allow c 1:3 rw", "allow c 195:* rwm", "deny c 1:3 w"}},
		// No per-bit reading any more, so nothing to warn about:
		// v1 and v2 both deny the O_RDWR open of 1:9.
		{name: "one rule must cover the access", def: DefaultDeny, rules: []string{"allow c 1:* r", "allow c 1:9 w"}},
		{name: "deny inside a wider allow", def: DefaultDeny, rules: []string{"allow c 1:* rw", "deny c 1:5 w"},
			err: `rule "deny c 1:5 w" cannot take access back from part of the earlier, wider "c 1:* rw"`},
		{name: "allow inside a wider deny", def: DefaultAllow, rules: []string{"deny c 1:* rw", "allow c 1:3 r"},
			err: "runc refuses the rule set"},
		{name: "wider deny spares a narrower allow", def: DefaultDeny, rules: []string{"allow c 1:3 rw", "deny c 1:* w"},
			warn: []string{`"deny c 1:* w" takes nothing from the earlier, narrower "c 1:3 rw"`}},
		{name: "v1 and v2 differ over allow", def: DefaultAllow, rules: []string{"deny c 1:9 w"},
			warn: []string{"cgroup v1 and v2 differ on c 1:9 rw:"}},
		{name: "a resets to deny: no difference", def: DefaultAllow, rules: []string{"deny c 1:9 w", "deny a", "allow c 1:3 r"}},
	} {
		_, warn, err := policy(tc.def, parse(tc.rules...))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.err)
		}
		if len(warn) != len(tc.warn) {
			t.Errorf("%s: warnings %q, want %d", tc.name, warn, len(tc.warn))
			continue
		}
		for i, w := range tc.warn {
			if !strings.Contains(warn[i], w) {
				t.Errorf("%s: warning %q lacks %q", tc.name, warn[i], w)
			}
		}
	}
}

// TestPolicyTableWarnings: the v1/v2 warning appears exactly for the
// shared table's rule sets that have a 'P' entry (a device where the
// kernel's v1 controller and runc's program were seen to differ).
func TestPolicyTableWarnings(t *testing.T) {
	for _, c := range testutil.DeviceRuleCases {
		_, warn, err := policy(Default(c.Default), tableRules(t, c))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		differ := false
		for _, w := range c.Want {
			differ = differ || strings.Contains(w, "P")
		}
		warned := slices.ContainsFunc(warn, func(w string) bool { return strings.Contains(w, "cgroup v1 and v2 differ") })
		if warned != differ {
			t.Errorf("%s: v1/v2 warning %v, want %v (warnings %q)", c.Name, warned, differ, warn)
		}
	}
}
