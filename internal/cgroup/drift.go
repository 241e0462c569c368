package cgroup

import (
	"fmt"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SpecDecision is what an OCI spec's linux.resources.devices asks for one
// access: runc starts a container's cgroup from deny-all and applies the
// rules in order, so the last rule matching the device and the access
// wins (libcontainer/specconv and the devices emulator of
// github.com/opencontainers/cgroups). A rule with no type or type "a"
// matches every device, a nil major or minor matches any, an empty access
// means "rwm". by names the deciding rule, or "default deny".
func SpecDecision(rules []specs.LinuxDeviceCgroup, dev DeviceRef, acc Access) (allowed bool, by string, err error) {
	if len(acc.Bits()) != 1 {
		return false, "", fmt.Errorf("spec decision needs one access, have %q", acc)
	}
	by = "default deny"
	for i, r := range rules {
		ok, err := specRuleMatches(r, dev, acc)
		if err != nil {
			return false, "", fmt.Errorf("linux.resources.devices[%d]: %w", i, err)
		}
		if ok {
			allowed, by = r.Allow, fmt.Sprintf("linux.resources.devices[%d]: %s", i, specRuleString(r))
		}
	}
	return allowed, by, nil
}

func specRuleMatches(r specs.LinuxDeviceCgroup, dev DeviceRef, acc Access) (bool, error) {
	switch r.Type {
	case "", "a":
	case "c", "b":
		if r.Type[0] != dev.Type {
			return false, nil
		}
	default:
		return false, fmt.Errorf("type %q is not a, b or c", r.Type)
	}
	if r.Major != nil && *r.Major != int64(dev.Major) {
		return false, nil
	}
	if r.Minor != nil && *r.Minor != int64(dev.Minor) {
		return false, nil
	}
	have := AccessAll
	if r.Access != "" {
		var err error
		if have, err = ParseAccess(r.Access); err != nil {
			return false, err
		}
	}
	return have&acc == acc, nil
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
	a := r.Access
	if a == "" {
		a = "rwm"
	}
	return fmt.Sprintf("%s %s %s:%s %s", verb, t, num(r.Major), num(r.Minor), a)
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

// Drift compares the spec's device rules with the kernel's effective policy
// for every r, w and m access to each device. Drift shows the runc
// rule-loading race and rules lost on a systemd daemon-reload.
func (p *Policy) Drift(rules []specs.LinuxDeviceCgroup, devs []DeviceRef) (DriftReport, error) {
	var rep DriftReport
	for _, dev := range devs {
		for _, acc := range AccessAll.Bits() {
			allowed, by, err := SpecDecision(rules, dev, acc)
			if err != nil {
				return DriftReport{}, err
			}
			k := p.evaluate(dev, acc).Combined
			it := DriftItem{Device: dev, Access: acc, SpecAllowed: allowed, SpecRule: by, Kernel: k}
			switch {
			case !k.Known:
				rep.Undecided = append(rep.Undecided, it)
			case k.Allowed != allowed:
				rep.Differ = append(rep.Differ, it)
			}
		}
	}
	return rep, nil
}
