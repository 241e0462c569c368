package deviceplugin

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// faultPlugin is a device plugin for the tester's tests that does one
// thing wrong, as its fields say; with none set it is a correct plugin:
// two Healthy devices fp-0 and fp-1 on NUMA node 0, one container
// response per request, registered once it serves, and again (its socket
// made again first) whenever kubelet.sock is made again.
type faultPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	// lists are the lists ListAndWatch sends, 50 ms apart; the last
	// stays current (default: one list, fp-0 and fp-1 Healthy).
	lists [][]*pluginapi.Device
	// endStream: ListAndWatch returns this after its lists (nil: it
	// stays open); endFirstOnly: only the first stream does, and the
	// plugin then registers again, as one that restarts its server.
	endStream    error
	endFirstOnly bool
	// failStream: ListAndWatch fails at once, before any list.
	failStream error
	// opts is GetDevicePluginOptions' answer; regOpts what Register
	// sends (default: opts); optsErr fails GetDevicePluginOptions.
	opts, regOpts *pluginapi.DevicePluginOptions
	optsErr       error
	// allocate answers Allocate (default: one response per request).
	allocate func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)
	// preferred answers GetPreferredAllocation (default: unimplemented).
	preferred func(*pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error)
	// registerTwice: a second Register right after the first was
	// accepted, from the same socket.
	registerTwice bool
	// keepSocketGone: after kubelet.sock is made again, register again
	// without making the socket again (the kubelet removed it).
	keepSocketGone bool
	// reregisterDelay: after kubelet.sock is made again, wait this long
	// before serving and registering again (a plugin that polls).
	reregisterDelay time.Duration

	dir, name, resource string
	mu                  sync.Mutex
	srv                 *grpc.Server
	streams             int
	regErrs             []error
}

func newFault(dir string) *faultPlugin {
	return &faultPlugin{dir: dir, name: "fault.sock", resource: "fault.example.com/dev", opts: &pluginapi.DevicePluginOptions{}}
}

func fpDevices(health ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for i, h := range health {
		out = append(out, &pluginapi.Device{ID: "fp-" + string(rune('0'+i)), Health: h,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}}}})
	}
	return out
}

func (f *faultPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	if f.optsErr != nil {
		return nil, f.optsErr
	}
	return f.opts, nil
}

func (f *faultPlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if f.failStream != nil {
		return f.failStream
	}
	f.mu.Lock()
	f.streams++
	n := f.streams
	f.mu.Unlock()
	lists := f.lists
	if lists == nil {
		lists = [][]*pluginapi.Device{fpDevices(pluginapi.Healthy, pluginapi.Healthy)}
	}
	for i, l := range lists {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: l}); err != nil {
			return err
		}
	}
	if f.endStream != nil && (!f.endFirstOnly || n == 1) {
		if f.endFirstOnly {
			// Registered again once the stream has ended, as a plugin
			// that restarted its server.
			go func() {
				time.Sleep(100 * time.Millisecond)
				f.register(context.Background())
			}()
		}
		if errors.Is(f.endStream, errReturnOK) {
			return nil
		}
		return f.endStream
	}
	<-s.Context().Done()
	return nil
}

// errReturnOK makes endStream a plain return from ListAndWatch.
var errReturnOK = errors.New("return nil")

func (f *faultPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	if f.allocate != nil {
		return f.allocate(req)
	}
	out := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		for _, id := range cr.DevicesIds {
			if !strings.HasPrefix(id, "fp-") {
				return nil, status.Errorf(codes.InvalidArgument, "unknown device %q", id)
			}
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"FP_DEVICES": strings.Join(cr.DevicesIds, ",")}})
	}
	return out, nil
}

func (f *faultPlugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	if f.preferred != nil {
		return f.preferred(req)
	}
	return nil, status.Error(codes.Unimplemented, "no preferred allocation")
}

func (f *faultPlugin) sock() string { return filepath.Join(f.dir, f.name) }

// serve listens on the socket (ListenUnix removes it on close).
func (f *faultPlugin) serve(t *testing.T) {
	t.Helper()
	if err := f.listen(); err != nil {
		t.Fatal(err)
	}
}

