package dramock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
)

// Mode is a failure the mock plants. ModeDocs says, for each, what it
// does and the symptom it reproduces.
type Mode string

const (
	ModeHealthy       Mode = "healthy"
	ModeNotRegistered Mode = "not-registered"
	ModePrepareError  Mode = "prepare-error"
	ModeNoCDISpec     Mode = "no-cdi-spec"
	ModeEmptyEdits    Mode = "empty-edits"
	ModeStaleSlice    Mode = "stale-slice"
	ModeDuplicate     Mode = "duplicate-with-plugin"
	ModeGetInfoError  Mode = "getinfo-error"
	ModeOldVersion    Mode = "unsupported-version"
	ModeBadEndpoint   Mode = "bad-endpoint"
	ModeEmptyPrepare  Mode = "empty-prepare"
	ModeUnprepareErr  Mode = "unprepare-error"
	ModeWrongType     Mode = "wrong-type"
)

// oldService is what unsupported-version's GetInfo offers: the DRA
// service of Kubernetes 1.31 and 1.32 (v1alpha4), which a 1.37 kubelet no
// longer speaks (its KubeletServices are v1 and v1beta1).
const oldService = "v1alpha4.DRAPlugin"

// ModeDoc documents one mode.
type ModeDoc struct {
	Mode    Mode
	Does    string
	Symptom string
	// Codes are the `plugin test --dra` findings that name the defect
	// (none: the defect needs the API server to be seen).
	Codes []string
}

// ModeDocs documents every mode, in the order the CLI lists them.
var ModeDocs = []ModeDoc{
	{ModeHealthy, "registers through plugins_registry (kubeletplugin's registration server), serves the DRA v1 service, and answers NodePrepareResources with one CDI device per claim, k8s.DRIVER/claim=UID-DEVICE, whose spec it writes into --cdi-spec-dir (edits: the env MOCK_VISIBLE_DEVICES=DEVICE); NodeUnprepareResources removes it.",
		"none: `plugin test --dra` finds no defect.", nil},
	{ModeNotRegistered, "serves the DRA service in its plugin directory but makes no registration socket (kubeletplugin.RegistrationService(false)).",
		"pods whose claims the driver must prepare stay in ContainerCreating: \"DRA driver DRIVER is not registered\" (pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go); the node reader behind `accel-doctor check` (internal/dra) finds the driver's directory serving without a registration.",
		[]string{CodeNotRegistered}},
	{ModePrepareError, "answers every claim of NodePrepareResources with an error, --error TEXT (default \"mock: preparation refused\").",
		"the pod stays in ContainerCreating; its events say \"Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for ResourceClaim NAME: TEXT\" and the kubelet retries.",
		[]string{CodePrepareFailed}},
	{ModeNoCDISpec, "answers NodePrepareResources with CDI device IDs and writes no spec for them.",
		"the kubelet passes the IDs to the runtime, which fails the container: \"unresolvable CDI devices k8s.DRIVER/claim=…\" (CreateContainerError); the same symptom as a per-claim spec lost in a reboot.",
		[]string{CodeCDIUnresolved}},
	{ModeEmptyEdits, "writes the claim's spec with a device whose containerEdits are empty.",
		"the CDI library refuses the spec (\"invalid device, empty device edits\", pkg/cdi/device.go), so the device does not resolve: \"unresolvable CDI devices …\" at container creation; `accel-doctor cdi validate` names the spec.",
		[]string{CodeCDIInvalidSpec, CodeCDIUnresolved}},
	{ModeStaleSlice, "like healthy; with --kubeconfig it publishes a ResourceSlice of its devices and, when it stops, leaves the slice in the API server (a healthy mock deletes its own); without --kubeconfig there is no slice and the mode is only accepted.",
		"needs the API server: the scheduler keeps allocating the driver's devices after it is gone, until the kubelet wipes the node's slices of an unregistered driver (about 30 s, defaultWipingDelay in pkg/kubelet/cm/dra/manager.go), and claims allocated then wait forever to be prepared. `plugin test --dra` cannot see it (it has no API server).",
		nil},
	{ModeDuplicate, "names its devices mock-0..mock-N-1, the IDs `plugin mock` (the device-plugin mock) lists, and gives each claim the same env MOCK_VISIBLE_DEVICES=mock-I the device-plugin mock's Allocate gives.",
		"the node advertises the same devices twice, as extended resource fake.example.com/gpu and as ResourceSlice devices: the scheduler can give one device to a pod through each, and both containers get it. `plugin test --dra --device-plugin-socket SOCKET` (the device-plugin mock's) finds it; the node reader behind `accel-doctor check` (internal/dra) names both sides while a claim is prepared (its spec in /var/run/cdi) and the device-plugin checkpoint registers mock-I.",
		[]string{CodeDoubleAdvertised}},
	{ModeGetInfoError, "registers a socket in plugins_registry whose GetInfo answers an error (gRPC Internal, \"mock: GetInfo refused\").",
		"the kubelet's plugin watcher cannot register the driver (\"RegisterPlugin error -- failed to get plugin info using RPC GetInfo\") and retries; claims wait as for a driver that is not registered; `accel-doctor check` names the socket that answers GetInfo with an error.",
		[]string{CodeGetInfoFailed}},
	{ModeOldVersion, "answers GetInfo with supported versions [" + oldService + "], a DRA service the kubelet of 1.37 does not speak.",
		"the kubelet rejects the registration (NotifyRegistrationStatus with an error naming the versions, which the mock prints as REGISTER_FAILED); claims wait as for a driver that is not registered; `accel-doctor check` names the versions.",
		[]string{CodeUnsupportedVersion}},
	{ModeBadEndpoint, "answers GetInfo with an endpoint in its plugin directory where nothing listens (missing-dra.sock).",
		"the kubelet registers the driver (its gRPC client connects lazily) and every NodePrepareResources fails to connect: pods stay in ContainerCreating; `accel-doctor check` names the endpoint.",
		[]string{CodeEndpointMissing}},
	{ModeEmptyPrepare, "answers NodePrepareResources for each claim with no device and no error.",
		"the claim counts as prepared and the container starts without the device: the workload finds no accelerator (CUDA_ERROR_NO_DEVICE and the like).",
		[]string{CodePrepareIncomplete}},
	{ModeUnprepareErr, "prepares as healthy does and answers NodeUnprepareResources for each claim with an error (\"mock: unprepare refused\").",
		"the pod's teardown does not finish: the kubelet keeps the claim in its DRA state and retries UnprepareResources; the claim's devices are not released.",
		[]string{CodeUnprepareFailed}},
	{ModeWrongType, "answers GetInfo with type CSIPlugin instead of DRAPlugin (a driver built on the wrong registration helper).",
		"the kubelet hands the registration to its CSI handler, not the DRA manager: the driver is never registered for DRA, and claims wait as for a driver that is not registered; `accel-doctor check` finds the driver's directory serving without a DRA registration.",
		[]string{CodeWrongType}},
}

