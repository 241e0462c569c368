package deviceplugin

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// Device plugins we did not write, built from their released source
// (harness.ThirdParty), against the kubelet's device manager and under
// `plugin test`: no FAIL on a healthy one, and each broken case named.

const sampleResource = "example.com/resource"

// startSample runs Kubernetes' sample device plugin for the node k. It
// registers at the kubelet's fixed path (/var/lib/kubelet/device-plugins
// /kubelet.sock, the test's directory in this mount namespace) and
// creates, on Allocate, /tmp/ID, which it mounts into the container: it
// runs in a mount namespace of its own whose /tmp is ROOT/tmp, so that
// those files are on the node `check --root ROOT` reads, and nothing is
// written in the host's /tmp.
func startSample(t *testing.T, k *harness.Kubelet) *harness.Proc {
	t.Helper()
	tmp := filepath.Join(k.Root, "tmp")
	if err := os.MkdirAll(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$1" /tmp && exec "$2"`, "sh", tmp, harness.SampleDevicePlugin.Path(t))
	return harness.StartCommand(t, cmd)
}

// sampleSocket is the sample plugin's socket in k's directory (named
// dp.<unix time>, a name that says nothing of its resource), "" if none.
func sampleSocket(k *harness.Kubelet) string {
	m, _ := filepath.Glob(filepath.Join(k.Dir, "dp.*"))
	if len(m) != 1 {
		return ""
	}
	return m[0]
}

// The sample plugin on the kubelet's device manager, then broken the
// ways a node breaks: no FAIL or WARN while it serves (its socket's name
// names no resource: check must not guess one); a device's file gone
// while allocated is KUBELET_CHECKPOINT_ABSENT_DEVICE for that device
// (its IDs are opaque: the mount source the checkpoint's AllocateResponse
// kept is what the host shows of it); the plugin killed is its socket
// dead; a kubelet restart with it dead leaves example.com/resource in the
// checkpoint with no plugin.
func TestSampleDevicePlugin(t *testing.T) {
	k := harness.Start(t, harness.Options{})
	p := startSample(t, k)
	if d, err := k.WaitCount(ctx(t), sampleResource, 2, 2); err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	} else {
		t.Logf("sample device plugin registered: 2/2 in %v", d)
	}
	pod := harness.Pod("sample", sampleResource, 1)
	if res := k.Admit(ctx(t), pod); !res.Admit {
		t.Fatalf("admit: %s: %s", res.Reason, res.Message)
	}
	opts, err := k.CreateContainer(ctx(t), pod, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Mounts) != 1 || !strings.HasPrefix(opts.Mounts[0].HostPath, "/tmp/Dev-") {
		t.Fatalf("the runtime gets mounts %+v, want one of /tmp/Dev-N", opts.Mounts)
	}
	file := opts.Mounts[0].HostPath
	id := filepath.Base(file)
	if _, err := os.Stat(filepath.Join(k.Root, file)); err != nil {
		t.Fatalf("the plugin's file for %s is not on the node: %v", id, err)
	}
	t.Logf("allocated %s: the container gets %s mounted", id, file)

	t.Run("healthy", func(t *testing.T) { checkClean(t, k) })

	t.Run("device file removed while allocated", func(t *testing.T) {
		if err := os.Remove(filepath.Join(k.Root, file)); err != nil {
			t.Fatal(err)
		}
		fs, raw := k.CheckKube(t)
		if !hasFinding(fs, "KUBELET_CHECKPOINT_ABSENT_DEVICE", "FAIL", id) {
			t.Errorf("want KUBELET_CHECKPOINT_ABSENT_DEVICE FAIL naming %s\n%s", id, raw)
		}
	})

	sock := sampleSocket(k)
	if sock == "" {
		t.Fatalf("no dp.* socket of the sample plugin in %s", k.Dir)
	}
	t.Run("plugin killed", func(t *testing.T) {
		p.Kill()
		fs, raw := k.CheckKube(t)
		if !hasFinding(fs, "KUBELET_PLUGIN_SOCKET_DEAD", "FAIL", filepath.Base(sock)) {
			t.Errorf("want KUBELET_PLUGIN_SOCKET_DEAD FAIL naming %s\n%s", filepath.Base(sock), raw)
		}
	})

	t.Run("kubelet restart with the plugin dead", func(t *testing.T) {
		k.Restart()
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Fatalf("the restarted manager left %s (%v)", sock, err)
		}
		if cp, al := k.Capacity().Count(sampleResource); cp != 0 || al != 0 {
			t.Fatalf("after the restart the manager counts %d/%d, want 0/0", cp, al)
		}
		fs, raw := k.CheckKube(t)
		// The restarted manager has not written its checkpoint (it writes on
		// a device update): a checkpoint older than kubelet.sock is a WARN.
		if !hasFinding(fs, "KUBELET_RESOURCE_NO_PLUGIN", "WARN", sampleResource) && !hasFinding(fs, "KUBELET_RESOURCE_NO_PLUGIN", "FAIL", sampleResource) {
			t.Errorf("want KUBELET_RESOURCE_NO_PLUGIN WARN or FAIL naming %s\n%s", sampleResource, raw)
		}
	})
}

