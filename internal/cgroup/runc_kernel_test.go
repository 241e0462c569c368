package cgroup

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// randomRunc draws a rule set as runc is given it: a default ("a"), then
// rules over a few numbers, so that they overlap, merge and punch holes.
func randomRunc(rng *rand.Rand) []*config.Rule {
	nums := []int64{config.Wildcard, 1, 3, 5}
	perms := []config.Permissions{"r", "w", "m", "rw", "rm", "wm", "rwm"}
	all := func(allow bool) *config.Rule {
		return &config.Rule{Type: 'a', Major: config.Wildcard, Minor: config.Wildcard, Permissions: "rwm", Allow: allow}
	}
	rules := []*config.Rule{all(rng.IntN(2) == 0)}
	for n := rng.IntN(7); n > 0; n-- {
		r := &config.Rule{Type: 'c', Major: nums[rng.IntN(len(nums))], Minor: nums[rng.IntN(len(nums))],
			Permissions: perms[rng.IntN(len(perms))], Allow: rng.IntN(2) == 0}
		switch rng.IntN(10) {
		case 0:
			r = all(r.Allow)
		case 1, 2:
			r.Type = 'b'
		}
		rules = append(rules, r)
	}
	return rules
}

// TestKernelRuncEmulator checks DeviceRules against runc's own code on
// random rule sets: runc refuses exactly the sets Apply reports a
// *HoleError for; the program runc generates and attaches (read back from
// the kernel and interpreted) decides every device and access as
// Decide(EnforcerV2); and the devices.list runc's v1 writer leaves is the
// exception list, decided as Decide(EnforcerV1). The processes that make
// the decisions real are in internal/sandbox's TestSandboxMatchesRunc;
// this covers many more rule sets without them.
func TestKernelRuncEmulator(t *testing.T) {
	requireRoot(t)
	m := testMounts(t)
	if m.DevicesV1 == "" || m.Unified == "" {
		t.Skip("needs the v1 devices controller and cgroup2 (a hybrid host) to compare both of runc's writers")
	}
	root := hostfs.MustNew("/")
	rng := rand.New(rand.NewPCG(6, 6))
	compared, holes := 0, 0
	for i := 0; i < 300; i++ {
		rules := randomRunc(rng)
		s := NewDeviceRules(false)
		var ours error
		for _, r := range rules {
			if err := s.Apply(*r); err != nil && ours == nil {
				ours = err
			}
		}
		var he *HoleError
		if ours != nil && !errors.As(ours, &he) {
			t.Fatalf("rules %s: %v", runcString(rules), ours)
		}
		v1, v2 := makeCgroup(t, m.DevicesV1), makeCgroup(t, m.Unified)
		err1 := cgroups.DevicesSetV1(v1, &cgroups.Resources{Devices: rules})
		err2 := cgroups.DevicesSetV2(v2, &cgroups.Resources{Devices: rules})
		if (ours != nil) != (err1 != nil) || (ours != nil) != (err2 != nil) {
			t.Fatalf("rules %s: Apply says %v; runc's v1 writer %v, its v2 program %v", runcString(rules), ours, err1, err2)
		}
		if ours != nil {
			holes++
			continue
		}
		p2, err := ReadV2(root, v2)
		if err != nil || len(p2.Programs) != 1 {
			t.Fatalf("read back runc's program from %s: %v (%d programs)", v2, err, len(p2.Programs))
		}
		p1, err := ReadV1(root, m.DevicesV1, v1)
		if err != nil {
			t.Fatal(err)
		}
		compareRuncList(t, rules, s, p1.Levels[0])
		for _, dev := range runcPoints() {
			for _, acc := range []Access{AccessRead, AccessWrite, AccessMknod, AccessRead | AccessWrite} {
				want := s.Decide(dev, acc, EnforcerV2).Allowed
				if d := p2.Evaluate(dev, acc); !d.Known || d.Allowed != want {
					t.Errorf("rules %s: %s %s: runc's program %+v, Decide(v2) %v", runcString(rules), dev, acc, d, want)
				}
				if s.DefaultAllow {
					continue // devices.list hides the deny exceptions
				}
				want = s.Decide(dev, acc, EnforcerV1).Allowed
				if d := p1.Evaluate(dev, acc); !d.Known || d.Allowed != want {
					t.Errorf("rules %s: %s %s: devices.list %v says %+v, Decide(v1) %v", runcString(rules), dev, acc, p1.Levels[0].Rules, d, want)
				}
			}
		}
		compared++
	}
	t.Logf("%d rule sets compared, %d refused by runc and by Apply", compared, holes)
	if compared < 100 || holes < 10 {
		t.Errorf("compared %d, refused %d: the draw does not cover both", compared, holes)
	}
}

// compareRuncList: the kernel's list after runc's v1 writer is Apply's
// exception list (in a default-deny cgroup; a default-allow one shows only
// "a *:* rwm").
func compareRuncList(t *testing.T, rules []*config.Rule, s *DeviceRules, l V1Level) {
	t.Helper()
	if l.DefaultAllow != s.DefaultAllow {
		t.Fatalf("rules %s: devices.list default allow %v, Apply %v", runcString(rules), l.DefaultAllow, s.DefaultAllow)
	}
	if s.DefaultAllow {
		return
	}
	var got, want []string
	for _, r := range l.Rules {
		got = append(got, r.CgroupString())
	}
	for _, x := range s.Exceptions {
		want = append(want, x.String())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rules %s: devices.list %q, Apply's exceptions %q", runcString(rules), got, want)
	}
}

// runcPoints are devices at the numbers randomRunc uses and one it does not.
func runcPoints() []DeviceRef {
	var out []DeviceRef
	for _, typ := range []byte{'c', 'b'} {
		for _, maj := range []uint32{1, 3, 5, 7} {
			for _, min := range []uint32{1, 3, 5, 7} {
				out = append(out, DeviceRef{typ, maj, min})
			}
		}
	}
	return out
}

func runcString(rules []*config.Rule) string {
	var parts []string
	for _, r := range rules {
		verb := "deny"
		if r.Allow {
			verb = "allow"
		}
		parts = append(parts, verb+" "+r.CgroupString())
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
