package dranode

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// exampleDriver is the DRA example driver's default name for its gpu
// profile ("PROFILE.example.com").
const exampleDriver = "gpu.example.com"

// startExample runs the kubernetes-sigs DRA example driver's kubelet
// plugin (harness.DRAExampleDriver) for node n, as its DaemonSet runs it
// on a node: its registration in the node's plugins_registry, its data
// directory under the node path /var/lib/kubelet/plugins (bind-mounted
// from ROOT: the kubelet dials the path its registration names, and
// check --root ROOT finds the same socket), its CDI specs in
// ROOT/var/run/cdi, two fake GPUs, and the API server's kubeconfig: it
// publishes its ResourceSlice and reads each claim from there.
func (n *node) startExample() *harness.Proc {
	n.t.Helper()
	cmd := exec.Command(harness.DRAExampleDriver.Path(n.t),
		"--node-name", n.name, "--cdi-root", n.cdiDir, "--num-devices", "2",
		"--kubelet-registrar-directory-path", n.registry, "--kubelet-plugins-directory-path", pluginsDir,
		"--kubeconfig", n.c.Kubeconfig)
	p := harness.StartCommand(n.t, cmd)
	took, err := apiserver.WaitFor(context.Background(), wait, func(context.Context) (bool, error) {
		_, err := n.plugins.GetPlugin(exampleDriver)
		return err == nil, nil
	})
	if err != nil {
		n.t.Fatalf("the kubelet did not register %s: %v\n%s", exampleDriver, err, p.Output())
	}
	n.t.Logf("the kubelet registered %s %v after its start", exampleDriver, took.Round(time.Millisecond))
	return p
}