// runTester starts `plugin test --device-plugin-dir` as the kubelet of
// k's directory (the device manager stopped first: the tester refuses a
// directory where a kubelet answers), waits for its kubelet.sock, runs
// start (the plugin, which registers at once), and gives the tester's
// findings.
func runTester(t *testing.T, k *harness.Kubelet, start func(), extra ...string) ([]harness.Finding, string) {
	t.Helper()
	k.Stop()
	args := append([]string{"--root", k.Root, "plugin", "test", "--device-plugin-dir", k.Dir, "--timeout", "5s", "--watch", "300ms", "-o", "json"}, extra...)
	tester := harness.StartAccelDoctor(t, args...)
	kubeletSock := filepath.Join(k.Dir, "kubelet.sock")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if fi, err := os.Stat(kubeletSock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin test served no %s in 20 s\n%s", kubeletSock, tester.Output())
		}
		time.Sleep(5 * time.Millisecond)
	}
	start()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := tester.Wait(c)
	if err != nil {
		t.Fatal(err)
	}
	out := tester.Stdout()
	var rep struct{ Findings []harness.Finding }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("plugin test: exit %d, not a report (%v):\n%s", code, err, tester.Output())
	}
	t.Logf("plugin test: exit %d\n%s", code, summarize(rep.Findings))
	return rep.Findings, out
}

// `plugin test` playing the kubelet for the sample plugin. The plugin
// re-registers only when it sees kubelet.sock created again, and then
// after 10 s (its Watch polls every 10 s before it serves again): the
// kubelet keeps a plugin's resource 5 minutes after its endpoint goes,
// so that return is slow, a WARN with the figure, not the FAIL of a
// plugin that never comes back. Nothing else may be wrong.
func TestSampleDevicePluginUnderTheTester(t *testing.T) {
	k := harness.Start(t, harness.Options{})
	fs, raw := runTester(t, k, func() { startSample(t, k) })
	for _, f := range fs {
		switch {
		case f.Code == "PLUGIN_REREGISTER_SLOW":
			if f.Status != "WARN" {
				t.Errorf("PLUGIN_REREGISTER_SLOW is %s, want WARN", f.Status)
			}
		case f.Status == "FAIL" || f.Status == "WARN":
			t.Errorf("plugin test finds %s %s (%s): %s", f.Status, f.Code, f.Subject, f.Summary)
		}
	}
	for _, c := range []string{"PLUGIN_OPTIONS_OK", "PLUGIN_DEVICES_LISTED", "PLUGIN_ALLOCATE_OK"} {
		if !hasFinding(fs, c, "PASS", "") {
			t.Errorf("want %s PASS\n%s", c, raw)
		}
	}
	if !hasFinding(fs, "PLUGIN_REREGISTER_SLOW", "WARN", "") && !hasFinding(fs, "PLUGIN_REREGISTERED", "PASS", "") {
		t.Errorf("the re-registration is neither judged slow nor passed\n%s", raw)
	}
}

