package cgroup

import (
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func i64(v int64) *int64 { return &v }

func TestSpecDecision(t *testing.T) {
	rules := []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(195), Access: "r"},
		{Allow: true, Type: "c", Major: i64(195), Minor: i64(255), Access: "rwm"},
		{Allow: false, Type: "c", Major: i64(195), Minor: i64(255), Access: "w"},
		{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "r"},
		{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "w"},
	}
	for _, tt := range []struct {
		dev  DeviceRef
		acc  Access
		want bool
		by   string
	}{
		{DeviceRef{'c', 195, 0}, AccessRead, true, "linux.resources.devices[1]: allow c 195:* r"},
		{DeviceRef{'c', 195, 0}, AccessRead | AccessWrite, false, "linux.resources.devices[0]: deny a *:* rwm"},
		{DeviceRef{'c', 195, 255}, AccessWrite, false, "linux.resources.devices[3]: deny c 195:255 w"},
		{DeviceRef{'c', 195, 255}, AccessRead | AccessWrite, false, "linux.resources.devices[3]: deny c 195:255 w"},
		{DeviceRef{'c', 195, 255}, AccessRead | AccessMknod, true, "linux.resources.devices[2]: allow c 195:255 rwm"},
		// Two identical lines add up: one exception c 1:3 rw.
		{DeviceRef{'c', 1, 3}, AccessRead | AccessWrite, true, "linux.resources.devices[5]: allow c 1:3 w"},
		{DeviceRef{'c', 1, 3}, AccessMknod, false, "linux.resources.devices[0]: deny a *:* rwm"},
		{DeviceRef{'b', 195, 0}, AccessRead, false, "linux.resources.devices[0]: deny a *:* rwm"},
	} {
		for _, e := range []Enforcer{EnforcerV1, EnforcerV2} {
			got, by, err := SpecDecision(rules, tt.dev, tt.acc, e)
			if err != nil || got != tt.want || by != tt.by {
				t.Errorf("%s %s under %s = %v %q %v; want %v %q", tt.dev, tt.acc, e, got, by, err, tt.want, tt.by)
			}
		}
	}
	if got, by, _ := SpecDecision(nil, c1_3, AccessRead, EnforcerV1); got || by != "default deny" {
		t.Errorf("no rules: %v %q, want default deny", got, by)
	}
	// "c 1:* r" and "c 1:9 w" do not make an O_RDWR open of 1:9.
	issue := []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(1), Access: "r"}, {Allow: true, Type: "c", Major: i64(1), Minor: i64(9), Access: "w"}}
	if got, by, err := SpecDecision(issue, DeviceRef{'c', 1, 9}, AccessRead|AccessWrite, EnforcerV2); got || err != nil {
		t.Errorf("c 1:9 rw: allowed=%v by %q, %v; want denied", got, by, err)
	}
	for name, bad := range map[string][]specs.LinuxDeviceCgroup{
		"type p":       {{Allow: true, Type: "p", Access: "r"}},
		"empty access": {{Allow: true, Type: "c", Major: i64(1)}},
		// runc refuses to punch a hole in a wider rule.
		"hole": {{Allow: false, Access: "rwm"}, {Allow: true, Type: "c", Major: i64(195), Access: "rwm"},
			{Allow: false, Type: "c", Major: i64(195), Minor: i64(255), Access: "w"}},
	} {
		if _, _, err := SpecDecision(bad, c1_3, AccessRead, EnforcerV1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestDrift: the spec asks for the NVIDIA nodes; the kernel's v1 list lost
// them (a systemd daemon-reload), and with them the mknod runc's defaults
// grant every device; c 1:3 mknod, which the spec did not ask for, is
// runc's default too, so it is no drift; then the v2 part cannot be read.
func TestDrift(t *testing.T) {
	rules := []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rw"},
		{Allow: true, Type: "c", Major: i64(195), Access: "rw"},
	}
	p := &Policy{V1Applies: true, V1: v1Policy(t, "c 1:3 rwm\n")}
	rep, err := p.Drift(rules, []DeviceRef{c1_3, {'c', 195, 0}})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		Dev  DeviceRef
		Acc  Access
		Spec bool
	}
	var got []key
	for _, it := range rep.Differ {
		got = append(got, key{it.Device, it.Access, it.SpecAllowed})
	}
	want := []key{
		{DeviceRef{'c', 195, 0}, AccessRead, true},
		{DeviceRef{'c', 195, 0}, AccessWrite, true},
		{DeviceRef{'c', 195, 0}, AccessMknod, true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("drift (-want +got)\n%s", d)
	}
	if len(rep.Undecided) != 0 {
		t.Errorf("undecided %v", rep.Undecided)
	}

	// With an undecidable v2 part, only definite v1 denials still compare.
	p.V2Applies, p.V2Err = true, ErrCapturedHost
	rep, err = p.Drift(rules, []DeviceRef{c1_3, {'c', 195, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Differ) != 3 || len(rep.Undecided) != 3 {
		t.Errorf("differ %d (want the three 195:0 denials), undecided %d (want c 1:3 r, w, m)", len(rep.Differ), len(rep.Undecided))
	}
	for _, it := range rep.Differ {
		if it.Access == AccessMknod && it.SpecRule != "runc's default device rule: allow c *:* m" {
			t.Errorf("mknod decided by %q, want runc's default rule", it.SpecRule)
		}
	}
}

func TestCombine(t *testing.T) {
	allow := &Decision{Allowed: true, Known: true, DecidedBy: "a"}
	deny := &Decision{Known: true, DecidedBy: "d"}
	unk := &Decision{Reason: "u"}
	for _, tt := range []struct {
		parts []*Decision
		want  Decision
	}{
		{[]*Decision{allow, nil}, Decision{Allowed: true, Known: true, DecidedBy: "a"}},
		{[]*Decision{allow, allow}, Decision{Allowed: true, Known: true, DecidedBy: "a; a"}},
		{[]*Decision{unk, deny}, *deny},
		{[]*Decision{allow, unk}, Decision{Reason: "u", DecidedBy: "a"}},
		{[]*Decision{nil, nil}, Decision{Reason: "no cgroup device controller is in use"}},
	} {
		if d := cmp.Diff(tt.want, Combine(tt.parts...)); d != "" {
			t.Errorf("(-want +got)\n%s", d)
		}
	}
}

// runcShaped builds an allow-list program the way runc's generator lays
// it out: load the context into r2-r5, one compare block per rule, deny at
// the end.
func runcShaped(rules []DeviceRef) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), asm.And.Imm32(asm.R2, 0xffff),
		asm.LoadMem(asm.R3, asm.R1, 0, asm.Word), asm.RSh.Imm32(asm.R3, 16),
		asm.LoadMem(asm.R4, asm.R1, 4, asm.Word), asm.LoadMem(asm.R5, asm.R1, 8, asm.Word),
	}
	for i, r := range rules {
		next := "block-" + string(rune('a'+i+1))
		typ := int32(2)
		if r.Type == 'b' {
			typ = 1
		}
		first := asm.JNE.Imm(asm.R2, typ, next)
		if i > 0 {
			first = first.WithSymbol("block-" + string(rune('a'+i)))
		}
		insns = append(insns, first,
			asm.JNE.Imm(asm.R4, int32(r.Major), next), asm.JNE.Imm(asm.R5, int32(r.Minor), next),
			asm.Mov.Imm32(asm.R0, 1), asm.Return())
	}
	return append(insns, asm.Mov.Imm32(asm.R0, 0).WithSymbol("block-"+string(rune('a'+len(rules)))), asm.Return())
}

