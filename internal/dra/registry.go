package dra

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
)

// ServiceSocketName is the DRA service socket's file name in a driver's
// data directory, as kubeletplugin (k8s.io/dynamic-resource-allocation)
// makes it: PluginDataDirectoryPath/dra.sock.
const ServiceSocketName = "dra.sock"

// The plugin types a registration's GetInfo names
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1, constants.go). Spelled
// here so that this package links none of the generated API (a test holds
// them equal to its constants).
const (
	TypeDRA          = "DRAPlugin"
	TypeCSI          = "CSIPlugin"
	TypeDevicePlugin = "DevicePlugin"
)

// KubeletServices are the DRA gRPC services a v1.37 kubelet speaks, in its
// order of preference (servicesSupportedByKubelet in pkg/kubelet/cm/dra/
// plugin/dra_plugin.go). A DRA registration whose SupportedVersions names
// none of them is rejected (validateSupportedServices in
// dra_plugin_manager.go: "none of services supported by the plugin ... are
// supported by the kubelet"). The names are DRAPluginService of
// k8s.io/kubelet/pkg/apis/dra/v1 and v1beta1 (types.go), written out here
// because those packages pull in apimachinery's runtime for their
// conversions; a test of internal/dramock, which imports them, holds the
// two equal.
var KubeletServices = []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}

// Registration is one entry of the plugins_registry directory.
type Registration struct {
	Path string `json:"path"`
	Name string `json:"name"`
	// Type is what lstat says the entry is ("socket", "regular file",
	// "symlink"); only sockets are dialed, as the plugin watcher only acts
	// on sockets (util.IsUnixDomainSocket in plugin_watcher.go).
	Type    string    `json:"type"`
	ModTime time.Time `json:"mtime"`
	// OlderThanKubelet: the socket was bound before the running kubelet
	// started (KubeletStart). Unlike the device-plugin directory, this is
	// no fault by itself: the kubelet's plugin watcher walks the directory
	// when it starts and registers every socket it finds
	// (traversePluginDir in pkg/kubelet/pluginmanager/pluginwatcher/
	// plugin_watcher.go), so a driver need not re-register. It is kept as
	// evidence beside a dead or silent socket.
	OlderThanKubelet bool `json:"older_than_kubelet,omitempty"`
	// Dial is what GetInfo gave.
	Dial kubelet.Dial `json:"dial"`
	// Info is the GetInfo answer.
	Info *PluginInfo `json:"info,omitempty"`
	// Endpoint is the service socket Info names (DRA and CSI plugins);
	// nil when GetInfo did not answer or named none.
	Endpoint *Endpoint `json:"endpoint,omitempty"`
	// Unsupported: a DRA registration whose SupportedVersions holds none
	// of KubeletServices; the kubelet rejects it.
	Unsupported bool `json:"unsupported,omitempty"`
}

// PluginInfo is a registration's GetInfo answer.
type PluginInfo = rpc.RegistrationInfo

// Endpoint is the socket a registration names, connected to once.
type Endpoint struct {
	Path string `json:"path"`
	// Dial is the connect: Connected, Refused, Gone (no such file),
	// NotSocket... Absolute is false for an endpoint that is not a
	// host-absolute path: then nothing was dialed.
	Dial     kubelet.Dial `json:"dial"`
	Absolute bool         `json:"absolute"`
}

// Live reports whether the registration is one the kubelet can use now:
// GetInfo answered and, for DRA and CSI, the endpoint accepted a
// connection.
func (r *Registration) Live() bool {
	if r.Dial.Answer != kubelet.Answered || r.Info == nil {
		return false
	}
	if r.Endpoint != nil {
		return r.Endpoint.Dial.Answer == Connected
	}
	return r.Info.Type != TypeDRA && r.Info.Type != TypeCSI
}

