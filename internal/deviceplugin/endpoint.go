package deviceplugin

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Event is what a plugin or mock tells its caller about its life: the
// CLI prints each as one line on stdout (docs/device-plugin.md, "Ready
// lines").
type Event struct {
	Kind     EventKind
	Resource string
	Socket   string // the plugin's socket, a full path
	Err      error  // RegisterFailed
}

// EventKind names an Event.
type EventKind string

const (
	// EventServing: the socket answers GetDevicePluginOptions.
	EventServing EventKind = "SERVING"
	// EventRegistered: the kubelet accepted Register (it has dialled the
	// socket back and called GetDevicePluginOptions by then).
	EventRegistered EventKind = "REGISTERED"
	// EventRegisterFailed: Register failed; Err says why.
	EventRegisterFailed EventKind = "REGISTER_FAILED"
	// EventWaiting: there is no kubelet.sock yet; the plugin registers
	// when it appears.
	EventWaiting EventKind = "WAITING"
)

// backend is what differs between the plugin and the mock. Requests
// reach it validated: every device ID is one that was listed.
type backend interface {
	options() *pluginapi.DevicePluginOptions
	allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)
	preferred(ctx context.Context, r *pluginapi.ContainerPreferredAllocationRequest) ([]string, error)
	preStart(ctx context.Context, ids []string) error
}

// endpoint serves one resource on one socket of the kubelet's
// device-plugins directory and registers it with the kubelet.
type endpoint struct {
	pluginapi.UnimplementedDevicePluginServer

	resource   string
	kubeletDir string
	socket     string // file name in kubeletDir
	version    string // API version sent in Register
	log        *slog.Logger
	metrics    *Metrics
	be         backend
	notify     func(Event)
	// registerBeforeServe and noReregister plant the mock's defects.
	registerBeforeServe bool
	noReregister        bool
	// registerDelay is waited before each registration (the duplicate
	// mode's second instance: it registers after the first, whichever
	// of the plugin and the kubelet started first).
	registerDelay time.Duration
	// dead: the endpoint was killed (the mock's in-process crash): it
	// never serves again.
	dead atomic.Bool

	mu   sync.Mutex
	ids  map[string]bool
	list []*pluginapi.Device
	gen  uint64
	subs map[chan struct{}]struct{}
	// listed is closed once a ListAndWatch stream has sent its first
	// list (the mock's flapping starts from there).
	listed     chan struct{}
	listedOnce sync.Once

	srvMu  sync.Mutex
	server *grpc.Server
}

func newEndpoint(resource, kubeletDir, socket string, be backend, log *slog.Logger, m *Metrics, notify func(Event)) *endpoint {
	if notify == nil {
		notify = func(Event) {}
	}
	return &endpoint{resource: resource, kubeletDir: kubeletDir, socket: socket, version: pluginapi.Version,
		log: log.With("resource", resource), metrics: m, be: be, notify: notify,
		ids: map[string]bool{}, subs: map[chan struct{}]struct{}{}, listed: make(chan struct{})}
}

func (e *endpoint) socketPath() string { return filepath.Join(e.kubeletDir, e.socket) }

// publish replaces the device list and wakes every ListAndWatch stream.
// It never blocks: a stream that is behind is woken once and sends the
// newest list, however many came between.
func (e *endpoint) publish(devs []*pluginapi.Device) {
	e.mu.Lock()
	e.list = devs
	e.ids = make(map[string]bool, len(devs))
	healthy := 0
	for _, d := range devs {
		e.ids[d.ID] = true
		if d.Health == pluginapi.Healthy {
			healthy++
		}
	}
	e.gen++
	for c := range e.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	e.mu.Unlock()
	if e.metrics != nil {
		e.metrics.devices.WithLabelValues(e.resource, pluginapi.Healthy).Set(float64(healthy))
		e.metrics.devices.WithLabelValues(e.resource, pluginapi.Unhealthy).Set(float64(len(devs) - healthy))
	}
}

func (e *endpoint) snapshot() ([]*pluginapi.Device, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list, e.gen
}

// GetDevicePluginOptions implements the DevicePlugin service.
func (e *endpoint) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return e.be.options(), nil
}

