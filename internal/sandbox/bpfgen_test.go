package sandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func TestPolicyValidate(t *testing.T) {
	w := int64(config.Wildcard)
	for name, r := range map[string]config.Rule{
		"type":      {Type: 'p', Major: 1, Minor: 3, Permissions: "r"},
		"major":     {Type: 'c', Major: 4096, Minor: 3, Permissions: "r"},
		"neg major": {Type: 'c', Major: -2, Minor: 3, Permissions: "r"},
		"minor":     {Type: 'c', Major: 1, Minor: 1 << 20, Permissions: "r"},
		"no perms":  {Type: 'c', Major: 1, Minor: w},
		"bad perms": {Type: 'b', Major: 1, Minor: w, Permissions: "rx"},
		"dup perms": {Type: 'b', Major: 1, Minor: w, Permissions: "rr"},
	} {
		if _, _, err := policy(DefaultDeny, []config.Rule{r}); err == nil {
			t.Errorf("%s: %+v accepted", name, r)
		}
	}
	// 'a' ignores its other fields, as config.Rule documents.
	if _, _, err := policy(DefaultDeny, []config.Rule{{Type: 'a'}}); err != nil {
		t.Errorf("type a: %v", err)
	}
	if _, _, err := policy(DefaultDeny, make([]config.Rule, maxRules+1)); err == nil {
		t.Error("too many rules accepted")
	}
}

