package cgroup

import (
	"bytes"
	"errors"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

var captureDevices = []DeviceRef{{'c', 1, 3}, {'c', 1, 5}, {'c', 1, 7}, {'c', 195, 0}, {'c', 195, 255}, {'b', 7, 0}, {'c', 10, 200}}

func TestCaptureRoundTrip(t *testing.T) {
	p := &V2Policy{Dir: "/sys/fs/cgroup/x", Programs: []*V2Program{
		NewV2Program(7, "deny_some", denySomeProgram()),
		{ID: 9, Name: "unreadable", Err: errors.New("prog id 9: operation not permitted")},
	}}
	b, err := marshalV2(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := unmarshalV2(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Programs) != 2 || q.Programs[1].Err == nil || q.Programs[0].Name != "deny_some (captured)" {
		t.Fatalf("decoded %+v", q.Programs)
	}
	for _, d := range captureDevices {
		for _, a := range AccessAll.Bits() {
			want, got := p.Evaluate(d, a), q.Evaluate(d, a)
			if want.Known != got.Known || want.Allowed != got.Allowed {
				t.Errorf("%s %s: live %+v, replayed %+v", d, a, want, got)
			}
		}
	}
	for _, bad := range [][]byte{nil, []byte("{}"), []byte(`{"format":1,"programs":[{"id":1,"insns":"AAA="}]}`)} {
		if q, err := unmarshalV2(bad); err == nil && (len(q.Programs) == 0 || q.Programs[0].Err == nil) {
			t.Errorf("%q decoded without complaint", bad)
		}
	}
}

func FuzzUnmarshalV2(f *testing.F) {
	b, _ := marshalV2(&V2Policy{Dir: "/x", Programs: []*V2Program{NewV2Program(1, "p", denySomeProgram())}})
	f.Add(b)
	f.Add([]byte(`{"format":1,"programs":[{"id":1,"insns":"GAAAAAAAAAAAAAAAAAAAAA=="}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := unmarshalV2(b)
		if err != nil {
			return
		}
		for _, d := range captureDevices[:2] {
			p.Evaluate(d, AccessRead) // must terminate, never panic
		}
	})
}

// TestSnapshotKeepsDevicePrograms: a snapshot of a live host holds the
// device programs it read, and a replay decides as the kernel did.
func TestSnapshotKeepsDevicePrograms(t *testing.T) {
	requireRoot(t)
	m := testMounts(t)
	if m.Unified == "" {
		t.Skip("no cgroup2 hierarchy is mounted on this host")
	}
	cg := cgroupWithTestProgram(t, m.Unified, "adoc_test_snap")

	live := hostfs.MustNew("/")
	rec := live.Record()
	lp, err := ReadV2(live, cg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := live.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	sp, err := ReadV2(snap, cg)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if len(sp.Programs) != len(lp.Programs) || len(sp.Programs) == 0 {
		t.Fatalf("replay has %d programs, live %d", len(sp.Programs), len(lp.Programs))
	}
	for _, d := range captureDevices {
		for _, a := range AccessAll.Bits() {
			want, got := lp.Evaluate(d, a), sp.Evaluate(d, a)
			if want.Known != got.Known || want.Allowed != got.Allowed {
				t.Errorf("%s %s: live %+v, replayed %+v", d, a, want, got)
			}
		}
	}
}
