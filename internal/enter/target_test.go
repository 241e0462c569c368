package enter

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const statusSample = `Name:	sleep
Umask:	0022
State:	S (sleeping)
Uid:	100000	100000	100000	100000
Gid:	100005	100005	100005	100005
FDSize:	64
Groups:	100010 100011 
NStgid:	4242	1
CapInh:	0000000000000000
CapPrm:	0000000020000420
CapEff:	0000000020000420
CapBnd:	0000000020000420
CapAmb:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
Seccomp_filters:	1
`

func TestParseStatus(t *testing.T) {
	s, err := ParseStatus([]byte(statusSample))
	if err != nil {
		t.Fatal(err)
	}
	want := &Status{UID: [4]uint32{100000, 100000, 100000, 100000}, GID: [4]uint32{100005, 100005, 100005, 100005},
		Groups: []uint32{100010, 100011}, CapPrm: 0x20000420, CapEff: 0x20000420, CapBnd: 0x20000420, NoNewPrivs: true, Seccomp: 2}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for name, bad := range map[string]string{
		"no uid":        strings.Replace(statusSample, "Uid:", "Xid:", 1),
		"three ids":     strings.Replace(statusSample, "100000\t100000\t100000\t100000", "1 2 3", 1),
		"bad cap":       strings.Replace(statusSample, "CapEff:\t0000000020000420", "CapEff:\tzz", 1),
		"bad nnp":       strings.Replace(statusSample, "NoNewPrivs:\t1", "NoNewPrivs:\t7", 1),
		"bad seccomp":   strings.Replace(statusSample, "Seccomp:\t2", "Seccomp:\t9", 1),
		"negative uid":  strings.Replace(statusSample, "Uid:\t100000", "Uid:\t-1", 1),
		"no groups":     strings.Replace(statusSample, "Groups:", "Grupos:", 1),
		"bad group":     strings.Replace(statusSample, "100010", "x", 1),
		"empty":         "",
		"binary":        "\x00\x01Uid:\xff",
		"huge uid":      strings.Replace(statusSample, "Uid:\t100000", "Uid:\t99999999999", 1),
		"cap too large": strings.Replace(statusSample, "CapBnd:\t0000000020000420", "CapBnd:\t10000000000000000", 1),
	} {
		if _, err := ParseStatus([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// This process's own status parses.
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	me, err := ParseStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	if int(me.UID[1]) != os.Geteuid() {
		t.Errorf("euid %d, os says %d", me.UID[1], os.Geteuid())
	}
}

func TestParseIDMap(t *testing.T) {
	m, err := ParseIDMap([]byte("         0     100000      65536\n     65536    1000000          1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := ToInside(m, 100005); !ok || in != 5 {
		t.Errorf("100005 -> %d %v", in, ok)
	}
	if in, ok := ToInside(m, 1000000); !ok || in != 65536 {
		t.Errorf("1000000 -> %d %v", in, ok)
	}
	if _, ok := ToInside(m, 0); ok {
		t.Error("host root mapped")
	}
	id, err := ParseIDMap([]byte("         0          0 4294967295\n"))
	if err != nil || !IsIdentity(id) {
		t.Errorf("identity: %v %v", id, err)
	}
	for _, bad := range []string{"0 0", "0 x 1", "0 0 0", "4294967295 0 2", "1 2 3 4", "0 100 10\n5 200 10", "0 100 10\n20 105 1"} {
		if _, err := ParseIDMap([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := ParseIDMap([]byte(strings.Repeat("0 0 1\n", maxIDMapLines+1))); err == nil {
		t.Error("too many lines: no error")
	}
}

func TestParseCgroupFileAndPlace(t *testing.T) {
	lines, err := ParseCgroupFile([]byte("5:devices:/c1\n9:name=systemd:/c1\n1:cpu,cpuacct:/c1\n0::/c1\n"))
	if err != nil {
		t.Fatal(err)
	}
	mi := `25 24 0:22 / /sys/fs/cgroup/devices rw,relatime shared:10 - cgroup cgroup rw,devices
26 24 0:23 / /sys/fs/cgroup/systemd rw,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
27 24 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
28 24 0:25 / /sys/fs/cgroup/unified rw,relatime shared:13 - cgroup2 cgroup2 rw
`
	dirs, err := placeCgroups(lines, []byte(mi))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range dirs {
		if d.Err != nil {
			t.Errorf("%s: %v", d.Name(), d.Err)
		}
		got[d.Name()] = d.Dir
	}
	want := map[string]string{"devices": "/sys/fs/cgroup/devices/c1", "name=systemd": "/sys/fs/cgroup/systemd/c1",
		"cpu,cpuacct": "/sys/fs/cgroup/cpu,cpuacct/c1", "cgroup2": "/sys/fs/cgroup/unified/c1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// A mount that shows only part of the hierarchy, a path above it, and
	// one that climbs out of a cgroup namespace.
	lines, _ = ParseCgroupFile([]byte("0::/kubepods/pod1/c\n5:devices:/../c\n"))
	dirs, _ = placeCgroups(lines, []byte("28 24 0:25 /kubepods /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"))
	if dirs[0].Dir != "/sys/fs/cgroup/pod1/c" || dirs[1].Err == nil || !dirs[1].decidesDevices() {
		t.Errorf("%+v", dirs)
	}
	for _, bad := range []string{"x:devices:/", "1:devices", "0:cpu:/", "1:devices:relative"} {
		if _, err := ParseCgroupFile([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseEnviron(t *testing.T) {
	got := ParseEnviron([]byte("PATH=/bin\x00NVIDIA_VISIBLE_DEVICES=all\x00junk\x00=x\x00EMPTY=\x00"))
	want := []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all", "EMPTY="}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(statusSample))
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := ParseStatus(b); err == nil && len(s.Groups) > 65536 {
			t.Fatal("too many groups")
		}
	})
}

func FuzzParseIDMap(f *testing.F) {
	f.Add([]byte("0 100000 65536\n"))
	f.Add([]byte("0 0 4294967295"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseIDMap(b)
		if err != nil {
			return
		}
		for _, e := range m {
			if in, ok := ToInside(m, e.Outside); !ok || in != e.Inside {
				t.Fatalf("%v: %d -> %d %v", m, e.Outside, in, ok)
			}
		}
	})
}

func FuzzParseCgroupFile(f *testing.F) {
	f.Add([]byte("5:devices:/c1\n0::/c1\n"), []byte("28 24 0:25 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"))
	if a, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && len(b) < 1<<16 {
			f.Add(a, b)
		}
	}
	f.Fuzz(func(t *testing.T, cg, mi []byte) {
		lines, err := ParseCgroupFile(cg)
		if err != nil {
			return
		}
		dirs, err := placeCgroups(lines, mi)
		if err != nil {
			return
		}
		for _, d := range dirs {
			if d.Dir != "" && strings.Contains(d.Dir, "/../") {
				t.Fatalf("a placed directory climbs: %q", d.Dir)
			}
		}
	})
}
