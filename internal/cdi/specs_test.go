package cdi

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
)

// specCases are spec files, good and bad, for the equivalence test.
var specCases = map[string]string{
	"nvidia":           nvidiaSpec,
	"all-only":         allOnlySpec,
	"json":             `{"cdiVersion":"0.3.0","kind":"vendor.com/dev","devices":[{"name":"dev0","containerEdits":{"deviceNodes":[{"path":"/dev/vendor0"}]}}]}`,
	"malformed-yaml":   "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\n  containerEdits: [\n",
	"unknown-field":    "cdiVersion: 0.5.0\nkind: vendor.com/dev\nbogus: 1\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n",
	"empty":            "",
	"null":             "null\n",
	"version-too-low":  "cdiVersion: 0.3.0\nkind: vendor.com/dev\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [A=1]\n",
	"unknown-version":  "cdiVersion: 9.9.9\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n",
	"no-devices":       "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices: []\n",
	"empty-edits":      "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits: {}\n",
	"duplicate-device": "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n- name: a\n  containerEdits:\n    env: [B=1]\n",
	"bad-kind":         "cdiVersion: 0.5.0\nkind: vendor.com\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n",
	"bad-class":        "cdiVersion: 0.5.0\nkind: vendor.com/-x\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n",
	"bad-device-name":  "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a/b\n  containerEdits:\n    env: [A=1]\n",
	"bad-node-type":    "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes: [{path: /dev/x, type: z}]\n",
	"negative-major":   "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes: [{path: /dev/x, type: c, major: -1}]\n",
	"bad-hook-name":    "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    hooks: [{hookName: whenever, path: /bin/true}]\n",
	"bad-env":          "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    env: [NOEQUALS]\n",
	"bad-global-env":   "cdiVersion: 0.5.0\nkind: vendor.com/dev\ncontainerEdits:\n  env: [=x]\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n",
	"mount-no-host":    "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    mounts: [{containerPath: /x}]\n",
	"needs-0.7.0":      "cdiVersion: 0.6.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    additionalGids: [44]\n",
	"v-prefix":         "cdiVersion: v0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n",
	"annotations":      "cdiVersion: 0.6.0\nkind: vendor.com/dev\nannotations: {\"bad key!\": v}\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n",
}

// TestParseSpecMatchesLibrary holds ParseSpec (our bytes, the library's
// steps) to cdi.ReadSpec (the library reading the file itself): the same
// error text, or both valid. The library reads only the test's temp
// files here.
func TestParseSpecMatchesLibrary(t *testing.T) {
	dir := t.TempDir()
	for name, text := range specCases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			compareWithLibrary(t, p, []byte(text))
		})
	}
}

func compareWithLibrary(t testing.TB, p string, b []byte) {
	t.Helper()
	_, libErr := cdilib.ReadSpec(p, 0)
	_, ourErr := ParseSpec(b, p)
	if (libErr == nil) != (ourErr == nil) || (libErr != nil && libErr.Error() != ourErr.Error()) {
		t.Fatalf("%s:\n library: %v\n ours:    %v", p, libErr, ourErr)
	}
}

func FuzzParseSpecMatchesLibrary(f *testing.F) {
	for _, text := range specCases {
		f.Add([]byte(text))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		p := filepath.Join(dir, "fuzz.yaml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		compareWithLibrary(t, p, b)
	})
}

