package dranode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

const (
	driver = "gpu.e2e.example.com"
	// dpResource is the device-plugin mock's resource (duplicate-with-plugin).
	dpResource = "fake.example.com/gpu"
)

// scenarios are the mock's modes, "stopped" (a healthy mock killed: its
// sockets left behind) and "kubelet-restart" (a healthy mock across a
// restart of the kubelet, and a claim's spec lost), each against one
// node.
var scenarios = map[string]func(t *testing.T, n *node){
	"healthy":               healthy,
	"not-registered":        notRegistered,
	"stopped":               stopped,
	"prepare-error":         prepareError,
	"no-cdi-spec":           noCDISpec,
	"empty-edits":           emptyEdits,
	"stale-slice":           staleSlice,
	"duplicate-with-plugin": duplicateWithPlugin,
	"kubelet-restart":       kubeletRestart,
	"getinfo-error":         getInfoError,
	"unsupported-version":   unsupportedVersion,
	"bad-endpoint":          badEndpoint,
	"empty-prepare":         emptyPrepare,
	"unprepare-error":       unprepareError,
	"wrong-type":            wrongType,
	"dra-only-gpu-node":     draOnlyGPUNode,
}

// helpModes are the DRA modes `accel-doctor-kube plugin mock --help` lists
// (generated from dramock.ModeDocs): a mode without a scenario fails the
// test.
func helpModes(t *testing.T) []string {
	t.Helper()
	kube := filepath.Join(filepath.Dir(harness.AccelDoctor(t)), "accel-doctor-kube")
	out, err := exec.Command(kube, "plugin", "mock", "--help").Output()
	if err != nil {
		t.Fatalf("accel-doctor-kube plugin mock --help: %v", err)
	}
	_, sect, ok := strings.Cut(string(out), "DRA modes (--mode):\n")
	if !ok {
		t.Fatalf("no DRA modes in plugin mock --help:\n%s", out)
	}
	var modes []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z][a-z-]*)$`).FindAllStringSubmatch(sect, -1) {
		modes = append(modes, m[1])
	}
	if len(modes) == 0 {
		t.Fatalf("no DRA modes in plugin mock --help:\n%s", out)
	}
	return modes
}

// TestMockModesAgainstTheKubelet runs, for every DRA mode of the mock (and
// a mock that is killed), a node whose kubelet's DRA registration path is
// the kubelet's own (see node), the mock as a process registering there,
// the kubelet's DRA manager preparing a claim through the mock as it does
// for a pod, and then `accel-doctor check --layer kube` over the node's
// directories: each scenario asserts what the kubelet did and the cause
// check names.
func TestMockModesAgainstTheKubelet(t *testing.T) {
	if os.Geteuid() != 0 {
		// Before the build and the API server: every node needs the
		// harness's mount namespace (harness.Start says so too).
		t.Skip("needs root: the kubelet's device manager and the node's /var/lib/kubelet/plugins are bind mounts in a private mount namespace")
	}
	modes := helpModes(t)
	for _, m := range modes {
		if scenarios[m] == nil {
			t.Errorf("plugin mock --help lists DRA mode %q, which has no scenario here", m)
		}
	}
	c := apiserver.Start(t)
	names := make([]string, 0, len(scenarios))
	for name := range scenarios {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			n := startNode(t, c, "dranode-"+name)
			scenarios[name](t, n)
		})
	}
}

// healthy: registered, a claim prepared with a CDI device whose spec the
// mock wrote, check PASSes the driver's registration and finds nothing
// wrong; unprepared, the spec goes; stopped, the kubelet deregisters it
// and its slice is gone.
func healthy(t *testing.T, n *node) {
	p := n.startMock(driver, "healthy")
	t.Logf("registered by the kubelet %v after the socket served (the plugin manager's reconciler looks every second)", n.waitRegistered(p, driver, 1).Round(time.Millisecond))
	if _, err := n.waitSlices(driver, 1); err != nil {
		t.Fatal(err)
	}
	pod := n.claimPod("healthy", "claim", driver, "dev-0")
	ids, err := n.prepare(pod)
	if err != nil {
		t.Fatalf("PrepareResources: %v", err)
	}
	want := fmt.Sprintf("k8s.%s/claim=%s-dev-0", driver, claimUID(t, n, pod))
	if len(ids) != 1 || ids[0] != want {
		t.Fatalf("the runtime would be given CDI devices %q, want [%s]", ids, want)
	}
	spec := filepath.Join(n.cdiDir, "k8s."+driver+"-claim_"+claimUID(t, n, pod)+".json")
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("the claim's CDI spec: %v", err)
	}
	assertStateDevices(t, n, "claim", []string{want})

	got, raw := n.check()
	if b := bad(got); len(b) > 0 {
		t.Errorf("check --layer kube on a healthy node: want no FAIL or WARN, got:\n%s\n%s", summarize(b), raw)
	}
	if f := find(got, "DRA_REGISTRATION_OK", driver); f == nil || f.Status != "PASS" {
		t.Errorf("check --layer kube: want DRA_REGISTRATION_OK PASS naming %s; got:\n%s\n%s", driver, summarize(got), raw)
	}

	if err := n.dm.UnprepareResources(ctx(t), pod); err != nil {
		t.Fatalf("UnprepareResources: %v", err)
	}
	if _, err := os.Stat(spec); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after NodeUnprepareResources the claim's spec should be gone: %v", err)
	}
	if cl := stateClaim(t, n, "claim"); cl != nil {
		t.Errorf("after UnprepareResources the kubelet's DRA state still holds claim %s: %+v", cl.ClaimName, *cl)
	}

	if code := p.Stop(); code != 0 {
		t.Errorf("plugin mock --dra: exit %d after SIGTERM, want 0", code)
	}
	// A clean stop deletes the driver's own slices (the mock's, as
	// kubeletplugin-based drivers do) before it exits.
	if s, err := n.slicesOf(driver); err != nil || len(s) != 0 {
		t.Errorf("after a clean stop: %d ResourceSlice(s) of %s left (%v), want 0", len(s), driver, err)
	}
	n.waitDeregistered(driver)
	got, raw = n.check()
	if b := bad(got); len(b) > 0 {
		t.Errorf("check --layer kube after a clean stop: want no FAIL or WARN, got:\n%s\n%s", summarize(b), raw)
	}
}

// notRegistered: the mock serves its DRA service but has no registration
// socket: the kubelet never registers it and refuses to prepare its
// claims with its own words; check names the driver.
func notRegistered(t *testing.T, n *node) {
	n.startMock(driver, "not-registered")
	// The plugin manager's reconciler looks every second
	// (loopSleepDuration in pluginmanager): three passes.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := n.plugins.GetPlugin(driver); err == nil {
			t.Fatalf("the kubelet registered %s, which has no registration socket", driver)
		}
	}
	pod := n.claimPod("not-registered", "claim", driver, "dev-0")
	_, err := n.prepare(pod)
	if want := "prepare dynamic resources: DRA driver " + driver + " is not registered"; err == nil || err.Error() != want {
		t.Fatalf("PrepareResources: %v, want %q", err, want)
	}
	got, raw := n.check()
	f := find(got, "DRA_DRIVER_NOT_REGISTERED", driver)
	if f == nil || f.Status != "FAIL" || f.Subject != driver {
		t.Errorf("check --layer kube: want DRA_DRIVER_NOT_REGISTERED FAIL with subject %s; got:\n%s\n%s", driver, summarize(got), raw)
	}
}

// stopped: a registered mock killed (SIGKILL): its sockets stay. The
// plugin watcher sees no socket removed, so the kubelet keeps the plugin
// and fails the claim's NodePrepareResources on a refused connection;
// check names the dead registration socket.
func stopped(t *testing.T, n *node) {
	p := n.startMock(driver, "healthy")
	n.waitRegistered(p, driver, 1)
	n.killed[p] = true
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(n.registry, driver+"-reg.sock")
	if fi, err := os.Lstat(reg); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("the killed mock's registration socket %s: %v", reg, err)
	}
	if _, err := n.plugins.GetPlugin(driver); err != nil {
		t.Fatalf("the kubelet dropped %s although its registration socket is still there: %v", driver, err)
	}
	pod := n.claimPod("stopped", "claim", driver, "dev-0")
	_, err := n.prepare(pod)
	if want := "prepare dynamic resources: NodePrepareResources: rpc error: code = Unavailable"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("PrepareResources: %v, want %q...", err, want)
	}
	t.Logf("PrepareResources: %v", err)
	got, raw := n.check()
	if f := find(got, "DRA_REGISTRATION_DEAD", driver+"-reg.sock"); f == nil || f.Status != "FAIL" {
		t.Errorf("check --layer kube: want DRA_REGISTRATION_DEAD FAIL naming %s-reg.sock; got:\n%s\n%s", driver, summarize(got), raw)
	}
}

// prepareError: the kubelet's NodePrepareResources fails with the
// driver's error, in the words the mode's symptom quotes. The node keeps
// no trace of it but a claim without devices in the DRA state, which is
// what check can say (DRA_CLAIM_NO_DEVICE, a WARN: the state does not
// tell a failed prepare from an empty answer; the error is `plugin test
// --dra`'s DRA_PLUGIN_PREPARE_FAILED and the pod's events), never a FAIL.
func prepareError(t *testing.T, n *node) {
	p := n.startMock(driver, "prepare-error")
	n.waitRegistered(p, driver, 1)
	pod := n.claimPod("prepare-error", "claim", driver, "dev-0")
	_, err := n.prepare(pod)
	if want := "prepare dynamic resources: NodePrepareResources failed for ResourceClaim claim: mock: preparation refused"; err == nil || err.Error() != want {
		t.Fatalf("PrepareResources: %v, want %q", err, want)
	}
	assertStateDevices(t, n, "claim", nil)
	// The kubelet wrote the claim to its state before it asked, and no
	// device after: the claim's WARN, the only DRA finding that is not a
	// PASS (the registration is live).
	got, raw := n.check()
	for _, f := range bad(got) {
		if strings.HasPrefix(f.Code, "DRA_") && f.Code != "DRA_CLAIM_NO_DEVICE" {
			t.Errorf("check --layer kube after a refused prepare: %s %s (%s): %s\n%s", f.Status, f.Code, f.Subject, f.Summary, raw)
		}
	}
	if f := find(got, "DRA_CLAIM_NO_DEVICE", "prepare-error/claim"); f == nil || f.Status != "WARN" {
		t.Errorf("check --layer kube after a refused prepare: want DRA_CLAIM_NO_DEVICE WARN for prepare-error/claim; got:\n%s\n%s", summarize(got), raw)
	}
}

