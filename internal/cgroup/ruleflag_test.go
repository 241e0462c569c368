package cgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups/devices/config"
)

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
	if r, err := ParseRuleFlag("c 1:3 r", false); err != nil || r.Allow {
		t.Errorf("deny rule: %+v, %v", r, err)
	}
	for _, bad := range []string{"", "x", "a 1:3 r", "a *:*", "c", "c 1:3", "c 1 r", "c 1:3 rx", "c 1:3 rr",
		"c -1:3 r", "c 4096:0 r", "c 1:1048576 r", "c 1:+3 r", "c 1:3 r extra", "cc 1:3 r", "c 1:3 ",
		"p 1:3 r", "c :3 r", "c 99999999999999999999:0 r"} {
		if r, err := ParseRuleFlag(bad, true); err == nil {
			t.Errorf("ParseRuleFlag(%q) = %+v, want an error", bad, r)
		}
	}
}

// FuzzParseRuleFlag: never panics, and every accepted rule survives a
// round trip through its cgroup string.
func FuzzParseRuleFlag(f *testing.F) {
	for _, s := range []string{"a", "c 195:* rw", "b 8:0 r", "c *:* m", "a *:* rwm", "c 1:3 rwm", "c 1:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRuleFlag(s, false)
		if err != nil {
			return
		}
		back, err := ParseRuleFlag(r.CgroupString(), false)
		if err != nil || back != r {
			t.Fatalf("round trip of %q via %q: %+v, %v", s, r.CgroupString(), back, err)
		}
	})
}