// ListAndWatch sends the device list, then every change, until the
// client goes away or the server stops. A client that stops reading
// blocks only its own stream (gRPC flow control holds its Send).
func (e *endpoint) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	c := make(chan struct{}, 1)
	e.mu.Lock()
	e.subs[c] = struct{}{}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.subs, c)
		e.mu.Unlock()
	}()
	var sent uint64
	for first := true; ; first = false {
		list, gen := e.snapshot()
		if first || gen != sent {
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: list}); err != nil {
				return err
			}
			e.listedOnce.Do(func() { close(e.listed) })
			sent = gen
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-c:
		}
	}
}

// checkIDs rejects what the kubelet never sends: an empty request or an
// ID that was not listed.
func (e *endpoint) checkIDs(ids []string, what string) error {
	if len(ids) == 0 {
		return status.Errorf(codes.InvalidArgument, "%s: no device IDs", what)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !e.ids[id] {
			return status.Errorf(codes.InvalidArgument, "%s: unknown device %q of resource %s", what, truncate(id, 100), e.resource)
		}
		if seen[id] {
			return status.Errorf(codes.InvalidArgument, "%s: device %q asked for twice", what, truncate(id, 100))
		}
		seen[id] = true
	}
	return nil
}

// Allocate implements the DevicePlugin service.
func (e *endpoint) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp, err := e.allocate(ctx, req)
	if e.metrics != nil {
		result := "ok"
		if err != nil {
			result = status.Code(err).String()
		}
		e.metrics.allocations.WithLabelValues(e.resource, result).Inc()
	}
	if err != nil {
		e.log.Warn("Allocate refused", "err", err)
	} else {
		e.log.Debug("Allocate", "containers", len(req.GetContainerRequests()))
	}
	return resp, err
}

func (e *endpoint) allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	if req == nil || len(req.ContainerRequests) == 0 {
		return nil, status.Error(codes.InvalidArgument, "Allocate: no container requests")
	}
	for i, cr := range req.ContainerRequests {
		if cr == nil {
			return nil, status.Errorf(codes.InvalidArgument, "Allocate: container request %d is empty", i)
		}
		if err := e.checkIDs(cr.DevicesIds, "Allocate"); err != nil {
			return nil, err
		}
	}
	return e.be.allocate(ctx, req)
}

// GetPreferredAllocation implements the DevicePlugin service.
func (e *endpoint) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	if req == nil || len(req.ContainerRequests) == 0 {
		return nil, status.Error(codes.InvalidArgument, "GetPreferredAllocation: no container requests")
	}
	out := &pluginapi.PreferredAllocationResponse{}
	for i, cr := range req.ContainerRequests {
		if cr == nil {
			return nil, status.Errorf(codes.InvalidArgument, "GetPreferredAllocation: container request %d is empty", i)
		}
		if cr.AllocationSize <= 0 {
			return nil, status.Errorf(codes.InvalidArgument, "GetPreferredAllocation: allocation size %d", cr.AllocationSize)
		}
		if err := e.checkIDs(cr.AvailableDeviceIDs, "GetPreferredAllocation available"); err != nil {
			return nil, err
		}
		if len(cr.MustIncludeDeviceIDs) > 0 {
			if err := e.checkIDs(cr.MustIncludeDeviceIDs, "GetPreferredAllocation must-include"); err != nil {
				return nil, err
			}
		}
		ids, err := e.be.preferred(ctx, cr)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "GetPreferredAllocation: %v", err)
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return out, nil
}

// PreStartContainer implements the DevicePlugin service.
func (e *endpoint) PreStartContainer(ctx context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "PreStartContainer: empty request")
	}
	if err := e.checkIDs(req.DevicesIds, "PreStartContainer"); err != nil {
		return nil, err
	}
	if err := e.be.preStart(ctx, req.DevicesIds); err != nil {
		return nil, err
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}

// listen starts the gRPC server on the socket and checks that it
// answers. A socket that answers already belongs to another plugin
// instance: that is refused (two instances of one resource confuse the
// kubelet, see mock mode duplicate); a dead one is replaced.
func (e *endpoint) listen() error {
	p := e.socketPath()
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s exists and is not a socket", p)
		}
		if c, err := net.DialTimeout("unix", p, 200*time.Millisecond); err == nil {
			c.Close()
			return fmt.Errorf("%s is served by another process (a second instance of this plugin?)", p)
		}
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("remove stale socket: %w", err)
		}
	}
	// Mode SocketMode from the start, whatever the umask (ListenUnix).
	lis, err := ListenUnix(context.Background(), p)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, e)
	go srv.Serve(lis)
	e.srvMu.Lock()
	e.server = srv
	e.srvMu.Unlock()
	if err := e.selfCheck(); err != nil {
		e.stop()
		return fmt.Errorf("own socket does not answer: %w", err)
	}
	e.log.Info("serving", "socket", p)
	e.notify(Event{Kind: EventServing, Resource: e.resource, Socket: p})
	return nil
}

