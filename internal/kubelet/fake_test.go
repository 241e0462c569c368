package kubelet

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// calls records every gRPC method a test server was asked, so tests can
// hold that Read calls nothing that changes state.
type calls struct {
	mu sync.Mutex
	m  []string
}

func (c *calls) add(m string) {
	c.mu.Lock()
	c.m = append(c.m, m)
	c.mu.Unlock()
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.m...)
	sort.Strings(out)
	return out
}

// serve starts a gRPC server on a unix socket at p, with every method
// call recorded in c, and stops it when the test ends.
func serve(t testing.TB, p string, c *calls, register func(*grpc.Server)) {
	t.Helper()
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			c.add(info.FullMethod)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			c.add(info.FullMethod)
			return h(srv, ss)
		}),
		// Unknown services too: the kubelet's server answers those
		// Unimplemented, and the test must see the call.
		grpc.UnknownServiceHandler(func(srv any, ss grpc.ServerStream) error {
			// The stream interceptor has recorded the call.
			m, _ := grpc.MethodFromServerStream(ss)
			return errUnimplemented(m)
		}),
	)
	register(s)
	go s.Serve(l)
	t.Cleanup(s.Stop)
}

// fakeKubelet is the kubelet's registration service as the device
// manager serves it: Registration only. Register must never be called.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
}

func (fakeKubelet) Register(context.Context, *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	panic("Register called: Read must never register")
}

// fakePlugin is a device plugin: GetDevicePluginOptions answers; the rest
// are the API's Unimplemented stubs.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts *pluginapi.DevicePluginOptions
}

func (p fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

type fakePodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	list  *podresourcesapi.ListPodResourcesResponse
	alloc *podresourcesapi.AllocatableResourcesResponse
}

func (f fakePodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	return f.list, nil
}

func (f fakePodResources) GetAllocatableResources(context.Context, *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	if f.alloc == nil {
		return nil, errUnimplemented("GetAllocatableResources")
	}
	return f.alloc, nil
}

// shortTemp is a temporary directory with a short path: a unix socket's
// path must fit in sun_path (108 bytes) to be bound.
func shortTemp(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// kubeletTree makes DIR/var/lib/kubelet/{device-plugins,pod-resources}.
func kubeletTree(t testing.TB) (root, dpDir, prDir string) {
	t.Helper()
	root = shortTemp(t)
	dpDir = filepath.Join(root, "var/lib/kubelet/device-plugins")
	prDir = filepath.Join(root, "var/lib/kubelet/pod-resources")
	for _, d := range []string{dpDir, prDir, filepath.Join(root, "proc/sys/kernel/random")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root, dpDir, prDir
}

// deadSocket leaves a socket file that nobody listens on, as a plugin
// that exited without removing it does.
func deadSocket(t testing.TB, p string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}

func setMtime(t testing.TB, p string, m time.Time) {
	t.Helper()
	if err := os.Chtimes(p, m, m); err != nil {
		t.Fatal(err)
	}
}

// listenSilent accepts connections and never answers: a server stuck, or
// one that is not gRPC.
func listenSilent(t testing.TB, p string) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return l
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
