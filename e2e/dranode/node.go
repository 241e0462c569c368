package dranode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	pluginwatcherapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	draplugin "k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// This file is not a _test.go file so that `go build ./...` (which .ci/run
// runs first, to have the e2e module compiled before go test's timeout
// starts) compiles the kubelet packages it wires: pkg/kubelet/cm/dra and
// pkg/kubelet/pluginmanager are imported by nothing else of the module.

// wait bounds each wait of a scenario.
const wait = 20 * time.Second

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return c
}

// pluginsDir is the kubelet's plugins directory as a node path
// (kubeletplugin.KubeletPluginsDir): a driver's registration names its
// endpoint inside it by absolute path, and the kubelet dials that path.
const pluginsDir = "/var/lib/kubelet/plugins"

// node is one fake node's kubelet, as far as DRA goes, wired as the
// kubelet wires it:
//
//   - the device manager (harness.Start), so that the node has its
//     kubelet.sock and device-plugin checkpoint, and check reads a node's
//     whole kubelet directory;
//   - the DRA manager, dra.NewManager(logger, client, ROOT/var/lib/kubelet)
//     as NewContainerManager makes it (container_manager_linux.go, with
//     nodeConfig.KubeletRootDir) and Start(ctx, activePods, getNode,
//     sourcesReady) as containerManagerImpl.Start calls it; its client is
//     the real API server's, where the node's Node object is;
//   - the kubelet's plugin manager, pluginmanager.NewPluginManager over
//     ROOT/var/lib/kubelet/plugins_registry, with the DRA manager's
//     GetWatcherHandler added for pluginwatcherapi.DRAPlugin, as
//     GetPluginRegistrationHandlers and Kubelet.Run do (kubelet.go), and
//     Run(ctx, sourcesReady, stop).
//
// ROOT/var/lib/kubelet/plugins is also bind-mounted at /var/lib/kubelet/plugins
// in the test binary's mount namespace (harness.BindNodeDir): the mock is
// given that node path for its data directory, so its registration names
// /var/lib/kubelet/plugins/DRIVER/dra.sock, which the kubelet dials and
// which `check --root ROOT` finds at ROOT/var/lib/kubelet/plugins/DRIVER.
type node struct {
	t        *testing.T
	k        *harness.Kubelet
	c        *apiserver.Cluster
	name     string
	kdir     string // ROOT/var/lib/kubelet
	registry string // ROOT/var/lib/kubelet/plugins_registry
	cdiDir   string // ROOT/var/run/cdi
	dm       *dra.Manager
	plugins  *draplugin.DRAPluginManager
	events   *record.FakeRecorder
	stop     func()

	mu   sync.Mutex
	pods map[types.UID]*corev1.Pod
	// killed are the mocks a scenario killed (SIGKILL): no exit status
	// is asked of them.
	killed map[*harness.Proc]bool
}

// sourcesReady is the kubelet's config.SourcesReady once every pod source
// has been seen.
type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return true }

