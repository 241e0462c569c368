package cdi

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// spec070 declares cdiVersion 0.7.0 although its fields need only 0.5.0.
const spec070 = `cdiVersion: 0.7.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
`

func TestBuildInfoOfFakeRuntime(t *testing.T) {
	b := fakeRuntime(t, "v0.6.2", "v0.6.0", "1.7.15")
	bi, err := BuildInfoFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := dep(bi, cdiModule)
	s, oks := dep(bi, cdiSpecsModule)
	if !ok || m.Version != "v0.6.2" || !oks || s.Version != "v0.6.0" {
		t.Fatalf("deps %+v %+v in\n%s", m, s, bi)
	}
	if v, from := mainVersion(bi); v != "1.7.15" || !strings.Contains(from, "-ldflags") {
		t.Errorf("version %q from %q", v, from)
	}
	// Not a Go binary: an error, not a panic.
	if _, err := BuildInfoFromBytes([]byte("\x7fELF garbage")); err == nil {
		t.Error("garbage read as a Go binary")
	}
	if _, err := BuildInfoFromBytes(b[:len(b)/3]); err == nil {
		t.Error("a truncated binary gave build information")
	}
}

// TestVersionTooNew is the planted fault: containerd built with CDI
// v0.6.2 (loads up to 0.6.0) and a spec declaring 0.7.0.
func TestVersionTooNew(t *testing.T) {
	files := map[string]string{"/etc/cdi/nvidia.yaml": spec070}
	dir := hostTree(t, files, gpuManifest, nil)
	installBinary(t, dir, "/usr/bin/containerd", fakeRuntime(t, "v0.6.2", "v0.6.0", "1.7.15"))
	res := Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
	rt := mustKind(t, res.Facts, KindRuntimeFound)
	if !strings.Contains(rt.Summary, "containerd 1.7.15 (/usr/bin/containerd) is built with container-device-interface v0.6.2 (exact, from its build information): it loads CDI spec versions up to 0.6.0") {
		t.Errorf("runtime: %s", rt.Summary)
	}
	f := mustKind(t, res.Facts, KindVersionTooNew)
	for _, want := range []string{"cdiVersion 0.7.0, which needs a runtime built with container-device-interface >= v0.7.0",
		"(containerd >= 1.7.16)", "containerd 1.7.15 is built with v0.6.2, which loads up to 0.6.0",
		"its fields need only cdiVersion 0.5.0, which this runtime loads"} {
		if !strings.Contains(f.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, f.Summary)
		}
	}
	// containerd 1.7 with no enable_cdi: off by default.
	d := mustKind(t, res.Facts, KindCDIDisabled)
	if !strings.Contains(d.Summary, "containerd 1.x default") {
		t.Error(d.Summary)
	}

	// Healthy: a runtime built with v1.1.0 loads it; config enables CDI.
	dir = hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": spec070,
		"/etc/containerd/config.toml": "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n  cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']\n"}, gpuManifest, nil)
	installBinary(t, dir, "/usr/local/bin/containerd", fakeRuntime(t, "v1.1.0", "v1.1.0", "2.2.1"))
	res = Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
	ok := mustKind(t, res.Facts, KindVersionOK)
	if !strings.Contains(ok.Summary, "containerd 2.2.1 (container-device-interface v1.1.0) loads /etc/cdi/nvidia.yaml (cdiVersion 0.7.0)") {
		t.Error(ok.Summary)
	}
	en := mustKind(t, res.Facts, KindCDIEnabled)
	if !strings.Contains(en.Summary, "enable_cdi = true in /etc/containerd/config.toml") {
		t.Error(en.Summary)
	}
	noKind(t, res.Facts, KindVersionTooNew, KindCDIDisabled)

	// Unreadable: a "containerd" that is no Go binary.
	dir = hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": spec070}, gpuManifest, nil)
	installBinary(t, dir, "/usr/bin/containerd", []byte("#!/bin/sh\nexec /opt/containerd \"$@\"\n"))
	res = Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
	u := mustKind(t, res.Facts, KindRuntimeUnknown)
	if !strings.Contains(dump(Facts{u})+u.Evidence[0].Value, "build information") {
		t.Errorf("%+v", u)
	}
	mustKind(t, res.Facts, KindVersionUnknown)
	noKind(t, res.Facts, KindVersionOK, KindVersionTooNew)
}