// The DRA example driver on the kubelet's DRA manager and plugin
// watcher, with the real API server: registered, its slice published, a
// claim allocated to one of its devices prepared with the driver's CDI
// device and spec: check finds nothing wrong. Then broken as nodes break:
// the claim's CDI spec removed (the runtime cannot resolve the claim's
// device: DRA_CLAIM_CDI_UNRESOLVED), the driver killed (its sockets left:
// DRA_REGISTRATION_DEAD, the kubelet's NodePrepareResources refused).
func TestDRAExampleDriver(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the node's /var/lib/kubelet/plugins is a bind mount in a private mount namespace")
	}
	c := apiserver.Start(t)
	n := startNode(t, c, "dra-example")
	p := n.startExample()
	if _, err := n.waitSlices(exampleDriver, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	}
	slices, err := n.slicesOf(exampleDriver)
	if err != nil || len(slices) != 1 || len(slices[0].Spec.Devices) != 2 || slices[0].Spec.Pool.Name != n.name {
		t.Fatalf("the driver's slice: %+v (%v), want one of 2 devices in pool %s", slices, err, n.name)
	}
	dev := slices[0].Spec.Devices[0].Name
	pod := n.claimPod("dra-example", "claim", exampleDriver, dev)
	ids, err := n.prepare(pod)
	uid := claimUID(t, n, pod)
	// The driver gives two CDI devices: its common one (a spec of its
	// own, written at start) and the claim's device (a spec per claim).
	var claimDev string
	for _, id := range ids {
		if strings.HasPrefix(id, "k8s."+exampleDriver+"/gpu=") && strings.Contains(id, uid) {
			claimDev = id
		}
	}
	if err != nil || claimDev == "" {
		t.Fatalf("PrepareResources: CDI devices %q, %v; want one of kind k8s.%s/gpu naming the claim's UID %s\n%s", ids, err, exampleDriver, uid, p.Output())
	}
	specs, _ := filepath.Glob(filepath.Join(n.cdiDir, "*"+uid+"*"))
	if len(specs) != 1 {
		t.Fatalf("the claim's CDI spec in %s: %v, want one file naming its UID", n.cdiDir, specs)
	}
	t.Logf("prepared %s: CDI devices %s, the claim's spec %s", dev, strings.Join(ids, ", "), filepath.Base(specs[0]))

	t.Run("healthy", func(t *testing.T) {
		got, raw := n.check()
		if b := bad(got); len(b) > 0 {
			t.Errorf("check --layer kube on a healthy node: want no FAIL or WARN, got:\n%s\n%s", summarize(b), raw)
		}
		if f := find(got, "DRA_REGISTRATION_OK", exampleDriver); f == nil || f.Status != "PASS" {
			t.Errorf("want DRA_REGISTRATION_OK PASS naming %s; got:\n%s", exampleDriver, summarize(got))
		}
	})

	t.Run("plugin test --dra", func(t *testing.T) {
		fs, raw := pluginTestDRA(t, n)
		for _, f := range fs {
			if f.Status == "FAIL" || f.Status == "WARN" {
				t.Errorf("plugin test --dra against a healthy driver: %s %s (%s): %s", f.Status, f.Code, f.Subject, f.Summary)
			}
		}
		// Without a kubeconfig the test's claims exist only in the test,
		// and this driver reads each claim from the API server: the
		// prepare is not judged, and the test says why.
		if f := findStatus(fs, "DRA_PLUGIN_CHECK_NOT_RUN", "NOT_RUN"); f == nil || !strings.Contains(f.Summary+f.Reason, "reads each claim from the API server") {
			t.Errorf("want the prepare NOT_RUN, saying the driver reads claims from the API server\n%s", raw)
		}
	})

	t.Run("claim's CDI spec removed", func(t *testing.T) {
		saved, err := os.ReadFile(specs[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(specs[0]); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(specs[0], saved, 0o644)
		got, raw := n.check()
		if f := find(got, "DRA_CLAIM_CDI_UNRESOLVED", claimDev); f == nil || f.Status != "FAIL" {
			t.Errorf("want DRA_CLAIM_CDI_UNRESOLVED FAIL naming %s; got:\n%s\n%s", claimDev, summarize(got), raw)
		}
	})

	t.Run("driver killed", func(t *testing.T) {
		p.Kill()
		reg := filepath.Join(n.registry, exampleDriver+"-reg.sock")
		if fi, err := os.Lstat(reg); err != nil || fi.Mode().Type() != fs.ModeSocket {
			t.Fatalf("the killed driver's registration socket %s: %v", reg, err)
		}
		next := n.claimPod("dra-example", "next", exampleDriver, slices[0].Spec.Devices[1].Name)
		if _, err := n.prepare(next); err == nil || !strings.Contains(err.Error(), "Unavailable") {
			t.Errorf("PrepareResources with the driver dead: %v, want the kubelet's refused connection", err)
		} else {
			t.Logf("PrepareResources: %v", err)
		}
		got, raw := n.check()
		if f := find(got, "DRA_REGISTRATION_DEAD", exampleDriver+"-reg.sock"); f == nil || f.Status != "FAIL" {
			t.Errorf("want DRA_REGISTRATION_DEAD FAIL naming %s-reg.sock; got:\n%s\n%s", exampleDriver, summarize(got), raw)
		}
		// What the dead driver leaves in the kubelet's state follows from
		// it, and says so.
		for _, code := range []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED", "DRA_CLAIM_NO_DEVICE"} {
			for _, f := range got {
				if f.Code == code && (f.CausedBy == nil || f.CausedBy.Code != "DRA_REGISTRATION_DEAD") {
					t.Errorf("%s (%s) is not marked as following from DRA_REGISTRATION_DEAD: %+v", code, f.Subject, f.CausedBy)
				}
			}
		}
	})
}

// pluginTestDRA runs `accel-doctor plugin test --dra` against the
// example driver's registration in n's plugins_registry (the kubelet's
// plugin watcher is connected to it too, as on a node) and gives its
// findings.
func pluginTestDRA(t *testing.T, n *node, extra ...string) ([]harness.Finding, string) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"plugin", "test", "--dra", "--plugins-registry", n.registry, "--driver", exampleDriver,
		"--cdi-spec-dir", n.cdiDir, "--timeout", "10s", "-o", "json"}, extra...)
	stdout, stderr, code := harness.Run(t, c, harness.AccelDoctor(t), args...)
	var rep struct{ Findings []harness.Finding }
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("plugin test --dra: exit %d, not a report (%v): %s\n%s", code, err, stderr, stdout)
	}
	t.Logf("plugin test --dra: exit %d\n%s", code, summarize(rep.Findings))
	return rep.Findings, stdout
}

func findStatus(fs []harness.Finding, code, status string) *harness.Finding {
	for i, f := range fs {
		if f.Code == code && f.Status == status {
			return &fs[i]
		}
	}
	return nil
}
