package dramock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drav1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drav1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/dra"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// internal/dra writes the service names out (to keep the node reader off
// apimachinery's runtime); they must be the API's.
func TestKubeletServicesAreTheAPIs(t *testing.T) {
	if !slices.Equal(dra.KubeletServices, []string{drav1.DRAPluginService, drav1beta1.DRAPluginService}) {
		t.Errorf("dra.KubeletServices %v", dra.KubeletServices)
	}
}

type env struct {
	dir, kdir, reg, plugins, cdi string
}

func newEnv(t *testing.T) env {
	t.Helper()
	dir, err := os.MkdirTemp("", "drm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := env{dir: dir, kdir: filepath.Join(dir, "var/lib/kubelet")}
	e.reg, e.plugins, e.cdi = filepath.Join(e.kdir, "plugins_registry"), filepath.Join(e.kdir, "plugins"), filepath.Join(dir, "var/run/cdi")
	return e
}

// start runs a mock until the test ends.
func start(t *testing.T, e env, mode Mode) *Mock { return startWith(t, e, mode, "") }

// startWith is start with prepare-error's error text.
func startWith(t *testing.T, e env, mode Mode, errText string) *Mock {
	t.Helper()
	m, err := New(Config{Driver: "gpu.example.com", Devices: 2, Mode: mode, RegistryDir: e.reg,
		PluginDir: filepath.Join(e.plugins, "gpu.example.com"), CDIDir: e.cdi, Error: errText}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock: %v", err)
		}
	})
	// Serving before the test looks (Run binds the sockets in Start).
	sock := filepath.Join(e.plugins, "gpu.example.com", "dra.sock")
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 500 {
			t.Fatalf("the mock never served %s", sock)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m
}

