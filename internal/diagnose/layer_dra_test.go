package diagnose

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/dra"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

const draNodes = "../dra/testdata/nodes/"

// draFindings runs layer 6 over a DRA node tree and keeps kube.dra's
// findings as "CODE STATUS".
func draFindings(t *testing.T, tree string) map[string]int {
	t.Helper()
	root, err := hostfs.New(draNodes + tree)
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, tree, Options{Layers: []report.Layer{report.LayerKube}})
	got := map[string]int{}
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			got[f.Code+" "+string(f.Status)]++
		}
	}
	return got
}

// The planted faults (a claim prepared before a reboot whose CDI spec was
// in the tmpfs; a GPU advertised by the device plugin and a DRA driver),
// the healthy node (the kubelet's own state file: no FAIL or WARN), and
// a tree where the kubelet's directories were not captured (nothing
// judged: the kubelet check says NOT_RUN).
func TestDRALayer(t *testing.T) {
	for _, c := range []struct {
		tree string
		want []string
	}{
		// A tree cannot hold sockets: no driver is registered in any of
		// them, so the claims' driver is "not registered" (WARN) in each;
		// the registration cases run on real sockets in internal/dra.
		{"dra-reboot", []string{"DRA_CLAIM_CDI_UNRESOLVED FAIL", "DRA_STATE_FROM_EARLIER_BOOT PASS", "DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
		{"dra-double", []string{"DRA_DOUBLE_ADVERTISED WARN", "DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
		{"dra-healthy", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_CDI_OK PASS"}},
		// The runtime under the driver (the claims in the state make
		// gpu.example.com the node's driver): containerd 1.7 with
		// enable_cdi = false; containerd 1.7.0, whose CDI library
		// (v0.5.4) loads cdiVersion up to 0.5.0, under the driver's
		// 0.6.0 spec; a config.toml that cannot be read (a directory:
		// it may turn CDI off) is not judged.
		{"dra-cdi-disabled", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_NO_CDI FAIL"}},
		{"dra-cdi-too-old", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_CDI_TOO_OLD FAIL"}},
		{"dra-runtime-unread", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_CDI_NOT_CHECKED NOT_RUN"}},
	} {
		t.Run(c.tree, func(t *testing.T) {
			got := draFindings(t, c.tree)
			for _, w := range c.want {
				if got[w] == 0 {
					t.Errorf("no %s; got %v", w, got)
				}
			}
			for k := range got {
				if !contains(c.want, k) && (len(k) > 5 && (k[len(k)-4:] == "FAIL" || k[len(k)-4:] == "WARN")) {
					t.Errorf("unexpected %s", k)
				}
			}
		})
	}
	root, err := hostfs.New("../../testdata/hosts/nvidia-h100x8")
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, "nvidia-h100x8", Options{Layers: []report.Layer{report.LayerKube}})
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			t.Errorf("a tree without the kubelet's directories: %s %s", f.Code, f.Status)
		}
		if f.Check == "kube.node" && f.Status != report.NotRun {
			t.Errorf("kube.node on a tree without the kubelet: %s %s", f.Code, f.Status)
		}
	}
}

// The runtime under the node's DRA driver: exactly one finding per tree,
// its status the tree's cause, its evidence where the answer was read.
func TestDRARuntimeCDI(t *testing.T) {
	for _, c := range []struct {
		tree, code string
		status     report.Status
		says, ev   string
	}{
		{"dra-healthy", "DRA_RUNTIME_CDI_OK", report.Pass, "has CDI enabled and loads /etc/cdi/example.com-gpu.yaml (cdiVersion 0.6.0), /var/run/cdi/k8s.gpu.example.com-claim_", "enable_cdi = true in /etc/containerd/config.toml"},
		{"dra-cdi-disabled", "DRA_RUNTIME_NO_CDI", report.Fail, "containerd 1.7.24 (/usr/bin/containerd) has CDI disabled", "enable_cdi = false in /etc/containerd/config.toml"},
		{"dra-cdi-too-old", "DRA_RUNTIME_CDI_TOO_OLD", report.Fail, "loads cdiVersion up to 0.5.0", "cdiVersion 0.6.0"},
		{"dra-runtime-unread", "DRA_RUNTIME_CDI_NOT_CHECKED", report.NotRun, "is not known", "/etc/containerd/config.toml"},
	} {
		t.Run(c.tree, func(t *testing.T) {
			root, err := hostfs.New(draNodes + c.tree)
			if err != nil {
				t.Fatal(err)
			}
			rep := runFixture(t, root, c.tree, Options{Layers: []report.Layer{report.LayerKube}})
			var got []report.Finding
			for _, f := range rep.Findings {
				if f.Check == "kube.dra" && strings.HasPrefix(f.Code, "DRA_RUNTIME_") {
					got = append(got, f)
				}
			}
			if len(got) != 1 {
				t.Fatalf("runtime findings %+v, want one %s", got, c.code)
			}
			f := got[0]
			if f.Code != c.code || f.Status != c.status || f.Subject != "gpu.example.com @ containerd" || !strings.Contains(f.Summary, c.says) {
				t.Errorf("%s %s %q: %s", f.Code, f.Status, f.Subject, f.Summary)
			}
			text := f.Reason
			for _, e := range f.Evidence {
				text += "\n" + e.Path + ": " + e.Value
			}
			if !strings.Contains(text, c.ev) {
				t.Errorf("evidence and reason do not name %q:\n%s", c.ev, text)
			}
			if c.status == report.NotRun && f.Reason == "" || c.status == report.Fail && f.Remediation == "" {
				t.Errorf("reason %q remediation %q", f.Reason, f.Remediation)
			}
		})
	}
}

// Two CRI runtimes, and which one the kubelet uses is not read: the one
// that cannot serve the driver is a WARN, not a FAIL, while the other
// (CRI-O of a release not known here) might.
func TestDRARuntimeCDITwoRuntimes(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(draNodes+"dra-cdi-disabled")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/bin/crio"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, hostfs.MustNew(dir), "dra-cdi-disabled+crio", Options{Layers: []report.Layer{report.LayerKube}})
	got := map[string]string{}
	for _, f := range rep.Findings {
		if strings.HasPrefix(f.Code, "DRA_RUNTIME_") {
			got[f.Subject] = f.Code + " " + string(f.Status)
		}
	}
	want := map[string]string{"gpu.example.com @ containerd": "DRA_RUNTIME_NO_CDI WARN", "gpu.example.com @ crio": "DRA_RUNTIME_CDI_NOT_CHECKED NOT_RUN"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// stateTree is dra-healthy copied where a test may change it, with its
// directories open to every user (the unprivileged run must reach the
// state file).
func stateTree(t *testing.T) (dir, state string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(draNodes+"dra-healthy")); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 != 0o005 && strings.HasPrefix(d, os.TempDir()) && d != os.TempDir() {
			os.Chmod(d, st.Mode().Perm()|0o005)
		}
	}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return dir, filepath.Join(dir, "var/lib/kubelet/dra_manager_state")
}

// stateFindings runs kube.dra over dir and returns its DRA_STATE_*
// findings.
func stateFindings(t *testing.T, dir string) []report.Finding {
	t.Helper()
	rep := runFixture(t, hostfs.MustNew(dir), "dra-healthy (state changed)", Options{Layers: []report.Layer{report.LayerKube}})
	var out []report.Finding
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" && strings.HasPrefix(f.Code, "DRA_STATE_") {
			out = append(out, f)
		}
	}
	return out
}

// A state path that is there and cannot be read is NOT_RUN with the
// reason, never a FAIL (DRA_STATE_CHECKSUM is for a file read that does
// not parse) nor a PASS: a FIFO (never opened: an open would block
// until a writer came), a socket, a directory, a symlink loop.
func TestDRAStateNotRead(t *testing.T) {
	for _, c := range []struct {
		what string
		make func(p string) error
		why  string
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"socket", func(p string) error { return syscall.Mknod(p, syscall.S_IFSOCK|0o600, 0) }, "not a regular file"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "not a regular file"},
		{"symlink loop", func(p string) error { return os.Symlink(filepath.Base(p), p) }, "too many levels of symbolic links"},
	} {
		t.Run(c.what, func(t *testing.T) {
			dir, p := stateTree(t)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := c.make(p); err != nil {
				t.Skipf("cannot make a %s here: %v", c.what, err)
			}
			done := make(chan []report.Finding, 1)
			go func() { done <- stateFindings(t, dir) }()
			var got []report.Finding
			select {
			case got = <-done:
			case <-time.After(time.Minute):
				// A reader that opened the FIFO blocks for good.
				t.Fatal("kube.dra did not return: the state path was opened")
			}
			if len(got) != 1 || got[0].Code != "DRA_STATE_NOT_READ" || got[0].Status != report.NotRun {
				t.Fatalf("findings %+v, want one DRA_STATE_NOT_READ NOT_RUN", got)
			}
			if !strings.Contains(got[0].Reason, "dra_manager_state") || !strings.Contains(got[0].Reason, c.why) {
				t.Errorf("reason %q does not say %q of the path", got[0].Reason, c.why)
			}
		})
	}
}

const unprivTreeEnv = "ACCEL_DOCTOR_TEST_DRA_STATE_TREE"

// As root a 0600 file is readable whatever its mode; run the check as
// nobody (uid 65534), in a copy of this test binary, over a 0600 state
// owned by root: NOT_RUN with the permission error, never FAIL or PASS.
func TestDRAStateNotReadUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: to own a 0600 file and run a process as another user")
	}
	dir, p := stateTree(t)
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The build's directory is 0700: a copy nobody can run.
	bin := filepath.Join(t.TempDir(), "diagnose.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(bin), 0o755)
	cmd := exec.Command(bin, "-test.run=^TestDRAStateUnprivilegedChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), unprivTreeEnv+"="+dir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as uid 65534: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestDRAStateUnprivilegedChild") {
		t.Fatalf("the child did not run its assertions:\n%s", out)
	}
}

// TestDRAStateUnprivilegedChild is TestDRAStateNotReadUnprivileged's
// other half, run as nobody.
func TestDRAStateUnprivilegedChild(t *testing.T) {
	dir := os.Getenv(unprivTreeEnv)
	if dir == "" {
		t.Skip("run by TestDRAStateNotReadUnprivileged")
	}
	if os.Geteuid() == 0 {
		t.Fatal("the child runs as root")
	}
	got := stateFindings(t, dir)
	if len(got) != 1 || got[0].Code != "DRA_STATE_NOT_READ" || got[0].Status != report.NotRun {
		t.Fatalf("findings %+v, want one DRA_STATE_NOT_READ NOT_RUN", got)
	}
	if !strings.Contains(got[0].Reason, "permission denied") || !strings.Contains(got[0].Reason, "dra_manager_state") {
		t.Errorf("reason %q", got[0].Reason)
	}
}

// judgeDRARegistration on each kind of registration: a live one is a PASS
// naming the driver; each fault is its FAIL and never also the PASS.
func TestDRARegistrationJudged(t *testing.T) {
	info := func(versions ...string) *dra.PluginInfo {
		return &dra.PluginInfo{Type: dra.TypeDRA, Name: "gpu.example.com", Endpoint: "/var/lib/kubelet/plugins/gpu.example.com/dra.sock", SupportedVersions: versions}
	}
	ep := func(a kubelet.Answer) *dra.Endpoint {
		return &dra.Endpoint{Path: "/var/lib/kubelet/plugins/gpu.example.com/dra.sock", Absolute: true, Dial: kubelet.Dial{Answer: a}}
	}
	answered := kubelet.Dial{Method: "GetInfo", Answer: kubelet.Answered}
	for _, c := range []struct {
		name string
		r    dra.Registration
		want string
	}{
		{"live", dra.Registration{Dial: answered, Info: info("v1.DRAPlugin"), Endpoint: ep(dra.Connected)}, "DRA_REGISTRATION_OK PASS"},
		{"endpoint refused", dra.Registration{Dial: answered, Info: info("v1.DRAPlugin"), Endpoint: ep(kubelet.Refused)}, "DRA_ENDPOINT_MISSING FAIL"},
		{"unsupported", dra.Registration{Dial: answered, Info: info("1.0.0"), Endpoint: ep(dra.Connected), Unsupported: true}, "DRA_UNSUPPORTED_VERSION FAIL"},
		{"dead", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.Refused}}, "DRA_REGISTRATION_DEAD FAIL"},
		{"dead, bound before the kubelet", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.Refused}, OlderThanKubelet: true}, "DRA_REGISTRATION_DEAD FAIL"},
		{"a device plugin's", dra.Registration{Dial: answered, Info: &dra.PluginInfo{Type: "DevicePlugin", Name: "x"}}, ""},
		{"a CSI driver's", dra.Registration{Dial: answered, Info: &dra.PluginInfo{Type: "CSIPlugin", Name: "csi.example.com", Endpoint: "/var/lib/kubelet/plugins/csi.example.com/csi.sock"}}, ""},
		{"a DRA socket registered as CSI", dra.Registration{Dial: answered, Info: &dra.PluginInfo{Type: "CSIPlugin", Name: "gpu.example.com", Endpoint: "/var/lib/kubelet/plugins/gpu.example.com/dra.sock"}}, "DRA_REGISTRATION_WRONG_TYPE WARN"},
		// Could not look: NOT_RUN, never silence, never the FAIL.
		{"registration no access", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.NoAccess, Err: "permission denied"}}, "DRA_REGISTRATION_NOT_ANSWERING NOT_RUN"},
		{"registration gone", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.Gone}}, "DRA_REGISTRATION_NOT_ANSWERING NOT_RUN"},
		{"registration timed out", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.TimedOut}}, "DRA_REGISTRATION_NOT_ANSWERING FAIL"},
		{"GetInfo answers an error", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.Answered, Code: "Internal", Err: "rpc error: code = Internal desc = refused"}}, "DRA_REGISTRATION_NOT_ANSWERING FAIL"},
		{"no gRPC caller", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.NotDialed, Err: "accel-doctor-kubelet not found"}}, "DRA_REGISTRATION_NOT_ANSWERING NOT_RUN"},
		{"endpoint no access", dra.Registration{Dial: answered, Info: info("v1.DRAPlugin"), Endpoint: ep(kubelet.NoAccess)}, "DRA_ENDPOINT_MISSING NOT_RUN"},
		{"endpoint gone", dra.Registration{Dial: answered, Info: info("v1.DRAPlugin"), Endpoint: ep(kubelet.Gone)}, "DRA_ENDPOINT_MISSING FAIL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.r.Path, c.r.Name, c.r.Type = "/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock", "gpu.example.com-reg.sock", "socket"
			out := &Out{check: &Check{ID: "kube.dra", Layer: report.LayerKube}}
			judgeDRARegistration(out, &c.r, false)
			var got []string
			for _, f := range out.findings {
				got = append(got, f.Code+" "+string(f.Status))
				older := false
				for _, e := range f.Evidence {
					older = older || strings.Contains(e.Value, "bound before the running kubelet")
				}
				if older != c.r.OlderThanKubelet {
					t.Errorf("%s: evidence %v, OlderThanKubelet %v", f.Code, f.Evidence, c.r.OlderThanKubelet)
				}
				if f.Status == report.Pass && f.Subject != "gpu.example.com" {
					t.Errorf("%s names %q, want the driver", f.Code, f.Subject)
				}
			}
			if c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// A prepared claim whose CDI device cannot be resolved because a spec
// directory was not captured (the reboot tree without /var/run) is
// NOT_RUN with the directory as its reason, never silence and never the
// FAIL.
func TestDRAClaimCDIUnknownIsNotRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(draNodes+"dra-reboot")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "var/run")); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, "dra-reboot-without-var-run", Options{Layers: []report.Layer{report.LayerKube}})
	var notRun int
	for _, f := range rep.Findings {
		switch {
		case f.Code == "DRA_CLAIM_CDI_UNRESOLVED":
			t.Errorf("%s %s with /var/run/cdi not captured: %s", f.Code, f.Status, f.Summary)
		case f.Code == "DRA_CLAIM_CDI_NOT_CHECKED":
			notRun++
			if f.Status != report.NotRun || !strings.Contains(f.Reason, "/var/run/cdi") {
				t.Errorf("%s %s, reason %q: want NOT_RUN naming /var/run/cdi", f.Code, f.Status, f.Reason)
			}
		}
	}
	if notRun == 0 {
		t.Errorf("no DRA_CLAIM_CDI_NOT_CHECKED; got %v", draCodesOf(rep))
	}
}

