package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// CheckpointFile is the name of the device manager's checkpoint in
// KubeletDir (pkg/kubelet/cm/devicemanager/manager.go,
// kubeletDeviceManagerCheckpoint).
const CheckpointFile = "kubelet_internal_checkpoint"

// one Kubelet at a time: there is one KubeletDir.
var kubeletMu sync.Mutex

// Kubelet is the kubelet's device manager with the admission that calls it,
// wired as NewContainerManager wires them
// (pkg/kubelet/cm/container_manager_linux.go): a topology manager, "none"
// policy unless Options say otherwise, whose hint provider is the device
// manager, which also takes it as its topology affinity store. Its methods
// are the calls the kubelet makes: Start at kubelet start, GetCapacity at
// each node status update, the topology manager's Admit at pod admission,
// GetDeviceRunContainerOptions when a container is created, Stop at exit.
type Kubelet struct {
	// Root stands for the node's root directory: Dir is
	// Root/var/lib/kubelet/device-plugins, so that a reader given Root
	// (accel-doctor check --root) finds what this kubelet left.
	Root string
	// Dir is the directory mounted at KubeletDir, by a path that is valid
	// outside the test binary's mount namespace too.
	Dir string

	t    testing.TB
	opts Options

	mu      sync.Mutex
	dm      *devicemanager.ManagerImpl
	tm      topologymanager.Manager
	started bool
	pods    map[types.UID]*v1.Pod
	// containers the runtime would report: at a restart the kubelet
	// hands them to the new manager (initialContainers and
	// initialContainerRunningSet in Start).
	containers containermap.ContainerMap
	running    sets.Set[string]
	nextID     int
}

// Options change how the Kubelet is built.
type Options struct {
	// NUMANodes are the node's NUMA node ids (cadvisor's
	// MachineInfo.Topology); none means one node, 0.
	NUMANodes []int
	// TopologyPolicy is the kubelet's --topology-manager-policy; ""
	// means "none", the kubelet's default.
	TopologyPolicy string
}

// Start builds a device manager over a fresh Dir and starts it, as the
// kubelet does at start: it serves kubelet.sock in KubeletDir and has wiped
// every other socket there. The test skips when the harness cannot run here
// (not root); the Kubelet stops when the test ends.
func Start(t testing.TB, opts Options) *Kubelet {
	t.Helper()
	if notRun != "" {
		t.Skip(notRun)
	}
	kubeletMu.Lock()
	t.Cleanup(kubeletMu.Unlock)
	// Not t.TempDir: its path holds the test's name, and a socket's path
	// must fit sun_path (108 bytes, unix(7)).
	root, err := os.MkdirTemp("", "e2e-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(root); err != nil {
			t.Error(err)
		}
	})
	dir := filepath.Join(root, strings.TrimPrefix(KubeletDir, "/"))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	bindKubeletDir(t, dir)
	logTo(t)
	k := &Kubelet{Root: root, Dir: dir, t: t, opts: opts,
		pods: map[types.UID]*v1.Pod{}, containers: containermap.NewContainerMap(), running: sets.New[string]()}
	if err := k.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k
}

func (k *Kubelet) start() error {
	logger := klog.Background()
	nodes := k.opts.NUMANodes
	if len(nodes) == 0 {
		nodes = []int{0}
	}
	var topo []cadvisorapi.Node
	for _, id := range nodes {
		topo = append(topo, cadvisorapi.Node{Id: id})
	}
	policy := k.opts.TopologyPolicy
	if policy == "" {
		policy = topologymanager.PolicyNone
	}
	tm, err := topologymanager.NewManager(logger, topo, policy, topologymanager.ContainerTopologyScope, nil)
	if err != nil {
		return fmt.Errorf("topology manager: %w", err)
	}
	dm, err := devicemanager.NewManagerImpl(logger, topo, tm)
	if err != nil {
		return fmt.Errorf("device manager: %w", err)
	}
	tm.AddHintProvider(logger, dm)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := dm.Start(logger, k.activePods, allReady{}, k.containers.Clone(), k.running.Clone()); err != nil {
		return fmt.Errorf("device manager start: %w", err)
	}
	k.dm, k.tm, k.started = dm, tm, true
	return nil
}

// allReady is the kubelet's config.SourcesReady once every pod source has
// been seen: the manager may then forget allocations of pods that are gone.
type allReady struct{}

func (allReady) AddSource(string) {}
func (allReady) AllReady() bool   { return true }

func (k *Kubelet) activePods() []*v1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	pods := make([]*v1.Pod, 0, len(k.pods))
	for _, p := range k.pods {
		pods = append(pods, p)
	}
	return pods
}

// Stop stops the device manager, as the kubelet's exit does: kubelet.sock
// goes, the plugins' connections close. The plugins' sockets and the
// checkpoint stay.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	dm, started := k.dm, k.started
	k.started = false
	k.mu.Unlock()
	if started {
		if err := dm.Stop(klog.Background()); err != nil {
			k.t.Errorf("device manager stop: %v", err)
		}
	}
}

// Restart is a kubelet restart: the manager stops, and a new one (with a new
// topology manager, as a new kubelet process has) starts over the same
// directory, wiping every socket but its own and reading the checkpoint. The
// pods admitted before stay active, and their started containers are handed
// to the new manager as running, as the runtime would report them.
func (k *Kubelet) Restart() {
	k.t.Helper()
	k.Stop()
	if err := k.start(); err != nil {
		k.t.Fatal(err)
	}
}

// Manager is the device manager now running, for calls the harness does not
// wrap.
func (k *Kubelet) Manager() *devicemanager.ManagerImpl {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dm
}

