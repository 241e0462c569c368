package cgroup

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/opencontainers/cgroups/devices/config"
)

// This file is the one definition of what a device rule set does to an
// access. The v1 evaluator (V1Policy.Evaluate), the drift check's model of
// runc (SpecDecision), the sandbox's v1 write plan and the sandbox's
// generated v2 program all decide through DeviceRules.
//
// A device cgroup's policy is a default (allow or deny) and a list of
// exceptions to it, each a type, a major and a minor (a number or any) and
// a set of accesses: struct dev_cgroup in security/device_cgroup.c. Rules
// change it in order, as writes to devices.allow and devices.deny do
// (devcgroup_update_access):
//
//   - type 'a' resets it: the default becomes the rule's verdict and the
//     exceptions are dropped, whatever else the rule says;
//   - a rule whose verdict differs from the default adds its accesses to
//     the exception with the identical type, major and minor, or appends a
//     new one (dev_exception_add);
//   - a rule whose verdict is the default's takes its accesses off the
//     exception with the identical type, major and minor and off no other
//     (dev_exception_rm): "deny c 1:5 w" after "allow c 1:* rw" leaves 1:5
//     writable.
//
// runc builds the same list from an OCI spec, for cgroup v1 and for the
// program it generates on cgroup v2 (its devices emulator,
// github.com/opencontainers/cgroups devices/devices_emulator.go), with one
// difference: where the kernel silently ignores a rule that would punch a
// hole in a wider exception, as in the example above, runc refuses the rule
// set. Apply reports that case as a *HoleError.
//
// An access is one bit, or several that one operation asks for at once: an
// O_RDWR open asks for r and w in one check (devcgroup_inode_permission,
// include/linux/device_cgroup.h, which both the v1 controller and a v2
// program receive: devcgroup_check_permission, security/device_cgroup.c).
// It is decided as follows.
//
//   - Default deny: allowed only when ONE exception that matches the device
//     holds every requested bit (match_exception). "allow c 1:* r" and
//     "allow c 1:9 w" do not let an O_RDWR open of 1:9 through. runc's
//     program agrees: a rule matches only an access that is a subset of
//     the rule's (devicefilter.go, the "R3 & bpfAccess != R3" test).
//   - Default allow: the v1 controller denies when any exception that
//     matches the device holds ANY requested bit (match_exception_partial),
//     but runc's program denies only when one exception holds EVERY
//     requested bit, as in the default-deny case. This is a real
//     difference between the mechanisms: over allow-all, "deny c 1:9 w"
//     makes an O_RDWR open of 1:9 EPERM on v1 and lets it through runc's
//     v2 program. Decide takes the Enforcer for that reason; for a single
//     bit, and for every default-deny rule set, the two agree.

// Enforcer is the kernel mechanism that enforces a rule set.
type Enforcer uint8

const (
	// EnforcerV1 is the cgroup v1 devices controller
	// (security/device_cgroup.c).
	EnforcerV1 Enforcer = iota + 1
	// EnforcerV2 is a BPF_PROG_TYPE_CGROUP_DEVICE program generated from
	// the exception list the way runc generates it (devicefilter.go in
	// github.com/opencontainers/cgroups), which is also how the sandbox's
	// generator works.
	EnforcerV2
)

func (e Enforcer) String() string {
	switch e {
	case EnforcerV1:
		return "the cgroup v1 devices controller"
	case EnforcerV2:
		return "a cgroup v2 device program"
	}
	return fmt.Sprintf("Enforcer(%d)", uint8(e))
}

// DeviceException is one entry of the exception list.
type DeviceException struct {
	Type         byte  // 'c' or 'b'
	Major, Minor int64 // a number, or config.Wildcard for any
	Access       Access
	// Rule is the index, among the rules given to Apply, of the last one
	// that added access to this exception.
	Rule int
}