func draCodesOf(rep *report.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			out = append(out, f.Code+" "+string(f.Status))
		}
	}
	return out
}

// A claim's CDI devices are resolved in the spec directories the runtime
// reads: containerd's cdi_spec_dirs, or --cdi-spec-dirs, not the
// library's defaults alone (a spec in /opt/cdi was a false
// DRA_CLAIM_CDI_UNRESOLVED).
func TestDRAClaimCDIInRuntimeDirs(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(draNodes+"dra-healthy")); err != nil {
		t.Fatal(err)
	}
	specs, err := filepath.Glob(filepath.Join(dir, "var/run/cdi/*.json"))
	if err != nil || len(specs) != 1 {
		t.Fatalf("the claim's spec: %v %v", specs, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "opt/cdi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(specs[0], filepath.Join(dir, "opt/cdi", filepath.Base(specs[0]))); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "etc/containerd/config.toml")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(string(b), `"/var/run/cdi"]`, `"/opt/cdi"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]Options{
		"containerd's cdi_spec_dirs": {Layers: []report.Layer{report.LayerKube}},
		"--cdi-spec-dirs":            {Layers: []report.Layer{report.LayerKube}, CDISpecDirs: []string{"/etc/cdi", "/opt/cdi"}},
	} {
		rep := runFixture(t, root, "dra-opt-cdi", opts)
		for _, f := range rep.Findings {
			if f.Check == "kube.dra" && f.Code == "DRA_CLAIM_CDI_UNRESOLVED" {
				t.Errorf("%s: %s %s: %s", name, f.Code, f.Status, f.Summary)
			}
		}
	}
	// And the spec really is needed: with the library's defaults only,
	// the claim's device does not resolve.
	rep := runFixture(t, root, "dra-opt-cdi", Options{Layers: []report.Layer{report.LayerKube}, CDISpecDirs: []string{"/etc/cdi", "/var/run/cdi"}})
	unresolved := false
	for _, f := range rep.Findings {
		unresolved = unresolved || f.Code == "DRA_CLAIM_CDI_UNRESOLVED" && f.Status == report.Fail
	}
	if !unresolved {
		t.Error("with /var/run/cdi named, the moved spec is not found: want DRA_CLAIM_CDI_UNRESOLVED FAIL")
	}
}

