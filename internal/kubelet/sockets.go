package kubelet

import (
	"path"
	"strings"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
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

// listSocketDir lists dir: kubelet.sock and the plugins' sockets; nothing
// is called (socketCalls makes the calls).
func listSocketDir(root *hostfs.Root, dir string) (reg *Socket, plugins []*Socket, err error) {
	names, err := root.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
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
	}
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

// socketCalls are the calls on the listed sockets: Health.Check on
// kubelet.sock, GetDevicePluginOptions on a plugin's; what answers is
// filed on the socket by the returned function.
func socketCalls(reg *Socket, plugins []*Socket) ([]rpc.Call, func([]rpc.Reply)) {
	var calls []rpc.Call
	var to []*Socket
	for _, s := range append([]*Socket{reg}, plugins...) {
		if s == nil || s.Dial.Answer == NotSocket {
			continue
		}
		m := rpc.MethodGetDevicePluginOptions
		if s == reg {
			m = rpc.MethodHealthCheck
		}
		calls = append(calls, rpc.Call{Path: s.Path, Method: m})
		to = append(to, s)
	}
	return calls, func(replies []rpc.Reply) {
		for i, r := range replies {
			to[i].Dial, to[i].Health, to[i].Options = r.Dial, r.Health, r.Options
		}
	}
}