// listen serves on a new socket, the old server stopped first: closing
// its listener removes the file at the path if it has the inode it made,
// and a new socket may be given that inode number again.
func (f *faultPlugin) listen() error {
	f.stop()
	lis, err := ListenUnix(context.Background(), f.sock())
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, f)
	go srv.Serve(lis)
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	return nil
}

func (f *faultPlugin) stop() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

func (f *faultPlugin) register(ctx context.Context) error {
	conn, err := dialUnix(filepath.Join(f.dir, KubeletSocket))
	if err != nil {
		return err
	}
	defer conn.Close()
	opts := f.regOpts
	if opts == nil {
		opts = f.opts
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: f.name, ResourceName: f.resource, Options: opts})
	f.mu.Lock()
	f.regErrs = append(f.regErrs, err)
	f.mu.Unlock()
	return err
}

// run serves, registers (twice with registerTwice), and follows
// kubelet.sock as plugins do, by inotify: each one created is a restarted
// kubelet, which removed the socket; it is made again (unless
// keepSocketGone) and registered again.
func (f *faultPlugin) run(t *testing.T) {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(f.dir); err != nil {
		t.Fatal(err)
	}
	f.serve(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; w.Close(); f.stop() })
	go func() {
		defer close(done)
		if f.register(ctx) == nil && f.registerTwice {
			f.register(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Base(ev.Name) != KubeletSocket || !ev.Has(fsnotify.Create) {
					continue
				}
				if f.reregisterDelay > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(f.reregisterDelay):
					}
				}
				if !f.keepSocketGone && !exists(f.sock()) {
					if f.listen() != nil {
						continue
					}
				}
				f.register(ctx)
			}
		}
	}()
}

// testFault runs `plugin test` as the kubelet against f.
func testFault(t *testing.T, f *faultPlugin, o TestOptions) *TestResult {
	t.Helper()
	o.KubeletDir = f.dir
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Watch == 0 {
		o.Watch = 300 * time.Millisecond
	}
	if o.Root == nil {
		o.Root = hostWithNUMA0(t)
	}
	if o.Grace == 0 {
		o.Grace = 300 * time.Millisecond
	}
	return runTest(t, o, func() { f.run(t) })
}