// A claim in the kubelet's DRA state with no device of its driver: the
// kubelet's own state of dra-healthy with the claim's devices taken out,
// as the kubelet writes it before NodePrepareResources (a part for the
// driver, Devices null), is a WARN naming the claim and its pod; the same
// part where the allocation skips NodePrepareResources ("*") is nothing.
// The healthy node (TestDRALayer) has none; a state that cannot be read
// is DRA_STATE_NOT_READ (TestDRAStateNotRead), never this.
func TestDRAClaimNoDevice(t *testing.T) {
	for _, c := range []struct {
		name, driverState string
		want              bool
	}{
		{"before-or-empty-prepare", `{"Devices":null}`, true},
		{"prepare-skipped", `{"Devices":null,"skipNodeOperations":["*"]}`, false},
		{"unprepare-skipped-only", `{"Devices":null,"skipNodeOperations":["NodeUnprepareResources"]}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(draNodes+"dra-healthy")); err != nil {
				t.Fatal(err)
			}
			data := `{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":[{"ClaimUID":"a1b2c3d4-1111-4222-8333-444455556666","ClaimName":"pod-gpu-claim","Namespace":"ml","PodUIDs":{"0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd":{}},"DriverState":{"gpu.example.com":` + c.driverState + `}}]}`
			b, err := json.Marshal(struct {
				Data     string
				Checksum uint32
			}{data, crc32.ChecksumIEEE([]byte(data))})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "var/lib/kubelet", dra.StateName), b, 0o600); err != nil {
				t.Fatal(err)
			}
			root, err := hostfs.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			rep := runFixture(t, root, c.name, Options{Layers: []report.Layer{report.LayerKube}})
			var got []report.Finding
			for _, f := range rep.Findings {
				if f.Check == "kube.dra" && f.Code == "DRA_CLAIM_NO_DEVICE" {
					got = append(got, f)
				}
				if f.Check == "kube.dra" && (f.Code == "DRA_STATE_CHECKSUM" || f.Code == "DRA_STATE_NOT_READ") {
					t.Fatalf("the planted state was refused: %s %s", f.Code, f.Summary)
				}
			}
			if !c.want {
				if len(got) != 0 {
					t.Errorf("a claim that skips NodePrepareResources: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Status != report.Warn || got[0].Subject != "ml/pod-gpu-claim" ||
				!strings.Contains(got[0].Summary, "gpu.example.com") || !strings.Contains(fmt.Sprint(got[0].Evidence), "0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd") {
				t.Errorf("want one DRA_CLAIM_NO_DEVICE WARN for ml/pod-gpu-claim naming the driver and the pod; got %+v", got)
			}
		})
	}
}

// barrierCaller answers a batch of calls only once n batches are in
// flight together (or after 5 s, when it gives up): the proof that the
// readers making them run beside each other.
type barrierCaller struct {
	n        int
	mu       sync.Mutex
	batches  int
	together int // batches that met the others
	all      chan struct{}
}

func (c *barrierCaller) Call(_ context.Context, _ *hostfs.Root, calls []kubeletrpc.Call, _ time.Duration) []kubeletrpc.Reply {
	c.mu.Lock()
	c.batches++
	if c.batches == c.n {
		close(c.all)
	}
	c.mu.Unlock()
	select {
	case <-c.all:
		c.mu.Lock()
		c.together++
		c.mu.Unlock()
	case <-time.After(5 * time.Second):
	}
	return kubeletrpc.NotDialedReplies(calls, errors.New("a test's caller"))
}

// On a node, layer 6's two readers make their calls on the kubelet's
// sockets at the same time (prefetchKube): each batch is a run of
// accel-doctor-kubelet there, and the two ran one after the other, most of
// a check's time on a node. A node tree with the kubelet's socket and a
// DRA driver's registration socket, and a caller that answers only once
// both batches are in flight.
func TestKubeReadersCallBesideEachOther(t *testing.T) {
	// Short: a socket's path is at most 107 bytes (sun_path).
	dir, err := os.MkdirTemp("", "kr")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, p := range []string{"var/lib/kubelet/device-plugins/kubelet.sock", "var/lib/kubelet/plugins_registry/g-reg.sock"} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	root, err := hostfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &barrierCaller{n: 2, all: make(chan struct{})}
	runFixture(t, root, "node", Options{Layers: []report.Layer{report.LayerKube}, KubeletRPC: c})
	if c.batches != 2 || c.together != 2 {
		t.Errorf("%d batches of calls, %d of them in flight together; want 2 and 2", c.batches, c.together)
	}
}

// A driver killed (its registration socket left, refusing): its claims
// in the kubelet's state, one with no device (its prepare failed on the
// refused connection), are consequences of the dead registration, and
// say so. A driver merely absent (nothing of it on the node: a tree
// holds no socket) leaves them with no cause named; a registration that
// could not be tried says nothing of its claims (registrations unknown).
func TestDRAClaimsFollowTheirDeadDriver(t *testing.T) {
	const drv = "gpu.example.com"
	state := &dra.State{ChecksumOK: true, Claims: []dra.Claim{
		{UID: "u1", Name: "a", Namespace: "ml", Drivers: []dra.DriverClaim{{Driver: drv, Devices: []dra.ClaimDevice{{}}}}},
		{UID: "u2", Name: "b", Namespace: "ml", Drivers: []dra.DriverClaim{{Driver: drv}}},
	}}
	reg := func(a kubelet.Answer) []*dra.Registration {
		return []*dra.Registration{{Path: "/var/lib/kubelet/plugins_registry/" + drv + "-reg.sock", Name: drv + "-reg.sock", Type: "socket",
			Dial: kubelet.Dial{Method: "GetInfo", Answer: a}}}
	}
	for _, c := range []struct {
		name  string
		regs  []*dra.Registration
		cause string // the cause each claim finding names; "" none
		want  []string
	}{
		{"its registration socket refuses", reg(kubelet.Refused), "DRA_REGISTRATION_DEAD " + drv + "-reg.sock",
			[]string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_CLAIM_NO_DEVICE WARN"}},
		{"nothing of it on the node", nil, "", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_CLAIM_NO_DEVICE WARN"}},
		{"its registration could not be tried", reg(kubelet.NoAccess), "", []string{"DRA_CLAIM_NO_DEVICE WARN"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &dra.Node{RegistryDir: "/var/lib/kubelet/plugins_registry", RegistryState: kubelet.Present, Registrations: c.regs,
				StatePath: "/var/lib/kubelet/dra_manager_state", StateState: kubelet.Present, State: state}
			out := &Out{check: &Check{ID: "kube.dra", Layer: report.LayerKube}}
			judgeClaimDrivers(out, n)
			var got []string
			for _, f := range out.findings {
				got = append(got, f.Code+" "+string(f.Status))
				cause := ""
				if f.CausedBy != nil {
					cause = f.CausedBy.Code + " " + f.CausedBy.Subject
				}
				if cause != c.cause {
					t.Errorf("%s: caused by %q, want %q", f.Code, cause, c.cause)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