// String writes the exception as devices.list does: "c 1:* rw".
func (x DeviceException) String() string {
	num := func(n int64) string {
		if n == config.Wildcard {
			return "*"
		}
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%c %s:%s %s", x.Type, num(x.Major), num(x.Minor), x.Access)
}

// matches reports whether the exception names dev.
func (x DeviceException) matches(dev DeviceRef) bool {
	return x.Type == dev.Type &&
		(x.Major == config.Wildcard || x.Major == int64(dev.Major)) &&
		(x.Minor == config.Wildcard || x.Minor == int64(dev.Minor))
}

// sameDevices reports whether x and y name the same devices the same way,
// which is what dev_exception_add and dev_exception_rm compare.
func (x DeviceException) sameDevices(y DeviceException) bool {
	return x.Type == y.Type && x.Major == y.Major && x.Minor == y.Minor
}

// contains reports whether x names every device y names.
func (x DeviceException) contains(y DeviceException) bool {
	return x.Type == y.Type &&
		(x.Major == config.Wildcard || x.Major == y.Major) &&
		(x.Minor == config.Wildcard || x.Minor == y.Minor)
}

// DeviceRules is a device cgroup's policy: a default and its exceptions.
// Build it with NewDeviceRules and Apply; decide with Decide.
type DeviceRules struct {
	DefaultAllow bool
	// Exceptions have the verdict opposite to the default; no two name the
	// same devices the same way.
	Exceptions []DeviceException
	// DefaultRule is the index of the 'a' rule that set the default, -1
	// when it is the one NewDeviceRules was given.
	DefaultRule int

	// removals are the rules, since the default was set, that took access
	// away (with Rule their index), to name what decided a denial.
	removals []DeviceException
	applied  int
}

// NewDeviceRules starts a policy from a default and no exceptions: a new
// v1 cgroup under an allow-all parent starts from allow (devcgroup_online
// copies the parent), runc's emulator from deny.
func NewDeviceRules(defaultAllow bool) *DeviceRules {
	return &DeviceRules{DefaultAllow: defaultAllow, DefaultRule: -1}
}

// HoleError is a rule with the default's verdict that names part of a
// wider exception holding some of its accesses. The v1 controller ignores
// it there (only an identical exception loses access); runc refuses the
// whole rule set ("cannot punch hole in existing wildcard rule").
type HoleError struct {
	Rule  config.Rule
	Wider DeviceException
}

func (e *HoleError) Error() string {
	verb := "deny"
	if e.Rule.Allow {
		verb = "allow"
	}
	return fmt.Sprintf("rule %q cannot take access back from part of the earlier, wider %q: the v1 devices controller ignores such a rule (it takes access only from an identical line) and runc refuses the rule set",
		verb+" "+e.Rule.CgroupString(), e.Wider.String())
}

// ruleException turns a 'b' or 'c' rule into the exception it names.
func ruleException(r config.Rule, index int) (DeviceException, error) {
	if r.Type != config.CharDevice && r.Type != config.BlockDevice {
		return DeviceException{}, fmt.Errorf("rule %q: type %q is not a, b or c", r.CgroupString(), r.Type)
	}
	for _, n := range []int64{r.Major, r.Minor} {
		if n != config.Wildcard && (n < 0 || n > math.MaxUint32) {
			return DeviceException{}, fmt.Errorf("rule %q: %d is not a device number or *", r.CgroupString(), n)
		}
	}
	acc, err := ParseAccess(string(r.Permissions))
	if err != nil {
		return DeviceException{}, fmt.Errorf("rule %q: %w", r.CgroupString(), err)
	}
	return DeviceException{Type: byte(r.Type), Major: r.Major, Minor: r.Minor, Access: acc, Rule: index}, nil
}

// Apply changes the policy by one rule, as a write of the rule to
// devices.allow (Allow) or devices.deny does. A malformed rule is an error
// and changes nothing. A *HoleError is returned after the rule has been
// applied as the v1 controller applies it (taken off the identical
// exception only), so that a caller may go on with the kernel's view.
func (s *DeviceRules) Apply(r config.Rule) error {
	index := s.applied
	if r.Type == config.WildcardDevice {
		s.applied++
		s.DefaultAllow, s.DefaultRule, s.Exceptions, s.removals = r.Allow, index, nil, nil
		return nil
	}
	x, err := ruleException(r, index)
	if err != nil {
		return err
	}
	s.applied++
	if r.Allow != s.DefaultAllow {
		s.add(x)
		return nil
	}
	return s.remove(r, x)
}

func (s *DeviceRules) add(x DeviceException) {
	for i := range s.Exceptions {
		if e := &s.Exceptions[i]; e.sameDevices(x) {
			e.Access |= x.Access
			e.Rule = x.Rule
			return
		}
	}
	s.Exceptions = append(s.Exceptions, x)
}

func (s *DeviceRules) remove(r config.Rule, x DeviceException) error {
	s.removals = append(s.removals, x)
	var hole error
	for _, e := range s.Exceptions {
		if !e.sameDevices(x) && e.contains(x) && e.Access&x.Access != 0 && hole == nil {
			hole = &HoleError{Rule: r, Wider: e}
		}
	}
	for i := range s.Exceptions {
		if e := &s.Exceptions[i]; e.sameDevices(x) {
			e.Access &^= x.Access
		}
	}
	s.Exceptions = slices.DeleteFunc(s.Exceptions, func(e DeviceException) bool { return e.Access == 0 })
	return hole
}

// Spared lists the exceptions that rule r, applied next, would name in
// part and leave alone: r has the default's verdict, and they lie strictly
// inside r's devices and hold some of its accesses. dev_exception_rm takes
// access only from an identical exception, so "deny c 1:* w" after
// "allow c 1:3 rw" leaves 1:3 writable on v1 and in runc alike.
func (s *DeviceRules) Spared(r config.Rule) []DeviceException {
	if r.Type == config.WildcardDevice || r.Allow != s.DefaultAllow {
		return nil
	}
	x, err := ruleException(r, s.applied)
	if err != nil {
		return nil
	}
	var out []DeviceException
	for _, e := range s.Exceptions {
		if !e.sameDevices(x) && x.contains(e) && e.Access&x.Access != 0 {
			out = append(out, e)
		}
	}
	return out
}

// Verdict is what a DeviceRules says about one access.
type Verdict struct {
	Allowed bool
	// Exception is the index in Exceptions of the exception that decided,
	// -1 when the default did.
	Exception int
	// Rule is the index, among the rules given to Apply, of the rule that
	// decided: the deciding exception's Rule; else the last rule that took
	// some of the access back from this device; else the 'a' rule that set
	// the default; -1 for the starting default.
	Rule int
}

// Decide decides acc (a non-empty set of r, w, m) on dev (type 'c' or 'b')
// as enforcer e would; see the top of this file.
func (s *DeviceRules) Decide(dev DeviceRef, acc Access, e Enforcer) Verdict {
	for i, x := range s.Exceptions {
		if !x.matches(dev) {
			continue
		}
		whole := acc&^x.Access == 0
		// match_exception_partial: the v1 controller in default-allow mode.
		partial := e == EnforcerV1 && s.DefaultAllow && acc&x.Access != 0
		if whole || partial {
			return Verdict{Allowed: !s.DefaultAllow, Exception: i, Rule: x.Rule}
		}
	}
	v := Verdict{Allowed: s.DefaultAllow, Exception: -1, Rule: s.DefaultRule}
	for i := len(s.removals) - 1; i >= 0; i-- {
		if x := s.removals[i]; x.matches(dev) && x.Access&acc != 0 {
			v.Rule = x.Rule
			break
		}
	}
	return v
}
