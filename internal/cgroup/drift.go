package cgroup

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/opencontainers/cgroups/devices/config"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SpecDecision is what an OCI spec's linux.resources.devices asks for acc
// (one access, or several that one operation asks for at once) on dev,
// under enforcer e. runc converts the rules (libcontainer/specconv
// CreateCgroupConfig: no type means 'a', no major or minor means any, an
// empty access is refused), starts from deny-all and applies them in order
// through its devices emulator, which builds the exception list that
// DeviceRules models, for v1 and v2 alike; a rule set the emulator refuses
// (a *HoleError here) is an error, as it is for runc. by names the
// deciding rule, or "default deny".
func SpecDecision(rules []specs.LinuxDeviceCgroup, dev DeviceRef, acc Access, e Enforcer) (allowed bool, by string, err error) {
	s, err := specDeviceRules(rules)
	if err != nil {
		return false, "", err
	}
	v := s.Decide(dev, acc, e)
	return v.Allowed, specRuleName(rules, len(rules), v.Rule), nil
}

// RuncDefaultDevices are the rules runc appends to every container's
// linux.resources.devices, after the spec's own (libcontainer/specconv
// AllowedDevices, runc 1.x): mknod of any char or block device, the
// standard nodes (null, zero, full, random, urandom, tty, console, ptmx),
// /dev/pts and /dev/net/tun. They come last, so they win over the spec.
// A real runc container showed them: without them a fresh container
// "drifts" on every mknod and on /dev/null.
var RuncDefaultDevices = func() []specs.LinuxDeviceCgroup {
	n := func(v int64) *int64 { return &v }
	r := func(t string, maj, min *int64, acc string) specs.LinuxDeviceCgroup {
		return specs.LinuxDeviceCgroup{Allow: true, Type: t, Major: maj, Minor: min, Access: acc}
	}
	return []specs.LinuxDeviceCgroup{
		r("c", nil, nil, "m"), r("b", nil, nil, "m"),
		r("c", n(1), n(3), "rwm"), r("c", n(1), n(8), "rwm"), r("c", n(1), n(7), "rwm"),
		r("c", n(5), n(0), "rwm"), r("c", n(1), n(5), "rwm"), r("c", n(1), n(9), "rwm"),
		r("c", n(5), n(1), "rwm"), r("c", n(136), nil, "rwm"), r("c", n(5), n(2), "rwm"),
		r("c", n(10), n(200), "rwm"),
	}
}()

// specDeviceRules applies rules as runc does, from deny-all.
func specDeviceRules(rules []specs.LinuxDeviceCgroup) (*DeviceRules, error) {
	s := NewDeviceRules(false)
	for i, sr := range rules {
		r, err := specRule(sr)
		if err == nil {
			err = s.Apply(r)
		}
		if err != nil {
			return nil, fmt.Errorf("linux.resources.devices[%d]: %w", i, err)
		}
	}
	return s, nil
}

// specRule converts a spec rule the way runc's specconv does.
func specRule(r specs.LinuxDeviceCgroup) (config.Rule, error) {
	t := r.Type
	if t == "" {
		t = "a"
	}
	if t != "a" && t != "b" && t != "c" {
		return config.Rule{}, fmt.Errorf("type %q is not a, b or c", r.Type)
	}
	if r.Access == "" {
		return config.Rule{}, errors.New("empty access (runc refuses it)")
	}
	out := config.Rule{Type: config.Type(t[0]), Major: config.Wildcard, Minor: config.Wildcard,
		Permissions: config.Permissions(r.Access), Allow: r.Allow}
	if r.Major != nil {
		out.Major = *r.Major
	}
	if r.Minor != nil {
		out.Minor = *r.Minor
	}
	return out, nil
}

// specRuleName names rule i of rules, whose first nSpec come from the spec
// and the rest from the runtime's defaults; -1 is the starting default.
func specRuleName(rules []specs.LinuxDeviceCgroup, nSpec, i int) string {
	switch {
	case i < 0:
		return "default deny"
	case i >= nSpec:
		return "runc's default device rule: " + specRuleString(rules[i])
	}
	return fmt.Sprintf("linux.resources.devices[%d]: %s", i, specRuleString(rules[i]))
}

func specRuleString(r specs.LinuxDeviceCgroup) string {
	verb := "deny"
	if r.Allow {
		verb = "allow"
	}
	t := r.Type
	if t == "" {
		t = "a"
	}
	num := func(p *int64) string {
		if p == nil {
			return "*"
		}
		return strconv.FormatInt(*p, 10)
	}
	return fmt.Sprintf("%s %s %s:%s %s", verb, t, num(r.Major), num(r.Minor), r.Access)
}

// DriftItem is one (device, access) where the spec and the kernel were
// compared.
type DriftItem struct {
	Device      DeviceRef
	Access      Access // a single access
	SpecAllowed bool
	SpecRule    string
	Kernel      Decision // the combined kernel decision
}

// DriftReport lists the accesses where the kernel's effective policy
// differs from what the spec asked, and those where the kernel's policy
// could not be decided (so no comparison was possible).
type DriftReport struct {
	Differ    []DriftItem
	Undecided []DriftItem
}

// Drift compares the spec's device rules, as runc applies them (the spec's
// rules, then RuncDefaultDevices), with the kernel's effective policy for
// every r, w and m access to each device. Drift shows the runc
// rule-loading race and rules lost on a systemd daemon-reload.
func (p *Policy) Drift(rules []specs.LinuxDeviceCgroup, devs []DeviceRef) (DriftReport, error) {
	var rep DriftReport
	all := append(append([]specs.LinuxDeviceCgroup{}, rules...), RuncDefaultDevices...)
	s, err := specDeviceRules(all)
	if err != nil {
		return DriftReport{}, err
	}
	for _, dev := range devs {
		for _, acc := range AccessAll.Bits() {
			// One access at a time: v1 and v2 decide a single bit alike.
			v := s.Decide(dev, acc, EnforcerV2)
			k := p.evaluate(dev, acc).Combined
			it := DriftItem{Device: dev, Access: acc, SpecAllowed: v.Allowed, SpecRule: specRuleName(all, len(rules), v.Rule), Kernel: k}
			switch {
			case !k.Known:
				rep.Undecided = append(rep.Undecided, it)
			case k.Allowed != v.Allowed:
				rep.Differ = append(rep.Differ, it)
			}
		}
	}
	return rep, nil
}