// readRegistry lists dir and asks every socket in it GetInfo, all at once.
func readRegistry(ctx context.Context, root *hostfs.Root, dir string, caller rpc.Caller, timeout time.Duration) ([]*Registration, error) {
	names, err := root.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var regs []*Registration
	for _, name := range names {
		p := path.Join(dir, name)
		n, err := root.Lstat(p)
		if err != nil {
			continue // gone since the listing
		}
		r := &Registration{Path: p, Name: name, Type: n.Type.String()}
		switch n.Type {
		case hostfs.TypeSocket:
		case hostfs.TypeRegular:
			if !strings.HasSuffix(name, ".sock") {
				continue
			}
			r.Dial = kubelet.Dial{Answer: kubelet.NotSocket, Method: getInfoMethod}
		default:
			// Directories: the watcher walks them too; drivers put
			// their registration sockets at the top (kubeletplugin's
			// RegistrarDirectoryPath default), so one level is read.
			continue
		}
		if m, err := root.ModTime(p); err == nil {
			r.ModTime = m
		}
		regs = append(regs, r)
	}
	var calls []rpc.Call
	var to []*Registration
	for _, r := range regs {
		if r.Dial.Answer != kubelet.NotSocket {
			calls = append(calls, rpc.Call{Path: r.Path, Method: getInfoMethod})
			to = append(to, r)
		}
	}
	if len(calls) > 0 {
		replies := caller.Call(ctx, root, calls, timeout)
		if len(replies) != len(calls) {
			replies = rpc.NotDialedReplies(calls, fmt.Errorf("%w: a reply per call was not given", rpc.ErrInternal))
		}
		var wg sync.WaitGroup
		for i, r := range to {
			r.Dial, r.Info = replies[i].Dial, replies[i].Info
			if r.Info != nil {
				wg.Go(func() { fileInfo(ctx, root, r, timeout) })
			}
		}
		wg.Wait()
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].Name < regs[j].Name })
	return regs, nil
}

// fileInfo judges a registration's GetInfo answer and connects once to
// the endpoint it names.
func fileInfo(ctx context.Context, root *hostfs.Root, r *Registration, timeout time.Duration) {
	if r.Info.Type == TypeDRA {
		r.Unsupported = !slices.ContainsFunc(r.Info.SupportedVersions, func(v string) bool { return slices.Contains(KubeletServices, v) })
	}
	if r.Info.Endpoint == "" || r.Info.Type == TypeDevicePlugin {
		// A device plugin's registration through this directory names
		// its socket the same way, but the device manager handles it;
		// CSI and DRA name the service socket the kubelet dials.
		if r.Info.Type != TypeDRA && r.Info.Type != TypeCSI {
			return
		}
	}
	ep := &Endpoint{Path: r.Info.Endpoint, Absolute: strings.HasPrefix(r.Info.Endpoint, "/")}
	if ep.Absolute {
		// The kubelet dials the endpoint as a host path (the plugin
		// and the kubelet share /var/lib/kubelet/plugins through a
		// hostPath mount); through the root here.
		ep.Dial = connectOnly(ctx, root, path.Clean(ep.Path), timeout)
	} else {
		ep.Dial = kubelet.Dial{Answer: kubelet.Failed, Err: "endpoint " + quote(ep.Path) + " is not an absolute path"}
	}
	r.Endpoint = ep
}

func quote(s string) string { return "\"" + s + "\"" }

// DriverDir is one directory under the kubelet's plugins directory: a
// driver's data directory (kubeletplugin's PluginDataDirectoryPath, by
// default /var/lib/kubelet/plugins/DRIVER, holding its service socket
// dra.sock) or a CSI driver's.
type DriverDir struct {
	Path string `json:"path"`
	Name string `json:"name"`
	// Sockets are the sockets in the directory (one level), each
	// connected to once.
	Sockets []DirSocket `json:"sockets,omitempty"`
	// RegisteredBy names the registration sockets whose GetInfo names this
	// driver or an endpoint in this directory; Live whether one of them is
	// live (Registration.Live).
	RegisteredBy []string `json:"registered_by,omitempty"`
	Live         bool     `json:"live"`
	// RegistryUnknown: the registration directory could not be read (or
	// was not captured): whether a registration names the driver is not
	// known.
	RegistryUnknown bool `json:"registry_unknown,omitempty"`
}

// DirSocket is a socket of a driver's directory.
type DirSocket struct {
	Path    string       `json:"path"`
	ModTime time.Time    `json:"mtime"`
	Dial    kubelet.Dial `json:"dial"`
}