func findings(r *TestResult, code string) []report.Finding {
	var out []report.Finding
	for _, f := range r.Findings {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

// wantDefects fails unless the WARN and FAIL codes are exactly want;
// PLUGIN_ALLOCATE_SLOW, a latency, is left out unless wanted: these
// plugins answer from memory, and only a loaded machine makes one slow.
func wantDefects(t *testing.T, r *TestResult, want ...string) {
	t.Helper()
	slices.Sort(want)
	got := defects(r)
	if !slices.Contains(want, CodeAllocateSlow) {
		got = slices.DeleteFunc(got, func(c string) bool { return c == CodeAllocateSlow })
	}
	if !slices.Equal(got, want) {
		t.Errorf("defects %v, want %v\n%s", got, want, dump(r))
	}
}

// The fault plugin with no fault is a plugin the kubelet keeps: nothing
// found, every step judged, a kubelet restart survived.
func TestFaultPluginHealthy(t *testing.T) {
	f := newFault(shortDir(t))
	r := testFault(t, f, TestOptions{Reregister: true})
	wantDefects(t, r)
	for _, c := range []string{CodeRegistered, CodeOptionsOK, CodeListed, CodeAllocateOK, CodeReregistered} {
		if !hasCode(r, c) {
			t.Errorf("no %s\n%s", c, dump(r))
		}
	}
}

// The kubelet answers a second Register from a socket it is connected to
// with "device plugin already connected" (manager.go PluginConnected).
func TestPluginTestRegisteredTwice(t *testing.T) {
	f := newFault(shortDir(t))
	f.registerTwice = true
	r := testFault(t, f, TestOptions{})
	wantDefects(t, r, CodeRegisteredTwice)
	fs := findings(r, CodeRegisteredTwice)
	if len(fs) != 1 || !strings.Contains(fs[0].Evidence[len(fs[0].Evidence)-1].Value, "device plugin already connected: "+f.sock()) {
		t.Errorf("the finding does not quote the kubelet's answer: %+v", fs)
	}
	f.mu.Lock()
	errs := slices.Clone(f.regErrs)
	f.mu.Unlock()
	if len(errs) != 2 || errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "device plugin already connected") {
		t.Errorf("the plugin's Register answers: %v, want accepted, then \"device plugin already connected\"", errs)
	}
}

// Once the kubelet's stream ended, it has disconnected the endpoint
// (PluginDisconnected): a Register from the same socket is accepted, and
// a plugin whose new stream stays open is healthy.
func TestPluginTestRegisterAfterStreamEnded(t *testing.T) {
	f := newFault(shortDir(t))
	f.endStream, f.endFirstOnly = errReturnOK, true
	r := testFault(t, f, TestOptions{Grace: 700 * time.Millisecond})
	wantDefects(t, r)
	f.mu.Lock()
	errs := slices.Clone(f.regErrs)
	f.mu.Unlock()
	if len(errs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Errorf("the plugin's Register answers: %v, want both accepted", errs)
	}
}

// A stream that ends after its list, with a status or none: the kubelet
// disconnects the plugin and marks every device unhealthy.
func TestPluginTestListAndWatchEnded(t *testing.T) {
	for _, c := range []struct {
		end  error
		says string
	}{
		{errReturnOK, "returned from ListAndWatch (status OK)"},
		{status.Error(codes.Internal, "planted stream failure"), "planted stream failure"},
	} {
		f := newFault(shortDir(t))
		f.endStream = c.end
		r := testFault(t, f, TestOptions{Reregister: true})
		wantDefects(t, r, CodeListAndWatchEnded)
		fs := findings(r, CodeListAndWatchEnded)
		if len(fs) != 1 || !strings.Contains(fs[0].Evidence[0].Value, c.says) {
			t.Errorf("%v: ended findings %+v", c.end, fs)
		}
	}
	// Dialled directly: the tester's own stream, judged the same way.
	g := newFault(shortDir(t))
	g.endStream = errReturnOK
	g.serve(t)
	t.Cleanup(g.stop)
	r, err := Test(context.Background(), TestOptions{Socket: g.sock(), Timeout: 2 * time.Second, Watch: 200 * time.Millisecond, Root: hostWithNUMA0(t)})
	if err != nil {
		t.Fatal(err)
	}
	wantDefects(t, r, CodeListAndWatchEnded)
}

// A stream that fails before any list, in both modes: a finding, not a
// wait.
func TestPluginTestListAndWatchFailsAtOnce(t *testing.T) {
	f := newFault(shortDir(t))
	f.failStream = status.Error(codes.Unavailable, "planted: no list")
	r := testFault(t, f, TestOptions{})
	wantDefects(t, r, CodeListAndWatchFailed)

	g := newFault(shortDir(t))
	g.failStream = errors.New("planted: no list")
	g.serve(t)
	t.Cleanup(g.stop)
	at := time.Now()
	r, err := Test(context.Background(), TestOptions{Socket: g.sock(), Timeout: 2 * time.Second, Root: hostWithNUMA0(t)})
	if err != nil {
		t.Fatal(err)
	}
	wantDefects(t, r, CodeListAndWatchFailed)
	if d := time.Since(at); d > 2*time.Second {
		t.Errorf("a stream that failed at once took %s to judge", d)
	}
}

// The list the kubelet holds is the last: a device left out of a later
// list is gone from capacity; one that went Unhealthy and stayed so
// leaves nothing allocatable, however Healthy the first list was.
func TestPluginTestJudgesTheLastList(t *testing.T) {
	f := newFault(shortDir(t))
	f.lists = [][]*pluginapi.Device{fpDevices(pluginapi.Healthy, pluginapi.Healthy), fpDevices(pluginapi.Healthy)}
	r := testFault(t, f, TestOptions{})
	wantDefects(t, r, CodeDeviceRemoved)
	if fs := findings(r, CodeDeviceRemoved); len(fs) != 1 || !strings.HasSuffix(fs[0].Subject, " fp-1") {
		t.Errorf("removed: %+v", fs)
	}

	g := newFault(shortDir(t))
	g.lists = [][]*pluginapi.Device{fpDevices(pluginapi.Healthy), fpDevices(pluginapi.Unhealthy)}
	r = testFault(t, g, TestOptions{})
	wantDefects(t, r, CodeNoHealthyDevices)

	h := newFault(shortDir(t))
	h.lists = [][]*pluginapi.Device{fpDevices(pluginapi.Healthy), {}}
	r = testFault(t, h, TestOptions{})
	wantDefects(t, r, CodeDeviceRemoved, CodeNoDevices)
}

// Topology: a node the host lacks, and a resource where some devices
// give a node and others none; both WARN, as the kubelet of 1.37 admits
// such devices under its default topology policy.
func TestPluginTestTopology(t *testing.T) {
	f := newFault(shortDir(t))
	devs := fpDevices(pluginapi.Healthy, pluginapi.Healthy)
	devs[1].Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 7}}}
	f.lists = [][]*pluginapi.Device{devs}
	r := testFault(t, f, TestOptions{})
	wantDefects(t, r, CodeNUMAUnknown)
	if fs := findings(r, CodeNUMAUnknown); len(fs) != 1 || fs[0].Status != report.Warn {
		t.Errorf("NUMA unknown: %+v", fs)
	}

	g := newFault(shortDir(t))
	devs = fpDevices(pluginapi.Healthy, pluginapi.Healthy)
	devs[1].Topology = nil
	g.lists = [][]*pluginapi.Device{devs}
	r = testFault(t, g, TestOptions{})
	wantDefects(t, r, CodeNUMAPartial)
	if fs := findings(r, CodeNUMAPartial); len(fs) != 1 || !strings.Contains(fs[0].Evidence[0].Value, "fp-1") {
		t.Errorf("NUMA partial: %+v", fs)
	}

	// A host whose NUMA nodes cannot be read: the nodes are not judged,
	// and the check says why.
	h := newFault(shortDir(t))
	r = testFault(t, h, TestOptions{Root: fixtureRoot(t, shortDir(t))})
	wantDefects(t, r)
	if !strings.Contains(dump(r), "NOT_RUN PLUGIN_CHECK_NOT_RUN numa:") {
		t.Errorf("no NUMA NOT_RUN on a host without NUMA nodes\n%s", dump(r))
	}
}