// startNode starts a node named name against the cluster c. Everything it
// started stops when t ends.
func startNode(t *testing.T, c *apiserver.Cluster, name string) *node {
	t.Helper()
	k := harness.Start(t, harness.Options{})
	n := &node{t: t, k: k, c: c, name: name, kdir: filepath.Join(k.Root, "var/lib/kubelet"),
		cdiDir: filepath.Join(k.Root, "var/run/cdi"), pods: map[types.UID]*corev1.Pod{}, killed: map[*harness.Proc]bool{}}
	n.registry = filepath.Join(n.kdir, "plugins_registry")
	// ROOT/etc: a node has one (its /etc/cdi may be absent); a root
	// without /etc is a capture that did not take it, and check then
	// says it cannot resolve CDI devices (NOT_RUN), rightly.
	for _, d := range []string{n.registry, filepath.Join(n.kdir, "plugins"), n.cdiDir, filepath.Join(k.Root, "etc")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	harness.BindNodeDir(t, pluginsDir, filepath.Join(n.kdir, "plugins"))

	cx := ctx(t)
	if _, err := c.CreateNode(cx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	// A ResourceSlice of this node that no driver owns: the DRA plugin
	// manager deletes every slice of the node when it starts
	// (NewDRAPluginManager, "When kubelet starts up, no DRA driver has
	// registered yet"), in the background; its going proves that wipe
	// ran with the real client, and that it is over before a driver
	// publishes.
	sentinel := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-left-from-before"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "left.e2e.example.com", NodeName: &name,
			Pool: resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1}}}
	if _, err := c.Client.ResourceV1().ResourceSlices().Create(cx, sentinel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	n.startKubelet()
	t.Cleanup(n.stopKubelet)

	took, err := apiserver.WaitFor(cx, wait, func(ctx context.Context) (bool, error) {
		_, err := c.Client.ResourceV1().ResourceSlices().Get(ctx, sentinel.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the DRA plugin manager's start-up wipe did not delete ResourceSlice %s: %v", sentinel.Name, err)
	}
	t.Logf("the DRA plugin manager's start-up wipe deleted the node's stale ResourceSlice in %v", took.Round(time.Millisecond))
	return n
}

// startKubelet makes and starts the DRA manager and the plugin manager,
// as a kubelet process does at its start.
func (n *node) startKubelet() {
	n.t.Helper()
	logger := klog.Background()
	dm, err := dra.NewManager(logger, n.c.Client, n.kdir)
	if err != nil {
		n.t.Fatalf("dra.NewManager: %v", err)
	}
	runCtx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	getNode := func(ctx context.Context) (*corev1.Node, error) {
		return n.c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	}
	if err := dm.Start(runCtx, n.activePods, getNode, sourcesReady{}); err != nil {
		cancel()
		n.t.Fatalf("DRA manager Start: %v", err)
	}
	h := dm.GetWatcherHandler()
	plugins, ok := h.(*draplugin.DRAPluginManager)
	if !ok {
		cancel()
		dm.Stop()
		n.t.Fatalf("the DRA manager's watcher handler is a %T, not the DRAPluginManager", h)
	}
	// The plugin manager's recorder (operationexecutor) records a Node
	// event when a registration fails; kept and logged.
	events := record.NewFakeRecorder(1000)
	pm := pluginmanager.NewPluginManager(n.registry, events)
	pm.AddHandler(pluginwatcherapi.DRAPlugin, h)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pm.Run(runCtx, sourcesReady{}, stop)
	}()
	n.dm, n.plugins, n.events = dm, plugins, events
	n.stop = func() {
		close(stop)
		<-done
		cancel()
		dm.Stop()
		n.logEvents()
	}
}

// stopKubelet stops what startKubelet started, as the kubelet's exit
// does: the sockets and the DRA state stay.
func (n *node) stopKubelet() {
	if n.stop != nil {
		n.stop()
		n.stop = nil
	}
}

// restart is a kubelet restart: the DRA side and the device manager stop,
// and new ones start over the same directories (the new DRA manager reads
// dra_manager_state; the new plugin watcher finds the registration sockets
// already there).
func (n *node) restart() {
	n.t.Helper()
	n.stopKubelet()
	n.k.Restart()
	n.startKubelet()
}

func (n *node) activePods() []*corev1.Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(n.pods))
	for _, p := range n.pods {
		out = append(out, p)
	}
	return out
}

func (n *node) logEvents() {
	for {
		select {
		case e := <-n.events.Events:
			n.t.Logf("plugin manager event: %s", e)
		default:
			return
		}
	}
}

// startMock runs `accel-doctor plugin mock --dra` for driver in mode,
// with 2 devices, its registration in the node's plugins_registry, its
// data directory at the node path /var/lib/kubelet/plugins/DRIVER, its
// per-claim CDI specs in ROOT/var/run/cdi, and the API server's
// kubeconfig (it publishes a ResourceSlice for the node and reads claims
// from the API server, as a real driver does). It waits for SERVING and,
// unless the mode makes none, REGISTRATION; waitRegistered waits for the
// kubelet's side.
func (n *node) startMock(driver, mode string, extra ...string) *harness.Proc {
	n.t.Helper()
	args := append([]string{"plugin", "mock", "--dra", "--driver", driver, "--mode", mode, "--devices", "2",
		"--plugins-registry", n.registry, "--plugin-data-dir", pluginsDir + "/" + driver, "--cdi-spec-dir", n.cdiDir,
		"--node-name", n.name, "--kubeconfig", n.c.Kubeconfig}, extra...)
	p := harness.StartAccelDoctor(n.t, args...)
	// Runs before StartAccelDoctor's own cleanup: a stop is SIGTERM, and
	// the mock must exit 0 after it, also when it is still starting.
	n.t.Cleanup(func() {
		if code := p.Stop(); code != 0 && !n.killed[p] {
			n.t.Errorf("plugin mock --dra --mode %s: exit %d after SIGTERM, want 0", mode, code)
		}
	})
	cx := ctx(n.t)
	if _, err := p.WaitLine(cx, "SERVING "+driver+" ", 1); err != nil {
		n.t.Fatal(err)
	}
	if mode != "not-registered" {
		if _, err := p.WaitLine(cx, "REGISTRATION "+driver+" ", 1); err != nil {
			n.t.Fatal(err)
		}
	}
	return p
}

// waitRegistered waits until the kubelet has registered driver, and says
// how long that took: the mock's REGISTERED line (n-th of them), printed
// when the kubelet's plugin watcher told it so (NotifyRegistrationStatus,
// the last step of the registration: the watcher hands the driver to the
// DRA handler first, and takes it back if the notification fails), and
// then the DRA plugin manager handing out a plugin for it (GetPlugin,
// what the DRA manager asks before every NodePrepareResources).
func (n *node) waitRegistered(p *harness.Proc, driver string, nth int) time.Duration {
	n.t.Helper()
	start := time.Now()
	if _, err := p.WaitLine(ctx(n.t), "REGISTERED "+driver+" ", nth); err != nil {
		n.t.Fatal(err)
	}
	if _, err := n.plugins.GetPlugin(driver); err != nil {
		n.t.Fatalf("the kubelet notified %s that it is registered, yet its DRA plugin manager has none: %v", driver, err)
	}
	return time.Since(start)
}

