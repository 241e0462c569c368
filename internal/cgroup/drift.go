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
	return specDecision(rules, len(rules), dev, acc)
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

// specDecision decides over rules whose first nSpec come from the spec and
// the rest from the runtime's defaults, naming the deciding one.
func specDecision(rules []specs.LinuxDeviceCgroup, nSpec int, dev DeviceRef, acc Access) (allowed bool, by string, err error) {
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
			if i >= nSpec {
				by = "runc's default device rule: " + specRuleString(r)
			}
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

// Drift compares the spec's device rules, as runc applies them (the spec's
// rules, then RuncDefaultDevices), with the kernel's effective policy for
// every r, w and m access to each device. Drift shows the runc
// rule-loading race and rules lost on a systemd daemon-reload.
func (p *Policy) Drift(rules []specs.LinuxDeviceCgroup, devs []DeviceRef) (DriftReport, error) {
	var rep DriftReport
	all := append(append([]specs.LinuxDeviceCgroup{}, rules...), RuncDefaultDevices...)
	for _, dev := range devs {
		for _, acc := range AccessAll.Bits() {
			allowed, by, err := specDecision(all, len(rules), dev, acc)
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
