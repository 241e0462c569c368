package cgroup

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

func TestParseNSPath(t *testing.T) {
	for _, tt := range []struct {
		in    string
		up    int
		names []string
		bad   bool
	}{
		{in: "/"},
		{in: "/a", names: []string{"a"}},
		{in: "/a/b:c d", names: []string{"a", "b:c d"}},
		{in: "/..", up: 1},
		{in: "/../y", up: 1, names: []string{"y"}},
		{in: "/../../kubepods/pod1/ctr", up: 2, names: []string{"kubepods", "pod1", "ctr"}},
		{in: "/...", names: []string{"..."}}, // a legal cgroup name
		{in: "", bad: true},
		{in: "relative", bad: true},
		{in: "../x", bad: true},
		{in: "/a/../b", bad: true}, // ".." after a name: not the kernel's
		{in: "/a/..", bad: true},
		{in: "/./a", bad: true},
		{in: "//a", bad: true},
		{in: "/a/", bad: true},
		{in: "/" + strings.Repeat("../", 10000) + "x", bad: true}, // past PATH_MAX
	} {
		p, err := parseNSPath(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("parseNSPath(%.40q): err %v, want error %v", tt.in, err, tt.bad)
			continue
		}
		if err != nil {
			continue
		}
		if p.up != tt.up || strings.Join(p.names, "/") != strings.Join(tt.names, "/") {
			t.Errorf("parseNSPath(%q) = %d up, %q; want %d, %q", tt.in, p.up, p.names, tt.up, tt.names)
		}
		if p.String() != tt.in {
			t.Errorf("parseNSPath(%q).String() = %q", tt.in, p.String())
		}
	}
}

// TestMapPathNamespaces: a path and a mount root join only when they climb
// the same number of levels above the reader's namespace root; everything
// else is an error naming why, never a directory that may be another
// cgroup's.
func TestMapPathNamespaces(t *testing.T) {
	const mnt = "/sys/fs/cgroup"
	deep := strings.Repeat("../", 1364) // 4092 bytes: within PATH_MAX
	for _, tt := range []struct {
		name, root, cg string
		want           string
		err            error // nil: any error when want is ""
	}{
		{"host", "/", "/kubepods/pod1", mnt + "/kubepods/pod1", nil},
		{"own namespace root", "/", "/", mnt, nil},
		{"inside own namespace", "/", "/child", mnt + "/child", nil},
		{"sibling of own root, whole hierarchy mounted", "/../..", "/../y", "", ErrAboveNamespace},
		{"sibling, mount of own root", "/", "/../y", "", ErrAboveNamespace},
		{"mount of the parent, sibling target", "/..", "/../y", mnt + "/y", nil},
		{"same climb, nested names", "/../../a", "/../../a/b/c", mnt + "/b/c", nil},
		{"same climb, other branch", "/../../a", "/../../b", "", ErrOutsideMount},
		{"same climb, shorter", "/../../a/b", "/../../a", "", ErrOutsideMount},
		{"prefix of a name is not a parent", "/../../a", "/../../ab", "", ErrOutsideMount},
		{"target climbs above the mount", "/", "/../../../etc", "", ErrAboveNamespace},
		{"target climbs less than the mount", "/../..", "/x", "", ErrAboveNamespace},
		{"container view, v1 without cgroupns", "/docker/abc", "/docker/abc/x", mnt + "/x", nil},
		{"deep but legal", "/" + deep + "a", "/" + deep + "a/b", mnt + "/b", nil},
		{"10,000 ../ in the path", "/", "/" + strings.Repeat("../", 10000), "", nil},
		{"10,000 ../ in the mount root", "/" + strings.Repeat("../", 10000), "/x", "", nil},
		{"not the kernel's: .. after a name", "/", "/a/../../etc", "", nil},
		{"relative", "/", "x", "", nil},
	} {
		got, err := mapPath(mnt, tt.root, tt.cg)
		switch {
		case tt.want != "":
			if err != nil || got != tt.want {
				t.Errorf("%s: mapPath(%.40q, %.40q) = %q, %v; want %q", tt.name, tt.root, tt.cg, got, err, tt.want)
			}
		case err == nil:
			t.Errorf("%s: mapPath(%.40q, %.40q) = %q, want an error", tt.name, tt.root, tt.cg, got)
		case tt.err != nil && !errors.Is(err, tt.err):
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
		case len(err.Error()) > 300:
			t.Errorf("%s: error of %d bytes: a message should not echo hostile input whole", tt.name, len(err.Error()))
		}
	}
	if _, err := mapPath("", "/", "/"); err == nil {
		t.Error("unmounted hierarchy: no error")
	}
}

