package kubeletcli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/cli"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// The binaries as processes (internal/testutil builds them once); the
// helpers are internal/cli's tests' too.
const hosts = "../../testdata/hosts/"

func binary(t testing.TB) string { return testutil.Binaries(t, "../..") }

func sockDir(t *testing.T) string { return testutil.SockDir(t) }

func start(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	return testutil.Start(t, binary(t), args...)
}

func pluginCodes(t *testing.T, js string) map[string]report.Status {
	t.Helper()
	return testutil.CodesAs[report.Status](t, js)
}

// run runs accel-doctor-kubelet's command line in this process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = cli.MainWith(context.Background(), args, &o, &e, Extension())
	return o.String(), e.String(), code
}

// The binaries as the e2e suite runs them: plugin test acting as the
// kubelet, the mock as another process (timed through SIGUSR1, found by
// the socket's peer credentials), a clean exit on SIGTERM that leaves no
// socket behind.
func TestPluginBinaryMockAndTest(t *testing.T) {
	dir := sockDir(t)
	tester := start(t, "plugin", "test", "--device-plugin-dir", dir, "--timeout", "5s", "--watch", "300ms", "-o", "json")
	testutil.WaitFile(t, filepath.Join(dir, deviceplugin.KubeletSocket))
	mock := start(t, "plugin", "mock", "--device-plugin-dir", dir, "--resource", "fake.example.com/gpu", "--devices", "2", "--mode", "healthy")
	line := mock.WaitLine(t, "REGISTERED ")
	if want := "REGISTERED fake.example.com/gpu " + filepath.Join(dir, "accel-doctor-mock-fake.example.com_gpu.sock"); line != want {
		t.Errorf("ready line %q, want %q", line, want)
	}
	code, out := tester.Wait(t)
	if code != 0 {
		t.Fatalf("plugin test exit %d:\n%s", code, out)
	}
	got := pluginCodes(t, out)
	for _, c := range []string{deviceplugin.CodeRegistered, deviceplugin.CodeHealthUpdate, deviceplugin.CodeAllocateOK, deviceplugin.CodeReregistered} {
		if got[c] != report.Pass {
			t.Errorf("%s: %q, want PASS\n%s", c, got[c], out)
		}
	}
	mock.Cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := mock.Wait(t); code != 0 {
		t.Errorf("mock exit %d after SIGTERM, want 0", code)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
}

func TestPluginBinaryFindsPlantedFailures(t *testing.T) {
	for mode, want := range map[string]string{
		"fail-allocate=no GPU for you": deviceplugin.CodeAllocateFailed,
		"crash-allocate":               deviceplugin.CodeCrashed,
	} {
		t.Run(strings.Fields(mode)[0], func(t *testing.T) {
			dir := sockDir(t)
			tester := start(t, "plugin", "test", "--device-plugin-dir", dir, "--timeout", "5s", "--watch", "200ms")
			testutil.WaitFile(t, filepath.Join(dir, deviceplugin.KubeletSocket))
			mock := start(t, "plugin", "mock", "--device-plugin-dir", dir, "--mode", mode)
			code, out := tester.Wait(t)
			if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "Measured:") {
				t.Errorf("exit %d, want 1 with %s and the measurements:\n%s", code, want, out)
			}
			if mode == "fail-allocate=no GPU for you" && !strings.Contains(out, "no GPU for you") {
				t.Errorf("the planted error text is not shown:\n%s", out)
			}
			if mode == "crash-allocate" {
				if c, _ := mock.Wait(t); c != 3 {
					t.Errorf("crashed mock exit %d, want 3", c)
				}
			}
		})
	}
}