// The kubelet keeps GetDevicePluginOptions' answer, not Register's.
func TestPluginTestOptionsMismatch(t *testing.T) {
	f := newFault(shortDir(t))
	f.regOpts = &pluginapi.DevicePluginOptions{PreStartRequired: true}
	r := testFault(t, f, TestOptions{})
	wantDefects(t, r, CodeOptionsMismatch)
	// No PreStartContainer: the kubelet would call none.
	if hasCode(r, CodePreStartOK) || hasCode(r, CodePreStartFailed) {
		t.Errorf("PreStartContainer judged for a plugin whose GetDevicePluginOptions does not ask for it\n%s", dump(r))
	}

	// Options that cannot be read: the kubelet refuses the registration.
	g := newFault(shortDir(t))
	g.optsErr = status.Error(codes.Internal, "planted: no options")
	var regErr error
	r = runTest(t, TestOptions{KubeletDir: g.dir, Timeout: 2 * time.Second, Grace: 100 * time.Millisecond, Root: hostWithNUMA0(t)}, func() {
		g.serve(t)
		t.Cleanup(g.stop)
		regErr = g.register(context.Background())
	})
	wantDefects(t, r, CodeOptionsFailed)
	if regErr == nil || !strings.Contains(regErr.Error(), "failed to get device plugin options") {
		t.Errorf("the plugin's Register answer: %v", regErr)
	}
}

