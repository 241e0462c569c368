package cgroup

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups/devices/config"
)

// The largest major and minor a dev_t holds: MINORBITS is 20
// (include/linux/kdev_t.h), which leaves 12 bits of major.
const (
	MaxMajor = 1<<12 - 1
	MaxMinor = 1<<20 - 1
)

// ParseRuleFlag parses a rule as `sandbox --allow/--deny` and
// `cgroup eval --rule` take it, in the devices.allow syntax
// (Documentation/admin-guide/cgroup-v1/devices.rst):
//
//	a                 every device, every access
//	a *:* rwm         the same, as devices.list prints it
//	c 195:* rw        type c or b, major and minor as a number or *, then
//	b 8:0 r           a non-empty set of r, w, m (required)
//
// Numbers are bounded by what a dev_t holds (MaxMajor, MaxMinor). The
// returned rule has its permissions in "rwm" order and Allow set to allow.
// Anything else is an error.
func ParseRuleFlag(s string, allow bool) (config.Rule, error) {
	f := strings.Fields(s)
	bad := func(format string, a ...any) (config.Rule, error) {
		return config.Rule{}, fmt.Errorf("rule %q: %s", s, fmt.Sprintf(format, a...))
	}
	if len(f) == 0 {
		return bad("empty")
	}
	if len(f[0]) != 1 {
		return bad("type %q: want a, b or c", f[0])
	}
	r := config.Rule{Type: config.Type(f[0][0]), Allow: allow}
	switch r.Type {
	case config.WildcardDevice:
		if len(f) == 1 || (len(f) == 3 && f[1] == "*:*" && f[2] == "rwm") {
			r.Major, r.Minor, r.Permissions = config.Wildcard, config.Wildcard, "rwm"
			return r, nil
		}
		// devices.allow ignores whatever follows "a"; refusing it keeps a
		// typo from silently meaning "everything".
		return bad(`type a takes no numbers or permissions (write "a")`)
	case config.CharDevice, config.BlockDevice:
	default:
		return bad("type %q: want a, b or c", f[0])
	}
	if len(f) != 3 {
		return bad("want TYPE MAJOR:MINOR PERMS, e.g. \"c 195:* rw\"")
	}
	maj, min, ok := strings.Cut(f[1], ":")
	if !ok {
		return bad("%q: want MAJOR:MINOR", f[1])
	}
	var err error
	if r.Major, err = parseRuleNumber(maj, MaxMajor); err != nil {
		return bad("major: %v", err)
	}
	if r.Minor, err = parseRuleNumber(min, MaxMinor); err != nil {
		return bad("minor: %v", err)
	}
	var have [3]bool
	for _, c := range f[2] {
		i := strings.IndexRune("rwm", c)
		if i < 0 {
			return bad("permission %q: want r, w, m", c)
		}
		if have[i] {
			return bad("permission %q repeated", c)
		}
		have[i] = true
	}
	for i, c := range "rwm" {
		if have[i] {
			r.Permissions += config.Permissions(c)
		}
	}
	return r, nil
}

func parseRuleNumber(s string, max int64) (int64, error) {
	if s == "*" {
		return config.Wildcard, nil
	}
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number or *", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("%q out of range 0-%d", s, max)
	}
	return n, nil
}