// Serving reports whether a socket of the directory accepts connections:
// a driver runs there.
func (d *DriverDir) Serving() bool {
	for _, s := range d.Sockets {
		if s.Dial.Answer == Connected {
			return true
		}
	}
	return false
}

// NotRegistered: the directory has a socket that accepts connections (a
// driver serves there), the registrations could be read, and no live one
// names it. A directory without a serving socket is a leftover, not a
// driver.
func (d *DriverDir) NotRegistered() bool { return d.Serving() && !d.Live && !d.RegistryUnknown }

// NotRunning: the directory is a DRA driver's (it holds the service
// socket ServiceSocketName, or is named for a DRA driver the vendor table
// knows, and no other kind of driver's), every socket in it refuses
// connections, and the registrations could be read and none names it:
// the driver is installed (its DaemonSet made the directory and bound
// the socket) and its kubelet plugin is not running. A directory that
// some registration names is judged by that registration's finding; a
// socket that could not be tried leaves it unknown.
func (d *DriverDir) NotRunning() bool {
	if d.RegistryUnknown || len(d.RegisteredBy) > 0 || len(d.Sockets) == 0 || !d.isDRA() {
		return false
	}
	for _, s := range d.Sockets {
		if s.Dial.Answer != kubelet.Refused {
			return false
		}
	}
	return true
}

// isDRA: the directory holds a DRA service socket, or is named for a DRA
// driver of the vendor table and holds no CSI socket.
func (d *DriverDir) isDRA() bool {
	named := false
	if _, ok := kubelet.VendorFor(d.Name); ok {
		named = true
	}
	for _, s := range d.Sockets {
		switch path.Base(s.Path) {
		case ServiceSocketName:
			return true
		case "csi.sock":
			return false
		}
	}
	return named
}

// readDriverDirs lists the plugins directory and connects to the sockets
// of each driver directory.
func readDriverDirs(ctx context.Context, root *hostfs.Root, dir string, timeout time.Duration) ([]*DriverDir, error) {
	names, err := root.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var dirs []*DriverDir
	for _, name := range names {
		p := path.Join(dir, name)
		n, err := root.Lstat(p)
		if err != nil || n.Type != hostfs.TypeDir {
			continue
		}
		dd := &DriverDir{Path: p, Name: name}
		entries, err := root.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range entries {
			sp := path.Join(p, e)
			sn, err := root.Lstat(sp)
			if err != nil || sn.Type != hostfs.TypeSocket {
				continue
			}
			s := DirSocket{Path: sp}
			if m, err := root.ModTime(sp); err == nil {
				s.ModTime = m
			}
			dd.Sockets = append(dd.Sockets, s)
		}
		dirs = append(dirs, dd)
	}
	var wg sync.WaitGroup
	for _, dd := range dirs {
		for i := range dd.Sockets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dd.Sockets[i].Dial = connectOnly(ctx, root, dd.Sockets[i].Path, timeout)
			}()
		}
	}
	wg.Wait()
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].Name < dirs[j].Name })
	return dirs, nil
}

// linkDirs marks each driver directory registered by the registrations
// that name it: by driver name, or by an endpoint inside it.
func linkDirs(dirs []*DriverDir, regs []*Registration, known bool) {
	for _, d := range dirs {
		d.RegisteredBy, d.Live, d.RegistryUnknown = nil, false, !known
		for _, r := range regs {
			if !r.names(d) {
				continue
			}
			d.RegisteredBy = append(d.RegisteredBy, r.Path)
			if r.Live() && !r.Unsupported {
				d.Live = true
			}
		}
	}
}

func (r *Registration) names(d *DriverDir) bool {
	if r.Info != nil {
		if r.Info.Name == d.Name {
			return true
		}
		if ep := r.Info.Endpoint; strings.HasPrefix(ep, "/") && strings.HasPrefix(path.Clean(ep), d.Path+"/") {
			return true
		}
	}
	// A registration that did not answer is named by kubeletplugin's
	// convention: DRIVER-reg.sock, or DRIVER-UID-reg.sock in a rolling
	// update (RollingUpdateRegistrarSocketFile in kubeletplugin).
	return r.Info == nil && (r.Name == d.Name+"-reg.sock" ||
		strings.HasPrefix(r.Name, d.Name+"-") && strings.HasSuffix(r.Name, "-reg.sock"))
}