// Allocate as the kubelet takes it: no response fails, extra responses
// and a container path given twice are WARN (the kubelet uses the first),
// a failure for a container of two devices fails.
func TestPluginTestAllocateAnswers(t *testing.T) {
	one := func(cr *pluginapi.ContainerAllocateResponse) func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
		return func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{cr}}, nil
		}
	}
	// Each answer refuses an ID it never listed, as a correct plugin does.
	known := func(fn func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)) func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
		return func(req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			for _, id := range req.ContainerRequests[0].DevicesIds {
				if !strings.HasPrefix(id, "fp-") {
					return nil, status.Errorf(codes.InvalidArgument, "unknown device %q", id)
				}
			}
			return fn(req)
		}
	}
	root := hostWithNUMA0(t)
	for _, p := range []string{"dev/fa", "dev/fb"} {
		os.MkdirAll(filepath.Join(root.Dir(), "dev"), 0o755)
		if err := os.WriteFile(filepath.Join(root.Dir(), p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name     string
		allocate func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)
		want     []string
	}{
		{"none", func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			return &pluginapi.AllocateResponse{}, nil
		}, []string{CodeAllocateInvalid}},
		{"extra", func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{}, {}}}, nil
		}, []string{CodeAllocateExtra}},
		{"path-conflict", one(&pluginapi.ContainerAllocateResponse{Devices: []*pluginapi.DeviceSpec{
			{HostPath: "/dev/fa", ContainerPath: "/dev/f", Permissions: "rw"}, {HostPath: "/dev/fb", ContainerPath: "/dev/f", Permissions: "rw"}}}),
			[]string{CodeAllocatePathConflict}},
		{"same-path-twice", one(&pluginapi.ContainerAllocateResponse{Devices: []*pluginapi.DeviceSpec{
			{HostPath: "/dev/fa", ContainerPath: "/dev/f", Permissions: "rw"}, {HostPath: "/dev/fa", ContainerPath: "/dev/f", Permissions: "rw"}}}),
			nil},
		{"two-devices-refused", func(req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			if len(req.ContainerRequests[0].DevicesIds) > 1 {
				return nil, errors.New("planted: one device at a time")
			}
			return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{}}}, nil
		}, []string{CodeAllocateFailed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFault(shortDir(t))
			f.allocate = known(c.allocate)
			r := testFault(t, f, TestOptions{Root: root})
			wantDefects(t, r, c.want...)
		})
	}
}

// GetPreferredAllocation's wrong answer is a WARN: the kubelet fills the
// set itself and admits the pod.
func TestPluginTestPreferredWrongIsWarn(t *testing.T) {
	f := newFault(shortDir(t))
	f.opts = &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
	f.preferred = func(req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
		return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: []string{"fp-9"}}}}, nil
	}
	r := testFault(t, f, TestOptions{})
	wantDefects(t, r, CodePreferredWrong)
	if fs := findings(r, CodePreferredWrong); len(fs) != 1 || fs[0].Status != report.Warn {
		t.Errorf("preferred wrong: %+v", fs)
	}

	// Advertised and not answered: the kubelet fails the pod's admission.
	g := newFault(shortDir(t))
	g.opts = &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
	r = testFault(t, g, TestOptions{})
	wantDefects(t, r, CodePreferredFailed)
}

// A restarted kubelet removed the socket; a plugin that registers again
// without making it is refused (the dial back fails).
func TestPluginTestReregisterRefused(t *testing.T) {
	f := newFault(shortDir(t))
	f.keepSocketGone = true
	r := testFault(t, f, TestOptions{Reregister: true, Timeout: time.Second})
	wantDefects(t, r, CodeReregisterRefused)
	fs := findings(r, CodeReregisterRefused)
	if len(fs) != 1 || !strings.Contains(fs[0].Summary, "failed to dial device plugin") {
		t.Errorf("refused: %+v", fs)
	}
	if exists(f.sock()) {
		t.Errorf("the restart left the plugin's socket %s", f.sock())
	}
}

// junkServer accepts connections on a socket of its own and writes
// garbage (or, with hangUp, closes each at once).
func junkServer(t *testing.T, p string, hangUp bool) {
	t.Helper()
	lis, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			if !hangUp {
				c.Write([]byte("HTTP/1.0 200 OK\r\nnot a gRPC server\r\n\r\n"))
			}
			c.Close()
		}
	}()
}

