package sandbox

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups/devices/config"
)

// Default is what the sandbox does with an access no rule matches.
type Default string

const (
	DefaultDeny  Default = "deny"
	DefaultAllow Default = "allow"
)

// ParseDefault accepts "allow" and "deny".
func ParseDefault(s string) (Default, error) {
	switch Default(s) {
	case DefaultDeny, DefaultAllow:
		return Default(s), nil
	}
	return "", fmt.Errorf("default %q: want allow or deny", s)
}

// RulesHelp explains the rule flags and their order semantics; the
// sandbox command prints it in its help.
const RulesHelp = `Rules use the devices.allow syntax: "a" (every device and access), or
TYPE MAJOR:MINOR PERMS with TYPE c or b, MAJOR and MINOR a number or *, and
PERMS a set of r (open for reading), w (open for writing), m (mknod), e.g.
--allow 'c 195:* rwm' --deny 'c 195:255 m'.

Order: --allow and --deny rules are read in the order given. Each access
letter is decided by the LAST rule that matches the device and holds that
letter; with none, --default decides (deny unless told otherwise). A rule
"a" matches everything, so rules before it no longer matter. An open for
reading and writing needs both r and w.

cgroup v2 (--v2) applies exactly this with a generated BPF device program.
cgroup v1 (--v1) writes the rules, in order, to devices.allow/devices.deny;
the v1 controller cannot express every ordering (a --deny inside an earlier,
wider --allow, or the reverse with --default allow): such rule sets are
refused with the device they disagree on. On v1 an access asking for several
letters needs one rule holding all of them; a difference there is reported
as a warning.`

// maxRules bounds a rule set: the v1 consistency check walks every
// combination of the numbers the rules name.
const maxRules = 256

// RuleString writes a rule the way the flags take it, prefixed with
// its action: "allow c 195:* rw", "deny a".
func RuleString(r config.Rule) string {
	action := "deny"
	if r.Allow {
		action = "allow"
	}
	if r.Type == config.WildcardDevice {
		return action + " a"
	}
	return action + " " + r.CgroupString()
}

// Allows is the sandbox's rule semantics as a plain function, the
// reference the generated program and the v1 write plan are checked
// against: every bit of perms ("r", "rw", "m"...) must be allowed, and each
// bit is decided by the last rule that matches the device and holds the
// bit (a rule of type 'a' matches everything), or by the default. typ is
// 'c' or 'b'.
func Allows(def Default, rules []config.Rule, typ byte, major, minor int64, perms string) bool {
	for i := 0; i < len(perms); i++ {
		allowed := def == DefaultAllow
		for j := len(rules) - 1; j >= 0; j-- {
			r := rules[j]
			if r.Type != config.WildcardDevice &&
				(byte(r.Type) != typ ||
					(r.Major != config.Wildcard && r.Major != major) ||
					(r.Minor != config.Wildcard && r.Minor != minor)) {
				continue
			}
			if ruleHas(r, perms[i]) {
				allowed = r.Allow
				break
			}
		}
		if !allowed {
			return false
		}
	}
	return true
}

// V1Write is one line written to a v1 devices cgroup file.
type V1Write struct {
	File string `json:"file"` // "devices.allow" or "devices.deny"
	Line string `json:"line"`
}

