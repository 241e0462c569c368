package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
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

// RulesHelp explains the rule flags and how a rule set is read; the
// sandbox command prints it in its help. The semantics are
// cgroup.DeviceRules' (internal/cgroup/rules.go).
const RulesHelp = `Rules use the devices.allow syntax: "a" (every device and access), or
TYPE MAJOR:MINOR PERMS with TYPE c or b, MAJOR and MINOR a number or *, and
PERMS a set of r (open for reading), w (open for writing), m (mknod), e.g.
--allow 'c 195:* rwm' --deny 'c 195:255 m'.

Order: the rules are applied in the order given, as the kernel applies
writes to devices.allow and devices.deny and as runc applies an OCI spec's
device rules. --default (deny unless told otherwise) is the starting
policy; "a" resets it to allow or deny. A rule that disagrees with the
current default adds its letters to the exception for exactly its
TYPE MAJOR:MINOR; a rule that agrees takes its letters off the exception
with exactly the same TYPE MAJOR:MINOR, and off no other: --deny 'c 195:* w'
after --allow 'c 195:0 rw' leaves 195:0 writable (a warning says so), and
--deny 'c 195:255 w' after --allow 'c 195:* rw' is refused (the kernel
would ignore it; runc refuses it).

One operation is one access: an open for reading and writing asks for r
and w at once and needs ONE exception holding both, so --allow 'c 1:* r'
--allow 'c 1:9 w' does not let it through on 1:9.

cgroup v1 (--v1) writes the rules to devices.deny and devices.allow;
cgroup v2 (--v2) attaches a generated BPF device program that decides as
runc's does. They differ in one case, reported as a warning: over
--default allow, a --deny holding only some letters of an operation
(--deny 'c 1:9 w', then an open of 1:9 for reading and writing) makes it
EPERM on v1, while the v2 program, like runc's, denies only what one rule
covers whole.`

// maxRules bounds a rule set: the v1/v2 comparison walks every
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

// validateRule rejects a rule the sandbox cannot apply: beyond what
// cgroup.DeviceRules checks, numbers must fit a dev_t (a v2 program
// compares them as 32-bit immediates; the kernel never passes more).
func validateRule(r config.Rule) error {
	switch r.Type {
	case config.WildcardDevice:
		// 'a' covers every device and access: the other fields are ignored,
		// as config.Rule documents and as devices.allow treats "a".
		return nil
	case config.BlockDevice, config.CharDevice:
	default:
		return fmt.Errorf("rule %q: device type %q is not 'a', 'b' or 'c'", r.CgroupString(), r.Type)
	}
	if r.Major != config.Wildcard && (r.Major < 0 || r.Major > cgroup.MaxMajor) {
		return fmt.Errorf("rule %q: major %d out of range 0-%d", r.CgroupString(), r.Major, cgroup.MaxMajor)
	}
	if r.Minor != config.Wildcard && (r.Minor < 0 || r.Minor > cgroup.MaxMinor) {
		return fmt.Errorf("rule %q: minor %d out of range 0-%d", r.CgroupString(), r.Minor, cgroup.MaxMinor)
	}
	if _, err := cgroup.ParseAccess(string(r.Permissions)); err != nil {
		return fmt.Errorf("rule %q: %w", r.CgroupString(), err)
	}
	return nil
}

// policy applies rules over def, as the kernel and runc do
// (cgroup.DeviceRules). A rule the kernel would ignore and runc refuses
// (a *cgroup.HoleError) is an error: applied on v1 it would silently not
// do what it says. A rule that takes access off one exception but names
// narrower ones it leaves alone gives a warning.
func policy(def Default, rules []config.Rule) (*cgroup.DeviceRules, []string, error) {
	if len(rules) > maxRules {
		return nil, nil, fmt.Errorf("%d rules: at most %d", len(rules), maxRules)
	}
	s := cgroup.NewDeviceRules(def == DefaultAllow)
	var warnings []string
	for _, r := range rules {
		if err := validateRule(r); err != nil {
			return nil, nil, err
		}
		for _, x := range s.Spared(r) {
			warnings = append(warnings, fmt.Sprintf("%q takes nothing from the earlier, narrower %q: a rule takes access back only from an identical TYPE MAJOR:MINOR (the kernel and runc alike)",
				RuleString(r), x.String()))
		}
		if err := s.Apply(r); err != nil {
			var he *cgroup.HoleError
			if errors.As(err, &he) {
				return nil, nil, fmt.Errorf("%w; reorder or split the rules", err)
			}
			return nil, nil, err
		}
	}
	return s, append(warnings, v1v2Differences(s)...), nil
}

