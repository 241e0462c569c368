package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Options configure a Plugin or a Mock. Every field may be left zero.
type Options struct {
	// Root is the host the plugin reads devices from (default "/"). A
	// fixture tree or a temp dir with its own dev/ in tests; CDI specs
	// are written under it too.
	Root *hostfs.Root
	// Logger receives the plugin's logs (default: discarded).
	Logger *slog.Logger
	// Registerer receives the Prometheus metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Notify is told when a resource serves, registers or fails to.
	Notify func(Event)
	// NoUevents keeps the plugin from opening a uevent socket (tests
	// over fixture trees; a non-live root never opens one anyway).
	NoUevents bool
}

func (o *Options) fill() error {
	if o.Root == nil {
		r, err := hostfs.New("/")
		if err != nil {
			return err
		}
		o.Root = r
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Plugin is `accel-doctor plugin serve`: a device plugin for the
// resources of a Config. It writes: one socket per resource in the
// kubelet's device-plugins directory and, for CDI resources, a CDI spec.
type Plugin struct {
	kubeletDir string
	cfg        *Config
	opts       Options
	metrics    *Metrics
	monitor    *Monitor
	resources  []*resource
}

// resource is one configured resource: its endpoint and what it
// answers from.
type resource struct {
	cfg     *ResourceConfig
	index   int
	plugin  *Plugin
	ep      *endpoint
	mu      sync.RWMutex
	devs    map[string]*Device
	specSig string
	// inSpec: the devices of the CDI spec this plugin last wrote (CDI
	// resources), the only ones Allocate names.
	inSpec map[string]bool
}

// New discovers the devices of every resource of cfg (validated) and
// prepares to serve them in kubeletDir. Run serves.
func New(kubeletDir string, cfg *Config, opts Options) (*Plugin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	p := &Plugin{kubeletDir: kubeletDir, cfg: cfg, opts: opts, metrics: NewMetrics(opts.Registerer)}
	for i := range cfg.Resources {
		r := &resource{cfg: &cfg.Resources[i], index: i, plugin: p, devs: map[string]*Device{}}
		r.ep = newEndpoint(r.cfg.Name, kubeletDir, r.cfg.Socket, r, opts.Logger, p.metrics, opts.Notify)
		p.resources = append(p.resources, r)
	}
	m, err := NewMonitor(opts.Root, cfg, opts.Logger, p.update)
	if err != nil {
		return nil, err
	}
	p.monitor = m
	return p, nil
}

// Monitor is the plugin's device monitor (tests replay uevents into it).
func (p *Plugin) Monitor() *Monitor { return p.monitor }

// Socket is the full path of a resource's socket.
func (p *Plugin) Socket(resource string) string {
	for _, r := range p.resources {
		if r.cfg.Name == resource {
			return r.ep.socketPath()
		}
	}
	return ""
}

// update takes a resource's devices from the monitor: CDI spec first
// (a name in an Allocate answer must resolve), then ListAndWatch.
func (p *Plugin) update(i int, devs []*Device) {
	r := p.resources[i]
	m := make(map[string]*Device, len(devs))
	list := make([]*pluginapi.Device, 0, len(devs))
	r.mu.Lock()
	for _, d := range devs {
		if old := r.devs[d.ID]; old != nil && old.Health != d.Health {
			p.metrics.transitions.WithLabelValues(r.cfg.Name, d.Health).Inc()
		}
		m[d.ID] = d
		list = append(list, d.api())
	}
	r.devs = m
	r.mu.Unlock()
	if r.cfg.CDI != nil {
		declared, err := r.writeSpec(devs)
		if err != nil {
			// The spec on disk is the one written before, if any.
			p.opts.Logger.Error("CDI spec not written", "resource", r.cfg.Name, "err", err)
		} else {
			r.mu.Lock()
			r.inSpec = declared
			r.mu.Unlock()
		}
	}
	r.ep.publish(list)
}

// NoResourcesLog is what Run logs when the config declares no resource.
const NoResourcesLog = "advertising nothing: the config declares no resources, so no socket is made and nothing is registered with the kubelet; add resources to the config (docs/device-plugin.md, docs/plugin-config.example.yaml) and restart the plugin"

// NoDeviceLog is what Run logs for a resource that selects no device at
// its start.
const NoDeviceLog = "the resource selects no device on this node: it is registered with none (the node advertises 0 of it) until a device appears"

// Run serves every resource until ctx ends, then removes the sockets.
// The kubelet need not be there yet: each resource registers when
// kubelet.sock appears, and again whenever it is recreated.
//
// A config with no resources (deploy/plugin ships one, so that the
// DaemonSet advertises nothing until its config is edited) makes no
// socket, registers nothing and watches no device: Run logs why
// (NoResourcesLog) and waits for ctx, so that a DaemonSet's pod stays
// Running instead of restarting in a loop, and returns nil.
func (p *Plugin) Run(ctx context.Context) error {
	if len(p.resources) == 0 {
		p.monitor.watcher.Close()
		p.opts.Logger.Warn(NoResourcesLog)
		<-ctx.Done()
		return nil
	}
	for i, r := range p.resources {
		if len(p.monitor.Devices(i)) == 0 {
			p.opts.Logger.Warn(NoDeviceLog, "resource", r.cfg.Name)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go p.monitor.Run(ctx, p.opts.Root.IsLive() && !p.opts.NoUevents)
	errs := make([]error, len(p.resources))
	var wg sync.WaitGroup
	for i, r := range p.resources {
		wg.Go(func() {
			if err := r.ep.run(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", r.cfg.Name, err)
				cancel() // one resource that cannot serve stops the plugin: say so, do not limp
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *resource) options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{PreStartRequired: r.cfg.PreStartContainer, GetPreferredAllocationAvailable: true}
}

func (r *resource) device(id string) *Device {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.devs[id]
}

// allocate answers with what each container needs: CDI names, or the
// devices' nodes, the shared nodes, mounts and env.
func (r *resource) allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	r.mu.RLock()
	defer r.mu.RUnlock()
	ce := &r.cfg.Container
	for _, cr := range req.ContainerRequests {
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
		if ce.DeviceIDsEnv != "" {
			resp.Envs[ce.DeviceIDsEnv] = strings.Join(cr.DevicesIds, ",")
		}
		if r.cfg.CDI != nil {
			for _, id := range cr.DevicesIds {
				if !r.inSpec[id] {
					// The runtime would fail the container with
					// "unresolvable CDI devices": fail the pod's
					// admission here instead, with the reason.
					why := "the CDI spec could not be written (see the plugin's log)"
					if d := r.devs[id]; d != nil && d.Health != pluginapi.Healthy {
						why = d.Reason
					}
					return nil, status.Errorf(codes.FailedPrecondition, "Allocate: device %s is not in the CDI spec %s: %s",
						id, path.Join(r.plugin.cfg.CDISpecDir, SpecFileName(r.cfg.CDI)), why)
				}
				resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: r.cfg.CDI.Kind() + "=" + id})
			}
			out.ContainerResponses = append(out.ContainerResponses, resp)
			continue
		}
		seen := map[string]bool{}
		add := func(host, ctr string) {
			if seen[ctr] {
				return
			}
			seen[ctr] = true
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: ctr, HostPath: host, Permissions: ce.Permissions})
		}
		for _, id := range cr.DevicesIds {
			d := r.devs[id]
			if d == nil {
				return nil, status.Errorf(codes.InvalidArgument, "Allocate: unknown device %q", id)
			}
			for _, n := range d.Nodes {
				add(n.Path, n.Path)
			}
		}
		for _, id := range cr.DevicesIds {
			for _, n := range r.devs[id].Shared {
				add(n.Path, n.Path)
			}
		}
		for _, n := range ce.DeviceNodes {
			add(n.HostPath, cmpOr(n.ContainerPath, n.HostPath))
		}
		for _, m := range ce.Mounts {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly})
		}
		for k, v := range ce.Env {
			resp.Envs[k] = v
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (r *resource) preferred(_ context.Context, cr *pluginapi.ContainerPreferredAllocationRequest) ([]string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return preferred(r.devs, cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize))
}

// preStart judges the devices as they are now, not as last published:
// a device that went away since Allocate fails the container's start
// with the reason, rather than a runtime error about a missing node.
func (r *resource) preStart(_ context.Context, ids []string) error {
	if !r.cfg.PreStartContainer {
		return nil
	}
	r.plugin.monitor.Refresh()
	devs := r.plugin.monitor.Devices(r.index)
	for _, id := range ids {
		i := slices.IndexFunc(devs, func(d *Device) bool { return d.ID == id })
		if i < 0 {
			return status.Errorf(codes.InvalidArgument, "PreStartContainer: unknown device %q", id)
		}
		if devs[i].Health != pluginapi.Healthy {
			return status.Errorf(codes.FailedPrecondition, "PreStartContainer: device %s is Unhealthy: %s", id, devs[i].Reason)
		}
	}
	return nil
}
