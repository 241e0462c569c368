package cgroup

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups/devices/config"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// flagRule parses "allow c 1:* r" / "deny a".
func flagRule(t testing.TB, s string) config.Rule {
	t.Helper()
	verb, rest, _ := strings.Cut(s, " ")
	if verb != "allow" && verb != "deny" {
		t.Fatalf("rule %q: want allow or deny first", s)
	}
	r, err := ParseRuleFlag(rest, verb == "allow")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func applyAll(t testing.TB, defaultAllow bool, rules ...string) *DeviceRules {
	t.Helper()
	s := NewDeviceRules(defaultAllow)
	for _, r := range rules {
		if err := s.Apply(flagRule(t, r)); err != nil {
			t.Fatalf("Apply(%q): %v", r, err)
		}
	}
	return s
}

var tableAccess = map[string]Access{"r": AccessRead, "w": AccessWrite, "rw": AccessRead | AccessWrite, "m": AccessMknod}

// wantFor reads testutil's expectation letter for enforcer e.
func wantFor(t testing.TB, letter byte, e Enforcer) bool {
	t.Helper()
	switch letter {
	case 'Y':
		return true
	case 'N':
		return false
	case 'P':
		return e == EnforcerV2
	}
	t.Fatalf("bad expectation letter %q", letter)
	return false
}

// forEachTuple calls f for every (case, node, access) of testutil's table.
func forEachTuple(t *testing.T, f func(t *testing.T, c testutil.DeviceRuleCase, dev DeviceRef, acc Access, want byte)) {
	n := 0
	for _, c := range testutil.DeviceRuleCases {
		t.Run(c.Name, func(t *testing.T) {
			for _, node := range testutil.DeviceRuleNodes {
				key := fmt.Sprintf("%d:%d", node.Major, node.Minor)
				want := c.Want[key]
				if len(want) != len(testutil.DeviceRuleAccesses) {
					t.Fatalf("%s: want %q has %d letters, want %d", key, want, len(want), len(testutil.DeviceRuleAccesses))
				}
				for i, a := range testutil.DeviceRuleAccesses {
					f(t, c, DeviceRef{'c', node.Major, node.Minor}, tableAccess[a], want[i])
					n++
				}
			}
		})
	}
	if n < 50 {
		t.Errorf("only %d tuples", n)
	}
}

// TestDeviceRulesTable: the evaluator decides every tuple of the shared
// table as the kernel's v1 controller and runc's v2 program do (the
// sandbox's real-kernel test checks the same table on real processes).
func TestDeviceRulesTable(t *testing.T) {
	forEachTuple(t, func(t *testing.T, c testutil.DeviceRuleCase, dev DeviceRef, acc Access, want byte) {
		s := applyAll(t, c.Default == "allow", c.Rules...)
		for _, e := range []Enforcer{EnforcerV1, EnforcerV2} {
			if got := s.Decide(dev, acc, e).Allowed; got != wantFor(t, want, e) {
				t.Errorf("%s %s under %s: allowed=%v, want %c", dev, acc, e, got, want)
			}
		}
	})
}

// TestV1EvaluateTable runs the v1 evaluator over the devices.list the
// kernel shows for each default-deny case of the table (its exception list).
func TestV1EvaluateTable(t *testing.T) {
	forEachTuple(t, func(t *testing.T, c testutil.DeviceRuleCase, dev DeviceRef, acc Access, want byte) {
		s := applyAll(t, c.Default == "allow", c.Rules...)
		if s.DefaultAllow {
			return // devices.list shows "a *:* rwm": nothing to evaluate
		}
		var list strings.Builder
		for _, x := range s.Exceptions {
			list.WriteString(x.String() + "\n")
		}
		d := v1Policy(t, list.String()).Evaluate(dev, acc)
		if !d.Known || d.Allowed != wantFor(t, want, EnforcerV1) {
			t.Errorf("%s %s over %q: %+v, want %c", dev, acc, list.String(), d, want)
		}
	})
}

// TestSpecDecisionTable runs the drift check's model of runc over the
// table, each case written as an OCI spec's linux.resources.devices.
func TestSpecDecisionTable(t *testing.T) {
	forEachTuple(t, func(t *testing.T, c testutil.DeviceRuleCase, dev DeviceRef, acc Access, want byte) {
		spec := []specs.LinuxDeviceCgroup{{Allow: c.Default == "allow", Access: "rwm"}}
		for _, s := range c.Rules {
			r := flagRule(t, s)
			sr := specs.LinuxDeviceCgroup{Allow: r.Allow, Type: string(r.Type), Access: string(r.Permissions)}
			if r.Major != config.Wildcard {
				sr.Major = i64(r.Major)
			}
			if r.Minor != config.Wildcard {
				sr.Minor = i64(r.Minor)
			}
			spec = append(spec, sr)
		}
		for _, e := range []Enforcer{EnforcerV1, EnforcerV2} {
			got, by, err := SpecDecision(spec, dev, acc, e)
			if err != nil || got != wantFor(t, want, e) {
				t.Errorf("%s %s under %s: allowed=%v by %q, %v; want %c", dev, acc, e, got, by, err, want)
			}
		}
	})
}

func TestDeviceRulesApply(t *testing.T) {
	s := applyAll(t, false, "allow c 1:3 r", "allow c 1:3 w", "allow c 195:* rwm", "deny c 195:* m", "allow b *:* m")
	want := []DeviceException{
		{Type: 'c', Major: 1, Minor: 3, Access: AccessRead | AccessWrite, Rule: 1},
		{Type: 'c', Major: 195, Minor: config.Wildcard, Access: AccessRead | AccessWrite, Rule: 2},
		{Type: 'b', Major: config.Wildcard, Minor: config.Wildcard, Access: AccessMknod, Rule: 4},
	}
	if d := cmp.Diff(want, s.Exceptions); d != "" {
		t.Errorf("exceptions (-want +got):\n%s", d)
	}
	// Taking every access away removes the exception.
	if err := s.Apply(flagRule(t, "deny c 1:3 rw")); err != nil || len(s.Exceptions) != 2 {
		t.Errorf("after deny c 1:3 rw: %v, %v", s.Exceptions, err)
	}
	if err := s.Apply(flagRule(t, "allow a")); err != nil || !s.DefaultAllow || len(s.Exceptions) != 0 || s.DefaultRule != 6 {
		t.Errorf("after allow a: %+v, %v", s, err)
	}
	for _, bad := range []config.Rule{
		{Type: 'x', Permissions: "r"},
		{Type: 'c', Major: 1, Minor: 3, Permissions: ""},
		{Type: 'c', Major: 1, Minor: 3, Permissions: "rr"},
		{Type: 'c', Major: -2, Minor: 3, Permissions: "r"},
		{Type: 'c', Major: 1, Minor: 1 << 33, Permissions: "r"},
	} {
		if err := NewDeviceRules(false).Apply(bad); err == nil {
			t.Errorf("Apply(%+v): no error", bad)
		}
	}
}

// TestDeviceRulesHole: a rule with the default's verdict inside a wider
// exception that holds some of its access is what runc refuses and the
// kernel ignores.
func TestDeviceRulesHole(t *testing.T) {
	for _, tc := range []struct {
		def   bool
		rules []string
		hole  bool
	}{
		{false, []string{"allow c 1:* rw", "deny c 1:5 w"}, true},
		{false, []string{"allow c *:5 rw", "deny c 1:5 r"}, true},
		{false, []string{"allow c *:* m", "deny c 1:5 m"}, true},
		{true, []string{"deny c 1:* rw", "allow c 1:3 r"}, true},
		{false, []string{"allow c 1:* r", "deny c 1:5 w"}, false},  // no access in common
		{false, []string{"allow c 1:5 rw", "deny c 1:* w"}, false}, // wider than the line: a no-op, not a hole
		{false, []string{"allow c 1:* rw", "deny c 1:* w"}, false}, // identical: taken off
		{false, []string{"allow b 1:* rw", "deny c 1:5 w"}, false}, // another type
	} {
		s := NewDeviceRules(tc.def)
		var err error
		for _, r := range tc.rules {
			if err = s.Apply(flagRule(t, r)); err != nil {
				break
			}
		}
		var he *HoleError
		if got := errors.As(err, &he); got != tc.hole {
			t.Errorf("%q: hole=%v (%v), want %v", tc.rules, got, err, tc.hole)
		}
		if he != nil && !strings.Contains(err.Error(), "runc refuses") {
			t.Errorf("%q: error %q does not say what runc does", tc.rules, err)
		}
	}
	// After a hole the state is the kernel's: 1:5 w still allowed.
	s := NewDeviceRules(false)
	s.Apply(flagRule(t, "allow c 1:* rw"))
	s.Apply(flagRule(t, "deny c 1:5 w"))
	if !s.Decide(DeviceRef{'c', 1, 5}, AccessWrite, EnforcerV1).Allowed {
		t.Error("after an ignored hole, 1:5 w is denied; the v1 controller allows it")
	}
}

func TestDeviceRulesSpared(t *testing.T) {
	s := applyAll(t, false, "allow c 1:3 rw", "allow c 1:5 r", "allow c 1:* m")
	got := s.Spared(flagRule(t, "deny c 1:* rw"))
	want := []DeviceException{{Type: 'c', Major: 1, Minor: 3, Access: AccessRead | AccessWrite, Rule: 0},
		{Type: 'c', Major: 1, Minor: 5, Access: AccessRead, Rule: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("spared (-want +got):\n%s", d)
	}
	if got := s.Spared(flagRule(t, "allow c 1:* rw")); got != nil {
		t.Errorf("an allow over default deny spares nothing: %v", got)
	}
}

// TestDeviceRulesVerdictRule: the verdict names the rule that decided.
func TestDeviceRulesVerdictRule(t *testing.T) {
	s := applyAll(t, true, "deny c 1:3 rwm", "allow a", "deny c 1:5 w", "deny c 1:9 rw", "allow c 1:9 r")
	for _, tc := range []struct {
		dev  DeviceRef
		acc  Access
		e    Enforcer
		want Verdict
	}{
		{DeviceRef{'c', 1, 3}, AccessRead, EnforcerV1, Verdict{Allowed: true, Exception: -1, Rule: 1}},
		{DeviceRef{'c', 1, 5}, AccessWrite, EnforcerV1, Verdict{Allowed: false, Exception: 0, Rule: 2}},
		{DeviceRef{'c', 1, 5}, AccessRead | AccessWrite, EnforcerV1, Verdict{Allowed: false, Exception: 0, Rule: 2}},
		{DeviceRef{'c', 1, 5}, AccessRead | AccessWrite, EnforcerV2, Verdict{Allowed: true, Exception: -1, Rule: 1}},
		{DeviceRef{'c', 1, 9}, AccessRead, EnforcerV1, Verdict{Allowed: true, Exception: -1, Rule: 4}},
	} {
		if got := s.Decide(tc.dev, tc.acc, tc.e); got != tc.want {
			t.Errorf("%s %s under %s: %+v, want %+v", tc.dev, tc.acc, tc.e, got, tc.want)
		}
	}
}