// plugin serve as a process, over a fixture host (--root), passes
// plugin test, and on SIGTERM removes its socket; its CDI spec stays.
func TestPluginBinaryServe(t *testing.T) {
	host := sockDir(t)
	if out, err := exec.Command("cp", "-a", hosts+"nvidia-h100x8/.", host).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cfg := filepath.Join(host, "plugin.yaml")
	os.WriteFile(cfg, []byte(`resources:
- name: example.com/gpu
  selector: {pci: {vendor: "10de", class: "0302", drivers: [nvidia]}}
  container: {deviceIDsEnv: ACCEL_VISIBLE_DEVICES}
- name: example.com/gpu-cdi
  selector: {pci: {vendor: "10de", class: "0302"}}
  cdi: {vendor: example.com, class: gpu}
`), 0o644)
	dir := sockDir(t)
	tester := start(t, "--root", host, "plugin", "test", "--device-plugin-dir", dir, "--timeout", "5s", "--watch", "200ms", "-o", "json")
	testutil.WaitFile(t, filepath.Join(dir, deviceplugin.KubeletSocket))
	serve := start(t, "--root", host, "plugin", "serve", "--device-plugin-dir", dir, "--config", cfg, "--metrics-address", "127.0.0.1:0")
	serve.WaitLine(t, "SERVING example.com/gpu ")
	code, out := tester.Wait(t)
	if code != 0 {
		t.Fatalf("plugin test of plugin serve: exit %d\n%s", code, out)
	}
	got := pluginCodes(t, out)
	if got[deviceplugin.CodeAllocateCDIResolved] != report.Pass || got[deviceplugin.CodeReregistered] != report.Pass {
		t.Errorf("findings %v", got)
	}
	serve.Cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := serve.Wait(t); code != 0 {
		t.Errorf("serve exit %d after SIGTERM, want 0", code)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the kubelet directory: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(host, "var/run/cdi/accel-doctor-example.com-gpu.json")); err != nil {
		t.Errorf("CDI spec: %v", err)
	}
}