// V1Write is one line written to a v1 devices cgroup file.
type V1Write struct {
	File string `json:"file"` // "devices.allow" or "devices.deny"
	Line string `json:"line"`
}

// v1Plan is the writes that give a fresh v1 devices cgroup the policy of
// rules over def: "a" with the default, then every rule in order. The
// kernel builds from them the exception list cgroup.DeviceRules models
// (devcgroup_update_access, security/device_cgroup.c).
func v1Plan(def Default, rules []config.Rule) []V1Write {
	file := func(allow bool) string {
		if allow {
			return "devices.allow"
		}
		return "devices.deny"
	}
	plan := []V1Write{{file(def == DefaultAllow), "a"}}
	for _, r := range rules {
		line := "a"
		if r.Type != config.WildcardDevice {
			line = r.CgroupString()
		}
		plan = append(plan, V1Write{file(r.Allow), line})
	}
	return plan
}

// maxDifferences bounds the v1/v2 warnings listed one by one.
const maxDifferences = 8

// v1v2Differences names the (device, access) pairs that the v1 controller
// and a v2 program decide differently under s: only over a default allow,
// where the v1 controller refuses an access any deny exception covers in
// part (match_exception_partial) and a v2 program, as runc generates it
// and as --v2 applies, refuses only what one exception covers whole.
// Rules compare numbers only for equality, so the numbers the exceptions
// name plus one they do not cover every case.
func v1v2Differences(s *cgroup.DeviceRules) []string {
	if !s.DefaultAllow || len(s.Exceptions) == 0 {
		return nil
	}
	// The only access of several bits the kernel asks for is r and w
	// together, an O_RDWR open (devcgroup_inode_permission); mknod asks
	// for m alone (devcgroup_inode_mknod).
	rw := cgroup.AccessRead | cgroup.AccessWrite
	var diff []string
	for _, dev := range devicePoints(s) {
		if s.Decide(dev, rw, cgroup.EnforcerV1).Allowed != s.Decide(dev, rw, cgroup.EnforcerV2).Allowed {
			diff = append(diff, fmt.Sprintf("%s %s", dev, rw))
		}
	}
	if len(diff) == 0 {
		return nil
	}
	more := ""
	if len(diff) > maxDifferences {
		more = fmt.Sprintf(" and %d more", len(diff)-maxDifferences)
		diff = diff[:maxDifferences]
	}
	return []string{fmt.Sprintf("cgroup v1 and v2 differ on %s%s: the v1 devices controller denies an open for reading and writing that a deny rule covers in part (match_exception_partial); a v2 program, as runc generates it and as --v2 applies, allows it unless one rule covers both",
		strings.Join(diff, ", "), more)}
}

// devicePoints are the devices of both types at points(), major by minor.
func devicePoints(s *cgroup.DeviceRules) []cgroup.DeviceRef {
	var out []cgroup.DeviceRef
	majors, minors := points(s, true), points(s, false)
	for _, typ := range []byte{'c', 'b'} {
		for _, maj := range majors {
			for _, min := range minors {
				out = append(out, cgroup.DeviceRef{Type: typ, Major: uint32(maj), Minor: uint32(min)})
			}
		}
	}
	return out
}

// points lists the majors (or minors) the exceptions name, plus one they
// do not (which stands for "any other").
func points(s *cgroup.DeviceRules, major bool) []int64 {
	var out []int64
	for _, x := range s.Exceptions {
		n := x.Minor
		if major {
			n = x.Major
		}
		if n != config.Wildcard && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	other := int64(0)
	for slices.Contains(out, other) {
		other++
	}
	slices.Sort(out)
	return append(out, other)
}