// Modes lists the mode names.
func Modes() []string {
	out := make([]string, len(ModeDocs))
	for i, d := range ModeDocs {
		out[i] = string(d.Mode)
	}
	return out
}

// Config configures a mock.
type Config struct {
	Driver  string
	Devices int
	Mode    Mode
	// Error is prepare-error's error text.
	Error string
	// RegistryDir is the kubelet's plugins_registry; PluginDir the
	// driver's data directory (default /var/lib/kubelet/plugins/DRIVER);
	// CDIDir where per-claim specs are written (default /var/run/cdi).
	RegistryDir string
	PluginDir   string
	CDIDir      string
	// NodeName names the pool and, with Kube, the node the ResourceSlice
	// is published for.
	NodeName string
	// Kube is a client of a real API server. When nil, the mock runs
	// kubeletplugin against an in-memory client (memClient) that holds
	// each claim the kubelet side asks to prepare, so that kubeletplugin's
	// GET of the claim succeeds; nothing is published.
	Kube kubernetes.Interface
}

// Event is a line the mock reports (the CLI prints it on stdout).
type Event struct {
	Kind   string // SERVING, REGISTRATION, REGISTERED, REGISTER_FAILED, PUBLISHED, STOPPED
	Detail string
}

// Mock is a running fake DRA driver.
type Mock struct {
	cfg     Config
	log     *slog.Logger
	notify  func(Event)
	helper  *kubeletplugin.Helper
	mem     *memClient
	mu      sync.Mutex
	specs   map[types.UID]string // claim UID -> spec path written
	nextDev int
	// registered: the kubelet's NotifyRegistrationStatus said registered
	// and its registration connection is still open (registrarConnDone).
	registered bool
}