func runTest(t *testing.T, e env, o TestOptions) *TestResult {
	t.Helper()
	o.RegistryDir, o.Driver, o.CDIDirs, o.Root = e.reg, "gpu.example.com", []string{e.cdi}, hostfs.MustNew("/")
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Samples == 0 {
		o.Samples = 3
	}
	res, err := Test(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func found(res *TestResult, s report.Status) []string {
	var out []string
	for _, f := range res.Findings {
		if f.Status == s {
			out = append(out, f.Code)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Healthy: the contract holds, nothing planted is found; latencies are
// measured.
func TestHealthy(t *testing.T) {
	e := newEnv(t)
	start(t, e, ModeHealthy)
	res := runTest(t, e, TestOptions{})
	if bad := append(found(res, report.Fail), found(res, report.Warn)...); len(bad) != 0 {
		t.Fatalf("healthy mock: %v\n%+v", bad, res.Findings)
	}
	if !slices.Contains(found(res, report.Pass), CodeContractOK) {
		t.Errorf("no %s: %+v", CodeContractOK, res.Findings)
	}
	if len(res.Measurements) != 3 || len(res.Measurements[1].Samples) != 3 {
		t.Errorf("measurements %+v", res.Measurements)
	}
	// Every spec written was removed by NodeUnprepareResources.
	if es, _ := os.ReadDir(e.cdi); len(es) != 0 {
		t.Errorf("specs left after unprepare: %v", es)
	}
}

// Each mode's planted defect is found by the tester, by its code.
func TestModesFound(t *testing.T) {
	for _, d := range ModeDocs {
		if len(d.Codes) == 0 || d.Mode == ModeDuplicate {
			continue
		}
		t.Run(string(d.Mode), func(t *testing.T) {
			e := newEnv(t)
			start(t, e, d.Mode)
			res := runTest(t, e, TestOptions{Timeout: time.Second})
			got := append(found(res, report.Fail), found(res, report.Warn)...)
			for _, c := range d.Codes {
				if !slices.Contains(got, c) {
					t.Errorf("%s not found: %v\n%+v", c, got, res.Findings)
				}
			}
			if slices.Contains(found(res, report.Pass), CodeContractOK) {
				t.Errorf("contract passed in mode %s", d.Mode)
			}
		})
	}
}

// duplicate-with-plugin beside the device-plugin mock: the same IDs.
func TestDuplicateWithPlugin(t *testing.T) {
	e := newEnv(t)
	start(t, e, ModeDuplicate)
	dp := filepath.Join(e.kdir, "device-plugins")
	os.MkdirAll(dp, 0o755)
	m, err := deviceplugin.NewMock(dp, deviceplugin.MockConfig{Resource: "fake.example.com/gpu", Devices: 2, Mode: deviceplugin.ModeHealthy, Socket: "mock.sock"}, deviceplugin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	sock := filepath.Join(dp, "mock.sock")
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := runTest(t, e, TestOptions{DevicePluginSocket: sock, Samples: 1})
	if !slices.Contains(found(res, report.Warn), CodeDoubleAdvertised) {
		t.Fatalf("not found: %+v", res.Findings)
	}
	// Healthy DRA mock beside the same plugin: names differ, nothing found.
	e2 := newEnv(t)
	start(t, e2, ModeHealthy)
	res = runTest(t, e2, TestOptions{DevicePluginSocket: sock, Samples: 1})
	if w := found(res, report.Warn); len(w) != 0 {
		t.Errorf("healthy mode beside the plugin: %v", w)
	}
}

// The node reader (check's layer 6) sees not-registered in the mock's
// directories, and a healthy mock as registered.
func TestNodeReaderSeesTheMock(t *testing.T) {
	for _, mode := range []Mode{ModeHealthy, ModeNotRegistered} {
		e := newEnv(t)
		start(t, e, mode)
		if mode == ModeHealthy {
			// The registration socket appears after Start returns.
			for i := 0; i < 300; i++ {
				if _, err := os.Stat(filepath.Join(e.reg, "gpu.example.com-reg.sock")); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// The endpoint kubeletplugin answers is the host path of the
		// socket: read the temp dir as the host. The mock's sockets come
		// up after Start returns: read until they show (a loaded machine
		// can take a while), then judge.
		want := mode == ModeNotRegistered
		var n *dra.Node
		var dd *dra.DriverDir
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var err error
			n, err = dra.Read(context.Background(), hostfs.MustNew("/"), dra.Options{KubeletDir: e.kdir, CDIDirs: []string{e.cdi}, Timeout: 2 * time.Second, RPC: grpccall.Caller{}})
			if err != nil {
				t.Fatal(err)
			}
			dd = nil
			for _, d := range n.DriverDirs {
				if d.Name == "gpu.example.com" {
					dd = d
				}
			}
			if dd != nil && dd.NotRegistered() == want && n.Registered("gpu.example.com") != want || time.Now().After(deadline) {
				break
			}
		}
		if dd == nil {
			t.Fatalf("%s: no driver dir in %+v", mode, n.DriverDirs)
		}
		if dd.NotRegistered() != want || n.Registered("gpu.example.com") == want {
			t.Errorf("%s: not registered %v, registered %v; registrations %+v", mode, dd.NotRegistered(), n.Registered("gpu.example.com"), n.Registrations)
		}
	}
}

func TestModeDocs(t *testing.T) {
	for _, d := range ModeDocs {
		if d.Does == "" || d.Symptom == "" {
			t.Errorf("%s: undocumented", d.Mode)
		}
		for _, c := range d.Codes {
			if _, ok := CodeOf(c); !ok {
				t.Errorf("%s: unknown code %s", d.Mode, c)
			}
		}
	}
	if _, err := New(Config{Driver: "x.example.com", Devices: 1, Mode: "nope"}, nil, nil); err == nil || !strings.Contains(err.Error(), "healthy") {
		t.Errorf("unknown mode: %v", err)
	}
}

func TestCodesRemediations(t *testing.T) {
	cmds := map[string]bool{"kubectl": true, "ls": true, "accel-doctor": true}
	tick := regexp.MustCompile("`([^`]+)`")
	seen := map[string]bool{}
	for _, c := range Codes {
		if seen[c.Code] || c.Title == "" || c.Status == "" {
			t.Errorf("%s: duplicate or incomplete", c.Code)
		}
		seen[c.Code] = true
		for _, m := range tick.FindAllStringSubmatch(c.Remediation, -1) {
			if w := strings.Fields(m[1])[0]; !cmds[w] {
				t.Errorf("%s: remediation names %q", c.Code, w)
			}
		}
	}
}

// The kubelet side's NotifyRegistrationStatus is reported: REGISTERED when
// it says registered (the tester says so once GetInfo validated), so that
// a caller knows when the registration is complete, not only that the
// socket serves.
func TestRegisteredEvent(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var kinds []string
	m, err := New(Config{Driver: "gpu.example.com", Devices: 2, Mode: ModeHealthy, RegistryDir: e.reg,
		PluginDir: filepath.Join(e.plugins, "gpu.example.com"), CDIDir: e.cdi}, nil, func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		kinds = append(kinds, ev.Kind+" "+ev.Detail)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock: %v", err)
		}
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(e.reg, "gpu.example.com-reg.sock")); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("the mock never made its registration socket")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := runTest(t, e, TestOptions{Samples: 1})
	if bad := found(res, report.Fail); len(bad) != 0 {
		t.Fatalf("healthy mock: %v", bad)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "REGISTERED " + filepath.Join(e.reg, "gpu.example.com-reg.sock")
	if !slices.Contains(kinds, want) {
		t.Errorf("events %q: want %q", kinds, want)
	}
}

// A mock stopped while its ResourceSlice controller still waits for the
// API server (the informer's first list) stops cleanly: Run returns nil,
// as for any stop, not "publish ResourceSlice: ... context canceled" (the
// CLI's exit 2). The API server here is a clientset whose every list of
// ResourceSlices fails, so that the informer never syncs.
func TestStopWhilePublishing(t *testing.T) {
	e := newEnv(t)
	cs := fake.NewClientset()
	cs.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is not answering")
	})
	serving := make(chan struct{}, 1)
	m, err := New(Config{Driver: "gpu.example.com", Devices: 2, Mode: ModeHealthy, RegistryDir: e.reg,
		PluginDir: filepath.Join(e.plugins, "gpu.example.com"), CDIDir: e.cdi, NodeName: "node-a", Kube: cs}, nil, func(ev Event) {
		if ev.Kind == "SERVING" {
			serving <- struct{}{}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-serving:
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the mock never served")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after a stop during publishing: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
}

// A driver built on kubeletplugin reads each claim from the API server;
// asked for the claim the test made up, it answers the helper's
// "retrieve claim NS/NAME: ... not found". That is no fault of the
// driver: the prepare is NOT_RUN saying why, never
// DRA_PLUGIN_PREPARE_FAILED. Any other error stays the FAIL.
func TestPrepareOfAClaimTheAPIServerLacks(t *testing.T) {
	for _, c := range []struct {
		text    string
		notRun  bool
		failure bool
	}{
		{`get resource claims: retrieve claim accel-doctor-test/claim-0: resourceclaims.resource.k8s.io "claim-0" not found`, true, false},
		{"claim accel-doctor-test/claim-0 not allocated", true, false},
		{"mock: preparation refused", false, true},
	} {
		t.Run(c.text, func(t *testing.T) {
			e := newEnv(t)
			startWith(t, e, ModePrepareError, c.text)
			res := runTest(t, e, TestOptions{Timeout: time.Second})
			var prepNotRun *report.Finding
			for i, f := range res.Findings {
				if f.Check == "dra-plugin.prepare" && f.Status == report.NotRun {
					prepNotRun = &res.Findings[i]
				}
			}
			if (prepNotRun != nil) != c.notRun || slices.Contains(found(res, report.Fail), CodePrepareFailed) != c.failure {
				t.Fatalf("findings %+v", res.Findings)
			}
			if prepNotRun != nil && !strings.Contains(prepNotRun.Reason, "reads each claim from the API server") {
				t.Errorf("reason %q", prepNotRun.Reason)
			}
		})
	}
}