// plugin serve with the config deploy/plugin ships (it selects nothing)
// starts, stays up, makes no socket, prints no event, says why on stderr,
// and exits 0 on SIGTERM.
func TestPluginServeShippedConfig(t *testing.T) {
	dir := sockDir(t)
	cmd := exec.Command(binary(t), "plugin", "serve", "--device-plugin-dir", dir, "--config", "../../deploy/plugin/plugin.yaml")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	logged := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), deviceplugin.NoResourcesLog) {
				logged <- sc.Text()
			}
		}
	}()
	select {
	case l := <-logged:
		if !strings.Contains(l, "level=WARN") {
			t.Errorf("the reason is logged as %q, want a warning", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("plugin serve logged no reason for advertising nothing in 30s")
	}
	select {
	case err := <-exited:
		t.Fatalf("plugin serve exited (%v) before it was stopped: its pod would restart in a loop", err)
	case <-time.After(300 * time.Millisecond):
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("made in the kubelet directory: %v", ents)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("events on stdout: %q, want none", stdout.String())
	}
}

func TestPluginUsageErrors(t *testing.T) {
	dir := sockDir(t)
	for _, args := range [][]string{
		{"plugin", "test"},
		{"plugin", "test", "--device-plugin-dir", dir, "--device-plugin-socket", "/x"},
		{"plugin", "test", "--device-plugin-socket", "/nonexistent.sock"},
		{"plugin", "test", "--device-plugin-dir", dir, "-o", "yaml"},
		{"plugin", "mock", "--device-plugin-dir", dir, "--mode", "bogus"},
		{"plugin", "mock", "--device-plugin-dir", dir, "--mode", "healthy=1s"},
		{"plugin", "mock", "--device-plugin-dir", dir, "--mode", "flapping=soon"},
		{"plugin", "mock", "--device-plugin-dir", dir, "--resource", "gpu"},
		{"plugin", "mock", "--device-plugin-dir", "relative"},
		{"plugin", "serve", "--device-plugin-dir", dir},
		{"plugin", "serve", "--device-plugin-dir", dir, "--config", "/nonexistent.yaml"},
	} {
		if _, stderr, code := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a usage error left %v", ents)
	}
}

// Every `accel-doctor ...` command that plugin test's codes name parses.
func TestPluginRemediationCommandsExist(t *testing.T) {
	span := regexp.MustCompile("`accel-doctor ([^`]*)`")
	n := 0
	for _, c := range deviceplugin.Codes {
		for _, m := range span.FindAllStringSubmatch(c.Explain+"\n"+c.Remediation, -1) {
			args := testutil.SplitArgs(m[1])
			if _, stderr, code := run(t, append(args, "--help")...); code != 0 {
				t.Errorf("%s names `accel-doctor %s`, which does not parse: %s", c.Code, m[1], stderr)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no accel-doctor command found in the codes")
	}
}

// BenchmarkPluginServeRSS measures the plugin process's resident memory
// with 16 devices (real nodes made with mknod under a temp root), after
// it served a ListAndWatch stream and 1000 Allocates: VmRSS and VmHWM of
// /proc/PID/status, in MiB. Goal: 20 MiB.
func BenchmarkPluginServeRSS(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (mknod)")
	}
	host, _ := os.MkdirTemp("", "rss")
	defer os.RemoveAll(host)
	for i := range 16 {
		p := filepath.Join(host, "dev/accel", "accel"+strconv.Itoa(i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			b.Fatal(err)
		}
	}
	cfg := filepath.Join(host, "plugin.yaml")
	os.WriteFile(cfg, []byte("resources:\n- name: example.com/accel\n  selector: {deviceNodes: [/dev/accel/accel*]}\n"), 0o644)
	kdir, _ := os.MkdirTemp("", "kd")
	defer os.RemoveAll(kdir)
	bin := binary(b)
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "--root", host, "plugin", "serve", "--device-plugin-dir", kdir, "--config", cfg)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "SERVING") {
		}
		sock := filepath.Join(kdir, "accel-doctor-example.com_accel.sock")
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		c := pluginapi.NewDevicePluginClient(conn)
		s, err := c.ListAndWatch(context.Background(), &pluginapi.Empty{})
		if err != nil {
			b.Fatal(err)
		}
		if r, err := s.Recv(); err != nil || len(r.Devices) != 16 {
			b.Fatalf("ListAndWatch: %v, %d devices", err, len(r.GetDevices()))
		}
		for j := range 1000 {
			if _, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"accel_accel" + strconv.Itoa(j%16)}}}}); err != nil {
				b.Fatal(err)
			}
		}
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		for _, l := range strings.Split(string(st), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:" || f[0] == "RssAnon:" || f[0] == "RssFile:") {
				kb, _ := strconv.Atoi(f[1])
				b.ReportMetric(float64(kb)/1024, strings.ToLower(strings.TrimSuffix(f[0], ":"))+"-MiB")
			}
		}
		conn.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
}

// Every command accel-doctor-kubelet adds is one accel-doctor lists and
// hands over (cli.KubeletCommands), but kubelet-rpc, which only
// accel-doctor's check runs, directly.
func TestHandedOver(t *testing.T) {
	names := map[string]bool{}
	for _, c := range cli.KubeletCommands {
		names[c.Name] = true
	}
	for _, c := range Extension().Commands(&cli.Globals{}) {
		if !names[c.Name()] && !(c.Hidden && c.Name() == "kubelet-rpc") {
			t.Errorf("command %s is not in cli.KubeletCommands: accel-doctor would not hand it over", c.Name())
		}
	}
	if ext := Extension(); ext.Binary != cli.KubeletBinary || ext.KubeletRPC == nil {
		t.Errorf("Extension: binary %q, caller %v", ext.Binary, ext.KubeletRPC)
	}
}