func mustPolicy(t testing.TB, def Default, rules []config.Rule) *cgroup.DeviceRules {
	t.Helper()
	s, _, err := policy(def, rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGenSmallest pins the shape of the simplest programs: with no
// exception, the context loads and the default's exit.
func TestGenSmallest(t *testing.T) {
	for _, def := range []Default{DefaultDeny, DefaultAllow} {
		insns, err := DeviceInstructions(mustPolicy(t, def, nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(insns) != 7+2 {
			t.Errorf("default %s: %d instructions:\n%v", def, len(insns), insns)
		}
		want := int64(0)
		if def == DefaultAllow {
			want = 1
		}
		if last := insns[len(insns)-2]; last.OpCode != asm.Mov.Op32(asm.ImmSource) || last.Constant != want {
			t.Errorf("default %s: exit returns %v", def, last)
		}
	}
}

// randomRules draws a rule set over a few numbers so that rules overlap.
func randomRules(rng *rand.Rand) []config.Rule {
	nums := []int64{config.Wildcard, 1, 3, 5, 195}
	perms := []config.Permissions{"r", "w", "m", "rw", "rm", "wm", "rwm"}
	var rules []config.Rule
	for n := rng.IntN(8); n > 0; n-- {
		r := config.Rule{Type: config.CharDevice, Major: nums[rng.IntN(len(nums))], Minor: nums[rng.IntN(len(nums))],
			Permissions: perms[rng.IntN(len(perms))], Allow: rng.IntN(2) == 0}
		switch rng.IntN(8) {
		case 0:
			r = config.Rule{Type: config.WildcardDevice, Major: config.Wildcard, Minor: config.Wildcard, Permissions: "rwm", Allow: r.Allow}
		case 1, 2:
			r.Type = config.BlockDevice
		}
		rules = append(rules, r)
	}
	return rules
}

// randomPoints are the devices at every number randomRules uses, and 7,
// which it does not (rules compare numbers only for equality).
var randomPoints = func() []cgroup.DeviceRef {
	var out []cgroup.DeviceRef
	for _, typ := range []byte{'c', 'b'} {
		for _, maj := range []uint32{1, 3, 5, 195, 7} {
			for _, min := range []uint32{1, 3, 5, 195, 7} {
				out = append(out, cgroup.DeviceRef{Type: typ, Major: maj, Minor: min})
			}
		}
	}
	return out
}()

var allAccesses = []cgroup.Access{cgroup.AccessRead, cgroup.AccessWrite, cgroup.AccessMknod,
	cgroup.AccessRead | cgroup.AccessWrite, cgroup.AccessRead | cgroup.AccessMknod,
	cgroup.AccessWrite | cgroup.AccessMknod, cgroup.AccessAll}

// TestGenMatchesSemantics runs generated programs through the cgroup
// package's interpreter of device programs (interp.go, written
// independently of this generator) on every device the rules can tell
// apart and every access set, against cgroup.DeviceRules for a v2
// program. Rule sets with a hole (which the sandbox refuses) are skipped.
func TestGenMatchesSemantics(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for i := 0; i < 400; i++ {
		rules := randomRules(rng)
		def := []Default{DefaultDeny, DefaultAllow}[rng.IntN(2)]
		s, _, err := policy(def, rules)
		var he *cgroup.HoleError
		if errors.As(err, &he) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		insns, err := DeviceInstructions(s)
		if err != nil {
			t.Fatal(err)
		}
		prog := cgroup.NewDeviceProgram(insns)
		for _, dev := range randomPoints {
			for _, a := range allAccesses {
				got := prog.Eval(dev, a)
				if want := s.Decide(dev, a, cgroup.EnforcerV2).Allowed; !got.Known || got.Allowed != want {
					t.Fatalf("default %s rules %v: %s %s: program %+v, want allowed=%v\n%v", def, rules, dev, a, got, want, insns)
				}
			}
		}
		checked++
	}
	if checked < 200 {
		t.Errorf("only %d rule sets without a hole", checked)
	}
}

// TestGenTable: the generated program decides the shared table's tuples
// as runc's program does (the 'P' entries allowed).
func TestGenTable(t *testing.T) {
	for _, c := range testutil.DeviceRuleCases {
		rules := tableRules(t, c)
		insns, err := DeviceInstructions(mustPolicy(t, Default(c.Default), rules))
		if err != nil {
			t.Fatal(err)
		}
		prog := cgroup.NewDeviceProgram(insns)
		for _, n := range testutil.DeviceRuleNodes {
			want := c.Want[fmt.Sprintf("%d:%d", n.Major, n.Minor)]
			for i, a := range testutil.DeviceRuleAccesses {
				acc, _ := cgroup.ParseAccess(a)
				got := prog.Eval(cgroup.DeviceRef{Type: 'c', Major: n.Major, Minor: n.Minor}, acc)
				if !got.Known || got.Allowed != (want[i] != 'N') {
					t.Errorf("%s: c %d:%d %s: program %+v, want %c", c.Name, n.Major, n.Minor, a, got, want[i])
				}
			}
		}
	}
}

// TestGenLoads loads generated programs into the kernel: the verifier must
// accept whatever the generator emits (it rejects, for one, unreachable
// instructions), from no rules at all to the largest rule set.
func TestGenLoads(t *testing.T) {
	testMounts(t, V2)
	rng := rand.New(rand.NewPCG(3, 4))
	var big []config.Rule
	for i := int64(0); len(big) < maxRules; i++ {
		big = append(big, config.Rule{Type: 'c', Major: i % 300, Minor: i, Permissions: "rw", Allow: true})
	}
	allowAll := config.Rule{Type: 'a', Major: -1, Minor: -1, Permissions: "rwm", Allow: true}
	denyAll := allowAll
	denyAll.Allow = false
	sets := [][]config.Rule{nil, {allowAll}, {denyAll}, {{Type: 'c', Major: 1, Minor: 3, Permissions: "r", Allow: true}}, big}
	for len(sets) < 55 {
		sets = append(sets, randomRules(rng))
	}
	loaded := 0
	for _, rules := range sets {
		for _, def := range []Default{DefaultDeny, DefaultAllow} {
			s, _, err := policy(def, rules)
			if err != nil {
				continue // a hole: refused before any program exists
			}
			spec, err := DeviceProgramSpec(s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ebpf.NewProgram(spec)
			if err != nil {
				t.Fatalf("default %s, %d rules: load %d instructions: %v", def, len(rules), len(spec.Instructions), err)
			}
			info, err := p.Info()
			p.Close()
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != ProgramName || info.Type != ebpf.CGroupDevice {
				t.Errorf("loaded as %q type %v", info.Name, info.Type)
			}
			loaded++
		}
	}
	if loaded < 60 {
		t.Errorf("only %d programs loaded", loaded)
	}
}
