package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// MockMode is a failure the mock plants. docs/device-plugin.md says,
// for each, what it does and the symptom it reproduces in a cluster,
// with the kubelet's words (ModeDocs holds the same text).
type MockMode string

// The modes.
const (
	ModeHealthy             MockMode = "healthy"
	ModeUnhealthy           MockMode = "unhealthy"
	ModeFlapping            MockMode = "flapping"
	ModeZeroDevices         MockMode = "zero-devices"
	ModeSlowAllocate        MockMode = "slow-allocate"
	ModeFailAllocate        MockMode = "fail-allocate"
	ModeCrashAllocate       MockMode = "crash-allocate"
	ModeWrongVersion        MockMode = "wrong-version"
	ModeRegisterBeforeServe MockMode = "register-before-serve"
	ModeNoReregister        MockMode = "no-reregister"
	ModeDuplicate           MockMode = "duplicate"
)

// ModeDoc is one mode's documentation.
type ModeDoc struct {
	Mode MockMode
	// What the mock does.
	Does string
	// Symptom is what a cluster shows, in the kubelet's and the
	// scheduler's own words where they have some.
	Symptom string
	// Codes are the `plugin test` findings that name the defect.
	Codes []string
}

// ModeDocs documents every mode, in the order the CLI lists them.
var ModeDocs = []ModeDoc{
	{ModeHealthy, "lists N Healthy devices mock-0..mock-N-1 with NUMA node 0; Allocate answers an env MOCK_VISIBLE_DEVICES with the IDs; re-registers when kubelet.sock is recreated.",
		"none: the node advertises capacity and allocatable N, pods requesting the resource run. `plugin test` finds no defect.", nil},
	{ModeUnhealthy, "lists N devices, every one Unhealthy.",
		"the node shows capacity N and allocatable 0 (pkg/kubelet/cm/devicemanager/manager.go GetCapacity counts unhealthy devices in capacity only); pods stay Pending with \"0/1 nodes are available: 1 Insufficient RESOURCE\" (the scheduler's noderesources fit plugin, fit.go: \"Insufficient %v\").",
		[]string{CodeNoHealthyDevices}},
	{ModeFlapping, "lists N devices, Healthy, and from the first ListAndWatch on turns every one Unhealthy and Healthy again every --interval (default 1s).",
		"allocatable swings between N and 0; a pod admitted while it was N and allocated while it is 0 fails with reason UnexpectedAdmissionError, \"Allocate failed due to no healthy devices present; cannot allocate unhealthy devices RESOURCE, which is unexpected\" (manager.go devicesToAllocate; pkg/kubelet/cm/admission/errors.go).",
		[]string{CodeHealthFlapping}},
	{ModeZeroDevices, "registers and lists no device at all.",
		"the resource appears with capacity 0 and allocatable 0; pods stay Pending with \"Insufficient RESOURCE\".",
		[]string{CodeNoDevices}},
	{ModeSlowAllocate, "answers Allocate after --delay (default 5s).",
		"pods requesting the resource take --delay longer to start (the kubelet sets no deadline of its own on Allocate: devicemanager endpoint.go allocate passes its caller's context), and the kubelet's device_plugin_alloc_duration_seconds shows it; admission of the node's other pods waits behind it.",
		[]string{CodeAllocateSlow}},
	{ModeFailAllocate, "answers every Allocate with an error, --error TEXT (default \"mock: allocation refused\").",
		"pods fail at admission with reason UnexpectedAdmissionError and message \"Allocate failed due to rpc error: code = Unknown desc = TEXT, which is unexpected\" (pkg/kubelet/cm/admission/errors.go); the scheduler keeps placing them on the node, which still advertises the devices.",
		[]string{CodeAllocateFailed}},
	{ModeCrashAllocate, "exits (status 3) in the middle of the first Allocate, as a plugin that panics does.",
		"the pod fails with UnexpectedAdmissionError (\"Allocate failed due to rpc error: code = Unavailable desc = error reading from server: EOF, which is unexpected\", or, when the process exits with bytes of the kubelet's connection unread, which makes the kernel reset it (net/unix/af_unix.c unix_release_sock), \"Allocate failed due to rpc error: code = Unavailable desc = error reading from server: connection reset by peer, which is unexpected\"); the kubelet's ListAndWatch stream ends, it marks every device of the resource unhealthy (manager.go PluginDisconnected, markResourceUnhealthy): capacity N, allocatable 0, until the 5-minute endpointStopGracePeriod (types.go) ends and the resource is dropped.",
		[]string{CodeCrashed}},
	{ModeWrongVersion, "registers with API version v1alpha.",
		"the kubelet refuses the registration with `requested API version \"v1alpha\" is not supported by kubelet. Supported version is [\"v1beta1\"]` (plugin/v1beta1/api.go errUnsupportedVersion, formatted with %q of the list); the node never advertises the resource: \"Insufficient RESOURCE\".",
		[]string{CodeAPIVersion}},
	{ModeRegisterBeforeServe, "calls Register before its socket listens, and listens only after Register returned; started before the kubelet, it waits for kubelet.sock to accept a connection, however long that takes, and then does the same.",
		"the kubelet's Register handler dials the plugin's socket back and waits 10 s (plugin/v1beta1/client.go dial), then fails the registration with \"failed to dial device plugin: context deadline exceeded\"; the plugin, which never registers again, is not used: the resource never appears (\"Insufficient RESOURCE\").",
		[]string{CodeRegisterBeforeServe}},
	{ModeNoReregister, "registers once, at its start when kubelet.sock is there, or else when kubelet.sock first appears, and ignores kubelet.sock being recreated after that.",
		"after a kubelet restart (which deletes every socket in the directory, manager.go CleanupPluginDirectory) the kubelet restores the resource from its checkpoint with no device under a stopped endpoint (manager.go readCheckpoint): capacity 0 and allocatable 0 for the 5-minute endpointStopGracePeriod (types.go), then the resource is dropped; pods stay Pending with \"Insufficient RESOURCE\", and a pod admitted again in that window fails with UnexpectedAdmissionError \"no healthy devices present; cannot allocate unhealthy devices RESOURCE\"; `accel-doctor check` reports KUBELET_RESOURCE_NO_PLUGIN: the checkpoint holds the resource and no plugin socket serves it.",
		[]string{CodeNoReregister}},
	{ModeDuplicate, "runs two instances of the plugin for one resource on two sockets, as during a rolling update: the first lists mock-0..N-1 and resends its list every --interval, the second lists mockb-0..N-1 and registers 200 ms after the first each time kubelet.sock appears, so that it is the one registered last whichever of the mock and the kubelet started first.",
		"the kubelet keeps both endpoints (manager.go PluginConnected: endpointStore), sends GetPreferredAllocation and Allocate to the one that registered last, and takes the device list from whichever instance sent last; when the first instance's list is current, the kubelet offers its IDs to the second (the mock advertises GetPreferredAllocation, which the kubelet calls before Allocate, manager.go devicesToAllocate), which answers \"unknown device\": UnexpectedAdmissionError \"Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = InvalidArgument desc = GetPreferredAllocation available: unknown device \\\"mock-0\\\" of resource RESOURCE, which is unexpected\" (or another ID of the first instance); capacity stays N, not 2N.",
		[]string{CodeDuplicateRegistration}},
}