// TestRuntimeFromDpkg: a binary built outside module mode carries no
// module list: the release comes from dpkg, the library from the table.
func TestRuntimeFromDpkg(t *testing.T) {
	status := "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b2\n\n" +
		"Package: containerd\nStatus: install ok installed\nPriority: optional\nVersion: 1.7.24~ds1-6+b3\nDescription: daemon\n multi-line\n\n"
	dir := hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": spec070, DpkgStatus: status}, gpuManifest, nil)
	installBinary(t, dir, "/usr/bin/containerd", fakeRuntime(t, "", "", ""))
	res := Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
	rt := mustKind(t, res.Facts, KindRuntimeFound)
	if !strings.Contains(rt.Summary, "containerd 1.7.24") || !strings.Contains(rt.Summary, "v0.7.2 (inferred from its release)") {
		t.Errorf("%s", rt.Summary)
	}
	var ev string
	for _, e := range rt.Evidence {
		ev += e.Value + "\n"
	}
	if !strings.Contains(ev, "dpkg: containerd 1.7.24~ds1-6+b3") || !strings.Contains(ev, "lists no modules") || !strings.Contains(ev, "a distribution's build may use another") {
		t.Errorf("evidence:\n%s", ev)
	}
	mustKind(t, res.Facts, KindVersionOK)

	// An old release: no CDI at all.
	dir = hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": spec070,
		DpkgStatus: "Package: containerd\nStatus: install ok installed\nVersion: 1.6.20~ds1-1+b1\n"}, gpuManifest, nil)
	installBinary(t, dir, "/usr/bin/containerd", fakeRuntime(t, "", "", ""))
	res = Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
	if f := mustKind(t, res.Facts, KindRuntimeNoCDI); !strings.Contains(f.Summary, "containerd 1.6.20") {
		t.Error(f.Summary)
	}
	// A module list without the library: no CDI, exactly.
	dir = hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": spec070}, gpuManifest, nil)
	b := fakeRuntime(t, "", "", "")
	bi, _ := BuildInfoFromBytes(b)
	if len(bi.Deps) != 0 {
		t.Fatalf("the dependency-free build lists %v", bi.Deps)
	}
}

