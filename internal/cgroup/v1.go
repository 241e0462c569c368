package cgroup

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// ParseDevicesList parses a cgroup v1 devices.list. Each line is
// "<a|b|c> <major|*>:<minor|*> <access>", as devcgroup_seq_show writes it
// (security/device_cgroup.c). Every line is an allow exception except the
// single "a *:* rwm" line a default-allow cgroup shows; both come back with
// Allow true. A major or minor of 4294967295 (~0) is the kernel's own
// encoding of "*" and comes back as config.Wildcard.
func ParseDevicesList(b []byte) ([]config.Rule, error) {
	var out []config.Rule
	for n, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		r, err := parseDevicesLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %q: %w", n+1, line, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseDevicesLine(line string) (config.Rule, error) {
	f := strings.Split(line, " ")
	if len(f) != 3 {
		return config.Rule{}, fmt.Errorf("want 3 fields separated by one space, have %d", len(f))
	}
	if len(f[0]) != 1 {
		return config.Rule{}, fmt.Errorf("type %q is not a, b or c", f[0])
	}
	r := config.Rule{Type: config.Type(f[0][0]), Allow: true}
	switch r.Type {
	case config.WildcardDevice, config.BlockDevice, config.CharDevice:
	default:
		return config.Rule{}, fmt.Errorf("type %q is not a, b or c", f[0])
	}
	mm := strings.Split(f[1], ":")
	if len(mm) != 2 {
		return config.Rule{}, fmt.Errorf("device %q is not major:minor", f[1])
	}
	var err error
	if r.Major, err = parseDevNum(mm[0]); err != nil {
		return config.Rule{}, fmt.Errorf("major: %w", err)
	}
	if r.Minor, err = parseDevNum(mm[1]); err != nil {
		return config.Rule{}, fmt.Errorf("minor: %w", err)
	}
	acc, err := ParseAccess(f[2])
	if err != nil {
		return config.Rule{}, err
	}
	r.Permissions = config.Permissions(acc.String())
	if r.Type == config.WildcardDevice && (r.Major != config.Wildcard || r.Minor != config.Wildcard || acc != AccessAll) {
		// The kernel shows 'a' only as "a *:* rwm" (devcgroup_seq_show).
		return config.Rule{}, fmt.Errorf("type a appears only as \"a *:* rwm\"")
	}
	return r, nil
}

func parseDevNum(s string) (int64, error) {
	if s == "*" {
		return config.Wildcard, nil
	}
	// Digits only: ParseUint would accept "+1"; the kernel prints %u.
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number or *", s)
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	if v == 1<<32-1 {
		// ~0 is how the kernel stores '*' (set_majmin prints it as "*").
		return config.Wildcard, nil
	}
	return int64(v), nil
}

// V1Level is one cgroup's devices.list.
type V1Level struct {
	Dir          string        // host path of the cgroup directory
	Rules        []config.Rule // as listed; nil when Err is set
	DefaultAllow bool          // the list is "a *:* rwm": deny exceptions are hidden
	Err          error         // reading or parsing failed

	rules *DeviceRules // Rules as a policy, when ReadV1 built it
}

// ListPath is the devices.list of the level.
func (l *V1Level) ListPath() string { return path.Join(l.Dir, "devices.list") }

// V1Policy is the devices.list of a cgroup and of each ancestor up to the
// hierarchy's mount, target first.
type V1Policy struct {
	Levels []V1Level
}