// selfCheck dials the socket as the kubelet will and calls
// GetDevicePluginOptions: serve before register.
func (e *endpoint) selfCheck() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := dialUnix(e.socketPath())
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	return err
}

// kill stops the endpoint for good, as if its process had died.
func (e *endpoint) kill() {
	e.dead.Store(true)
	e.stop()
}

// stop ends the server and its streams; closing the listener removes
// the socket if it is still the one this endpoint made (ListenUnix).
func (e *endpoint) stop() {
	e.srvMu.Lock()
	srv := e.server
	e.server = nil
	e.srvMu.Unlock()
	if srv == nil {
		return
	}
	srv.Stop()
}

func (e *endpoint) serving() bool {
	e.srvMu.Lock()
	defer e.srvMu.Unlock()
	return e.server != nil
}

// dialUnix opens a gRPC client connection on a unix socket (the
// connection itself is made lazily, on the first call).
func dialUnix(p string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+p,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
}

// register sends one Register to kubelet.sock. The kubelet dials the
// socket back and calls GetDevicePluginOptions before it answers
// (plugin/v1beta1/server.go Register -> handler.go connectClient; its dial waits up
// to 10 s, client.go dial), hence the timeout.
func (e *endpoint) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := dialUnix(filepath.Join(e.kubeletDir, KubeletSocket))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: e.version, Endpoint: e.socket, ResourceName: e.resource, Options: e.be.options(),
	})
	result := "ok"
	if err != nil {
		result = "error"
	}
	if e.metrics != nil {
		e.metrics.registrations.WithLabelValues(e.resource, result).Inc()
	}
	return err
}