// FuzzMapPath holds the mapping to what it must mean: a directory under
// the mount point with no ".." in it, and the same directory that the
// absolute paths give for every namespace root the relative ones could
// have been written from.
func FuzzMapPath(f *testing.F) {
	for _, s := range [][2]string{
		{"/", "/a"}, {"/../..", "/../y"}, {"/..", "/../y"}, {"/../../a", "/../../a/b"},
		{"/", "/../x"}, {"/a/b", "/a/b/c"}, {"/" + strings.Repeat("../", 3000), "/"},
	} {
		f.Add(s[0], s[1])
	}
	const mnt = "/sys/fs/cgroup"
	f.Fuzz(func(t *testing.T, root, cg string) {
		got, err := mapPath(mnt, root, cg)
		if err != nil {
			return
		}
		if got != path.Clean(got) || (got != mnt && !strings.HasPrefix(got, mnt+"/")) {
			t.Fatalf("mapPath(%q, %q) = %q: not a clean path under the mount", root, cg, got)
		}
		for _, part := range strings.Split(got, "/") {
			if part == ".." || part == "." {
				t.Fatalf("mapPath(%q, %q) = %q: holds %q", root, cg, got, part)
			}
		}
		// Write both as absolute paths from a namespace root R deep enough
		// for the climb: the mapping must not depend on R's names.
		mr, _ := parseNSPath(root)
		cp, _ := parseNSPath(cg)
		var r []string
		for i := 0; i < mr.up+2; i++ {
			r = append(r, "r"+strings.Repeat("x", i))
		}
		abs := func(p nsPath) string {
			return "/" + strings.Join(append(append([]string(nil), r[:len(r)-p.up]...), p.names...), "/")
		}
		again, err := mapPath(mnt, abs(mr), abs(cp))
		if err != nil || again != got {
			t.Fatalf("mapPath(%q, %q) = %q, but from R=/%s: %q, %v", root, cg, got, strings.Join(r, "/"), again, err)
		}
	})
}

// tree writes files under a temp dir (a capture or fixture host).
func tree(t *testing.T, files map[string]string) *hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.MustNew(dir)
}

// A reader in a namespace rooted at /adtest/z, as this VM showed it.
const nsMountinfo = `36 31 0:33 /../.. /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
41 31 0:38 /../.. /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const initialMountinfo = `36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