const rdmaResource = "rdma/hca_shared_devices_a"

// startRDMA runs the k8s-rdma-shared-dev-plugin with one resource whose
// selector matches no device (vendor ffff): a resource server of no
// devices, which is what it serves on a node without RDMA hardware, and
// which touches no network interface (it brings up only the devices its
// selectors match). The plugin registers through plugins_registry when
// /var/lib/kubelet/plugins_registry exists, the kubelet's device-plugins
// directory otherwise; the test needs the latter, and skips on a node
// that has a plugins_registry (a real kubelet's, which would register
// it).
func startRDMA(t *testing.T, k *harness.Kubelet) *harness.Proc {
	t.Helper()
	// At its start the plugin asks the kernel's RDMA netlink for the RDMA
	// subsystem's network-namespace mode and exits when it cannot: a
	// kernel without the RDMA core (ib_core) has no such netlink family.
	if fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA); err != nil {
		t.Skipf("this kernel has no RDMA netlink (socket(AF_NETLINK, NETLINK_RDMA): %v): the RDMA shared device plugin exits at its start without it", err)
	} else {
		unix.Close(fd)
	}
	if _, err := os.Stat("/var/lib/kubelet/plugins_registry"); err == nil {
		t.Skip("/var/lib/kubelet/plugins_registry exists here (a kubelet's): the RDMA shared device plugin would register through it")
	}
	cfg := filepath.Join(k.Root, "rdma-config.json")
	if err := os.WriteFile(cfg, []byte(`{"periodicUpdateInterval": 0, "configList": [{"resourceName": "hca_shared_devices_a", "rdmaHcaMax": 10, "selectors": {"vendors": ["ffff"]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return harness.StartCommand(t, exec.Command(harness.RDMASharedDevicePlugin.Path(t), "-config-file", cfg))
}

// The RDMA shared device plugin on the kubelet's device manager: its
// resource registers (with no device: no hardware here), and check finds
// nothing wrong in the kubelet's directory; after a kubelet restart,
// which removes its socket, it sees its own socket gone, serves and
// registers again.
func TestRDMASharedDevicePlugin(t *testing.T) {
	k := harness.Start(t, harness.Options{})
	p := startRDMA(t, k)
	if _, err := k.WaitFor(ctx(t), rdmaResource+" registered", func(c harness.Capacity) bool { return c.Has(rdmaResource) }); err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	}
	checkClean(t, k)
	k.Restart()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Registered again: the new manager's endpoint for the resource.
	d, err := k.WaitFor(c, rdmaResource+" registered again", func(harness.Capacity) bool {
		_, err := os.Stat(filepath.Join(k.Dir, "hca_shared_devices_a.sock"))
		return err == nil && strings.Contains(p.Output(), "most likely Kubelet restarted")
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	}
	t.Logf("served again %v after the restart", d)
	checkClean(t, k)
}

// `plugin test` playing the kubelet for the RDMA shared device plugin:
// its restart removes the plugin's socket, which is how this plugin
// tells a kubelet restart, and it comes back (its lstat every 5 s: within
// the tester's --timeout, or a WARN with the figure); no FAIL.
func TestRDMASharedDevicePluginUnderTheTester(t *testing.T) {
	k := harness.Start(t, harness.Options{})
	fs, raw := runTester(t, k, func() { startRDMA(t, k) })
	for _, f := range fs {
		if f.Status == "FAIL" {
			t.Errorf("plugin test finds %s %s (%s): %s", f.Status, f.Code, f.Subject, f.Summary)
		}
	}
	if !hasFinding(fs, "PLUGIN_OPTIONS_OK", "PASS", "") {
		t.Errorf("want PLUGIN_OPTIONS_OK PASS\n%s", raw)
	}
	if !hasFinding(fs, "PLUGIN_REREGISTERED", "PASS", "") && !hasFinding(fs, "PLUGIN_REREGISTER_SLOW", "WARN", "") {
		t.Errorf("the plugin's return after the restart is neither PLUGIN_REREGISTERED nor PLUGIN_REREGISTER_SLOW\n%s", raw)
	}
}