// registerRetry registers until it succeeds, kubelet.sock goes away or
// ctx ends. A kubelet that just created kubelet.sock may not listen yet
// (ECONNREFUSED between bind and listen): that passes. "device plugin
// already connected" means an earlier Register of ours was accepted (an
// attempt cancelled after the kubelet took it): it is final, and is never
// retried, because the 1.37 manager drops its record of the working
// connection when it refuses a second one (seen in e2e/deviceplugin,
// TestManagerForgetsAPluginThatRegisteredTwice). Errors the kubelet gives
// for the request itself (version, name) end the attempts after a few.
func (e *endpoint) registerRetry(ctx context.Context) bool {
	delay := 2 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := e.register(ctx)
		if err == nil {
			e.log.Info("registered with the kubelet", "socket", e.socketPath())
			e.notify(Event{Kind: EventRegistered, Resource: e.resource, Socket: e.socketPath()})
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if strings.Contains(err.Error(), "already connected") {
			e.log.Info("the kubelet already holds our registration", "socket", e.socketPath(), "answer", err)
			e.notify(Event{Kind: EventRegistered, Resource: e.resource, Socket: e.socketPath()})
			return true
		}
		code := status.Code(err)
		transient := code == codes.Unavailable || code == codes.DeadlineExceeded
		e.log.Warn("registration failed", "attempt", attempt, "err", err)
		if (!transient && attempt >= 5) || !exists(filepath.Join(e.kubeletDir, KubeletSocket)) {
			e.notify(Event{Kind: EventRegisterFailed, Resource: e.resource, Socket: e.socketPath(), Err: err})
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// sockID tells one kubelet.sock from the next: its inode number and
// change time (a filesystem reuses a freed inode number at once).
type sockID struct {
	ino  uint64
	ctim syscall.Timespec
}

// sockInode is which kubelet.sock p is.
func sockInode(p string) (sockID, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return sockID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return sockID{}, false
	}
	return sockID{st.Ino, st.Ctim}, true
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// run serves, registers, and registers again whenever the kubelet
// recreates kubelet.sock (it removes every socket in its directory when
// it starts, pkg/kubelet/cm/devicemanager/manager.go
// CleanupPluginDirectory, ours too: then the socket is made again
// first). It returns when ctx ends, with the socket removed.
func (e *endpoint) run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := os.MkdirAll(e.kubeletDir, 0o750); err != nil {
		return err
	}
	if err := w.Add(e.kubeletDir); err != nil {
		return fmt.Errorf("watch %s: %w", e.kubeletDir, err)
	}
	defer e.stop()
	kubelet := filepath.Join(e.kubeletDir, KubeletSocket)
	// Registration runs beside the event loop, so that the loop keeps
	// reading events while a Register waits (the kubelet may take 10 s to
	// answer one whose socket went away meanwhile): each new event cancels
	// the attempt in flight and starts from the state it brings.
	regCancel, regDone := context.CancelFunc(func() {}), make(chan struct{})
	close(regDone)
	stopReg := func() { regCancel(); <-regDone }
	// regIno is the kubelet.sock a registration was started for: its
	// Create event can arrive after our socket's Remove already started
	// one (the kubelet wipes the directory, then binds kubelet.sock), and
	// a second Register to the same kubelet would be refused. A Remove of
	// kubelet.sock forgets it: a filesystem reuses the inode number at
	// once and timestamps are coarse (jiffies), so a kubelet.sock made
	// again quickly can look the same.
	var regIno sockID
	// started: a registration was started once (noReregister registers
	// that once, and never again).
	started := false
	startReg := func() {
		started = true
		regIno, _ = sockInode(kubelet)
		stopReg()
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		regCancel, regDone = cancel, done
		go func() {
			defer close(done)
			if e.registerDelay > 0 {
				select {
				case <-rctx.Done():
					return
				case <-time.After(e.registerDelay):
				}
			}
			e.registerRetry(rctx)
		}()
	}
	defer stopReg()
	if e.registerBeforeServe {
		// The defect the mock plants: Register first, serve after. The
		// one early Register waits, however long it takes, for
		// kubelet.sock to accept a connection (a kubelet binds it before
		// it listens), never for the plugin's own socket, which is the
		// defect; the plugin then does the same whichever of it and the
		// kubelet started first.
		if !exists(kubelet) {
			e.log.Info("no kubelet.sock yet: registering when it appears", "dir", e.kubeletDir)
			e.notify(Event{Kind: EventWaiting, Resource: e.resource, Socket: e.socketPath()})
		}
		if !waitAccepting(ctx, kubelet) {
			return nil
		}
		// The Create event of this kubelet.sock may still be queued: it
		// must not make a second, proper registration at once.
		regIno, _ = sockInode(kubelet)
		if err := e.register(ctx); err != nil {
			e.notify(Event{Kind: EventRegisterFailed, Resource: e.resource, Socket: e.socketPath(), Err: err})
		} else {
			e.notify(Event{Kind: EventRegistered, Resource: e.resource, Socket: e.socketPath()})
		}
		if err := e.listen(); err != nil {
			return err
		}
	} else {
		if err := e.listen(); err != nil {
			return err
		}
		if exists(kubelet) {
			startReg()
		} else {
			e.log.Info("no kubelet.sock yet: registering when it appears", "dir", e.kubeletDir)
			e.notify(Event{Kind: EventWaiting, Resource: e.resource, Socket: e.socketPath()})
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			e.log.Warn("fsnotify on the kubelet directory", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if e.dead.Load() {
				return nil
			}
			if e.noReregister && started {
				continue // registered once (or tried to): never again
			}
			name := filepath.Base(ev.Name)
			switch {
			case name == KubeletSocket && ev.Has(fsnotify.Create):
				if ino, ok := sockInode(kubelet); ok && ino == regIno && e.serving() {
					continue // registering (or registered) with this very kubelet.sock
				}
				e.log.Info("kubelet.sock created: the kubelet restarted; registering again")
				stopReg()
				if !exists(e.socketPath()) || !e.serving() {
					e.stop()
					if err := e.listen(); err != nil {
						e.log.Error("cannot serve again", "err", err)
						continue
					}
				}
				startReg()
			case name == KubeletSocket && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)):
				regIno = sockID{}
			case name == e.socket && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)):
				if exists(e.socketPath()) {
					continue // an old event: the socket is there again
				}
				// Our socket went away (the kubelet's wipe, or someone
				// else): serve again at once; register if the kubelet
				// is there.
				e.log.Warn("socket removed: serving again", "socket", e.socketPath())
				stopReg()
				e.stop()
				if err := e.listen(); err != nil {
					e.log.Error("cannot serve again", "err", err)
					continue
				}
				if exists(kubelet) {
					startReg()
				}
			}
		}
	}
}

// waitAccepting waits until the unix socket p accepts a connection, and
// reports whether it did before ctx ended.
func waitAccepting(ctx context.Context, p string) bool {
	for {
		if c, err := net.DialTimeout("unix", p, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}
