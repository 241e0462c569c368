package kubelet

import (
	"context"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// KubeletSocketName is the kubelet's registration socket in the device
// plugin directory (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1,
// KubeletSocket).
const KubeletSocketName = "kubelet.sock"

// Socket is one entry of the device-plugin directory that is a socket or
// is named like one.
type Socket struct {
	Path string `json:"path"` // host path
	Name string `json:"name"`
	// Type is what lstat says the entry is: "socket" for a real one,
	// "symlink" (then Target), or "regular file" for a file named like a
	// socket.
	Type   string `json:"type"`
	Target string `json:"target,omitempty"`
	// ModTime is the entry's modification time: a socket's is when it was
	// bound.
	ModTime time.Time `json:"mtime"`
	// OlderThanKubelet: this plugin socket was created before kubelet.sock
	// was. The kubelet removes every socket in the directory when its
	// device manager starts (ManagerImpl.CleanupPluginDirectory in
	// pkg/kubelet/cm/devicemanager/manager.go, called from server.Start
	// in pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go) and then
	// binds kubelet.sock: a socket older than kubelet.sock survived or
	// escaped that sweep, so it was not created for the running kubelet.
	OlderThanKubelet bool `json:"older_than_kubelet,omitempty"`
	// Dial is what the one read-only call gave: grpc.health.v1 Check on
	// kubelet.sock, GetDevicePluginOptions on a plugin socket.
	Dial Dial `json:"dial"`
	// Options is the plugin's answer to GetDevicePluginOptions.
	Options *PluginOptions `json:"options,omitempty"`
	// Health is kubelet.sock's answer to grpc.health.v1 Check, when it
	// serves that service ("" when it does not: the kubelet's
	// registration server registers only the Registration service).
	Health string `json:"health,omitempty"`
	// Resource is the resource name the socket's name implies by a known
	// plugin's naming convention (ResourceHint says which); "" when none.
	// The kubelet keeps the endpoint-to-resource map in memory only
	// (ManagerImpl.endpoints): a socket does not name its resource.
	Resource     string `json:"resource,omitempty"`
	ResourceHint string `json:"resource_hint,omitempty"`
}

// PluginOptions is a plugin's DevicePluginOptions.
type PluginOptions struct {
	PreStartRequired                bool `json:"pre_start_required,omitempty"`
	GetPreferredAllocationAvailable bool `json:"get_preferred_allocation_available,omitempty"`
}

// healthMethod is the one call made on kubelet.sock. The kubelet's
// registration server (plugin/v1beta1/server.go) registers only
// v1beta1.Registration, whose one method, Register, changes the kubelet's
// state: it is never called. A health Check is read-only by definition;
// the kubelet answers it Unimplemented, which proves a gRPC server is
// serving the socket as well as an answer would.
var healthMethod = grpc_health_v1.Health_Check_FullMethodName

// optionsMethod is the one call made on a plugin socket:
// GetDevicePluginOptions takes Empty and changes nothing (the kubelet
// itself calls it when a plugin registers: ManagerImpl.PluginConnected).
var optionsMethod = pluginapi.DevicePlugin_GetDevicePluginOptions_FullMethodName

// readSocketDir lists dir and talks to every socket in it, all at once.
func readSocketDir(ctx context.Context, root *hostfs.Root, dir string, timeout time.Duration) (reg *Socket, plugins []*Socket, err error) {
	names, err := root.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var all []*Socket
	for _, name := range names {
		if name == CheckpointName {
			continue
		}
		p := path.Join(dir, name)
		n, err := root.Lstat(p)
		if err != nil {
			continue // gone since the listing
		}
		s := &Socket{Path: p, Name: name, Type: n.Type.String()}
		switch n.Type {
		case hostfs.TypeSocket:
		case hostfs.TypeSymlink:
			s.Target = n.Target
		case hostfs.TypeRegular:
			if !socketLike(name) {
				continue
			}
			s.Dial = Dial{Answer: NotSocket}
		default:
			continue // directories and other files: not the kubelet's
		}
		if m, err := root.ModTime(p); err == nil {
			s.ModTime = m
		}
		if name == KubeletSocketName {
			reg = s
		} else {
			s.Resource, s.ResourceHint = resourceFromSocketName(name)
			plugins = append(plugins, s)
		}
		all = append(all, s)
	}
	var wg sync.WaitGroup
	for _, s := range all {
		if s.Dial.Answer == NotSocket {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s == reg {
				dialKubelet(ctx, root, s, timeout)
			} else {
				dialPlugin(ctx, root, s, timeout)
			}
		}()
	}
	wg.Wait()
	if reg != nil && !reg.ModTime.IsZero() {
		for _, s := range plugins {
			if !s.ModTime.IsZero() && s.ModTime.Before(reg.ModTime) {
				s.OlderThanKubelet = true
			}
		}
	}
	return reg, plugins, nil
}

// socketLike: regular files with these names stand where a socket should
// be. Plugins name their sockets NAME.sock (NVIDIA, Intel, the kubelet's
// own sample plugin) or, through kubevirt's device-plugin-manager (AMD),
// NAMESPACE_NAME without a suffix.
func socketLike(name string) bool {
	return strings.HasSuffix(name, ".sock") || strings.Contains(name, "_") && strings.Contains(name, ".")
}

func dialKubelet(ctx context.Context, root *hostfs.Root, s *Socket, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, d := newClient(ctx, root, s.Path)
	if d != nil {
		d.Method = healthMethod
		s.Dial = *d
		return
	}
	defer c.Close()
	resp, err := grpc_health_v1.NewHealthClient(c.cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	s.Dial = c.result(healthMethod, err)
	if err == nil {
		s.Health = resp.GetStatus().String()
	}
}

func dialPlugin(ctx context.Context, root *hostfs.Root, s *Socket, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, d := newClient(ctx, root, s.Path)
	if d != nil {
		d.Method = optionsMethod
		s.Dial = *d
		return
	}
	defer c.Close()
	o, err := pluginapi.NewDevicePluginClient(c.cc).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	s.Dial = c.result(optionsMethod, err)
	if err == nil {
		s.Options = &PluginOptions{PreStartRequired: o.GetPreStartRequired(),
			GetPreferredAllocationAvailable: o.GetGetPreferredAllocationAvailable()}
	}
}