// claimPod creates ResourceClaim ns/name with one request "dev", allocates
// it to device of driver in the node's pool and reserves it for a pod, as
// the scheduler would (status: allocation and reservedFor), and returns
// that pod: one container "c" using the claim, never created in the API
// server (the DRA manager is handed the pod, as the kubelet's pod workers
// hand it). The pod counts as active from now on.
func (n *node) claimPod(ns, name, driver, device string) *corev1.Pod {
	n.t.Helper()
	cx := ctx(n.t)
	if err := n.c.EnsureNamespace(cx, ns); err != nil {
		n.t.Fatal(err)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "dev", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mock.e2e.example.com"},
		}}}}}
	claim, err := n.c.Client.ResourceV1().ResourceClaims(ns).Create(cx, claim, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-pod", UID: uuid.NewUUID()},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}},
			Containers:     []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		}}
	claim.Status = resourceapi.ResourceClaimStatus{
		Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "dev", Driver: driver, Pool: n.name, Device: device,
		}}}},
		ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
	}
	if _, err := n.c.Client.ResourceV1().ResourceClaims(ns).UpdateStatus(cx, claim, metav1.UpdateOptions{}); err != nil {
		n.t.Fatalf("allocate and reserve claim %s/%s: %v", ns, name, err)
	}
	n.mu.Lock()
	n.pods[pod.UID] = pod
	n.mu.Unlock()
	return pod
}

// prepare is the kubelet's PrepareResources for pod (what the kubelet's
// pod sync calls before it creates the pod's sandbox); on success it also
// gives the CDI devices the runtime would be told to add to container
// "c" (GetResources, through which the kubelet builds the container's
// CDI devices).
func (n *node) prepare(pod *corev1.Pod) ([]string, error) {
	n.t.Helper()
	if err := n.dm.PrepareResources(ctx(n.t), pod); err != nil {
		return nil, err
	}
	info, err := n.dm.GetResources(pod, &pod.Spec.Containers[0])
	if err != nil {
		return nil, fmt.Errorf("GetResources: %w", err)
	}
	var ids []string
	for _, d := range info.CDIDevices {
		ids = append(ids, d.Name)
	}
	return ids, nil
}

// statePath is the DRA manager's checkpoint (draManagerStateFileName in
// pkg/kubelet/cm/dra/manager.go) in the node's kubelet directory.
func (n *node) statePath() string { return filepath.Join(n.kdir, "dra_manager_state") }

// check runs `accel-doctor check --root ROOT --layer kube -o json`.
func (n *node) check() ([]harness.Finding, string) {
	n.t.Helper()
	fs, raw := n.k.CheckKube(n.t)
	n.t.Logf("check --layer kube:\n%s", summarize(fs))
	return fs, raw
}

// find is the first finding with code whose subject or summary holds what.
func find(fs []harness.Finding, code, what string) *harness.Finding {
	for i, f := range fs {
		if f.Code == code && strings.Contains(f.Subject+" "+f.Summary, what) {
			return &fs[i]
		}
	}
	return nil
}

// bad lists the FAIL and WARN findings.
func bad(fs []harness.Finding) []harness.Finding {
	var out []harness.Finding
	for _, f := range fs {
		if f.Status == "FAIL" || f.Status == "WARN" {
			out = append(out, f)
		}
	}
	return out
}

func summarize(fs []harness.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.Status + " " + f.Code + " (" + f.Subject + "): " + f.Summary + "\n")
	}
	return b.String()
}

// sliceOf returns the node's ResourceSlices of driver.
func (n *node) slicesOf(driver string) ([]resourceapi.ResourceSlice, error) {
	sel := resourceapi.ResourceSliceSelectorDriver + "=" + driver + "," + resourceapi.ResourceSliceSelectorNodeName + "=" + n.name
	l, err := n.c.Client.ResourceV1().ResourceSlices().List(ctx(n.t), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitSlices waits until the node has want ResourceSlices of driver.
func (n *node) waitSlices(driver string, want int) (time.Duration, error) {
	var got int
	took, err := apiserver.WaitFor(context.Background(), 45*time.Second, func(ctx context.Context) (bool, error) {
		s, err := n.slicesOf(driver)
		got = len(s)
		return err == nil && got == want, err
	})
	if err != nil {
		return took, errors.Join(fmt.Errorf("%d ResourceSlice(s) of %s on node %s, want %d", got, driver, n.name, want), err)
	}
	return took, nil
}