// Modes lists the mode names.
func Modes() []string {
	out := make([]string, len(ModeDocs))
	for i, d := range ModeDocs {
		out[i] = string(d.Mode)
	}
	return out
}

// duplicateLag is how long after the first instance the duplicate
// mode's second one registers: well inside the tester's wait for a
// second Register (TestOptions.Grace).
const duplicateLag = 200 * time.Millisecond

// MockConfig configures a mock.
type MockConfig struct {
	Resource string
	Devices  int
	Mode     MockMode
	// Interval: flapping's period and duplicate's resend period
	// (default 1s).
	Interval time.Duration
	// Delay: slow-allocate's delay (default 5s).
	Delay time.Duration
	// Error: fail-allocate's error text.
	Error string
	// Socket is the socket's file name (default
	// MockSocketName; the duplicate mode's second instance adds "@2"
	// before ".sock").
	Socket string
	// Crash is what crash-allocate does in the middle of Allocate
	// (default: exit the process with status 3). CrashInProcess kills
	// the mock's endpoint instead, for a mock run inside another program.
	Crash func()
}

// Mock is `accel-doctor plugin mock`: a fake plugin that plants one
// failure. It writes its socket(s) in the kubelet's directory.
type Mock struct {
	cfg  MockConfig
	opts Options
	eps  []*endpoint
	mu   sync.Mutex
	// health of every device of every instance, by instance.
	health []map[string]string
	ids    [][]string
}