// v1Plan turns a rule set into the writes that give a fresh v1
// devices cgroup that policy, in flag order. The v1 controller does not
// evaluate rules in order: it keeps a default and a list of exceptions, a
// write with the default's own verdict only removes an exception with the
// identical type and numbers, and an access asking for several bits needs
// one exception holding them all (security/device_cgroup.c:
// devcgroup_update_access, dev_exception_rm, match_exception). So the plan
// is run through a model of those rules and compared with Allows at
// every device the rules can tell apart: a single-bit difference makes the
// rule set impossible on v1 (an error that says so), a multi-bit one is
// returned as a warning.
func v1Plan(def Default, rules []config.Rule) ([]V1Write, []string, error) {
	if len(rules) > maxRules {
		return nil, nil, fmt.Errorf("%d rules: at most %d", len(rules), maxRules)
	}
	file := func(allow bool) string {
		if allow {
			return "devices.allow"
		}
		return "devices.deny"
	}
	// "a" resets the cgroup to a default and empties its exceptions.
	plan := []V1Write{{file(def == DefaultAllow), "a"}}
	for _, r := range rules {
		if err := validateRule(r); err != nil {
			return nil, nil, err
		}
		line := "a"
		if r.Type != config.WildcardDevice {
			line = r.CgroupString()
		}
		plan = append(plan, V1Write{file(r.Allow), line})
	}

	m := &v1Model{}
	for i, w := range plan {
		var r config.Rule
		if i == 0 {
			r = config.Rule{Type: config.WildcardDevice}
		} else {
			r = rules[i-1]
		}
		m.write(w.File == "devices.allow", r)
	}
	var warnings []string
	majors, minors := points(rules, true), points(rules, false)
	for _, typ := range []byte{'c', 'b'} {
		for _, maj := range majors {
			for _, min := range minors {
				for _, perms := range []string{"r", "w", "m", "rw", "rm", "wm", "rwm"} {
					want := Allows(def, rules, typ, maj, min, perms)
					got := m.permits(typ, maj, min, perms)
					if want == got {
						continue
					}
					dev := fmt.Sprintf("%c %d:%d %s", typ, maj, min, perms)
					if len(perms) == 1 {
						return nil, nil, fmt.Errorf("cgroup v1 cannot apply these rules in order: for %s they %s but the v1 devices controller would %s (a v1 write that repeats the default only removes an earlier line with the same type and numbers); reorder the rules or use cgroup v2",
							dev, verb(want), verb(got))
					}
					warnings = append(warnings, fmt.Sprintf("cgroup v1: %s is %s, unlike the rules' bit-by-bit reading (the v1 controller needs one rule granting every bit of an access)",
						dev, map[bool]string{true: "allowed", false: "denied"}[got]))
				}
			}
		}
	}
	return plan, warnings, nil
}

func verb(allow bool) string {
	if allow {
		return "allow it"
	}
	return "deny it"
}

// points lists the majors (or minors) the rules name plus one they
// do not: rules only compare numbers for equality, so these points cover
// every case.
func points(rules []config.Rule, major bool) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, r := range rules {
		n := r.Minor
		if major {
			n = r.Major
		}
		if r.Type != config.WildcardDevice && n != config.Wildcard && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	other := int64(0)
	for seen[other] {
		other++
	}
	out = append(out, other)
	slices.Sort(out)
	return out
}

// v1Model is the v1 devices controller's state for one cgroup whose
// parent allows everything: a default and an exception list
// (security/device_cgroup.c struct dev_cgroup).
type v1Model struct {
	allow bool
	ex    []v1Exception
}

type v1Exception struct {
	typ          byte
	major, minor int64 // config.Wildcard for *
	acc          string
}

func (m *v1Model) write(toAllow bool, r config.Rule) {
	if r.Type == config.WildcardDevice {
		m.allow, m.ex = toAllow, nil
		return
	}
	e := v1Exception{byte(r.Type), r.Major, r.Minor, string(r.Permissions)}
	if toAllow == m.allow {
		// dev_exception_rm: take the bits off the identical exception.
		for i := 0; i < len(m.ex); i++ {
			w := &m.ex[i]
			if w.typ != e.typ || w.major != e.major || w.minor != e.minor {
				continue
			}
			w.acc = strings.Map(func(c rune) rune {
				if strings.ContainsRune(e.acc, c) {
					return -1
				}
				return c
			}, w.acc)
			if w.acc == "" {
				m.ex = slices.Delete(m.ex, i, i+1)
				i--
			}
		}
		return
	}
	// dev_exception_add: merge into the identical exception or append.
	for i := range m.ex {
		w := &m.ex[i]
		if w.typ == e.typ && w.major == e.major && w.minor == e.minor {
			for _, c := range e.acc {
				if !strings.ContainsRune(w.acc, c) {
					w.acc += string(c)
				}
			}
			return
		}
	}
	m.ex = append(m.ex, e)
}

// permits is devcgroup_legacy_check_permission for one device: default
// allow denies when any exception matches some of the bits
// (match_exception_partial); default deny allows only when one exception
// holds every bit (match_exception).
func (m *v1Model) permits(typ byte, major, minor int64, perms string) bool {
	for _, e := range m.ex {
		if e.typ != typ || (e.major != config.Wildcard && e.major != major) ||
			(e.minor != config.Wildcard && e.minor != minor) {
			continue
		}
		if m.allow {
			if strings.ContainsAny(e.acc, perms) {
				return false
			}
			continue
		}
		all := true
		for _, c := range perms {
			all = all && strings.ContainsRune(e.acc, c)
		}
		if all {
			return true
		}
	}
	return m.allow
}