// A socket that accepts and does not speak gRPC, registered or dialled:
// ENDPOINT_UNREACHABLE saying so, within the timeout, and no call made.
func TestPluginTestGarbageOnTheSocket(t *testing.T) {
	for _, hangUp := range []bool{false, true} {
		dir := shortDir(t)
		junk := filepath.Join(dir, "junk.sock")
		junkServer(t, junk, hangUp)
		at := time.Now()
		r, err := Test(context.Background(), TestOptions{Socket: junk, Timeout: 500 * time.Millisecond, Root: hostWithNUMA0(t)})
		if err != nil {
			t.Fatal(err)
		}
		wantDefects(t, r, CodeEndpointUnreachable)
		if !strings.Contains(dump(r), "never completes a gRPC handshake") {
			t.Errorf("hang-up %t: %s", hangUp, dump(r))
		}
		if d := time.Since(at); d > 3*time.Second {
			t.Errorf("hang-up %t: judged in %s", hangUp, d)
		}
	}

	// Registered: the kubelet's dial back fails the same way.
	dir := shortDir(t)
	junkServer(t, filepath.Join(dir, "junk.sock"), false)
	o := TestOptions{KubeletDir: dir, Timeout: 500 * time.Millisecond, Grace: 100 * time.Millisecond, Root: hostWithNUMA0(t), Reregister: true}
	var regErr error
	r := runTest(t, o, func() {
		f := newFault(dir)
		f.name = "junk.sock"
		regErr = f.register(context.Background())
	})
	wantDefects(t, r, CodeEndpointUnreachable)
	if regErr == nil || !strings.Contains(regErr.Error(), "failed to dial device plugin: context deadline exceeded") {
		t.Errorf("the plugin's Register answer: %v", regErr)
	}
	if !strings.Contains(dump(r), "never completes a gRPC handshake") {
		t.Errorf("%s", dump(r))
	}
}

// The fake kubelet forgets a plugin that registered twice, as the 1.37
// manager does (e2e/deviceplugin TestManagerForgetsAPluginThatRegisteredTwice
// holds the same of the real one): once the first stream has ended, a
// new instance on the same socket is refused too, until a restart.
func TestFakeKubeletForgetsAPluginThatRegisteredTwice(t *testing.T) {
	dir := shortDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := &fakeKubelet{dir: dir, timeout: 2 * time.Second, ctx: ctx, wake: make(chan struct{}, 1)}
	if err := k.start(); err != nil {
		t.Fatal(err)
	}
	defer k.stop(false)
	f := newFault(dir)
	f.serve(t)
	t.Cleanup(f.stop)
	if err := f.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.register(ctx); err == nil || !strings.Contains(err.Error(), "device plugin already connected: "+f.sock()) {
		t.Fatalf("second Register: %v", err)
	}
	f.stop() // the first stream ends
	deadline := time.Now().Add(5 * time.Second)
	for {
		regs := k.registrations()
		if r := regs[0]; r.lw != nil {
			if _, _, done := r.lw.state(); done {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the first stream never ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.serve(t)
	if err := f.register(ctx); err == nil || !strings.Contains(err.Error(), "device plugin already connected") {
		t.Fatalf("a new instance's Register: %v, want \"device plugin already connected\"", err)
	}
	// A restart forgets everything.
	k.stop(false)
	if err := k.start(); err != nil {
		t.Fatal(err)
	}
	if err := f.register(ctx); err != nil {
		t.Fatalf("Register after a restart: %v", err)
	}
}

// A plugin that comes back after the kubelet's restart later than
// --timeout (as one polling kubelet.sock every few seconds does) is what
// the kubelet accepts: PLUGIN_REREGISTER_SLOW, a WARN with the figure;
// one not back within the wait is PLUGIN_NO_REREGISTER.
func TestPluginTestReregisterSlow(t *testing.T) {
	f := newFault(shortDir(t))
	f.reregisterDelay = 1500 * time.Millisecond
	r := testFault(t, f, TestOptions{Reregister: true, Timeout: time.Second, ReregisterWait: 5 * time.Second})
	wantDefects(t, r, CodeReregisterSlow)
	if fs := findings(r, CodeReregisterSlow); len(fs) != 1 || !strings.Contains(fs[0].Summary, "over --timeout 1s") {
		t.Errorf("slow: %+v", fs)
	}

	g := newFault(shortDir(t))
	g.reregisterDelay = 3 * time.Second
	r = testFault(t, g, TestOptions{Reregister: true, Timeout: time.Second, ReregisterWait: 1500 * time.Millisecond})
	wantDefects(t, r, CodeNoReregister)
}