// DeviceName is the mock's name for device i.
func (c *Config) DeviceName(i int) string {
	if c.Mode == ModeDuplicate {
		return fmt.Sprintf("mock-%d", i)
	}
	return fmt.Sprintf("dev-%d", i)
}

// CDIKind is the CDI vendor/class of the mock's per-claim specs (the
// NVIDIA driver's convention: k8s.DRIVER/claim).
func (c *Config) CDIKind() string { return "k8s." + c.Driver + "/claim" }

// New checks the configuration.
func New(cfg Config, log *slog.Logger, notify func(Event)) (*Mock, error) {
	if cfg.Driver == "" || strings.ContainsAny(cfg.Driver, "/ ") {
		return nil, fmt.Errorf("driver name %q: want a DNS subdomain such as gpu.example.com", cfg.Driver)
	}
	if cfg.Devices <= 0 || cfg.Devices > 128 {
		return nil, fmt.Errorf("devices %d: want 1..128 (a ResourceSlice holds at most 128)", cfg.Devices)
	}
	known := false
	for _, d := range ModeDocs {
		known = known || d.Mode == cfg.Mode
	}
	if !known {
		return nil, fmt.Errorf("mode %q: want one of %s", cfg.Mode, strings.Join(Modes(), ", "))
	}
	if cfg.RegistryDir == "" {
		cfg.RegistryDir = kubeletplugin.KubeletRegistryDir
	}
	if cfg.PluginDir == "" {
		cfg.PluginDir = filepath.Join(kubeletplugin.KubeletPluginsDir, cfg.Driver)
	}
	if cfg.CDIDir == "" {
		cfg.CDIDir = "/var/run/cdi"
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "mock-node"
	}
	if cfg.Error == "" {
		cfg.Error = "mock: preparation refused"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if notify == nil {
		notify = func(Event) {}
	}
	return &Mock{cfg: cfg, log: log, notify: notify, specs: map[types.UID]string{}}, nil
}

// Run serves until ctx ends, then stops (removing its sockets; the specs
// it wrote are removed too, except in no-cdi-spec where there are none).
func (m *Mock) Run(ctx context.Context) error {
	c := m.cfg
	for _, d := range []string{c.PluginDir, c.RegistryDir, c.CDIDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	kube := c.Kube
	if kube == nil {
		m.mem = newMemClient()
		kube = m.mem
	}
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(c.Driver),
		kubeletplugin.KubeClient(kube),
		kubeletplugin.NodeName(c.NodeName),
		kubeletplugin.RegistrarDirectoryPath(c.RegistryDir),
		kubeletplugin.PluginDataDirectoryPath(c.PluginDir),
		kubeletplugin.HealthService(false),
		kubeletplugin.GRPCInterceptor(m.intercept),
		kubeletplugin.PluginListener(listen),
		kubeletplugin.RegistrarListener(m.listenRegistrar),
	}
	if c.Mode == ModeNotRegistered {
		opts = append(opts, kubeletplugin.RegistrationService(false))
	}
	h, err := kubeletplugin.Start(ctx, m, opts...)
	if err != nil {
		return fmt.Errorf("start kubeletplugin: %w", err)
	}
	m.helper = h
	m.notify(Event{"SERVING", filepath.Join(c.PluginDir, "dra.sock")})
	if c.Mode != ModeNotRegistered {
		m.notify(Event{"REGISTRATION", filepath.Join(c.RegistryDir, c.Driver+"-reg.sock")})
	}
	if c.Kube != nil {
		err := h.PublishResources(ctx, m.resources())
		switch {
		case err != nil && ctx.Err() != nil:
			// Stopped while the ResourceSlice controller was starting
			// (its informer's first sync waits on the API server): a
			// stop asked for, not a failure; nothing was published.
		case err != nil:
			h.Stop()
			return fmt.Errorf("publish ResourceSlice: %w", err)
		default:
			m.notify(Event{"PUBLISHED", fmt.Sprintf("%d devices in pool %s", c.Devices, c.NodeName)})
		}
	}
	<-ctx.Done()
	h.Stop()
	if c.Kube != nil && c.Mode != ModeStaleSlice {
		// A clean stop takes its slices with it; stale-slice leaves them.
		sel := resourceapi.ResourceSliceSelectorDriver + "=" + c.Driver + "," + resourceapi.ResourceSliceSelectorNodeName + "=" + c.NodeName
		err := c.Kube.ResourceV1().ResourceSlices().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			m.log.Warn("delete ResourceSlices", "err", err)
		}
	}
	m.mu.Lock()
	for _, p := range m.specs {
		os.Remove(p)
	}
	m.mu.Unlock()
	m.notify(Event{"STOPPED", c.Driver})
	return nil
}