// NewMock makes a mock serving in kubeletDir.
func NewMock(kubeletDir string, mc MockConfig, opts Options) (*Mock, error) {
	if err := ValidateResourceName(mc.Resource); err != nil {
		return nil, err
	}
	if !slices.Contains(Modes(), string(mc.Mode)) {
		return nil, fmt.Errorf("unknown mode %q (want one of %s)", mc.Mode, strings.Join(Modes(), ", "))
	}
	if mc.Devices < 0 || mc.Devices > 1024 {
		return nil, fmt.Errorf("devices %d: want 0..1024", mc.Devices)
	}
	if mc.Interval <= 0 {
		mc.Interval = time.Second
	}
	if mc.Delay <= 0 {
		mc.Delay = 5 * time.Second
	}
	if mc.Error == "" {
		mc.Error = "mock: allocation refused"
	}
	if mc.Socket == "" {
		mc.Socket = MockSocketName(mc.Resource, 0)
	}
	if !strings.HasSuffix(mc.Socket, ".sock") || strings.ContainsRune(mc.Socket, '/') || mc.Socket == KubeletSocket {
		return nil, fmt.Errorf("socket %q must be a file name ending in .sock, not kubelet.sock", mc.Socket)
	}
	if mc.Crash == nil {
		mc.Crash = func() { os.Exit(3) }
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	m := &Mock{cfg: mc, opts: opts}
	metrics := NewMetrics(opts.Registerer)
	instances := 1
	if mc.Mode == ModeDuplicate {
		instances = 2
	}
	for i := range instances {
		prefix, socket := "mock-", mc.Socket
		if i == 1 {
			prefix, socket = "mockb-", strings.TrimSuffix(mc.Socket, ".sock")+"@2.sock"
		}
		n := mc.Devices
		if mc.Mode == ModeZeroDevices {
			n = 0
		}
		h := map[string]string{}
		var ids []string
		for j := range n {
			id := fmt.Sprintf("%s%d", prefix, j)
			ids = append(ids, id)
			h[id] = pluginapi.Healthy
			if mc.Mode == ModeUnhealthy {
				h[id] = pluginapi.Unhealthy
			}
		}
		m.health = append(m.health, h)
		m.ids = append(m.ids, ids)
		ep := newEndpoint(mc.Resource, kubeletDir, socket, &mockBackend{m: m, instance: i}, opts.Logger.With("instance", i), metrics, opts.Notify)
		switch mc.Mode {
		case ModeWrongVersion:
			ep.version = "v1alpha"
		case ModeRegisterBeforeServe:
			ep.registerBeforeServe = true
		case ModeNoReregister:
			ep.noReregister = true
		case ModeDuplicate:
			if i == 1 {
				// The second instance registers after the first, as a
				// new pod of a rolling update does, every time
				// kubelet.sock appears: it is the one the kubelet
				// registered last, whichever started first.
				ep.registerDelay = duplicateLag
			}
		}
		m.eps = append(m.eps, ep)
		m.publish(i)
	}
	return m, nil
}

// CrashInProcess makes crash-allocate kill the mock's server instead of
// the process: it stops answering, its socket goes, and it never serves
// again, as a dead process would.
func (m *Mock) CrashInProcess() { m.cfg.Crash = func() { m.eps[0].kill() } }

// Socket is the full path of the (first) instance's socket.
func (m *Mock) Socket() string { return m.eps[0].socketPath() }

// Sockets are the full paths of every instance's socket.
func (m *Mock) Sockets() []string {
	var out []string
	for _, e := range m.eps {
		out = append(out, e.socketPath())
	}
	return out
}

func (m *Mock) publish(i int) {
	m.mu.Lock()
	list := make([]*pluginapi.Device, 0, len(m.ids[i]))
	for _, id := range m.ids[i] {
		list = append(list, &pluginapi.Device{ID: id, Health: m.health[i][id],
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}}}})
	}
	m.mu.Unlock()
	m.eps[i].publish(list)
}

