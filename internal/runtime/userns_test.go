package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func TestParseIDMap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    IDMap
		wantErr bool
	}{
		{"initial namespace", "         0          0 4294967295\n", IDMap{{0, 0, 4294967295}}, false},
		{"container", "         0     100000      65536\n", IDMap{{0, 100000, 65536}}, false},
		{"two extents", "0 1000 1\n1 100000 65535\n", IDMap{{0, 1000, 1}, {1, 100000, 65535}}, false},
		{"never written", "", nil, false},
		{"two fields", "0 100000\n", nil, true},
		{"four fields", "0 1 2 3\n", nil, true},
		{"zero count", "0 100000 0\n", nil, true},
		{"past 2^32", "4294967295 0 2\n", nil, true},
		{"outside past 2^32", "0 4294967295 2\n", nil, true},
		{"negative", "-1 0 1\n", nil, true},
		{"inside overlap", "0 1000 10\n5 2000 10\n", nil, true},
		{"outside overlap", "0 1000 10\n100 1005 10\n", nil, true},
		{"NUL", "0 1000\x00 10\n", nil, true},
		{"341 extents", func() string {
			var b strings.Builder
			for i := 0; i < 341; i++ {
				fmt.Fprintf(&b, "%d %d 1\n", i, 1000+i)
			}
			return b.String()
		}(), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIDMap([]byte(tc.in))
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			testutil.CheckParse(t, got, err, tc.want, tc.wantErr)
		})
	}
	m := IDMap{{0, 100000, 65536}}
	for outside, want := range map[uint32]struct {
		in uint32
		ok bool
	}{100000: {0, true}, 165535: {65535, true}, 165536: {0, false}, 0: {0, false}, 99999: {0, false}} {
		if in, ok := m.ToInside(outside); in != want.in || ok != want.ok {
			t.Errorf("ToInside(%d) = %d, %v; want %d, %v", outside, in, ok, want.in, want.ok)
		}
	}
	if !(IDMap{{0, 0, 4294967295}}).IsIdentity() || m.IsIdentity() {
		t.Error("IsIdentity")
	}
	if in, ok := (IDMap{{0, 0, 4294967295}}).ToInside(4294967294); !ok || in != 4294967294 {
		t.Error("the identity map")
	}
}

func FuzzParseIDMap(f *testing.F) {
	f.Add([]byte("0 100000 65536\n"))
	f.Add([]byte("0 0 4294967295\n1 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseIDMap(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// A map that parsed is a bijection on its ranges.
		for _, e := range m {
			for _, id := range []uint32{e.Outside, e.Outside + e.Count - 1} {
				if in, ok := m.ToInside(id); !ok || in != e.Inside+(id-e.Outside) {
					t.Fatalf("%v: ToInside(%d) = %d, %v", m, id, in, ok)
				}
			}
		}
	})
}

// The owner view and the mode check, over the cases a container meets.
func TestModeDecision(t *testing.T) {
	node := func(mode fs.FileMode, uid, gid uint32) hostfs.Node {
		return hostfs.Node{Type: hostfs.TypeChar, Major: 195, Minor: 0, Mode: mode, UID: uid, GID: gid}
	}
	ok := ProcRead{State: ReadOK}
	userns := &UserNS{UIDMap: IDMap{{0, 100000, 65536}}, GIDMap: IDMap{{0, 100000, 65536}}, UIDRead: ok, GIDRead: ok,
		IDRead: ok, ReaderIDRead: ok, ID: "user:[2]", ReaderID: "user:[1]", OverflowUID: 65534, OverflowGID: 65534}
	hostns := &UserNS{IDRead: ok, ReaderIDRead: ok, ID: "user:[1]", ReaderID: "user:[1]"}
	nsRoot := &ProcStatus{UID: [4]uint32{100000, 100000, 100000, 100000}, GID: [4]uint32{100000, 100000, 100000, 100000},
		CapEff: 1<<capDACOverride | 1<<capDACReadSearch}
	hostRoot := &ProcStatus{CapEff: 1 << capDACOverride}
	nonRoot := &ProcStatus{UID: [4]uint32{1000, 1000, 1000, 1000}, GID: [4]uint32{1000, 1000, 1000, 1000}, Groups: []uint32{44}}
	for _, tc := range []struct {
		name    string
		n       hostfs.Node
		ns      *UserNS
		st      *ProcStatus
		want    Access
		allowed bool
		by      string
	}{
		{"unmapped root-owned 0600, userns root with CAP_DAC_OVERRIDE", node(0o600, 0, 0), userns, nsRoot, MayRW, false, "CAP_DAC_OVERRIDE does not apply"},
		{"unmapped root-owned 0666: other bits", node(0o666, 0, 0), userns, nsRoot, MayRW, true, "other bits rw-"},
		{"mapped 0600 owned by the namespace's root", node(0o600, 100000, 100000), userns, nsRoot, MayRW, true, "owner bits"},
		{"mapped 0000: CAP_DAC_OVERRIDE applies", node(0o000, 100005, 100005), userns, nsRoot, MayRW, true, "CAP_DAC_OVERRIDE overrides"},
		{"host root, 0600 root-owned", node(0o600, 0, 0), hostns, hostRoot, MayRW, true, "owner bits"},
		{"host root, 0000: CAP_DAC_OVERRIDE", node(0o000, 5, 5), hostns, hostRoot, MayRW, true, "CAP_DAC_OVERRIDE"},
		{"non-root, group video 0660", node(0o660, 0, 44), hostns, nonRoot, MayRW, true, "group bits rw-"},
		{"non-root, group render 0660", node(0o660, 0, 109), hostns, nonRoot, MayRW, false, "other bits ---"},
		{"non-root, 0644 write", node(0o644, 0, 0), hostns, nonRoot, MayWrite, false, "other bits r--"},
		{"non-root, 0644 read", node(0o644, 0, 0), hostns, nonRoot, MayRead, true, "other bits r--"},
		{"owner bits win over other bits", node(0o066, 1000, 1000), hostns, nonRoot, MayRead, false, "owner bits ---"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner, group := tc.ns.Owner(tc.n.UID), tc.ns.Group(tc.n.GID)
			d := modeDecision(tc.n, owner, group, tc.st, ok, tc.want)
			if !d.Known || d.Allowed != tc.allowed || !strings.Contains(d.By, tc.by) {
				t.Errorf("%+v, want allowed %v by %q", d, tc.allowed, tc.by)
			}
		})
	}
	if v := userns.Owner(0); v.Mapped || v.Inside != 65534 || !v.Known || !strings.Contains(v.String(), "unmapped") {
		t.Errorf("unmapped root: %+v %s", v, v)
	}
	if v := userns.Owner(100007); !v.Mapped || v.Inside != 7 {
		t.Errorf("mapped: %+v", v)
	}
	if v := hostns.Owner(7); !v.Mapped || v.Inside != 7 {
		t.Errorf("shared namespace: %+v", v)
	}
	unread := &UserNS{UIDRead: ProcRead{State: ReadUnreadable}}
	if v := unread.Owner(0); v.Known {
		t.Errorf("unread map: %+v", v)
	}
	if d := modeDecision(node(0o600, 0, 0), unread.Owner(0), unread.Group(0), nsRoot, ok, MayRW); d.Known {
		t.Errorf("unknown owner mapping decided: %+v", d)
	}
	if d := modeDecision(node(0o600, 0, 0), hostns.Owner(0), hostns.Group(0), nsRoot, ProcRead{State: ReadGone}, MayRW); d.Known {
		t.Errorf("unknown credentials decided: %+v", d)
	}
}