// noCDISpec: the kubelet prepares the claim and checkpoints its CDI
// device (it does not resolve CDI names: the runtime does); no spec
// declares it; check names the unresolvable ID.
func noCDISpec(t *testing.T, n *node) {
	p := n.startMock(driver, "no-cdi-spec")
	n.waitRegistered(p, driver, 1)
	pod := n.claimPod("no-cdi-spec", "claim", driver, "dev-0")
	ids, err := n.prepare(pod)
	if err != nil || len(ids) != 1 {
		t.Fatalf("PrepareResources: CDI devices %q, %v; want one", ids, err)
	}
	assertStateDevices(t, n, "claim", ids)
	if m, _ := filepath.Glob(filepath.Join(n.cdiDir, "*")); len(m) != 0 {
		t.Fatalf("no-cdi-spec wrote %v", m)
	}
	got, raw := n.check()
	if f := find(got, "DRA_CLAIM_CDI_UNRESOLVED", ids[0]); f == nil || f.Status != "FAIL" {
		t.Errorf("check --layer kube: want DRA_CLAIM_CDI_UNRESOLVED FAIL naming %s; got:\n%s\n%s", ids[0], summarize(got), raw)
	}
}

// emptyEdits: prepared, the spec written, but its device has no edits:
// the CDI library refuses the file, so the ID does not resolve; check
// names the refused spec and the library's words.
func emptyEdits(t *testing.T, n *node) {
	p := n.startMock(driver, "empty-edits")
	n.waitRegistered(p, driver, 1)
	pod := n.claimPod("empty-edits", "claim", driver, "dev-0")
	ids, err := n.prepare(pod)
	if err != nil || len(ids) != 1 {
		t.Fatalf("PrepareResources: CDI devices %q, %v; want one", ids, err)
	}
	if m, _ := filepath.Glob(filepath.Join(n.cdiDir, "*.json")); len(m) != 1 {
		t.Fatalf("empty-edits should write the claim's spec: %v", m)
	}
	got, raw := n.check()
	f := find(got, "DRA_CLAIM_CDI_UNRESOLVED", ids[0])
	if f == nil || f.Status != "FAIL" || !strings.Contains(f.Summary, "empty device edits") {
		t.Errorf("check --layer kube: want DRA_CLAIM_CDI_UNRESOLVED FAIL naming %s and the CDI library's \"empty device edits\"; got:\n%s\n%s", ids[0], summarize(got), raw)
	}
}