// ReadV1 reads the devices.list of dir and of every ancestor up to mount
// (the devices controller's mount point). dir must be mount or below it.
// The target's own list must be readable; an ancestor that is not is kept
// with its error, as the decision does not depend on it.
func ReadV1(root *hostfs.Root, mount, dir string) (*V1Policy, error) {
	mount, dir = path.Clean(mount), path.Clean(dir)
	if dir != mount && !strings.HasPrefix(dir, mount+"/") {
		return nil, fmt.Errorf("%s is not under the devices mount %s", dir, mount)
	}
	p := &V1Policy{}
	for d := dir; ; d = path.Dir(d) {
		list := path.Join(d, "devices.list")
		b, err := root.ReadFile(list)
		var rules []config.Rule
		if err == nil {
			if rules, err = ParseDevicesList(b); err != nil {
				err = fmt.Errorf("%s: %w", list, err)
			}
		}
		if err != nil && d == dir {
			return nil, err
		}
		p.Levels = append(p.Levels, newV1Level(d, rules, err))
		if d == mount || d == "/" {
			break
		}
	}
	return p, nil
}

// newV1Level is the level of cgroup dir whose devices.list gave rules, or
// err.
func newV1Level(dir string, rules []config.Rule, err error) V1Level {
	l := V1Level{Dir: dir, Rules: rules, Err: err}
	for _, r := range rules {
		if r.Type == config.WildcardDevice {
			l.DefaultAllow = true
		}
	}
	if !l.DefaultAllow && err == nil {
		// An error here leaves Evaluate to report it.
		l.rules, _ = listRules(rules)
	}
	return l
}

// listRules is the policy a default-deny devices.list describes: the
// list is the exception list itself (devcgroup_seq_show), so its lines are
// applied as allow rules over deny, as runc's emulatorFromList does.
func listRules(lines []config.Rule) (*DeviceRules, error) {
	s := NewDeviceRules(false)
	for _, r := range lines {
		if err := s.Apply(r); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Evaluate decides acc (one access or several asked at once, as an O_RDWR
// open asks for r and w) on dev.
//
// The kernel checks only the task's own cgroup
// (devcgroup_legacy_check_permission, security/device_cgroup.c): a child
// cannot hold more than its parent because the kernel refuses such writes
// (parent_has_perm) and pushes a parent's new restrictions down
// (propagate_exception). So the target level decides, by DeviceRules'
// semantics for EnforcerV1: in default-deny mode access needs one line
// holding all of acc. In default-allow mode any hidden deny exception
// matching part of acc refuses it, and those exceptions are not shown, so
// the decision cannot be made from the file.
func (p *V1Policy) Evaluate(dev DeviceRef, acc Access) Decision {
	if len(p.Levels) == 0 {
		return undecided("no devices.list was read")
	}
	if acc == 0 || acc&^AccessAll != 0 {
		return undecided(fmt.Sprintf("access %#x is not a set of r, w, m", uint8(acc)))
	}
	if dev.Type != 'c' && dev.Type != 'b' {
		return undecided(fmt.Sprintf("device type %q is not 'c' or 'b'", dev.Type))
	}
	l := &p.Levels[0]
	if l.DefaultAllow {
		return Decision{
			Reason:    "a default-allow v1 cgroup hides its deny rules (devices.list shows a *:* rwm): only opening the node inside the cgroup shows them",
			DecidedBy: l.ListPath() + ": a *:* rwm",
			Hidden:    true,
		}
	}
	rules := l.rules
	if rules == nil {
		var err error
		if rules, err = listRules(l.Rules); err != nil {
			return undecidedErr(fmt.Sprintf("%s: %v", l.ListPath(), err), err)
		}
	}
	if v := rules.Decide(dev, acc, EnforcerV1); v.Allowed {
		return Decision{Allowed: true, Known: true, DecidedBy: l.ListPath() + ": " + l.Rules[v.Rule].CgroupString()}
	}
	d := Decision{Known: true, DecidedBy: fmt.Sprintf("%s: no line allows %s %s (default deny)", l.ListPath(), dev, acc)}
	if len(acc.Bits()) > 1 && !slices.ContainsFunc(acc.Bits(), func(b Access) bool { return !rules.Decide(dev, b, EnforcerV1).Allowed }) {
		d.Reason = "each access is allowed by a different line, but one operation asking for all of them needs a single line holding all"
	}
	return d
}