// Every mock mode, as processes, in both start orders against plugin
// test acting as the kubelet: the mock first (it waits for kubelet.sock,
// as a plugin started before the kubelet does) and the tester first. Each
// order finds exactly the codes the mode documents (ModeDocs), and the
// exit status follows from them; a healthy mock passes registration,
// re-registration, the health update and Allocate; the duplicate mode's
// second instance is the one registered last.
func TestPluginMockModesEitherStartOrder(t *testing.T) {
	bin := binary(t)
	// A host whose only NUMA node is 0, the mock's devices' node, whatever
	// the machine the test runs on.
	host := sockDir(t)
	testutil.WriteTree(t, host, map[string]string{"/sys/devices/system/node/online": "0\n"}, nil, "")
	args := map[deviceplugin.MockMode]string{
		deviceplugin.ModeFlapping:     "flapping=150ms",
		deviceplugin.ModeSlowAllocate: "slow-allocate=250ms",
		deviceplugin.ModeFailAllocate: "fail-allocate=planted failure",
		deviceplugin.ModeDuplicate:    "duplicate=300ms",
	}
	for _, doc := range deviceplugin.ModeDocs {
		for _, order := range []string{"mock-first", "tester-first"} {
			t.Run(string(doc.Mode)+"/"+order, func(t *testing.T) {
				t.Parallel()
				mode := cmp.Or(args[doc.Mode], string(doc.Mode))
				dir := sockDir(t)
				testArgs := []string{"--root", host, "plugin", "test", "--device-plugin-dir", dir, "--timeout", "4s", "--watch", "700ms", "-o", "json"}
				mockArgs := []string{"plugin", "mock", "--device-plugin-dir", dir, "--devices", "2", "--mode", mode}
				var tester *testutil.Proc
				if order == "mock-first" {
					mock := testutil.Start(t, bin, mockArgs...)
					instances := 1
					if doc.Mode == deviceplugin.ModeDuplicate {
						instances = 2
					}
					for range instances {
						mock.WaitLine(t, "WAITING ")
					}
					tester = testutil.Start(t, bin, testArgs...)
				} else {
					tester = testutil.Start(t, bin, testArgs...)
					testutil.WaitFile(t, filepath.Join(dir, deviceplugin.KubeletSocket))
					testutil.Start(t, bin, mockArgs...)
				}
				code, out := tester.Wait(t)
				var rep struct{ Findings []report.Finding }
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("plugin test exit %d, output not JSON (%v):\n%s", code, err, out)
				}
				var got []string
				byCode := map[string]report.Finding{}
				for _, f := range rep.Findings {
					byCode[f.Code] = f
					if (f.Status == report.Fail || f.Status == report.Warn) && !slices.Contains(got, f.Code) {
						got = append(got, f.Code)
					}
				}
				want := slices.Clone(doc.Codes)
				wantExit := 0
				for _, c := range want {
					if cd, _ := deviceplugin.CodeOf(c); cd.Status == string(report.Fail) {
						wantExit = 1
					}
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) || code != wantExit {
					t.Fatalf("exit %d, found %v; the mode documents %v (exit %d):\n%s", code, got, want, wantExit, findingLines(rep.Findings))
				}
				switch doc.Mode {
				case deviceplugin.ModeHealthy:
					for _, c := range []string{deviceplugin.CodeRegistered, deviceplugin.CodeReregistered, deviceplugin.CodeHealthUpdate, deviceplugin.CodeAllocateOK} {
						if byCode[c].Status != report.Pass {
							t.Errorf("%s: %q, want PASS\n%s", c, byCode[c].Status, findingLines(rep.Findings))
						}
					}
				case deviceplugin.ModeDuplicate:
					ev := byCode[deviceplugin.CodeDuplicateRegistration].Evidence
					if len(ev) < 2 || !strings.Contains(ev[0].Value, "_gpu.sock") || !strings.Contains(ev[len(ev)-1].Value, "_gpu@2.sock") {
						t.Errorf("the second instance did not register last: %v", ev)
					}
				}
			})
		}
	}
}

func findingLines(fs []report.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s %s %s\n", f.Status, f.Code, f.Summary)
	}
	return b.String()
}