// staleSlice: the mock leaves its ResourceSlice when it stops (a healthy
// one deletes it); the kubelet deregisters the driver when its socket
// goes and wipes the slice itself after its wiping delay (30 s,
// defaultWipingDelay). Nothing of the driver is left in the node's
// directories: check finds nothing wrong there (the slice is the
// cluster's; `accel-doctor dra` reads slices).
func staleSlice(t *testing.T, n *node) {
	p := n.startMock(driver, "stale-slice")
	n.waitRegistered(p, driver, 1)
	if _, err := n.waitSlices(driver, 1); err != nil {
		t.Fatal(err)
	}
	if code := p.Stop(); code != 0 {
		t.Errorf("plugin mock --dra: exit %d after SIGTERM, want 0", code)
	}
	if s, err := n.slicesOf(driver); err != nil || len(s) != 1 {
		t.Fatalf("right after the stale-slice mock stopped: %d ResourceSlice(s) of %s (%v), want its 1 left behind", len(s), driver, err)
	}
	stoppedAt := time.Now()
	n.waitDeregistered(driver)
	if _, err := n.waitSlices(driver, 0); err != nil {
		t.Fatalf("the kubelet did not wipe the unregistered driver's slice: %v", err)
	}
	t.Logf("the kubelet wiped the stale ResourceSlice %v after the driver stopped", time.Since(stoppedAt).Round(100*time.Millisecond))
	got, raw := n.check()
	if b := bad(got); len(b) > 0 {
		t.Errorf("check --layer kube after the driver stopped: want no FAIL or WARN, got:\n%s\n%s", summarize(b), raw)
	}
}