// gpuNodes are the nodes of an 8-GPU NVIDIA host: nvidia0-7, nvidiactl,
// nvidia-uvm, nvidia-uvm-tools, nvidia-modeset.
var gpuNodes = []DeviceRef{
	{'c', 195, 0}, {'c', 195, 1}, {'c', 195, 2}, {'c', 195, 3}, {'c', 195, 4}, {'c', 195, 5}, {'c', 195, 6}, {'c', 195, 7},
	{'c', 195, 255}, {'c', 509, 0}, {'c', 509, 1}, {'c', 195, 254},
}

func BenchmarkEvaluate8GPU(b *testing.B) {
	allow := []DeviceRef{{'c', 1, 3}, {'c', 1, 5}, {'c', 1, 7}, {'c', 1, 8}, {'c', 1, 9}, {'c', 5, 0}, {'c', 5, 2}, {'c', 10, 200}}
	allow = append(allow, gpuNodes[:8]...)
	rules, _ := ParseDevicesList([]byte("c *:* m\nb *:* m\nc 1:3 rwm\nc 1:5 rwm\nc 1:7 rwm\nc 1:8 rwm\nc 1:9 rwm\nc 5:0 rwm\nc 5:2 rwm\nc 136:* rwm\nc 10:200 rwm\nc 195:* rwm\nc 509:* rw\n"))
	p := &Policy{
		// As ReadV1 builds it.
		V1Applies: true, V1: &V1Policy{Levels: []V1Level{newV1Level("/sys/fs/cgroup/devices/k8s/pod", rules, nil)}},
		V2Applies: true, V2: &V2Policy{Dir: "/sys/fs/cgroup/unified/k8s/pod", Programs: []*V2Program{NewV2Program(7, "runc-shaped", runcShaped(allow))}},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range gpuNodes {
			if r := p.Evaluate(n, AccessAll); len(r.Each) != 3 {
				b.Fatal(r)
			}
		}
	}
}
