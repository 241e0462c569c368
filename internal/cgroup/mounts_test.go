package cgroup

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hybridMountinfo is this project's test machine (kernel 6.18, systemd
// hybrid layout), trimmed.
const hybridMountinfo = `22 26 0:21 / /sys rw,relatime - sysfs sysfs rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 30 0:32 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

func TestParseMounts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *Mounts
	}{
		{"hybrid", hybridMountinfo, &Mounts{Mode: ModeHybrid, DevicesV1: "/sys/fs/cgroup/devices", DevicesV1Root: "/", Unified: "/sys/fs/cgroup/unified", UnifiedRoot: "/"}},
		{"v2", "25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			&Mounts{Mode: ModeV2, Unified: "/sys/fs/cgroup", UnifiedRoot: "/"}},
		{"v1 only, devices with cpuset", "35 30 0:32 / /sys/fs/cgroup/devices,cpuset rw - cgroup cgroup rw,devices,cpuset\n31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
			&Mounts{Mode: ModeV1, DevicesV1: "/sys/fs/cgroup/devices,cpuset", DevicesV1Root: "/"}},
		{"container with cgroup namespace off: root is its own cgroup", "900 800 0:32 /docker/abc /sys/fs/cgroup/devices ro - cgroup cgroup rw,devices\n",
			&Mounts{Mode: ModeV1, DevicesV1: "/sys/fs/cgroup/devices", DevicesV1Root: "/docker/abc"}},
		{"widest mount wins", "1 0 0:32 /a/b /x ro - cgroup cgroup rw,devices\n2 0 0:32 / /y ro - cgroup cgroup rw,devices\n",
			&Mounts{Mode: ModeV1, DevicesV1: "/y", DevicesV1Root: "/"}},
		{"reader in a cgroup namespace two levels down", "36 31 0:33 /../.. /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n41 31 0:38 /../.. /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			&Mounts{Mode: ModeHybrid, DevicesV1: "/sys/fs/cgroup/devices", DevicesV1Root: "/../..", Unified: "/sys/fs/cgroup/unified", UnifiedRoot: "/../.."}},
		{"the mount that climbs most is the widest", "1 0 0:38 / /own rw - cgroup2 cgroup2 rw\n2 0 0:38 /../../a /x rw - cgroup2 cgroup2 rw\n3 0 0:38 /../.. /whole rw - cgroup2 cgroup2 rw\n",
			&Mounts{Mode: ModeV2, Unified: "/whole", UnifiedRoot: "/../.."}},
		{"no cgroups", "22 26 0:21 / /sys rw,relatime - sysfs sysfs rw\n", &Mounts{}},
		{"name=devices is not the controller", "39 30 0:36 / /x rw - cgroup cgroup rw,name=devices\n", &Mounts{Mode: ModeV1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMounts([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
	for _, bad := range []string{
		"garbage line\n",
		"1 0 0:38 /a/../b /x rw - cgroup2 cgroup2 rw\n", // a root the kernel does not write
		"1 0 0:38 relative /x rw - cgroup2 cgroup2 rw\n",
	} {
		if _, err := ParseMounts([]byte(bad)); err == nil {
			t.Errorf("ParseMounts(%q): no error", bad)
		}
	}
}

func TestMapDirs(t *testing.T) {
	m := &Mounts{DevicesV1: "/sys/fs/cgroup/devices", DevicesV1Root: "/docker/abc", Unified: "/sys/fs/cgroup/unified", UnifiedRoot: "/"}
	for _, tt := range []struct {
		v1   bool
		in   string
		want string
		err  bool
	}{
		{true, "/docker/abc", "/sys/fs/cgroup/devices", false},
		{true, "/docker/abc/x", "/sys/fs/cgroup/devices/x", false},
		{true, "/docker/abcd", "", true},
		{true, "relative", "", true},
		{false, "/", "/sys/fs/cgroup/unified", false},
		{false, "/a/../b", "", true}, // not a path the kernel writes: refused, not cleaned
		{false, "/../b", "", true},   // above the reader's cgroup namespace: Locate resolves it
	} {
		f := m.UnifiedDir
		if tt.v1 {
			f = m.DevicesDir
		}
		got, err := f(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("dir(%q) = %q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.err)
		}
		if tt.in == "/docker/abcd" && !errors.Is(err, ErrOutsideMount) {
			t.Errorf("dir(%q) error %v is not ErrOutsideMount", tt.in, err)
		}
	}
	if _, err := (&Mounts{}).DevicesDir("/"); err == nil {
		t.Error("unmounted hierarchy: no error")
	}
}

func TestParseProcCgroup(t *testing.T) {
	in := "12:devices:/docker/abc\n9:name=systemd:/x\n4:cpu,cpuacct:/y\n0::/user.slice/a:b\n"
	got, err := ParseProcCgroup([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []ProcCgroup{
		{12, []string{"devices"}, "/docker/abc"},
		{9, []string{"name=systemd"}, "/x"},
		{4, []string{"cpu", "cpuacct"}, "/y"},
		{0, nil, "/user.slice/a:b"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if p, ok := DevicesPath(got); !ok || p != "/docker/abc" {
		t.Errorf("DevicesPath = %q, %v", p, ok)
	}
	if p, ok := UnifiedPath(got); !ok || p != "/user.slice/a:b" {
		t.Errorf("UnifiedPath = %q, %v", p, ok)
	}
	if _, ok := DevicesPath(got[1:]); ok {
		t.Error("DevicesPath found a line that is not there")
	}
	for _, bad := range []string{"x:devices:/a\n", "1:devices\n", "1:devices:relative\n", "-1::/\n"} {
		if _, err := ParseProcCgroup([]byte(bad)); err == nil {
			t.Errorf("ParseProcCgroup(%q): no error", bad)
		}
	}
}

func FuzzParseMounts(f *testing.F) {
	f.Add([]byte(hybridMountinfo))
	f.Add([]byte("1 0 0:32 /a/b /x ro - cgroup cgroup rw,devices\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMounts(b)
		if err != nil {
			return
		}
		if m.DevicesV1 != "" {
			m.DevicesDir("/a/b")
		}
		if m.Unified != "" {
			m.UnifiedDir("/")
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("12:devices:/docker/abc\n0::/x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseProcCgroup(b)
		if err != nil {
			return
		}
		for _, x := range e {
			if x.Path == "" || x.Path[0] != '/' {
				t.Fatalf("accepted a relative path %q", x.Path)
			}
		}
	})
}