// TestLoadMatchesLibraryCache: what Load says resolves is what the
// library's own cache resolves over the same directories, with its
// priority rule (a later directory wins) and its conflict rule (a name
// twice in one directory is dropped, even when a later directory has it
// too).
func TestLoadMatchesLibraryCache(t *testing.T) {
	dev := func(kind, name, node string) string {
		return "cdiVersion: 0.5.0\nkind: " + kind + "\ndevices:\n- name: " + name + "\n  containerEdits:\n    deviceNodes: [{path: " + node + ", type: c, major: 1, minor: 3}]\n"
	}
	dir := hostTree(t, map[string]string{
		"/etc/cdi/a.yaml":      dev("vendor.com/dev", "x", "/dev/a") + "- name: y\n  containerEdits:\n    env: [A=1]\n",
		"/etc/cdi/b.yaml":      dev("vendor.com/dev", "x", "/dev/b"), // conflicts with a.yaml's x
		"/etc/cdi/c.json":      `{"cdiVersion":"0.5.0","kind":"vendor.com/dev","devices":[{"name":"z","containerEdits":{"env":["Z=1"]}}]}`,
		"/etc/cdi/d.yaml":      dev("other.com/gpu", "0", "/dev/d"),
		"/etc/cdi/ignored.txt": dev("vendor.com/dev", "q", "/dev/q"),
		"/etc/cdi/bad.yaml":    "cdiVersion: [\n",
		"/var/run/cdi/e.yaml":  dev("vendor.com/dev", "x", "/dev/e") + "- name: z\n  containerEdits:\n    env: [Z=2]\n", // x again (still dropped), z overridden
		"/var/run/cdi/f.yaml":  dev("other.com/gpu", "1", "/dev/f"),
	}, "", nil)
	if err := os.MkdirAll(filepath.Join(dir, "etc/cdi/sub.yaml"), 0o755); err != nil { // a directory: skipped
		t.Fatal(err)
	}
	dirs := []string{"/etc/cdi", "/var/run/cdi"}
	reg := Load(openRoot(t, dir), dirs)

	cache, err := cdilib.NewCache(cdilib.WithSpecDirs(filepath.Join(dir, "etc/cdi"), filepath.Join(dir, "var/run/cdi")), cdilib.WithAutoRefresh(false))
	if cache == nil {
		t.Fatalf("library cache: %v", err)
	}
	want := cache.ListDevices()
	slices.Sort(want)
	if diff := cmp.Diff(want, reg.Names()); diff != "" {
		t.Errorf("resolvable names differ from the library's cache (-library +ours):\n%s", diff)
	}
	if got := reg.Conflicts["vendor.com/dev=x"]; len(got) != 2 {
		t.Errorf("conflict of x: %v", got)
	}
	if d := reg.Devices["vendor.com/dev=z"]; d == nil || d.Spec.Path != "/var/run/cdi/e.yaml" {
		t.Errorf("z should resolve to the later directory's spec: %+v", d)
	}
	facts := reg.specFacts()
	mustKind(t, facts, KindDeviceConflict)
	ov := mustKind(t, facts, KindDeviceOverridden)
	if ov.Subject != "vendor.com/dev=z" {
		t.Errorf("override: %+v", ov)
	}
	inv := mustKind(t, facts, KindSpecInvalid)
	if inv.Subject != "/etc/cdi/bad.yaml" || !strings.Contains(inv.Summary, "failed to parse CDI Spec") {
		t.Errorf("invalid spec fact: %+v", inv)
	}
	// The library's per-file errors name the same files.
	var libBad []string
	for p := range cache.GetErrors() {
		libBad = append(libBad, strings.TrimPrefix(p, dir))
	}
	slices.Sort(libBad)
	var ours []string
	for _, f := range facts {
		switch f.Kind {
		case KindSpecInvalid:
			ours = append(ours, f.Subject)
		case KindDeviceConflict:
			for _, e := range f.Evidence {
				if e.Value == "declares "+f.Subject {
					ours = append(ours, e.Path)
				}
			}
		}
	}
	slices.Sort(ours)
	ours = slices.Compact(ours)
	if diff := cmp.Diff(libBad, ours); diff != "" {
		t.Errorf("files with errors differ from the library's (-library +ours):\n%s", diff)
	}
}