// ToggleHealth flips the health of one device of each instance (the
// first device when id is "") and publishes the change: the trigger
// `plugin test` uses to time how fast a health change reaches
// ListAndWatch. The binary does it on SIGUSR1.
func (m *Mock) ToggleHealth(id string) error {
	m.mu.Lock()
	flipped := false
	for i := range m.ids {
		did := id
		if did == "" {
			if len(m.ids[i]) == 0 {
				continue
			}
			did = m.ids[i][0]
		}
		h, ok := m.health[i][did]
		if !ok {
			continue
		}
		flipped = true
		if h == pluginapi.Healthy {
			m.health[i][did] = pluginapi.Unhealthy
		} else {
			m.health[i][did] = pluginapi.Healthy
		}
	}
	m.mu.Unlock()
	if !flipped {
		if id == "" {
			return errors.New("the mock lists no device")
		}
		return fmt.Errorf("no device %q", id)
	}
	for i := range m.eps {
		m.publish(i)
	}
	return nil
}

// Run serves until ctx ends.
func (m *Mock) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(m.eps))
	for i, ep := range m.eps {
		wg.Go(func() {
			if err := ep.run(ctx); err != nil {
				errs[i] = err
				cancel()
			}
		})
	}
	switch m.cfg.Mode {
	case ModeFlapping:
		// From the first list a kubelet reads on: the first list is
		// every device Healthy whenever the kubelet (or the tester)
		// starts, and the flapping it then sees is the mode's.
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-m.eps[0].listed:
			}
			m.every(ctx, m.cfg.Interval, m.flap)
		})
	case ModeDuplicate:
		// The first instance's health loop resends its list.
		wg.Go(func() { m.every(ctx, m.cfg.Interval, func() { m.publish(0) }) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (m *Mock) every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

func (m *Mock) flap() {
	m.mu.Lock()
	for _, h := range m.health {
		for id, v := range h {
			if v == pluginapi.Healthy {
				h[id] = pluginapi.Unhealthy
			} else {
				h[id] = pluginapi.Healthy
			}
		}
	}
	m.mu.Unlock()
	for i := range m.eps {
		m.publish(i)
	}
}

type mockBackend struct {
	m        *Mock
	instance int
}

func (b *mockBackend) options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

func (b *mockBackend) allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	switch b.m.cfg.Mode {
	case ModeSlowAllocate:
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(b.m.cfg.Delay):
		}
	case ModeFailAllocate:
		return nil, errors.New(b.m.cfg.Error) // a plain error: the kubelet sees code Unknown, as from most plugins
	case ModeCrashAllocate:
		b.m.cfg.Crash()
		return nil, status.Error(codes.Unavailable, "mock crashed")
	}
	out := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"MOCK_VISIBLE_DEVICES": strings.Join(cr.DevicesIds, ",")},
		})
	}
	return out, nil
}

// preferred takes the must-include devices, then the available ones in
// order (the mock's devices have no topology to choose by).
func (b *mockBackend) preferred(_ context.Context, cr *pluginapi.ContainerPreferredAllocationRequest) ([]string, error) {
	size := int(cr.AllocationSize)
	out := dedupe(cr.MustIncludeDeviceIDs)
	if len(out) > size {
		return nil, fmt.Errorf("%d must-include devices exceed the allocation size %d", len(out), size)
	}
	for _, id := range cr.AvailableDeviceIDs {
		if len(out) == size {
			break
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) < size {
		return nil, fmt.Errorf("allocation size %d exceeds the %d devices available", size, len(out))
	}
	return out, nil
}

func (b *mockBackend) preStart(context.Context, []string) error { return nil }
