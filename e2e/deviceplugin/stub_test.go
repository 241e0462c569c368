package deviceplugin

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// stubPlugin is the smallest device plugin that follows the v1beta1
// contract, written here from the API alone so that the harness is proven
// against a plugin that does not share code with ours: it serves before it
// registers, reports its devices with health and NUMA node, sends the list
// again on every change, answers Allocate with one DeviceSpec per device,
// and, unless told not to, serves and registers again whenever the kubelet
// makes kubelet.sock anew.
type stubPlugin struct {
	t        testing.TB
	dir      string // the kubelet's directory, by its path outside the namespace
	resource string
	endpoint string // the socket's name in dir
	// noReregister is a plugin that registers once and never again: the
	// "no re-registration after a kubelet restart" defect.
	noReregister atomic.Bool

	mu            sync.Mutex
	ids           []string
	health        map[string]string
	changed       chan struct{} // closed on every change, then replaced
	srv           *grpc.Server
	registrations int
	registered    chan struct{} // receives after each Register the kubelet accepted
	allocs        [][]string
	stop          func() // set by run

	pluginapi.UnimplementedDevicePluginServer
}

func newStub(t testing.TB, dir, resource string, n int) *stubPlugin {
	p := &stubPlugin{
		t: t, dir: dir, resource: resource,
		endpoint:   strings.NewReplacer("/", "-", ".", "-").Replace(resource) + ".sock",
		health:     map[string]string{},
		changed:    make(chan struct{}),
		registered: make(chan struct{}, 16),
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("stub-%d", i)
		p.ids = append(p.ids, id)
		p.health[id] = pluginapi.Healthy
	}
	return p
}

// run serves, registers, and watches for the kubelet's restarts until stop.
func (p *stubPlugin) run() {
	p.t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := w.Add(p.dir); err != nil {
		p.t.Fatal(err)
	}
	if err := p.serve(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.register(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				// A kubelet that starts wipes every socket in the
				// directory, ours too, then listens on kubelet.sock.
				if ev.Name == filepath.Join(p.dir, "kubelet.sock") && ev.Has(fsnotify.Create) && !p.noReregister.Load() {
					if err := p.serve(); err != nil {
						p.t.Errorf("stub: serve again: %v", err)
						continue
					}
					if err := p.register(); err != nil {
						p.t.Errorf("stub: register again: %v", err)
					}
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	p.stop = func() {
		w.Close()
		<-done
		p.mu.Lock()
		srv := p.srv
		p.mu.Unlock()
		if srv != nil {
			srv.Stop()
		}
	}
}

// serve (re)starts the gRPC server on dir/endpoint.
func (p *stubPlugin) serve() error {
	p.mu.Lock()
	old := p.srv
	p.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	sock := filepath.Join(p.dir, p.endpoint)
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		return err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go srv.Serve(ln)
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	return nil
}

// register registers with the kubelet, trying again for up to 5 s: the
// kubelet's socket exists from its bind(2), before its listen(2), and a
// connect(2) in between is refused.
func (p *stubPlugin) register() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		err := p.registerOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

func (p *stubPlugin) registerOnce(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.endpoint,
		ResourceName: p.resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", p.resource, err)
	}
	p.mu.Lock()
	p.registrations++
	p.mu.Unlock()
	select {
	case p.registered <- struct{}{}:
	default:
	}
	return nil
}

func (p *stubPlugin) setHealth(id, health string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health[id] = health
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *stubPlugin) list() ([]*pluginapi.Device, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var devs []*pluginapi.Device
	for _, id := range p.ids {
		devs = append(devs, &pluginapi.Device{ID: id, Health: p.health[id],
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}}}})
	}
	return devs, p.changed
}

func (p *stubPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *stubPlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devs, changed := p.list()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *stubPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cr := range req.ContainerRequests {
		c := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"STUB_DEVICES": strings.Join(cr.DevicesIds, ",")}}
		for _, id := range cr.DevicesIds {
			if _, ok := p.health[id]; !ok {
				return nil, status.Errorf(codes.InvalidArgument, "unknown device %q", id)
			}
			c.Devices = append(c.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/" + id, HostPath: "/dev/null", Permissions: "rw"})
		}
		p.allocs = append(p.allocs, cr.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, c)
	}
	return resp, nil
}
