package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// defects are the codes of a result's WARN and FAIL findings, sorted,
// once each.
func defects(r *TestResult) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range r.Findings {
		if (f.Status == report.Fail || f.Status == report.Warn) && !seen[f.Code] {
			seen[f.Code] = true
			out = append(out, f.Code)
		}
	}
	sort.Strings(out)
	return out
}

func dump(r *TestResult) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(string(f.Status) + " " + f.Code + " " + f.Summary + "\n")
	}
	return b.String()
}

// notRunFixes: every check that could not run says why and what to do
// about that.
func notRunFixes(t *testing.T, r *TestResult) {
	t.Helper()
	for _, f := range r.Findings {
		if f.Status == report.NotRun && (f.Reason == "" || f.Remediation == "") {
			t.Errorf("NOT_RUN %s %s: reason %q, fix %q", f.Code, f.Summary, f.Reason, f.Remediation)
		}
	}
}

// runTest serves kubelet.sock in dir with Test, starts the plugin once
// kubelet.sock exists (start), and returns the result.
func runTest(t *testing.T, o TestOptions, start func()) *TestResult {
	t.Helper()
	type out struct {
		r   *TestResult
		err error
	}
	c := make(chan out, 1)
	go func() {
		r, err := Test(context.Background(), o)
		c <- out{r, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !exists(filepath.Join(o.KubeletDir, KubeletSocket)) {
		if time.Now().After(deadline) {
			t.Fatal("plugin test never served kubelet.sock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start()
	select {
	case got := <-c:
		if got.err != nil {
			t.Fatal(got.err)
		}
		notRunFixes(t, got.r)
		return got.r
	case <-time.After(90 * time.Second):
		t.Fatal("plugin test did not finish in 90s")
	}
	return nil
}

// hostWithNUMA0 is a root whose only NUMA node is 0 (the mock's
// devices say 0), independent of the machine the test runs on.
func hostWithNUMA0(t *testing.T) *hostfs.Root {
	d := shortDir(t)
	if err := os.MkdirAll(filepath.Join(d, "sys/devices/system/node"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "sys/devices/system/node/online"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return fixtureRoot(t, d)
}

// TestPluginTestFindsEachMockDefect runs `plugin test` as the kubelet
// against every mock mode: it finds exactly the defect the mode plants,
// and nothing in the healthy mock.
func TestPluginTestFindsEachMockDefect(t *testing.T) {
	for _, doc := range ModeDocs {
		t.Run(string(doc.Mode), func(t *testing.T) {
			t.Parallel()
			dir := shortDir(t)
			mc := MockConfig{Resource: "fake.example.com/gpu", Devices: 2, Mode: doc.Mode,
				Interval: 150 * time.Millisecond, Delay: 250 * time.Millisecond, Error: "planted failure"}
			if doc.Mode == ModeDuplicate {
				mc.Interval = 300 * time.Millisecond
			}
			m, err := NewMock(dir, mc, Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			m.CrashInProcess() // the server dies, the test does not
			// 6 s: eleven modes run at once, and on a loaded machine a mock can take
			// seconds to reach its first Register (register-before-serve then waits
			// out the dial-back too).
			o := TestOptions{KubeletDir: dir, Timeout: 6 * time.Second, Watch: 700 * time.Millisecond, Root: hostWithNUMA0(t),
				Reregister: true, ReregisterWait: 8 * time.Second, Trigger: func(context.Context) error { return m.ToggleHealth("") }, TriggerNote: "the mock's ToggleHealth"}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			defer func() { cancel(); <-done }()
			res := runTest(t, o, func() { go func() { defer close(done); m.Run(ctx) }() })
			got := defects(res)
			want := slices.Clone(doc.Codes)
			sort.Strings(want)
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" && !(len(want) == 0 && len(got) == 0) {
				t.Errorf("defects found (-planted +found):\n%s\nfindings:\n%s", diff, dump(res))
			}
			// The findings a healthy mock must pass, it passes.
			if doc.Mode == ModeHealthy {
				for _, code := range []string{CodeRegistered, CodeOptionsOK, CodeListed, CodePreferredOK, CodeAllocateOK, CodeHealthUpdate, CodeReregistered} {
					if !hasCode(res, code) {
						t.Errorf("healthy mock: no %s\n%s", code, dump(res))
					}
				}
				names := map[string]bool{}
				for _, ms := range res.Measurements {
					names[ms.Name] = len(ms.Samples) > 0
				}
				for _, n := range []string{"registration -> first ListAndWatch", "health change -> ListAndWatch update", "Allocate", "kubelet.sock recreated -> Register"} {
					if !names[n] {
						t.Errorf("healthy mock: %q not measured (%v)", n, res.Measurements)
					}
				}
			}
		})
	}
}

func hasCode(r *TestResult, code string) bool {
	for _, f := range r.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

// Every mode is documented, with codes that exist.
func TestModeDocs(t *testing.T) {
	seen := map[MockMode]bool{}
	for _, d := range ModeDocs {
		if seen[d.Mode] || d.Does == "" || d.Symptom == "" {
			t.Errorf("mode %q: duplicate or undocumented", d.Mode)
		}
		seen[d.Mode] = true
		for _, c := range d.Codes {
			if _, ok := CodeOf(c); !ok {
				t.Errorf("mode %s names unknown code %s", d.Mode, c)
			}
		}
	}
	if len(seen) != 11 {
		t.Errorf("%d modes documented, want 11", len(seen))
	}
	codes := map[string]bool{}
	for _, c := range Codes {
		if codes[c.Code] || c.Title == "" || c.Explain == "" {
			t.Errorf("code %s: duplicate or without title/explanation", c.Code)
		}
		codes[c.Code] = true
		switch c.Status {
		case "PASS", "NOT_RUN":
		case "WARN", "FAIL":
			if c.Remediation == "" {
				t.Errorf("%s is %s without a remediation", c.Code, c.Status)
			}
		default:
			t.Errorf("%s: status %q", c.Code, c.Status)
		}
	}
}

// pluginConfig serves the fixture's H100s twice: DeviceSpecs and CDI.
func h100Config() *Config {
	return &Config{Resources: []ResourceConfig{
		{Name: "example.com/gpu", Selector: Selector{PCI: &PCISelector{Vendor: "10de", Class: "0302", Drivers: []string{"nvidia"}}},
			Container: ContainerEdits{DeviceIDsEnv: "ACCEL_VISIBLE_DEVICES", Env: map[string]string{"ACCEL_DRIVER_CAPS": "compute"}}, PreStartContainer: true},
		{Name: "example.com/gpu-cdi", Selector: Selector{PCI: &PCISelector{Vendor: "10de", Class: "0302"}},
			CDI: &CDIConfig{Vendor: "example.com", Class: "gpu"}},
	}}
}

func runPlugin(t testing.TB, kdir string, cfg *Config, root *hostfs.Root) (*Plugin, *events) {
	t.Helper()
	evs := newEvents()
	p, err := New(kdir, cfg, Options{Root: root, Logger: testLogger(t), Notify: evs.notify})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p, evs
}

// TestPluginTestFindsNothingInOurPlugin: accel-doctor's own plugin, over
// an 8 x H100 fixture, passes every check of `plugin test` in both modes.
func TestPluginTestFindsNothingInOurPlugin(t *testing.T) {
	host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/nvidia-h100x8"))
	root := fixtureRoot(t, host)
	dir := shortDir(t)
	o := TestOptions{KubeletDir: dir, Timeout: 5 * time.Second, Watch: 300 * time.Millisecond, Root: root, Reregister: true}
	res := runTest(t, o, func() { runPlugin(t, dir, h100Config(), root) })
	if got := defects(res); len(got) != 0 {
		t.Errorf("defects in our plugin: %v\n%s", got, dump(res))
	}
	for _, code := range []string{CodeRegistered, CodeListed, CodePreferredOK, CodeAllocateOK, CodeAllocateCDIResolved, CodePreStartOK, CodeReregistered} {
		if !hasCode(res, code) {
			t.Errorf("no %s\n%s", code, dump(res))
		}
	}
	if len(res.Resources) != 2 {
		t.Errorf("resources tested: %v, want both", res.Resources)
	}
}

// The CDI names Allocate answers resolve against TestOptions.CDISpecDirs
// (plugin test --cdi-spec-dir): our plugin writing its spec into a
// directory no runtime reads by default is UNRESOLVED without it, and
// resolves with it.
func TestPluginTestCDISpecDirs(t *testing.T) {
	host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/nvidia-h100x8"))
	root := fixtureRoot(t, host)
	cfg := h100Config()
	cfg.Resources = cfg.Resources[1:] // the CDI resource alone
	cfg.CDISpecDir = "/etc/cdi-elsewhere"
	for _, c := range []struct {
		dirs []string
		want string
	}{
		{nil, CodeAllocateCDIUnresolved},
		{[]string{"/etc/cdi-elsewhere"}, CodeAllocateCDIResolved},
	} {
		dir := shortDir(t)
		o := TestOptions{KubeletDir: dir, Timeout: 5 * time.Second, Watch: 100 * time.Millisecond, Root: root, CDISpecDirs: c.dirs}
		res := runTest(t, o, func() { runPlugin(t, dir, cfg, root) })
		if !hasCode(res, c.want) {
			t.Errorf("CDISpecDirs %v: no %s\n%s", c.dirs, c.want, dump(res))
		}
	}
}

// --device-plugin-socket mode: the calls are checked, registration is NOT_RUN with its
// reason, and a healthy mock has no defect.
func TestPluginTestSocketMode(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 3, Mode: ModeHealthy})
	evs.wait(t, EventServing, 1)
	res, err := Test(context.Background(), TestOptions{Socket: m.Socket(), Timeout: 3 * time.Second, Watch: 200 * time.Millisecond, Root: hostWithNUMA0(t),
		Trigger: func(context.Context) error { return m.ToggleHealth("") }})
	if err != nil {
		t.Fatal(err)
	}
	if got := defects(res); len(got) != 0 {
		t.Errorf("defects: %v\n%s", got, dump(res))
	}
	for _, c := range []string{CodeListed, CodeAllocateOK, CodeHealthUpdate} {
		if !hasCode(res, c) {
			t.Errorf("no %s\n%s", c, dump(res))
		}
	}
	if hasCode(res, CodeRegistered) || !strings.Contains(dump(res), "register: --device-plugin-socket dials the plugin directly") {
		t.Errorf("registration judged in --device-plugin-socket mode:\n%s", dump(res))
	}
	notRunFixes(t, res)
	for _, f := range res.Findings {
		if f.Check == "plugin.register" && !strings.Contains(f.Remediation, "Give --device-plugin-dir DIR instead of --device-plugin-socket") {
			t.Errorf("registration NOT_RUN: fix %q", f.Remediation)
		}
	}
}

// A socket nobody serves is ENDPOINT_UNREACHABLE, not a crash.
func TestPluginTestDeadSocket(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 1, Mode: ModeHealthy})
	evs.wait(t, EventServing, 1)
	sock := m.Socket()
	m.eps[0].kill()
	res, err := Test(context.Background(), TestOptions{Socket: sock, Timeout: 300 * time.Millisecond, Root: hostWithNUMA0(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := defects(res); !slices.Equal(got, []string{CodeEndpointUnreachable}) {
		t.Errorf("defects %v\n%s", got, dump(res))
	}
}