// duplicateWithPlugin: the device-plugin mock registers mock-0 and mock-1
// with the kubelet's device manager (its checkpoint lists them), and the
// DRA mock prepares a claim on mock-0: check WARNs that mock-0 is
// advertised twice.
func duplicateWithPlugin(t *testing.T, n *node) {
	dp := harness.StartAccelDoctor(t, "plugin", "mock", "--device-plugin-dir", n.k.Dir, "--resource", dpResource, "--devices", "2", "--mode", "healthy")
	t.Cleanup(func() {
		if code := dp.Stop(); code != 0 {
			t.Errorf("plugin mock (device plugin): exit %d, want 0", code)
		}
		if err := n.k.WaitPluginsGone(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if _, err := n.k.WaitCount(ctx(t), dpResource, 2, 2); err != nil {
		t.Fatal(err)
	}
	// The manager updates its counts before it writes the checkpoint
	// (genericDeviceUpdateCallback): wait for the file check reads.
	cp := filepath.Join(n.k.Dir, harness.CheckpointFile)
	if _, err := apiserver.WaitFor(ctx(t), wait, func(context.Context) (bool, error) {
		b, err := os.ReadFile(cp)
		return err == nil && strings.Contains(string(b), `"mock-0"`) && strings.Contains(string(b), `"mock-1"`), nil
	}); err != nil {
		t.Fatalf("the device manager's checkpoint %s does not register mock-0 and mock-1: %v", cp, err)
	}
	p := n.startMock(driver, "duplicate-with-plugin")
	n.waitRegistered(p, driver, 1)
	pod := n.claimPod("duplicate", "claim", driver, "mock-0")
	ids, err := n.prepare(pod)
	if err != nil || len(ids) != 1 {
		t.Fatalf("PrepareResources: CDI devices %q, %v; want one", ids, err)
	}
	got, raw := n.check()
	f := find(got, "DRA_DOUBLE_ADVERTISED", "mock-0")
	if f == nil || f.Status != "WARN" || !strings.Contains(f.Summary, dpResource) || !strings.Contains(f.Summary, driver) {
		t.Errorf("check --layer kube: want DRA_DOUBLE_ADVERTISED WARN naming mock-0, %s and %s; got:\n%s\n%s", dpResource, driver, summarize(got), raw)
	}
	if f := find(got, "DRA_DOUBLE_ADVERTISED", "mock-1"); f != nil {
		t.Errorf("check --layer kube: mock-1 is not prepared by the DRA driver, yet: %s", f.Summary)
	}
}

// waitDeregistered waits until the kubelet's DRA plugin manager no longer
// hands out a plugin for driver: the plugin watcher saw its registration
// socket go (DeRegisterPlugin).
func (n *node) waitDeregistered(driver string) {
	n.t.Helper()
	start := time.Now()
	for time.Since(start) < wait {
		if _, err := n.plugins.GetPlugin(driver); err != nil {
			if want := "DRA driver " + driver + " is not registered"; err.Error() != want {
				n.t.Fatalf("GetPlugin(%s): %v, want %q", driver, err, want)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	n.t.Fatalf("the kubelet's DRA plugin manager still has %s %v after its registration socket went", driver, wait)
}

// claimUID is the UID of the pod's (one) claim in the API server.
func claimUID(t *testing.T, n *node, pod *corev1.Pod) string {
	t.Helper()
	name := *pod.Spec.ResourceClaims[0].ResourceClaimName
	c, err := n.c.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(c.UID)
}

// stateClaim reads the DRA manager's checkpoint with the kubelet's own
// checkpointer (pkg/kubelet/cm/dra/state) and returns claim name's entry,
// nil when there is none.
func stateClaim(t *testing.T, n *node, name string) *state.ClaimInfoState {
	t.Helper()
	if _, err := os.Stat(n.statePath()); err != nil {
		// GetOrCreate would write one: the kubelet writes it at start.
		t.Fatalf("the kubelet's DRA state: %v", err)
	}
	cp, err := state.NewCheckpointer(n.kdir, "dra_manager_state")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cp.GetOrCreate()
	if err != nil {
		t.Fatalf("the kubelet's DRA state %s: %v", n.statePath(), err)
	}
	claims, err := c.GetClaimInfoStateList()
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims {
		if claims[i].ClaimName == name {
			return &claims[i]
		}
	}
	return nil
}

// assertStateDevices checks that the kubelet's DRA state holds claim name
// with exactly these CDI device IDs (nil: none, as after a refused
// prepare: the DRA manager checkpoints the claim before it calls the
// driver).
func assertStateDevices(t *testing.T, n *node, name string, want []string) {
	t.Helper()
	cl := stateClaim(t, n, name)
	if cl == nil {
		t.Errorf("the kubelet's DRA state has no claim %s", name)
		return
	}
	var got []string
	for _, ds := range cl.DriverState {
		for _, d := range ds.Devices {
			got = append(got, d.CDIDeviceIDs...)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the kubelet's DRA state: claim %s has CDI devices %q, want %q", name, got, want)
	}
}

// kubeletRestart: a healthy driver with a prepared claim, then a kubelet
// restart. The new plugin watcher registers the registration socket it
// finds (traversePluginDir: a socket older than the kubelet is no fault),
// and the new DRA plugin manager's start-up wipe deletes the node's slices
// (the driver publishes its slice again 30 s later, its controller's sync
// delay); check finds nothing wrong. Then the claim's spec is removed, as a reboot
// empties /var/run/cdi: the kubelet's state still says prepared, and check
// names the unresolvable CDI device. The restarted kubelet restored the
// claim as not prepared (newClaimInfoFromState), so preparing the pod
// again calls the driver, which writes the spec again, and check is clean:
// the remediation DRA_CLAIM_CDI_UNRESOLVED gives.
func kubeletRestart(t *testing.T, n *node) {
	p := n.startMock(driver, "healthy")
	n.waitRegistered(p, driver, 1)
	if _, err := n.waitSlices(driver, 1); err != nil {
		t.Fatal(err)
	}
	pod := n.claimPod("restart", "claim", driver, "dev-0")
	ids, err := n.prepare(pod)
	if err != nil || len(ids) != 1 {
		t.Fatalf("PrepareResources: CDI devices %q, %v; want one", ids, err)
	}
	spec := filepath.Join(n.cdiDir, "k8s."+driver+"-claim_"+claimUID(t, n, pod)+".json")

	n.restart()
	t.Logf("registered again %v after the restart, from the socket already there", n.waitRegistered(p, driver, 2).Round(time.Millisecond))
	// The wipe is at once; the driver's ResourceSlice controller makes
	// the slice again only after its sync delay (30 s,
	// resourceslice.DefaultSyncDelay; measured here: 30.0 s), which this
	// test does not wait for.
	took, err := n.waitSlices(driver, 0)
	if err != nil {
		t.Fatalf("the restarted kubelet's start-up wipe: %v", err)
	}
	t.Logf("the restarted kubelet wiped the node's ResourceSlices in %v", took.Round(time.Millisecond))
	got, raw := n.check()
	if b := bad(got); len(b) > 0 {
		t.Errorf("check --layer kube after a kubelet restart: want no FAIL or WARN, got:\n%s\n%s", summarize(b), raw)
	}
	if f := find(got, "DRA_REGISTRATION_OK", driver); f == nil || f.Status != "PASS" {
		t.Errorf("check --layer kube after a kubelet restart: want DRA_REGISTRATION_OK PASS naming %s; got:\n%s", driver, summarize(got))
	}

	if err := os.Remove(spec); err != nil {
		t.Fatal(err)
	}
	got, raw = n.check()
	if f := find(got, "DRA_CLAIM_CDI_UNRESOLVED", ids[0]); f == nil || f.Status != "FAIL" || f.Subject != "restart/claim" {
		t.Errorf("check --layer kube with the claim's spec gone: want DRA_CLAIM_CDI_UNRESOLVED FAIL for restart/claim naming %s; got:\n%s\n%s", ids[0], summarize(got), raw)
	}
	again, err := n.prepare(pod)
	if err != nil || !slices.Equal(again, ids) {
		t.Fatalf("PrepareResources after the restart: CDI devices %q, %v; want %q", again, err, ids)
	}
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("the restarted kubelet's PrepareResources should have had the driver write the spec again: %v", err)
	}
	got, raw = n.check()
	if b := bad(got); len(b) > 0 {
		t.Errorf("check --layer kube once the claim is prepared again: want no FAIL or WARN, got:\n%s\n%s", summarize(b), raw)
	}
}

// neverRegistered asserts that the kubelet does not register driver
// within three passes of the plugin manager's reconciler (it looks every
// second, loopSleepDuration in pluginmanager).
func neverRegistered(t *testing.T, n *node, driver string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := n.plugins.GetPlugin(driver); err == nil {
			t.Fatalf("the kubelet registered %s", driver)
		}
	}
}

// getInfoError: the registration socket answers GetInfo with an error:
// the kubelet's plugin watcher registers nothing, and check names that
// socket's answer (not a dead socket, not a missing one).
func getInfoError(t *testing.T, n *node) {
	n.startMock(driver, "getinfo-error")
	neverRegistered(t, n, driver)
	got, raw := n.check()
	f := find(got, "DRA_REGISTRATION_NOT_ANSWERING", driver+"-reg.sock")
	if f == nil || f.Status != "FAIL" || !strings.Contains(f.Summary, "mock: GetInfo refused") {
		t.Errorf("check --layer kube: want DRA_REGISTRATION_NOT_ANSWERING FAIL naming %s-reg.sock and the error; got:\n%s\n%s", driver, summarize(got), raw)
	}
}

// unsupportedVersion: GetInfo offers only a DRA service the kubelet no
// longer speaks: the kubelet rejects the registration (the mock prints
// REGISTER_FAILED with the kubelet's words), and check names the
// versions.
func unsupportedVersion(t *testing.T, n *node) {
	p := n.startMock(driver, "unsupported-version")
	line, err := p.WaitLine(ctx(t), "REGISTER_FAILED ", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the kubelet: %s", line)
	neverRegistered(t, n, driver)
	got, raw := n.check()
	f := find(got, "DRA_UNSUPPORTED_VERSION", driver)
	if f == nil || f.Status != "FAIL" || !strings.Contains(f.Summary, "v1alpha4.DRAPlugin") {
		t.Errorf("check --layer kube: want DRA_UNSUPPORTED_VERSION FAIL naming v1alpha4.DRAPlugin; got:\n%s\n%s", summarize(got), raw)
	}
}

// badEndpoint: GetInfo names an endpoint where nothing listens. Whatever
// the kubelet makes of the registration, no claim of the driver can be
// prepared; check names the endpoint.
func badEndpoint(t *testing.T, n *node) {
	n.startMock(driver, "bad-endpoint")
	time.Sleep(2 * time.Second) // two passes of the reconciler
	_, regErr := n.plugins.GetPlugin(driver)
	t.Logf("the kubelet's DRA plugin manager after the registration: %v", regErr)
	pod := n.claimPod("bad-endpoint", "claim", driver, "dev-0")
	if _, err := n.prepare(pod); err == nil {
		t.Fatalf("PrepareResources succeeded through an endpoint where nothing listens")
	} else {
		t.Logf("PrepareResources: %v", err)
	}
	got, raw := n.check()
	f := find(got, "DRA_ENDPOINT_MISSING", driver)
	if f == nil || f.Status != "FAIL" || !strings.Contains(f.Summary, "missing-dra.sock") {
		t.Errorf("check --layer kube: want DRA_ENDPOINT_MISSING FAIL naming missing-dra.sock; got:\n%s\n%s", summarize(got), raw)
	}
}

// emptyPrepare: NodePrepareResources answers the claim with no device and
// no error: the kubelet counts the claim prepared and the container
// would get no CDI device (`plugin test --dra` calls it
// DRA_PLUGIN_PREPARE_INCOMPLETE). The kubelet's own DRA state then holds
// the claim's part for the driver with no device: check WARNs
// DRA_CLAIM_NO_DEVICE for the claim, and does not blame the driver's
// registration.
func emptyPrepare(t *testing.T, n *node) {
	p := n.startMock(driver, "empty-prepare")
	n.waitRegistered(p, driver, 1)
	pod := n.claimPod("empty-prepare", "claim", driver, "dev-0")
	ids, err := n.prepare(pod)
	t.Logf("PrepareResources: CDI devices %q, %v", ids, err)
	if len(ids) != 0 {
		t.Fatalf("an empty answer gave CDI devices %q", ids)
	}
	got, raw := n.check()
	for _, f := range bad(got) {
		if strings.HasPrefix(f.Code, "DRA_REGISTRATION") || strings.HasPrefix(f.Code, "DRA_ENDPOINT") || f.Code == "DRA_DRIVER_NOT_REGISTERED" {
			t.Errorf("check --layer kube after an empty prepare: %s %s (%s): %s\n%s", f.Status, f.Code, f.Subject, f.Summary, raw)
		}
	}
	if f := find(got, "DRA_REGISTRATION_OK", driver); f == nil {
		t.Errorf("check --layer kube: the driver's registration is live: want DRA_REGISTRATION_OK; got:\n%s\n%s", summarize(got), raw)
	}
	if f := find(got, "DRA_CLAIM_NO_DEVICE", "empty-prepare/claim"); f == nil || f.Status != "WARN" || !strings.Contains(f.Summary, driver) {
		t.Errorf("check --layer kube: want DRA_CLAIM_NO_DEVICE WARN for empty-prepare/claim naming %s; got:\n%s\n%s", driver, summarize(got), raw)
	}
}

// unprepareError: the claim is prepared; NodeUnprepareResources fails with
// the driver's error, which the kubelet returns, and the kubelet keeps the
// claim in its DRA state to retry.
func unprepareError(t *testing.T, n *node) {
	p := n.startMock(driver, "unprepare-error")
	n.waitRegistered(p, driver, 1)
	pod := n.claimPod("unprepare-error", "claim", driver, "dev-0")
	ids, err := n.prepare(pod)
	if err != nil || len(ids) != 1 {
		t.Fatalf("PrepareResources: CDI devices %q, %v; want one", ids, err)
	}
	err = n.dm.UnprepareResources(ctx(t), pod)
	if err == nil || !strings.Contains(err.Error(), "mock: unprepare refused") {
		t.Fatalf("UnprepareResources: %v, want the driver's \"mock: unprepare refused\"", err)
	}
	if cl := stateClaim(t, n, "claim"); cl == nil {
		t.Errorf("after a failed UnprepareResources the kubelet's DRA state no longer holds the claim")
	}
	got, raw := n.check()
	for _, f := range bad(got) {
		if strings.HasPrefix(f.Code, "DRA_REGISTRATION") || strings.HasPrefix(f.Code, "DRA_ENDPOINT") {
			t.Errorf("check --layer kube after a refused unprepare: %s %s (%s): %s\n%s", f.Status, f.Code, f.Subject, f.Summary, raw)
		}
	}
}

// wrongType: GetInfo says CSIPlugin: the kubelet's plugin watcher hands it
// to a CSI handler (none here), never to the DRA manager. A CSI driver
// registers the same way, so check cannot FAIL it; it WARNs that the
// registration names a DRA service socket (dra.sock). (Before this
// scenario, check said nothing at all: the driver's directory counted as
// registered by the CSI registration naming it.)
func wrongType(t *testing.T, n *node) {
	n.startMock(driver, "wrong-type")
	neverRegistered(t, n, driver)
	got, raw := n.check()
	if f := find(got, "DRA_REGISTRATION_WRONG_TYPE", driver); f == nil || f.Status != "WARN" || !strings.Contains(f.Summary, "CSIPlugin") {
		t.Errorf("check --layer kube: want DRA_REGISTRATION_WRONG_TYPE WARN naming %s and CSIPlugin; got:\n%s\n%s", driver, summarize(got), raw)
	}
	if f := find(got, "DRA_REGISTRATION_OK", driver); f != nil {
		t.Errorf("check --layer kube: a CSI-typed registration is no DRA registration: %+v", *f)
	}
}

// draOnlyGPUNode: a node with eight NVIDIA GPUs (the committed fixture
// host's sysfs, /proc and device manifest under the node's root) whose
// GPUs a DRA driver of the vendor's name hands out, and no device plugin:
// the kubelet's device manager serves kubelet.sock with nothing
// registered. check finds nothing wrong and says the GPUs are served by
// DRA. Then the driver dies with its sockets left behind: check names
// the dead registration, and the GPUs follow from it; with the
// registration gone too (the driver's directory and its dead dra.sock
// left), check says the driver is installed and not running.
func draOnlyGPUNode(t *testing.T, n *node) {
	const nvidia = "gpu.nvidia.com"
	if out, err := exec.Command("cp", "-a", "../../testdata/hosts/nvidia-h100x8/.", n.k.Root+"/").CombinedOutput(); err != nil {
		t.Fatalf("copying the GPU host into the node's root: %v: %s", err, out)
	}
	p := n.startMock(nvidia, "healthy")
	n.waitRegistered(p, nvidia, 1)
	got, raw := n.check()
	if b := bad(got); len(b) > 0 {
		t.Errorf("check on a DRA-only GPU node: want no FAIL or WARN, got:\n%s\n%s", summarize(b), raw)
	}
	served := 0
	for _, f := range got {
		if f.Code == "KUBELET_ACCELERATOR_SERVED_BY_DRA" && f.Status == "PASS" && strings.Contains(f.Summary, nvidia) {
			served++
		}
	}
	if served != 8 {
		t.Errorf("want the 8 GPUs served by %s; %d are:\n%s", nvidia, served, summarize(got))
	}

	n.killed[p] = true
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(n.registry, nvidia+"-reg.sock")
	assertCause := func(code, subject string) {
		t.Helper()
		got, raw := n.check()
		if f := find(got, code, subject); f == nil || f.Status != "FAIL" {
			t.Fatalf("want %s FAIL naming %s; got:\n%s\n%s", code, subject, summarize(got), raw)
		}
		follow := 0
		for _, f := range got {
			if f.Code == "KUBELET_NO_PLUGIN_FOR_ACCELERATOR" && f.Status == "FAIL" && f.CausedBy != nil && f.CausedBy.Code == code && f.CausedBy.Subject == subject {
				follow++
			}
		}
		if follow != 8 {
			t.Errorf("want the 8 GPUs no plugin serves to follow from %s %s; %d do:\n%s", code, subject, follow, raw)
		}
	}
	assertCause("DRA_REGISTRATION_DEAD", nvidia+"-reg.sock")
	if err := os.Remove(reg); err != nil {
		t.Fatal(err)
	}
	n.waitDeregistered(nvidia)
	assertCause("DRA_DRIVER_NOT_RUNNING", nvidia)
}