func (m *Mock) resources() resourceslice.DriverResources {
	devs := make([]resourceapi.Device, m.cfg.Devices)
	for i := range devs {
		devs[i] = resourceapi.Device{Name: m.cfg.DeviceName(i)}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		m.cfg.NodeName: {Slices: []resourceslice.Slice{{Devices: devs}}},
	}}
}

// intercept, without an API server, puts each claim the kubelet side asks
// to prepare into the in-memory clientset before kubeletplugin looks it
// up, allocated to one of the mock's devices: the kubelet sends only a
// claim's namespace, name and UID (drapb.Claim), and kubeletplugin GETs
// the rest (nodePluginImplementation.getResourceClaims).
//
// It also reports the kubelet's NotifyRegistrationStatus (the interceptor
// runs for the registration server too): REGISTER_FAILED with its error,
// or, when it says registered, REGISTERED once the kubelet has closed that
// registration connection (registrarConnDone). REGISTRATION says only that
// the socket serves; the kubelet's plugin watcher hands the driver to its
// DRA handler before it notifies, takes it back if the notification fails
// (a reply it never got: a mock killed between handling the call and
// sending the reply), and closes its connection once the notification has
// returned (GenerateRegisterPluginFunc in
// pkg/kubelet/pluginmanager/operationexecutor). So REGISTERED is the moment
// the registration is complete on both sides.
func (m *Mock) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if _, ok := req.(*registerapi.InfoRequest); ok {
		return m.getInfo(ctx, req, h)
	}
	if st, ok := req.(*registerapi.RegistrationStatus); ok {
		resp, err := h(ctx, req)
		switch {
		case st.GetPluginRegistered() && err == nil:
			// Said when the kubelet closes this connection
			// (registrarConnDone): the reply is not on its way yet.
			m.mu.Lock()
			m.registered = true
			m.mu.Unlock()
		case !st.GetPluginRegistered():
			m.notify(Event{"REGISTER_FAILED", strconv.Quote(st.GetError())})
		}
		return resp, err
	}
	if r, ok := req.(*drapb.NodePrepareResourcesRequest); ok && m.mem != nil {
		for _, cl := range r.GetClaims() {
			m.mu.Lock()
			dev := m.cfg.DeviceName(m.nextDev % m.cfg.Devices)
			m.nextDev++
			m.mu.Unlock()
			claim := &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: cl.GetNamespace(), Name: cl.GetName(), UID: types.UID(cl.GetUid())},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "dev", Driver: m.cfg.Driver, Pool: m.cfg.NodeName, Device: dev}},
				}}},
			}
			m.mem.claims.put(claim)
		}
	}
	return h(ctx, req)
}

// getInfo plants the registration modes in kubeletplugin's own GetInfo
// answer.
func (m *Mock) getInfo(ctx context.Context, req any, h grpc.UnaryHandler) (any, error) {
	if m.cfg.Mode == ModeGetInfoError {
		return nil, status.Error(codes.Internal, "mock: GetInfo refused")
	}
	resp, err := h(ctx, req)
	pi, ok := resp.(*registerapi.PluginInfo)
	if err != nil || !ok {
		return resp, err
	}
	switch m.cfg.Mode {
	case ModeOldVersion:
		pi = proto.Clone(pi).(*registerapi.PluginInfo)
		pi.SupportedVersions = []string{oldService}
	case ModeBadEndpoint:
		pi = proto.Clone(pi).(*registerapi.PluginInfo)
		pi.Endpoint = filepath.Join(m.cfg.PluginDir, "missing-dra.sock")
	case ModeWrongType:
		pi = proto.Clone(pi).(*registerapi.PluginInfo)
		pi.Type = registerapi.CSIPlugin
	}
	return pi, nil
}

