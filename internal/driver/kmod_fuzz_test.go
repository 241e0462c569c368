package driver

import (
	"strings"
	"testing"
)

// The parsers of module files take bytes a host (or a capture) wrote:
// they must never panic, and what they return must have the shape they
// promise.
func FuzzParseModulesAlias(f *testing.F) {
	f.Add([]byte(testAliases))
	f.Add([]byte("alias pci:v*d*sv*sd*bc*sc*i* x\nalias\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		as, _ := ParseModulesAlias(b, "modules.alias", "pci:")
		for _, a := range as {
			if !strings.HasPrefix(a.Pattern, "pci:") || !validModuleName(a.Module) || strings.Contains(a.Module, "-") || a.Line < 1 {
				t.Fatalf("alias %+v", a)
			}
			MatchAlias(a.Pattern, p100)
		}
		ParseModulesDep(b, "modules.dep")
		ParseModulesBuiltin(b, "modules.builtin")
	})
}

func FuzzParseModprobeConf(f *testing.F) {
	f.Add([]byte("blacklist nouveau\ninstall amdgpu /bin/false\nblacklist \\\nxe\n"))
	f.Add([]byte("install\ninstall x\n\\\n\\"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range ParseModprobeConf(b, "x.conf") {
			if r.Module == "" || r.Line < 1 || (r.Kind != RuleBlacklist && r.Kind != RuleInstall) {
				t.Fatalf("rule %+v", r)
			}
			r.Refuses()
		}
		for _, p := range ParseCmdline(string(b)) {
			if p.Raw == "" || p.Name == "--" {
				t.Fatalf("param %+v", p)
			}
		}
		ParseLockdown(b)
	})
}

// MatchAlias ends (its loop only moves forward), and a pattern without
// metacharacters matches itself.
func FuzzMatchAlias(f *testing.F) {
	f.Add("pci:v000010DEd*sv*sd*bc03sc*i*", p100)
	f.Add("[!a-]*\\", "x]")
	f.Fuzz(func(t *testing.T, pat, s string) {
		MatchAlias(pat, s)
		if !strings.ContainsAny(s, `*?[\`) && !MatchAlias(s, s) {
			t.Fatalf("%q does not match itself", s)
		}
		if !MatchAlias("*", s) {
			t.Fatalf("* does not match %q", s)
		}
	})
}