func TestLoadDirectories(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "etc"), 0o755)
		os.MkdirAll(filepath.Join(dir, "var/run"), 0o755)
		reg := Load(openRoot(t, dir), DefaultSpecDirs)
		f := mustKind(t, reg.specFacts(), KindSpecNone)
		if !strings.Contains(f.Summary, "/etc/cdi, /var/run/cdi") {
			t.Error(f.Summary)
		}
		if !reg.Dirs[0].Absent || !reg.Dirs[1].Absent {
			t.Errorf("dirs %+v", reg.Dirs)
		}
	})
	t.Run("not a directory ends the scan", func(t *testing.T) {
		dir := hostTree(t, map[string]string{"/var/run/cdi/a.yaml": allOnlySpec}, "", nil)
		os.RemoveAll(filepath.Join(dir, "etc/cdi"))
		os.WriteFile(filepath.Join(dir, "etc/cdi"), []byte("oops"), 0o644)
		reg := Load(openRoot(t, dir), DefaultSpecDirs)
		f := mustKind(t, reg.specFacts(), KindSpecDirNotDir)
		if f.Subject != "/etc/cdi" || len(reg.Devices) != 0 || !reg.Dirs[1].NotScanned {
			t.Errorf("%+v; devices %v; dirs %+v", f, reg.Names(), reg.Dirs)
		}
		// The library agrees: nothing resolves.
		cache, _ := cdilib.NewCache(cdilib.WithSpecDirs(filepath.Join(dir, "etc/cdi"), filepath.Join(dir, "var/run/cdi")), cdilib.WithAutoRefresh(false))
		if got := cache.ListDevices(); len(got) != 0 {
			t.Errorf("library resolves %v", got)
		}
	})
	t.Run("not captured", func(t *testing.T) {
		dir := t.TempDir() // no /etc at all: a capture that never looked there
		reg := Load(openRoot(t, dir), DefaultSpecDirs)
		facts := reg.specFacts()
		if n := len(facts.OfKind(KindSpecDirNotCaught)); n != 2 {
			t.Errorf("want 2 not-captured dirs: %s", dump(facts))
		}
		if f := mustKind(t, facts, KindSpecNone); !strings.Contains(f.Summary, "the capture does not show /etc/cdi, /var/run/cdi") {
			t.Error(f.Summary)
		}
	})
	t.Run("unreadable file", func(t *testing.T) {
		dir := hostTree(t, nil, "", nil)
		if err := syscall.Mkfifo(filepath.Join(dir, "etc/cdi/fifo.yaml"), 0o644); err != nil {
			t.Skip(err)
		}
		reg := Load(openRoot(t, dir), DefaultSpecDirs)
		f := mustKind(t, reg.specFacts(), KindSpecUnreadable)
		if f.Subject != "/etc/cdi/fifo.yaml" || !strings.Contains(f.Error, "not a regular file") {
			t.Errorf("%+v", f)
		}
	})
	t.Run("dangling symlink is the runtime's error too", func(t *testing.T) {
		dir := hostTree(t, nil, "", nil)
		os.Symlink("/nowhere.yaml", filepath.Join(dir, "etc/cdi/gone.yaml"))
		reg := Load(openRoot(t, dir), DefaultSpecDirs)
		f := mustKind(t, reg.specFacts(), KindSpecInvalid)
		if f.Subject != "/etc/cdi/gone.yaml" {
			t.Errorf("%+v", f)
		}
	})
}

func TestSpecVersionsFacts(t *testing.T) {
	dir := hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": nvidiaSpec}, gpuManifest, hookExec)
	reg := Load(openRoot(t, dir), DefaultSpecDirs)
	if len(reg.Specs) != 1 || !reg.Specs[0].Valid() {
		t.Fatalf("%+v", reg.Specs)
	}
	sf := reg.Specs[0]
	if sf.Version() != "0.5.0" || sf.MinVersion != "0.5.0" || sf.Vendor != "nvidia.com" || sf.Class != "gpu" || len(sf.Devices) != 3 {
		t.Errorf("%+v", sf)
	}
	f := mustKind(t, reg.specFacts(), KindSpecLoaded)
	if !strings.Contains(f.Evidence[0].Value, "nvidia.com/gpu=0") {
		t.Error(f.Evidence)
	}
}

func TestOurLibraryVersion(t *testing.T) {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Skip(err)
	}
	if !strings.Contains(string(b), "tags.cncf.io/container-device-interface "+ourLibraryVersion+"\n") {
		t.Errorf("go.mod does not require the CDI library at %s", ourLibraryVersion)
	}
	// A spec newer than this library knows is rejected, and says so.
	dir := hostTree(t, map[string]string{"/etc/cdi/new.yaml": "cdiVersion: 1.2.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n"}, "", nil)
	f := mustKind(t, Load(openRoot(t, dir), DefaultSpecDirs).specFacts(), KindSpecInvalid)
	if !strings.Contains(f.Summary, "newer than the CDI library accel-doctor is built with") {
		t.Error(f.Summary)
	}
}