// PrepareResourceClaims is kubeletplugin.DRAPlugin's.
func (m *Mock) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, cl := range claims {
		switch m.cfg.Mode {
		case ModePrepareError:
			out[cl.UID] = kubeletplugin.PrepareResult{Err: errors.New(m.cfg.Error)}
			continue
		case ModeEmptyPrepare:
			out[cl.UID] = kubeletplugin.PrepareResult{}
			continue
		}
		var devs []kubeletplugin.Device
		spec := &cdispec.Spec{Version: "0.6.0", Kind: m.cfg.CDIKind()}
		if cl.Status.Allocation != nil {
			for _, r := range cl.Status.Allocation.Devices.Results {
				if r.Driver != m.cfg.Driver {
					continue
				}
				name := string(cl.UID) + "-" + r.Device
				edits := cdispec.ContainerEdits{Env: []string{"MOCK_VISIBLE_DEVICES=" + r.Device}}
				if m.cfg.Mode == ModeEmptyEdits {
					edits = cdispec.ContainerEdits{}
				}
				spec.Devices = append(spec.Devices, cdispec.Device{Name: name, ContainerEdits: edits})
				devs = append(devs, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
					CDIDeviceIDs: []string{m.cfg.CDIKind() + "=" + name}})
			}
		}
		if m.cfg.Mode != ModeNoCDISpec && len(spec.Devices) > 0 {
			p, err := m.writeSpec(cl.UID, spec)
			if err != nil {
				out[cl.UID] = kubeletplugin.PrepareResult{Err: err}
				continue
			}
			m.log.Debug("wrote CDI spec", "claim", cl.Namespace+"/"+cl.Name, "path", p)
		}
		out[cl.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return out, nil
}

// specPath is the per-claim spec's file: the CDI library's spec file
// naming (VENDOR-CLASS_NAME.json, with / of the kind made -).
func (m *Mock) specPath(uid types.UID) string {
	return filepath.Join(m.cfg.CDIDir, strings.ReplaceAll(m.cfg.CDIKind(), "/", "-")+"_"+string(uid)+".json")
}

func (m *Mock) writeSpec(uid types.UID, s *cdispec.Spec) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	p := m.specPath(uid)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return "", err
	}
	m.mu.Lock()
	m.specs[uid] = p
	m.mu.Unlock()
	return p, nil
}

// UnprepareResourceClaims is kubeletplugin.DRAPlugin's: the claim's spec
// is removed.
func (m *Mock) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, cl := range claims {
		if m.cfg.Mode == ModeUnprepareErr {
			out[cl.UID] = errors.New("mock: unprepare refused")
			continue
		}
		m.mu.Lock()
		p, ok := m.specs[cl.UID]
		delete(m.specs, cl.UID)
		m.mu.Unlock()
		if ok {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				out[cl.UID] = err
				continue
			}
		}
		out[cl.UID] = nil
	}
	return out, nil
}

// HandleError is kubeletplugin.DRAPlugin's: the mock logs what the
// helper's background work reports.
func (m *Mock) HandleError(_ context.Context, err error, msg string) {
	m.log.Warn(msg, "err", err)
}

// WatchHealthStatus is kubeletplugin.DRAPlugin's; the health service is
// off (kubeletplugin.HealthService(false)).
func (m *Mock) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

// listen makes a socket as kubeletplugin does (a stale one removed
// first, the socket removed again on Close), but with mode 0600 from the
// start whatever the umask (deviceplugin.ListenUnix): kubeletplugin's own
// leaves it to the umask, and only the kubelet, as root, is to connect.
func listen(ctx context.Context, path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove the stale socket: %w", err)
	}
	return deviceplugin.ListenUnix(ctx, path)
}

// listenRegistrar makes the registration socket (listen), with each
// connection telling registrarConnDone when the peer is gone.
func (m *Mock) listenRegistrar(ctx context.Context, path string) (net.Listener, error) {
	l, err := listen(ctx, path)
	if err != nil {
		return nil, err
	}
	return &doneListener{Listener: l, done: m.registrarConnDone}, nil
}

// registrarConnDone: a registration connection ended. After a
// NotifyRegistrationStatus that said registered, that is the kubelet
// closing it, which it does once the call has returned to it.
func (m *Mock) registrarConnDone() {
	m.mu.Lock()
	was := m.registered
	m.registered = false
	m.mu.Unlock()
	if was {
		m.notify(Event{"REGISTERED", filepath.Join(m.cfg.RegistryDir, m.cfg.Driver+"-reg.sock")})
	}
}

// doneListener's connections call done once, when a Read first fails (the
// peer closed it, or the server did).
type doneListener struct {
	net.Listener
	done func()
}

func (l *doneListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &doneConn{Conn: c, done: l.done}, nil
}

type doneConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *doneConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(c.done)
	}
	return n, err
}