func TestContainerdConfig(t *testing.T) {
	cases := []struct {
		name, version string
		files         map[string]string
		enabled       *bool
		from          string
		dirs          []string
	}{
		{"1.7 default", "1.7.20", nil, boolp(false), "containerd 1.x default", nil},
		{"2.x default", "2.0.0", nil, boolp(true), "containerd 2.x default", nil},
		{"unknown version, v3 config", "", map[string]string{"/etc/containerd/config.toml": "version = 3\n"}, boolp(true), "config version 3", nil},
		{"unknown version", "", nil, nil, "", nil},
		{"v2 set", "1.7.20", map[string]string{"/etc/containerd/config.toml": "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n  cdi_spec_dirs = [\"/etc/cdi\"]\n"},
			boolp(true), "enable_cdi = true in /etc/containerd/config.toml", []string{"/etc/cdi"}},
		{"import overrides", "2.1.0", map[string]string{
			"/etc/containerd/config.toml":    "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n",
			"/etc/containerd/conf.d/99.toml": "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n"},
			boolp(false), "conf.d/99.toml", nil},
		{"k3s", "", map[string]string{"/var/lib/rancher/k3s/agent/etc/containerd/config.toml": "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n"}, boolp(true), "k3s", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := hostTree(t, c.files, "", nil)
			got := ContainerdCDIConfig(openRoot(t, dir), c.version)
			if (got.Enabled == nil) != (c.enabled == nil) || (got.Enabled != nil && *got.Enabled != *c.enabled) || !strings.Contains(got.EnabledFrom, c.from) {
				t.Errorf("enabled %v from %q; errs %v", ptr(got.Enabled), got.EnabledFrom, got.Errs)
			}
			if strings.Join(got.Dirs, ",") != strings.Join(c.dirs, ",") {
				t.Errorf("dirs %v", got.Dirs)
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		dir := hostTree(t, map[string]string{"/etc/containerd/config.toml": "version = [\n"}, "", nil)
		got := ContainerdCDIConfig(openRoot(t, dir), "")
		if len(got.Errs) != 1 || got.Enabled != nil {
			t.Errorf("%+v", got)
		}
		rt := &Runtime{Name: "containerd", Binary: "/usr/bin/containerd", Config: got}
		if f := configFact(rt); f.Kind != KindCDIConfigUnknown || !strings.Contains(f.Summary, "could not be read") {
			t.Errorf("%+v", f)
		}
	})
}

func ptr(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// TestCRIOCorpusConfigDirs: a CRI-O drop-in moves the spec directories,
// and resolution uses them.
func TestCRIOConfigDirs(t *testing.T) {
	dir := hostTree(t, map[string]string{
		"/etc/crio/crio.conf":               "[crio.runtime]\ncdi_spec_dirs = [\"/etc/cdi\"]\n",
		"/etc/crio/crio.conf.d/10-gpu.conf": "[crio.runtime]\ncdi_spec_dirs = [\"/etc/cdi\", \"/opt/cdi\"]\n",
		"/opt/cdi/nvidia.yaml":              allOnlySpec,
	}, gpuManifest, nil)
	installBinary(t, dir, "/usr/bin/crio", fakeRuntime(t, "v1.0.1", "v1.0.0", "1.33.2"))
	res := Check(openRoot(t, dir), "nvidia.com/gpu=all", Options{})
	if strings.Join(res.Dirs, ",") != "/etc/cdi,/opt/cdi" || !strings.Contains(res.DirsFrom, "10-gpu.conf") {
		t.Errorf("dirs %v from %q", res.Dirs, res.DirsFrom)
	}
	mustKind(t, res.Facts, KindDeviceResolved)
	if f := mustKind(t, res.Facts, KindCDIEnabled); !strings.Contains(f.Summary, "CRI-O has no switch") {
		t.Error(f.Summary)
	}
	if f := mustKind(t, res.Facts, KindRuntimeFound); !strings.Contains(f.Summary, "crio 1.33.2") || !strings.Contains(f.Summary, "container-device-interface v1.0.0") {
		t.Error(f.Summary)
	}
}

func TestDockerConfig(t *testing.T) {
	for _, c := range []struct {
		version, json string
		want          *bool
	}{
		{"27.5.1", "", boolp(false)},
		{"27.5.1", `{"features": {"cdi": true}}`, boolp(true)},
		{"28.2.0", "", boolp(true)},
		{"28.3.1", `{"features": {"cdi": false}}`, boolp(false)},
		{"24.0.7", "", boolp(false)},
		{"", "", nil},
	} {
		files := map[string]string{}
		if c.json != "" {
			files[DockerDaemonJSON] = c.json
		}
		got := DockerCDIConfig(openRoot(t, hostTree(t, files, "", nil)), c.version)
		if ptr(got.Enabled) != ptr(c.want) {
			t.Errorf("%s %s: %v (%s)", c.version, c.json, ptr(got.Enabled), got.EnabledFrom)
		}
	}
}

func TestVersionTables(t *testing.T) {
	for _, c := range []struct{ rt, ver, lib string }{
		{"containerd", "1.7.0", "v0.5.4"}, {"containerd", "1.7.15", "v0.6.2"}, {"containerd", "1.7.30", "v0.8.1"},
		{"containerd", "2.0.4", "v0.8.1"}, {"containerd", "2.2.0", "v1.0.1"}, {"containerd", "2.3.1", "v1.1.0"},
		{"crio", "1.26.4", "v0.5.3"}, {"crio", "1.32.1", "v0.8.0"}, {"crio", "1.36.0", "v1.1.0"},
		{"dockerd", "26.0.2", "v0.6.2"}, {"dockerd", "28.0.4", "v0.8.1"},
	} {
		lib, none, _, ok := libForRelease(c.rt, c.ver)
		if !ok || none || lib != c.lib {
			t.Errorf("%s %s: %q none=%v ok=%v, want %s", c.rt, c.ver, lib, none, ok, c.lib)
		}
	}
	if _, none, _, _ := libForRelease("containerd", "1.6.33"); !none {
		t.Error("containerd 1.6 has no CDI")
	}
	if _, _, beyond, _ := libForRelease("containerd", "2.9.0"); !beyond {
		t.Error("2.9.0 is beyond the table")
	}
	for _, c := range []struct{ rt, spec, want string }{
		{"containerd", "0.6.0", "containerd >= 1.7.12"},
		{"containerd", "0.7.0", "containerd >= 1.7.16"},
		{"containerd", "0.8.0", "containerd >= 1.7.27"},
		{"containerd", "1.0.0", "containerd >= 2.0.5"},
		{"containerd", "1.1.0", "containerd >= 2.2.1"},
		{"crio", "0.7.0", "CRI-O >= 1.30.0"},
		{"crio", "1.0.0", "CRI-O >= 1.33.0"},
		{"dockerd", "0.8.0", "Docker Engine 25.0.17 to before 26.0.0 or >= 27.4.0"},
		{"dockerd", "1.1.0", "Docker Engine >= 29.2.0"},
	} {
		if got := FirstReleases(c.rt, c.spec); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.rt, c.spec, got, c.want)
		}
	}
	for _, c := range []struct{ main, specs, max string }{
		{"v0.5.4", "", "0.5.0"}, {"v0.6.2", "v0.6.0", "0.6.0"}, {"v0.8.1", "v0.8.0", "0.8.0"},
		{"v1.0.1", "v1.0.0", "1.0.0"}, {"v1.1.0", "v1.1.0", "1.1.0"}, {"v1.0.1", "v1.1.0", "1.1.0"},
	} {
		if got, _ := LibraryMaxSpec(c.main, c.specs); got != c.max {
			t.Errorf("%s/%s: %q, want %s", c.main, c.specs, got, c.max)
		}
	}
	if !Loads("0.6.0", "v0.5.0") || Loads("0.6.0", "0.7.0") || Loads("1.1.0", "1.2.0") {
		t.Error("Loads")
	}
	for _, c := range []struct{ in, out string }{
		{"1.7.24~ds1-6+b3", "1.7.24"}, {"2:28.0.1-1~debian.12~bookworm", "28.0.1"}, {"1.7.27-1", "1.7.27"}, {"v0.0.0-20230101000000-abcdef012345", ""}, {"devel", ""},
	} {
		if got := upstreamVersion(c.in); got != c.out {
			t.Errorf("%q: %q, want %q", c.in, got, c.out)
		}
	}
}

