package sandbox

import (
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
)

func TestGenValidate(t *testing.T) {
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
		if _, err := DeviceInstructions(false, []config.Rule{r}); err == nil {
			t.Errorf("%s: %+v accepted", name, r)
		}
	}
	// 'a' ignores its other fields, as config.Rule documents.
	if _, err := DeviceInstructions(false, []config.Rule{{Type: 'a'}}); err != nil {
		t.Errorf("type a: %v", err)
	}
}

// TestGenSmallest pins the shape of the simplest programs: no rules means
// each requested bit goes straight to the default.
func TestGenSmallest(t *testing.T) {
	insns, err := DeviceInstructions(false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 7 loads/shifts, 3 × (mov, and, jeq, ja), then two returns of 2.
	if len(insns) != 7+3*4+4 {
		t.Errorf("%d instructions:\n%v", len(insns), insns)
	}
	if last := insns[len(insns)-2]; last.OpCode != asm.Mov.Op(asm.ImmSource) || last.Constant != 0 {
		t.Errorf("deny return is %v", last)
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

// TestGenMatchesSemantics runs generated programs through the package's
// own interpreter of device programs (interp.go, written independently of
// this generator) on every device the rules can tell apart and every
// access set, against Allows. The kernel check is
// TestSandboxProbeDecisions.
func TestGenMatchesSemantics(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	accs := []cgroup.Access{cgroup.AccessRead, cgroup.AccessWrite, cgroup.AccessMknod, cgroup.AccessRead | cgroup.AccessWrite, cgroup.AccessRead | cgroup.AccessMknod,
		cgroup.AccessWrite | cgroup.AccessMknod, cgroup.AccessAll}
	for i := 0; i < 300; i++ {
		rules := randomRules(rng)
		def := DefaultDeny
		if rng.IntN(2) == 0 {
			def = DefaultAllow
		}
		insns, err := DeviceInstructions(def == DefaultAllow, rules)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []byte{'c', 'b'} {
			for _, maj := range []int64{1, 3, 5, 195, 7} {
				for _, min := range []int64{1, 3, 5, 195, 7} {
					for _, a := range accs {
						got := cgroup.EvalDeviceProgram(insns, cgroup.DeviceRef{Type: typ, Major: uint32(maj), Minor: uint32(min)}, a)
						want := Allows(def, rules, typ, maj, min, a.String())
						if !got.Known || got.Allowed != want {
							t.Fatalf("default %s rules %v: %c %d:%d %s: program %+v, want allowed=%v\n%v",
								def, rules, typ, maj, min, a, got, want, insns)
						}
					}
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
	for len(big) < maxRules {
		big = append(big, randomRules(rng)...)
	}
	allowAll := config.Rule{Type: 'a', Major: -1, Minor: -1, Permissions: "rwm", Allow: true}
	denyAll := allowAll
	denyAll.Allow = false
	sets := [][]config.Rule{nil, {allowAll}, {denyAll}, {{Type: 'c', Major: 1, Minor: 3, Permissions: "r", Allow: true}},
		big[:maxRules]}
	for i := 0; i < 50; i++ {
		sets = append(sets, randomRules(rng))
	}
	for _, rules := range sets {
		for _, defAllow := range []bool{false, true} {
			spec, err := DeviceProgramSpec(defAllow, rules)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ebpf.NewProgram(spec)
			if err != nil {
				t.Fatalf("default allow %v, %d rules: load %d instructions: %v", defAllow, len(rules), len(spec.Instructions), err)
			}
			info, err := p.Info()
			p.Close()
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != ProgramName || info.Type != ebpf.CGroupDevice {
				t.Errorf("loaded as %q type %v", info.Name, info.Type)
			}
		}
	}
}