// Capacity is one GetCapacity: what the kubelet writes into the node's
// status.
type Capacity struct {
	Capacity, Allocatable v1.ResourceList
	// Removed are resources whose plugin is gone past the grace period;
	// the kubelet zeroes them in the node status.
	Removed []string
}

// Count is a resource's capacity and allocatable, 0 when absent.
func (c Capacity) Count(resource string) (capacity, allocatable int64) {
	cq, aq := c.Capacity[v1.ResourceName(resource)], c.Allocatable[v1.ResourceName(resource)]
	return cq.Value(), aq.Value()
}

// Has says whether the resource is in the capacity at all.
func (c Capacity) Has(resource string) bool {
	_, ok := c.Capacity[v1.ResourceName(resource)]
	return ok
}

func (c Capacity) String() string {
	var parts []string
	for name := range c.Capacity {
		cp, al := c.Count(string(name))
		parts = append(parts, fmt.Sprintf("%s %d/%d", name, cp, al))
	}
	sort.Strings(parts)
	s := "capacity/allocatable: " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		s += "none"
	}
	if len(c.Removed) > 0 {
		s += fmt.Sprintf("; removed %v", c.Removed)
	}
	return s
}

// Capacity calls GetCapacity.
func (k *Kubelet) Capacity() Capacity {
	c, a, r := k.Manager().GetCapacity(klog.Background())
	return Capacity{c, a, r}
}

// WaitFor calls GetCapacity until cond holds or ctx ends, and says how long
// that took: a latency as the kubelet's node status would see it (the
// kubelet itself looks every nodeStatusUpdateFrequency, 10 s by default; the
// harness looks every 500 µs). On timeout the error holds the last
// capacity seen.
func (k *Kubelet) WaitFor(ctx context.Context, what string, cond func(Capacity) bool) (time.Duration, error) {
	start := time.Now()
	tick := time.NewTicker(500 * time.Microsecond)
	defer tick.Stop()
	for {
		c := k.Capacity()
		if cond(c) {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("%s: not seen in %v: last %v", what, time.Since(start).Round(time.Millisecond), c)
		case <-tick.C:
		}
	}
}

// WaitCount waits until resource has exactly this capacity and allocatable.
func (k *Kubelet) WaitCount(ctx context.Context, resource string, capacity, allocatable int64) (time.Duration, error) {
	return k.WaitFor(ctx, fmt.Sprintf("%s %d/%d", resource, capacity, allocatable), func(c Capacity) bool {
		cp, al := c.Count(resource)
		return c.Has(resource) && cp == capacity && al == allocatable
	})
}

// WaitPluginsGone waits (up to 10 s) until the manager counts nothing
// allocatable: once a plugin has stopped, the manager's ListAndWatch loop
// for it has returned and marked its devices unhealthy, so no update of
// that plugin is still being written to the checkpoint. A test stops its
// plugins and calls this before the Kubelet stops and KubeletDir is
// unmounted, so that a late checkpoint write cannot land in the next
// test's directory (Stop alone closes the plugins' connections but does
// not wait for those loops).
func (k *Kubelet) WaitPluginsGone(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := k.WaitFor(ctx, "no allocatable devices once the plugins stopped", func(c Capacity) bool {
		for _, q := range c.Allocatable {
			if !q.IsZero() {
				return false
			}
		}
		return true
	})
	return err
}

// Admit admits pod as the kubelet does: the pod becomes active (the kubelet's
// pod manager holds it before admission) and goes through the topology
// manager's Admit, which calls the device manager's Allocate for each init
// container, then each container. A rejection carries the kubelet's own
// reason and message ("UnexpectedAdmissionError", "Allocate failed due to
// ..., which is unexpected"); a rejected pod is no longer active.
func (k *Kubelet) Admit(ctx context.Context, pod *v1.Pod) lifecycle.PodAdmitResult {
	k.mu.Lock()
	var others []*v1.Pod
	for _, p := range k.pods {
		others = append(others, p)
	}
	k.pods[pod.UID] = pod
	tm := k.tm
	k.mu.Unlock()
	res := tm.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others, Operation: lifecycle.AddOperation})
	if !res.Admit {
		k.mu.Lock()
		delete(k.pods, pod.UID)
		k.mu.Unlock()
	}
	return res
}

// CreateContainer is the kubelet creating one of pod's containers:
// GetDeviceRunContainerOptions (which calls PreStartContainer when the
// plugin asks for it, and allocates again when the manager has no
// allocation for the container) gives what the runtime is told to add. The
// container then counts as running for a later Restart.
func (k *Kubelet) CreateContainer(ctx context.Context, pod *v1.Pod, name string) (*devicemanager.DeviceRunContainerOptions, error) {
	var c *v1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			c = &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("pod %s has no container %q", pod.Name, name)
	}
	opts, err := k.Manager().GetDeviceRunContainerOptions(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.nextID++
	id := fmt.Sprintf("container-%d", k.nextID)
	k.containers.Add(string(pod.UID), name, id)
	k.running.Insert(id)
	k.mu.Unlock()
	return opts, nil
}

// RemovePod is the pod's deletion: it is no longer active, and its
// containers no longer run; the manager frees its devices at its next
// allocation.
func (k *Kubelet) RemovePod(pod *v1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.pods, pod.UID)
	k.containers.Visit(func(podUID, _, id string) {
		if podUID == string(pod.UID) {
			k.running.Delete(id)
		}
	})
	for _, name := range containerNames(pod) {
		k.containers.RemoveByContainerRef(string(pod.UID), name)
	}
}

func containerNames(pod *v1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}