// TestSnapshotReplay: a snapshot keeps what cannot travel as a file (a
// runtime's build information; a hook's mode bits) and a replay decides
// as the host did.
func TestSnapshotReplay(t *testing.T) {
	files := gpuHost(t, nvidiaSpec)
	files["/etc/cdi/old.yaml"] = "cdiVersion: 0.7.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n"
	dir := hostTree(t, files, gpuManifest, hookExec)
	// Past the 16 MiB a snapshot keeps of a file, as a real containerd
	// is: the ELF reader does not care about what follows the sections.
	big := append(append([]byte(nil), fakeRuntime(t, "v0.6.2", "v0.6.0", "1.7.15")...), make([]byte, 17<<20)...)
	installBinary(t, dir, "/usr/bin/containerd", big)
	root := openRoot(t, dir)
	rec := root.Record()
	live := Validate(root, Options{})
	var buf bytes.Buffer
	if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	replay := Validate(snap, Options{})
	if got, want := summaries(replay.Facts), summaries(live.Facts); got != want {
		t.Errorf("replay differs:\nlive:%s\nreplay:%s", want, got)
	}
	mustKind(t, replay.Facts, KindHookOK)
	mustKind(t, replay.Facts, KindVersionTooNew)

	// A snapshot that did not record them says so, never "missing".
	os.Remove(filepath.Join(dir, "usr/bin/containerd"))
	plain := openRoot(t, dir)
	rec = plain.Record()
	_ = Validate(plain, Options{Runtime: "none"}) // reads the specs, not the hook modes' captures
	buf.Reset()
	plain.WriteSnapshot(rec, &buf, "test")
	snap2, cleanup2, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup2()
	c := checker{root: snap2, owner: "x", snapshot: true}
	if f := c.hook("/usr/bin/true-not-recorded", "hook"); f.Kind != KindHookUnreadable {
		t.Errorf("%+v", f)
	}
}

func summaries(fs Facts) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  " + string(f.Kind) + " " + f.Summary)
	}
	return b.String()
}
