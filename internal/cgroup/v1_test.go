package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups/devices/config"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func TestParseDevicesList(t *testing.T) {
	got, err := ParseDevicesList([]byte("c 1:3 rwm\nb *:* m\nc 195:* rw\nc 4294967295:1 r\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Rule{
		{Type: 'c', Major: 1, Minor: 3, Permissions: "rwm", Allow: true},
		{Type: 'b', Major: wc, Minor: wc, Permissions: "m", Allow: true},
		{Type: 'c', Major: 195, Minor: wc, Permissions: "rw", Allow: true},
		{Type: 'c', Major: wc, Minor: 1, Permissions: "r", Allow: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if r, err := ParseDevicesList(nil); err != nil || len(r) != 0 {
		t.Errorf("empty list = %v, %v; want no rules (default deny, nothing allowed)", r, err)
	}
	for _, bad := range []string{
		"c 1:3", "c  1:3 rwm", "x 1:3 r", "c 1:3 rwx", "c 1:3 rr", "c 1:3 ", "c 1-3 r", "c +1:3 r",
		"c 1:4294967296 r", "a 1:3 rwm", "a *:* r", "cc 1:3 r", "c 1:3 r extra",
	} {
		if _, err := ParseDevicesList([]byte(bad + "\n")); err == nil {
			t.Errorf("ParseDevicesList(%q): no error", bad)
		}
	}
}

func v1Policy(t *testing.T, list string) *V1Policy {
	t.Helper()
	rules, err := ParseDevicesList([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	return &V1Policy{Levels: []V1Level{newV1Level("/sys/fs/cgroup/devices/x", rules, nil)}}
}

func TestV1Evaluate(t *testing.T) {
	p := v1Policy(t, "c 195:* rwm\nc 1:* r\nc 1:9 w\nb 8:0 m\n")
	const list = "/sys/fs/cgroup/devices/x/devices.list"
	for _, tt := range []struct {
		dev  DeviceRef
		acc  Access
		want Decision
	}{
		{DeviceRef{'c', 195, 3}, AccessWrite, Decision{Allowed: true, Known: true, DecidedBy: list + ": c 195:* rwm"}},
		{DeviceRef{'c', 195, 3}, AccessRead | AccessWrite, Decision{Allowed: true, Known: true, DecidedBy: list + ": c 195:* rwm"}},
		{DeviceRef{'b', 195, 3}, AccessRead, Decision{Known: true, DecidedBy: list + ": no line allows b 195:3 r (default deny)"}},
		{DeviceRef{'c', 1, 9}, AccessWrite, Decision{Allowed: true, Known: true, DecidedBy: list + ": c 1:9 w"}},
		// One open asking r and w needs one exception holding both.
		{DeviceRef{'c', 1, 9}, AccessRead | AccessWrite, Decision{Known: true,
			DecidedBy: list + ": no line allows c 1:9 rw (default deny)",
			Reason:    "each access is allowed by a different line, but one operation asking for all of them needs a single line holding all"}},
		{DeviceRef{'b', 8, 0}, AccessMknod, Decision{Allowed: true, Known: true, DecidedBy: list + ": b 8:0 m"}},
		{DeviceRef{'b', 8, 1}, AccessMknod, Decision{Known: true, DecidedBy: list + ": no line allows b 8:1 m (default deny)"}},
		{DeviceRef{'x', 8, 1}, AccessMknod, Decision{Reason: `device type 'x' is not 'c' or 'b'`}},
		{DeviceRef{'c', 1, 1}, 0, Decision{Reason: "access 0x0 is not a set of r, w, m"}},
	} {
		if d := cmp.Diff(tt.want, p.Evaluate(tt.dev, tt.acc)); d != "" {
			t.Errorf("%s %s: (-want +got)\n%s", tt.dev, tt.acc, d)
		}
	}
	allow := v1Policy(t, "a *:* rwm\n")
	d := allow.Evaluate(DeviceRef{'c', 195, 0}, AccessRead)
	if d.Known || d.Allowed || !strings.Contains(d.Reason, "hides its deny rules") {
		t.Errorf("default-allow cgroup: %+v; want undecided with the reason", d)
	}
}

// writeTree writes files (host path -> content) under a temp root.
func writeTree(t *testing.T, files map[string]string) *hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	testutil.WriteTree(t, dir, files, nil, "")
	return hostfs.MustNew(dir)
}

// TestReadPolicyFixtureV1 is a v1-only host where a docker container's
// cgroup denies by default and allows the NVIDIA nodes read-only.
func TestReadPolicyFixtureV1(t *testing.T) {
	const dev = "/sys/fs/cgroup/devices"
	root := writeTree(t, map[string]string{
		"/proc/self/mountinfo":                  "35 30 0:32 / /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n",
		"/proc/4242/cgroup":                     "5:devices:/docker/abc\n1:name=systemd:/docker/abc\n",
		dev + "/devices.list":                   "a *:* rwm\n",
		dev + "/docker/devices.list":            "a *:* rwm\n",
		dev + "/docker/abc/devices.list":        "c 1:3 rwm\nc 195:* r\n",
		dev + "/docker/broken/devices.list":     "c 1:3 rwx\n",
		dev + "/docker/broken/sub/devices.list": "c 1:3 rwm\n",
	})
	p, err := ReadPolicy(root, Target{PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	if p.V2Applies || p.Mounts.Mode != ModeV1 || p.V1Path != "/docker/abc" {
		t.Fatalf("policy %+v", p)
	}
	if got, want := len(p.V1.Levels), 3; got != want {
		t.Fatalf("%d levels, want %d (the cgroup, docker, the root)", got, want)
	}
	r := p.Evaluate(DeviceRef{'c', 195, 0}, AccessRead|AccessWrite)
	want := Result{
		Device: DeviceRef{'c', 195, 0}, Access: AccessRead | AccessWrite,
		Whole: AccessResult{Access: AccessRead | AccessWrite,
			V1:       &Decision{Known: true, DecidedBy: dev + "/docker/abc/devices.list: no line allows c 195:0 rw (default deny)"},
			Combined: Decision{Known: true, DecidedBy: dev + "/docker/abc/devices.list: no line allows c 195:0 rw (default deny)"}},
		Each: []AccessResult{
			{Access: AccessRead,
				V1:       &Decision{Allowed: true, Known: true, DecidedBy: dev + "/docker/abc/devices.list: c 195:* r"},
				Combined: Decision{Allowed: true, Known: true, DecidedBy: dev + "/docker/abc/devices.list: c 195:* r"}},
			{Access: AccessWrite,
				V1:       &Decision{Known: true, DecidedBy: dev + "/docker/abc/devices.list: no line allows c 195:0 w (default deny)"},
				Combined: Decision{Known: true, DecidedBy: dev + "/docker/abc/devices.list: no line allows c 195:0 w (default deny)"}},
		},
	}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}

	// A path target, and an unreadable ancestor that does not matter.
	p, err = ReadPolicy(root, Target{Cgroup: "/docker/broken/sub"})
	if err != nil {
		t.Fatal(err)
	}
	if p.V1 == nil || p.V1.Levels[1].Err == nil {
		t.Fatalf("want the broken parent's error kept: %+v", p.V1)
	}
	if d := p.Evaluate(DeviceRef{'c', 1, 3}, AccessWrite).Whole.Combined; !d.Known || !d.Allowed {
		t.Errorf("c 1:3 w under a broken parent: %+v", d)
	}
	// The target's own list malformed: undecided, with the error.
	p, err = ReadPolicy(root, Target{Cgroup: "/docker/broken"})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Evaluate(DeviceRef{'c', 1, 3}, AccessRead).Whole.Combined; d.Known || !strings.Contains(d.Reason, "rwx") {
		t.Errorf("malformed own list: %+v; want undecided naming the bad line", d)
	}
	// Missing cgroup.
	p, err = ReadPolicy(root, Target{Cgroup: "/nope"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(p.V1Err, os.ErrNotExist) {
		t.Errorf("missing cgroup: V1Err %v", p.V1Err)
	}
	if _, err := ReadPolicy(root, Target{PID: 99}); err == nil {
		t.Error("missing pid: no error")
	}
	if _, err := ReadPolicy(root, Target{Cgroup: "rel"}); err == nil {
		t.Error("relative cgroup path: no error")
	}
}

// TestReadPolicyCapturedHybrid: a hybrid snapshot has the v1 lists but not
// the BPF programs; the v2 part is undecided with ErrCapturedHost, and a
// v1 denial still decides the combination.
func TestReadPolicyCapturedHybrid(t *testing.T) {
	root := writeTree(t, map[string]string{
		"/proc/self/mountinfo":                              hybridMountinfo,
		"/sys/fs/cgroup/devices/k8s/pod/devices.list":       "c 1:3 rwm\n",
		"/sys/fs/cgroup/unified/k8s/pod/cgroup.controllers": "",
	})
	p, err := ReadPolicy(root, Target{Cgroup: "/k8s/pod"})
	if err != nil {
		t.Fatal(err)
	}
	if !IsCapturedHost(p.V2Err) {
		t.Fatalf("V2Err = %v, want ErrCapturedHost", p.V2Err)
	}
	r := p.Evaluate(DeviceRef{'c', 195, 0}, AccessRead).Whole
	if !r.Combined.Known || r.Combined.Allowed || r.V2 == nil || r.V2.Known {
		t.Errorf("v1 denies, v2 unreadable: %+v / v2 %+v; want a known denial", r.Combined, r.V2)
	}
	r = p.Evaluate(DeviceRef{'c', 1, 3}, AccessRead).Whole
	if r.Combined.Known || !strings.Contains(r.Combined.Reason, "captured host") {
		t.Errorf("v1 allows, v2 unreadable: %+v; want undecided", r.Combined)
	}
}

func TestReadV2NotLive(t *testing.T) {
	_, err := ReadV2(hostfs.MustNew(t.TempDir()), "/sys/fs/cgroup")
	if !errors.Is(err, ErrCapturedHost) {
		t.Errorf("err = %v, want ErrCapturedHost", err)
	}
}

func FuzzParseDevicesList(f *testing.F) {
	for _, s := range []string{"a *:* rwm\n", "c 1:3 rwm\nb *:* m\n", "c 4294967295:1 r\n", "c 195:* rw"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rules, err := ParseDevicesList(b)
		if err != nil {
			return
		}
		// What parses evaluates without panicking and prints back to a
		// line that parses to the same rule.
		p := &V1Policy{Levels: []V1Level{{Dir: "/x", Rules: rules}}}
		p.Evaluate(DeviceRef{'c', 1, 3}, AccessRead|AccessWrite)
		for _, r := range rules {
			again, err := ParseDevicesList([]byte(r.CgroupString()))
			if err != nil || len(again) != 1 || again[0] != r {
				t.Fatalf("%q: round trip gave %v, %v", r.CgroupString(), again, err)
			}
		}
	})
}

func corpusDir(t *testing.T, sub string) string {
	t.Helper()
	return filepath.Join(testutil.CorpusDir(t), sub)
}

// readSections splits a corpus file into "==== NAME ====" sections.
func readSections(t *testing.T, p string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	name := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "==== ") && strings.HasSuffix(line, " ====") {
			name = strings.TrimSuffix(strings.TrimPrefix(line, "==== "), " ====")
			out[name] = ""
			continue
		}
		if name != "" {
			out[name] += line + "\n"
		}
	}
	return out
}

// TestCorpusDevicesListVectors runs runc's devices.list emulator vectors:
// the invalid ones must not parse, the valid ones must give the decisions
// the kernel's rules give.
func TestCorpusDevicesListVectors(t *testing.T) {
	secs := readSections(t, filepath.Join(corpusDir(t, "cgroups-devicefilter"), "devices-list-emulator-vectors.txt"))
	if len(secs) < 10 {
		t.Fatalf("found %d sections, the format changed?", len(secs))
	}
	type check struct {
		dev     DeviceRef
		acc     Access
		allowed bool
	}
	valid := map[string][]check{
		"BlacklistMode": nil, // undecided: checked below
		"WhitelistBasic": {
			{DeviceRef{'c', 4, 2}, AccessRead | AccessWrite, true}, {DeviceRef{'c', 4, 2}, AccessMknod, false},
			{DeviceRef{'c', 4, 3}, AccessRead, false}, {DeviceRef{'b', 4, 2}, AccessRead, false},
		},
		"WhitelistWildcard": {
			{DeviceRef{'b', 0, 7}, AccessMknod, true}, {DeviceRef{'b', 0, 7}, AccessRead, false},
			{DeviceRef{'b', 1, 0}, AccessMknod, false}, {DeviceRef{'c', 0, 7}, AccessMknod, false},
		},
		"WhitelistDuplicate": {
			{DeviceRef{'c', 1, 1}, AccessAll, true}, {DeviceRef{'c', 99, 1}, AccessWrite, true}, {DeviceRef{'b', 1, 1}, AccessRead, false},
		},
		"WhitelistComplicated": {
			{DeviceRef{'c', 1, 3}, AccessAll, true}, {DeviceRef{'c', 136, 5}, AccessRead | AccessWrite, true},
			{DeviceRef{'c', 10, 200}, AccessWrite, true}, {DeviceRef{'c', 1, 4}, AccessMknod, true},
			{DeviceRef{'c', 1, 4}, AccessRead, false}, {DeviceRef{'b', 8, 0}, AccessMknod, true},
			{DeviceRef{'b', 8, 0}, AccessRead, false}, {DeviceRef{'c', 195, 0}, AccessRead, false},
		},
	}
	for name, body := range secs {
		t.Run(name, func(t *testing.T) {
			checks, ok := valid[name]
			rules, err := ParseDevicesList([]byte(body))
			if !ok {
				if !strings.HasPrefix(name, "Invalid") {
					t.Fatalf("unknown vector %s", name)
				}
				if err == nil {
					t.Errorf("invalid vector parsed: %v", rules)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := &V1Policy{Levels: []V1Level{{Dir: "/x", Rules: rules}}}
			for _, r := range rules {
				p.Levels[0].DefaultAllow = p.Levels[0].DefaultAllow || r.Type == 'a'
			}
			if name == "BlacklistMode" {
				if d := p.Evaluate(DeviceRef{'c', 1, 3}, AccessRead); d.Known {
					t.Errorf("default-allow list decided: %+v", d)
				}
				return
			}
			for _, c := range checks {
				d := p.Evaluate(c.dev, c.acc)
				if !d.Known || d.Allowed != c.allowed {
					t.Errorf("%s %s: %+v, want allowed=%v", c.dev, c.acc, d, c.allowed)
				}
			}
		})
	}
}