// TestLocateCaptured: a capture replays the resolution it recorded, says
// why when it recorded a failure, and never guesses without one.
func TestLocateCaptured(t *testing.T) {
	cap := func(name string) string { return path.Join(hostfs.CapturedDir, name) }
	base := map[string]string{
		"proc/self/mountinfo":                         nsMountinfo,
		"proc/42/cgroup":                              "5:devices:/../y\n0::/../y\n",
		"sys/fs/cgroup/devices/adtest/y/devices.list": "c 1:3 rw\n",
		"sys/fs/cgroup/devices/adtest/devices.list":   "a *:* rwm\n",
		"sys/fs/cgroup/devices/devices.list":          "a *:* rwm\n",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	t.Run("no resolution captured", func(t *testing.T) {
		_, err := ReadPolicy(tree(t, base), Target{PID: 42})
		if err == nil || !strings.Contains(err.Error(), "no reading of") {
			t.Fatalf("err %v, want: the capture holds no reading from the initial namespace", err)
		}
		if !strings.Contains(err.Error(), "/../y") {
			t.Errorf("err %v does not name the path it could not resolve", err)
		}
	})

	t.Run("failure captured", func(t *testing.T) {
		root := tree(t, with(map[string]string{cap(capInitialError): "setns /proc/1/ns/cgroup: operation not permitted\x1b[2J"}))
		_, err := ReadPolicy(root, Target{PID: 42})
		if err == nil || !strings.Contains(err.Error(), "when the capture was taken: setns /proc/1/ns/cgroup: operation not permitted") {
			t.Fatalf("err %v", err)
		}
		if strings.Contains(err.Error(), "\x1b") {
			t.Errorf("control bytes from the capture reach the message: %q", err)
		}
	})

	t.Run("resolution captured", func(t *testing.T) {
		root := tree(t, with(map[string]string{
			cap(capInitialMounts):                  initialMountinfo,
			cap(capInitialDir + "/proc/42/cgroup"): "5:devices:/adtest/y\n0::/adtest/y\n",
			cap(capInitialVia):                     "the cgroup namespace of PID 1 (/proc/1/ns/cgroup)",
		}))
		p, err := ReadPolicy(root, Target{PID: 42})
		if err != nil {
			t.Fatal(err)
		}
		if p.V1Path != "/adtest/y" || p.V1Shown != "/../y" || p.V1Dir != "/sys/fs/cgroup/devices/adtest/y" {
			t.Errorf("v1: path %q shown %q dir %q", p.V1Path, p.V1Shown, p.V1Dir)
		}
		if p.V2Path != "/adtest/y" || p.V2Dir != "/sys/fs/cgroup/unified/adtest/y" || !IsCapturedHost(p.V2Err) {
			t.Errorf("v2: path %q dir %q err %v", p.V2Path, p.V2Dir, p.V2Err)
		}
		if p.Resolved != "the cgroup namespace of PID 1 (/proc/1/ns/cgroup), as captured" {
			t.Errorf("resolved %q", p.Resolved)
		}
		if d := p.Evaluate(DeviceRef{'c', 1, 3}, AccessRead|AccessWrite).Whole.V1; d == nil || !d.Known || !d.Allowed {
			t.Errorf("c 1:3 rw by v1: %+v", d)
		}
		if d := p.Evaluate(DeviceRef{'c', 1, 5}, AccessRead).Whole.V1; d == nil || !d.Known || d.Allowed {
			t.Errorf("c 1:5 r by v1: %+v", d)
		}
	})

	t.Run("captured view still climbs", func(t *testing.T) {
		root := tree(t, with(map[string]string{
			cap(capInitialMounts):                  nsMountinfo,
			cap(capInitialDir + "/proc/42/cgroup"): "5:devices:/../y\n0::/../y\n",
		}))
		if _, err := ReadPolicy(root, Target{PID: 42}); err == nil || !strings.Contains(err.Error(), "still climb") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("hostile captured view", func(t *testing.T) {
		root := tree(t, with(map[string]string{
			cap(capInitialMounts):                  initialMountinfo,
			cap(capInitialDir + "/proc/42/cgroup"): "0::/" + strings.Repeat("../", 10000) + "\n",
		}))
		if _, err := ReadPolicy(root, Target{PID: 42}); err == nil {
			t.Fatal("no error")
		}
	})

	t.Run("one hierarchy resolves lexically", func(t *testing.T) {
		// The reader's devices namespace root is the hierarchy's root (its
		// devices cgroup was "/" when it unshared); cgroup2's is not.
		root := tree(t, with(map[string]string{
			"proc/self/mountinfo": "36 31 0:33 / /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n41 31 0:38 /../.. /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			"proc/42/cgroup":      "5:devices:/adtest/y\n0::/../y\n",
		}))
		p, err := ReadPolicy(root, Target{PID: 42})
		if err != nil {
			t.Fatal(err)
		}
		if p.V1Dir != "/sys/fs/cgroup/devices/adtest/y" || p.V1 == nil {
			t.Errorf("v1 dir %q, err %v", p.V1Dir, p.V1Err)
		}
		if p.V2Dir != "" || !errors.Is(p.V2Err, ErrAboveNamespace) {
			t.Errorf("v2 dir %q err %v: want not located", p.V2Dir, p.V2Err)
		}
	})

	t.Run("sound as shown, nothing captured", func(t *testing.T) {
		// Path and mount root climb alike: the join stands without a
		// re-read, and the path stays as the reader was shown it.
		root := tree(t, with(map[string]string{"proc/42/cgroup": "5:devices:/../../adtest/y\n0::/../../adtest/y\n"}))
		p, err := ReadPolicy(root, Target{PID: 42})
		if err != nil {
			t.Fatal(err)
		}
		if p.V1Dir != "/sys/fs/cgroup/devices/adtest/y" || p.V1Path != "/../../adtest/y" || p.Resolved != "" || p.V1 == nil {
			t.Errorf("v1 dir %q path %q resolved %q err %v", p.V1Dir, p.V1Path, p.Resolved, p.V1Err)
		}
	})

	t.Run("cgroup target", func(t *testing.T) {
		root := tree(t, with(map[string]string{cap(capInitialMounts): initialMountinfo}))
		p, err := ReadPolicy(root, Target{Cgroup: "/adtest/y"})
		if err != nil {
			t.Fatal(err)
		}
		if p.V1Dir != "/sys/fs/cgroup/devices/adtest/y" {
			t.Errorf("v1 dir %q", p.V1Dir)
		}
		for _, bad := range []string{"/adtest/../y", "/../y"} {
			if _, err := ReadPolicy(root, Target{Cgroup: bad}); err == nil {
				t.Errorf("--cgroup %s: no error", bad)
			}
		}
	})

	t.Run("mountinfo source", func(t *testing.T) {
		// Taken with --root /host: the host init's table was read.
		root := tree(t, map[string]string{
			"proc/self/mountinfo":                         "1 0 0:1 / /host/sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n",
			"proc/1/mountinfo":                            initialMountinfo,
			"proc/42/cgroup":                              "5:devices:/adtest/y\n0::/adtest/y\n",
			cap(capMountinfoSource):                       "/proc/1/mountinfo",
			"sys/fs/cgroup/devices/adtest/y/devices.list": "c 1:3 rw\n",
		})
		p, err := ReadPolicy(root, Target{PID: 42})
		if err != nil {
			t.Fatal(err)
		}
		if p.Mounts.Source != initMountinfo || p.V1Dir != "/sys/fs/cgroup/devices/adtest/y" {
			t.Errorf("source %q, v1 dir %q", p.Mounts.Source, p.V1Dir)
		}
		// A capture naming any other file is not followed.
		root = tree(t, map[string]string{"proc/self/mountinfo": initialMountinfo, cap(capMountinfoSource): "/etc/passwd"})
		if got := mountinfoSource(root); got != selfMountinfo {
			t.Errorf("source %q", got)
		}
	})
}
