package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// TestOptions configure `plugin test`.
type TestOptions struct {
	// KubeletDir: act as the kubelet, serving KubeletDir/kubelet.sock.
	// Socket: dial this plugin socket directly. Exactly one.
	KubeletDir string
	Socket     string
	// Timeout bounds each wait: for Register, for each call, for the
	// first list, for a health update (default 10s).
	Timeout time.Duration
	// Watch is how long ListAndWatch is observed for changes nobody made
	// (default 2s).
	Watch time.Duration
	// Root is the host: its NUMA nodes, the host paths and CDI specs
	// Allocate's answers name (default "/").
	Root *hostfs.Root
	// CDISpecDirs are the CDI spec directories (host paths, in priority
	// order) the CDI names Allocate answers must resolve in; nil: the
	// runtime's cdi_spec_dirs, else /etc/cdi and /var/run/cdi, as a
	// container on this host would get them (internal/cdi).
	CDISpecDirs []string
	// Trigger changes one device's health when called (the mock's
	// SIGUSR1); nil: the health-update latency is NOT_RUN.
	Trigger func(ctx context.Context) error
	// TriggerNote says what Trigger is, or why there is none.
	TriggerNote string
	// Reregister: in kubelet mode, recreate kubelet.sock afterwards and
	// expect the plugin to register again.
	Reregister bool
	// ReregisterWait is how long a Register is awaited after the restart
	// before PLUGIN_NO_REREGISTER (default ReregisterWaitDefault, never
	// less than Timeout); one after Timeout is PLUGIN_REREGISTER_SLOW.
	ReregisterWait time.Duration
	// AllocateSamples is how many Allocate calls are timed (default 100;
	// fewer when they are slow: at most 2 s are spent).
	AllocateSamples int
	// Grace is how long after the first Register others are awaited
	// (a second instance; default 700ms).
	Grace  time.Duration
	Logger *slog.Logger
}

// Measurement is one latency `plugin test` measured.
type Measurement struct {
	Name    string
	Samples []time.Duration
}

// Percentile is the p-th percentile (nearest rank) of the samples.
func (m Measurement) Percentile(p float64) time.Duration {
	if len(m.Samples) == 0 {
		return 0
	}
	s := slices.Clone(m.Samples)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestResult is what `plugin test` found.
type TestResult struct {
	Resources    []string
	Findings     []report.Finding
	Measurements []Measurement
}

func (r *TestResult) add(code, subject, summary string, ev ...report.Evidence) *report.Finding {
	c, _ := CodeOf(code)
	f := report.Finding{Check: "plugin." + strings.ToLower(strings.TrimPrefix(code, "PLUGIN_")), Code: code,
		Layer: report.LayerKube, Status: report.Status(c.Status), Subject: subject, Summary: summary, Evidence: ev}
	if f.Status == report.Warn || f.Status == report.Fail {
		f.Remediation = c.Remediation
	}
	r.Findings = append(r.Findings, f)
	return &r.Findings[len(r.Findings)-1]
}

// notRun records a check that could not run, why, and the fix that
// follows from it.
func (r *TestResult) notRun(check, subject string, why report.Why) {
	f := report.Finding{Check: "plugin." + check, Code: CodeNotRun, Layer: report.LayerKube,
		Subject: subject, Summary: check + ": " + why.Reason}
	f.CouldNotLook(why)
	r.Findings = append(r.Findings, f)
}

// afterFailure is the why of a check skipped for an earlier step's
// FAIL (or WARN): the last such finding, whose fix comes first.
func (r *TestResult) afterFailure(reason string) report.Why {
	for i := len(r.Findings) - 1; i >= 0; i-- {
		if f := r.Findings[i]; f.Status == report.Fail || f.Status == report.Warn {
			return report.AfterFix(reason, f)
		}
	}
	return report.Explain(reason, "The plugin's earlier answers above say what failed; fix the plugin, then run the test again.")
}

func ev(path, format string, a ...any) report.Evidence {
	return report.Evidence{Path: path, Value: fmt.Sprintf(format, a...)}
}

// registration is one Register the fake kubelet received.
type registration struct {
	at      time.Time
	req     *pluginapi.RegisterRequest
	err     error // what the kubelet would have answered
	dialErr error // the endpoint could not be dialled at Register time
	// opts is GetDevicePluginOptions' answer at Register time: what the
	// kubelet keeps (manager.go PluginConnected), whatever Register said.
	opts *pluginapi.DevicePluginOptions
	// alreadyConnected: refused because the kubelet's connection to the
	// same socket for the same resource was still open.
	alreadyConnected bool
	// forgotten: a later Register was refused as alreadyConnected, and
	// the kubelet, refusing it, dropped its client of this socket
	// (plugin/v1beta1/handler.go connectClient -> deregisterClient): the
	// end of this stream is never noticed and the endpoint stays
	// (runClient returns before PluginDisconnected). Under fakeKubelet.mu.
	forgotten bool
	// lw is the kubelet's own ListAndWatch stream on conn, started once
	// the registration is accepted, as the kubelet starts it
	// (plugin/v1beta1/handler.go connectClient -> runClient).
	lw       *lwRecorder
	conn     *grpc.ClientConn
	firstLWT time.Duration // Register -> first ListAndWatch response
}

// lwRecorder keeps a ListAndWatch stream's responses.
type lwRecorder struct {
	mu    sync.Mutex
	resps []lwResp
	err   error
	done  bool
	wake  chan struct{}
}

type lwResp struct {
	at   time.Time
	devs []*pluginapi.Device
}

func newRecorder() *lwRecorder { return &lwRecorder{wake: make(chan struct{}, 1)} }

func (l *lwRecorder) run(ctx context.Context, c pluginapi.DevicePluginClient) {
	s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	for err == nil {
		var r *pluginapi.ListAndWatchResponse
		r, err = s.Recv()
		if err != nil {
			break
		}
		l.mu.Lock()
		l.resps = append(l.resps, lwResp{at: time.Now(), devs: r.Devices})
		l.mu.Unlock()
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	l.mu.Lock()
	l.err, l.done = err, true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// wait returns the responses once there are more than n, or when the
// stream ended or the deadline passed.
func (l *lwRecorder) wait(ctx context.Context, n int, until time.Time) []lwResp {
	for {
		l.mu.Lock()
		rs, done := slices.Clone(l.resps), l.done
		l.mu.Unlock()
		if len(rs) > n || done {
			return rs
		}
		t := time.Until(until)
		if t <= 0 {
			return rs
		}
		select {
		case <-ctx.Done():
			return rs
		case <-l.wake:
		case <-time.After(t):
		}
	}
}

func (l *lwRecorder) state() ([]lwResp, error, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.resps), l.err, l.done
}

// fakeKubelet serves kubelet.sock and judges Register as the kubelet does.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir     string
	timeout time.Duration
	ctx     context.Context
	mu      sync.Mutex
	regs    []*registration
	// inflight counts Register calls being judged (dialling back can
	// take the kubelet's 10 s): a wait does not end while one is.
	inflight int
	// live is the kubelet's endpointStore: the accepted registrations
	// whose ListAndWatch stream is open, by resource and socket path
	// (manager.go PluginConnected adds one; PluginDisconnected, called
	// when the stream ends, removes it). A kubelet that restarts has none.
	live map[string]*registration
	wake chan struct{}
	srv  *grpc.Server
}

// versionSupported is the kubelet's version check of a Register
// (plugin/v1beta1/server.go isVersionCompatibleWithPlugin).
func versionSupported(v string) bool { return slices.Contains(pluginapi.SupportedVersions[:], v) }

// dialReady opens a gRPC connection to the unix socket p and waits until
// it is ready, as the kubelet's dial does (plugin/v1beta1/client.go dial:
// grpc.DialContext with WithBlock, which returns once the connection is
// READY: the socket accepted and gRPC's HTTP/2 handshake completed). A
// socket that accepts and never speaks HTTP/2 fails it when ctx ends.
func dialReady(ctx context.Context, p string) (*grpc.ClientConn, error) {
	conn, err := dialUnix(p)
	if err != nil {
		return nil, err
	}
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return conn, nil
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, s) {
			conn.Close()
			return nil, &notReadyError{err: ctx.Err(), state: s}
		}
	}
}

// notReadyError is a gRPC connection that did not become ready in time.
type notReadyError struct {
	err   error // the context's
	state connectivity.State
}

func (e *notReadyError) Error() string {
	return fmt.Sprintf("%v (the gRPC connection was %s)", e.err, e.state)
}

func (e *notReadyError) Unwrap() error { return e.err }

// dialErrorText is the kubelet's words for a failed dial
// (plugin/v1beta1/client.go dial: errFailedToDialDevicePlugin + the
// dial's error, which is the context's).
func dialErrorText(err error) string {
	var nr *notReadyError
	if errors.As(err, &nr) {
		err = nr.err
	}
	return "failed to dial device plugin: " + err.Error()
}

// Register follows plugin/v1beta1/server.go Register: the version, the
// resource name, then the endpoint dialled back (waiting as the kubelet
// does, client.go dial: 10 s, or the timeout when shorter, until the gRPC
// connection is ready) and its options read (manager.go PluginConnected),
// refused when the same socket of the same resource is connected already
// (PluginConnected: "device plugin already connected"), then ListAndWatch
// started. Register's own options are not used, as the kubelet does not.
func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	reg := &registration{at: time.Now(), req: r}
	k.mu.Lock()
	k.inflight++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.regs = append(k.regs, reg)
		k.inflight--
		k.mu.Unlock()
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}()
	if !versionSupported(r.Version) {
		reg.err = fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", r.Version, pluginapi.SupportedVersions)
		return nil, reg.err
	}
	if err := ValidateResourceName(r.ResourceName); err != nil {
		reg.err = fmt.Errorf("the ResourceName %q is invalid", r.ResourceName)
		return nil, reg.err
	}
	sock := filepath.Join(k.dir, r.Endpoint)
	ctx, cancel := context.WithTimeout(k.ctx, min(10*time.Second, k.timeout))
	defer cancel()
	// The socket accepting first (polled), then the gRPC handshake: a
	// connection refused now is retried at once, not after gRPC's backoff.
	if err := waitDial(ctx, sock); err != nil {
		reg.dialErr = err
		reg.err = errors.New(dialErrorText(err))
		return nil, reg.err
	}
	conn, err := dialReady(ctx, sock)
	if err != nil {
		reg.dialErr, reg.err = err, errors.New(dialErrorText(err))
		return nil, reg.err
	}
	c := pluginapi.NewDevicePluginClient(conn)
	opts, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		reg.err = fmt.Errorf("failed to get device plugin options: %v", err)
		return nil, reg.err
	}
	reg.opts = opts
	key := r.ResourceName + "\x00" + sock
	k.mu.Lock()
	if first, ok := k.live[key]; ok {
		first.forgotten = true
		k.mu.Unlock()
		// The kubelet keeps this connection open and unused; the tester
		// has no use for it either.
		conn.Close()
		reg.alreadyConnected = true
		reg.err = fmt.Errorf("device plugin already connected: %s", sock)
		return nil, reg.err
	}
	k.live[key] = reg
	k.mu.Unlock()
	reg.conn, reg.lw = conn, newRecorder()
	go func() {
		reg.lw.run(k.ctx, c)
		// The stream ended: the kubelet disconnects the endpoint
		// (plugin/v1beta1/handler.go runClient -> manager.go PluginDisconnected).
		k.mu.Lock()
		if k.live[key] == reg && !reg.forgotten {
			delete(k.live, key)
		}
		k.mu.Unlock()
	}()
	return &pluginapi.Empty{}, nil
}

// waitDial waits until a unix socket accepts a connection, as a blocking
// gRPC dial does.
func waitDial(ctx context.Context, p string) error {
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", p)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (k *fakeKubelet) start() error {
	p := filepath.Join(k.dir, KubeletSocket)
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s exists and is not a socket", p)
		}
		if c, err := net.DialTimeout("unix", p, 200*time.Millisecond); err == nil {
			c.Close()
			return fmt.Errorf("%s answers: a kubelet (or another plugin test) serves this directory; give a directory of your own", p)
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	// Mode SocketMode from the start, whatever the umask (ListenUnix);
	// closing it removes kubelet.sock while it is still this one.
	lis, err := ListenUnix(k.ctx, p)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.live = map[string]*registration{}
	k.mu.Unlock()
	k.srv = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go k.srv.Serve(lis)
	return nil
}

// stop ends the registration server and the connections to the plugins,
// as a kubelet that exits does; the server's listener, closed, removes
// kubelet.sock if it is ours (ListenUnix).
func (k *fakeKubelet) stop(graceful bool) {
	if k.srv != nil {
		if graceful {
			// Let a Register in flight have its answer.
			done := make(chan struct{})
			go func() { k.srv.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Second):
				k.srv.Stop()
			}
		} else {
			k.srv.Stop()
		}
		k.srv = nil
	}
	k.mu.Lock()
	for _, r := range k.regs {
		if r.conn != nil {
			r.conn.Close()
		}
	}
	k.live = map[string]*registration{}
	k.mu.Unlock()
}

// removeSockets removes, as a starting kubelet removes every socket of
// its directory (manager.go CleanupPluginDirectory), the sockets of the
// plugins that registered with the tester: only those, only sockets, and
// only entries of the directory itself, as the kubelet's cleanup skips
// what is not a socket and does not descend. It returns their names.
func (k *fakeKubelet) removeSockets() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range k.registrations() {
		p := filepath.Join(k.dir, r.req.Endpoint)
		if seen[p] || filepath.Dir(p) != filepath.Clean(k.dir) || filepath.Base(p) == KubeletSocket {
			continue
		}
		seen[p] = true
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		if os.Remove(p) == nil {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

func (k *fakeKubelet) registrations() []*registration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.regs)
}

// waitRegs waits until more than n registrations came, or the deadline.
func (k *fakeKubelet) waitRegs(ctx context.Context, n int, until time.Time) []*registration {
	for {
		k.mu.Lock()
		rs, inflight := slices.Clone(k.regs), k.inflight
		k.mu.Unlock()
		if len(rs) > n {
			return rs
		}
		t := time.Until(until)
		if t <= 0 && inflight == 0 {
			return rs
		}
		if t <= 0 {
			t = 20 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return rs
		case <-k.wake:
		case <-time.After(t):
		}
	}
}

// Test runs the contract checks against a plugin.
func Test(ctx context.Context, o TestOptions) (*TestResult, error) {
	if (o.KubeletDir == "") == (o.Socket == "") {
		return nil, errors.New("give exactly one of a kubelet directory and a socket")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Watch <= 0 {
		o.Watch = 2 * time.Second
	}
	if o.AllocateSamples <= 0 {
		o.AllocateSamples = 100
	}
	if o.Grace <= 0 {
		o.Grace = 700 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Root == nil {
		r, err := hostfs.New("/")
		if err != nil {
			return nil, err
		}
		o.Root = r
	}
	res := &TestResult{}
	if o.Socket != "" {
		t := &tester{o: o, res: res, subject: o.Socket}
		t.contract(ctx, o.Socket, nil)
		res.notRun("register", o.Socket, report.Input("--device-plugin-socket dials the plugin directly: registration is checked with --device-plugin-dir",
			"--device-plugin-dir DIR instead of --device-plugin-socket: the tester then serves DIR/kubelet.sock as the kubelet does, and the plugin registers with it"))
		return res, nil
	}
	return testAsKubelet(ctx, o, res)
}

func testAsKubelet(ctx context.Context, o TestOptions, res *TestResult) (*TestResult, error) {
	if err := os.MkdirAll(o.KubeletDir, 0o750); err != nil {
		return nil, err
	}
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	k := &fakeKubelet{dir: o.KubeletDir, timeout: o.Timeout, ctx: kctx, wake: make(chan struct{}, 1)}
	if err := k.start(); err != nil {
		return nil, err
	}
	defer k.stop(true)
	start := time.Now()
	kubeletSock := filepath.Join(o.KubeletDir, KubeletSocket)
	regs := k.waitRegs(ctx, 0, start.Add(o.Timeout))
	if len(regs) == 0 {
		res.add(CodeNotRegistered, kubeletSock, fmt.Sprintf("no plugin called Register on %s within %s", kubeletSock, o.Timeout),
			ev(kubeletSock, "served from %s for %s", start.Format(time.RFC3339), o.Timeout))
		return res, nil
	}
	// A second instance, or a retry, may follow.
	regs = k.waitRegs(ctx, 1<<30, time.Now().Add(o.Grace))
	byRes := map[string][]*registration{}
	var names []string
	for _, r := range regs {
		n := r.req.ResourceName
		if _, ok := byRes[n]; !ok {
			names = append(names, n)
		}
		byRes[n] = append(byRes[n], r)
	}
	res.Resources = names
	// Every resource is checked on the kubelet's own connection first;
	// then one restart of the kubelet, which every one must survive.
	var again []string
	for _, name := range names {
		rs := byRes[name]
		t := &tester{o: o, res: res, subject: name}
		last := t.registrationFindings(ctx, rs, start)
		sock := filepath.Join(o.KubeletDir, last.req.Endpoint)
		answered := t.contract(ctx, sock, last)
		switch {
		case !o.Reregister:
		case answered && last.err == nil:
			again = append(again, name)
		case answered:
			// A restart is judged only after a registration the kubelet
			// accepted: until then the refusal above is what a node shows.
			res.notRun("reregistered", name, res.afterFailure("skipped: the kubelet refused the plugin's registration"))
		default:
			res.notRun("reregistered", name, res.afterFailure("skipped: the plugin's endpoint did not answer the contract checks"))
		}
	}
	if len(again) > 0 {
		reregistration(ctx, o, res, k, again)
	}
	return res, nil
}

type tester struct {
	o       TestOptions
	res     *TestResult
	subject string
	crashed bool
	// unreachable: registration found the endpoint unreachable after
	// waiting for it; the contract checks have nothing to dial.
	unreachable bool
	// ended: PLUGIN_LISTANDWATCH_ENDED was reported.
	ended bool
}

// registrationFindings judges the Register calls of one resource and
// returns the one the kubelet would use (the last accepted, else the
// last).
func (t *tester) registrationFindings(ctx context.Context, rs []*registration, start time.Time) *registration {
	kubeletSock := filepath.Join(t.o.KubeletDir, KubeletSocket)
	var accepted []*registration
	for _, r := range rs {
		if r.err == nil {
			accepted = append(accepted, r)
		}
	}
	last := rs[len(rs)-1]
	if len(accepted) > 0 {
		last = accepted[len(accepted)-1]
	}
	r := last
	regEv := ev(kubeletSock, "Register{version %q, endpoint %q, resource %q, options %s} after %s", r.req.Version, r.req.Endpoint, r.req.ResourceName, optString(r.req.Options), r.at.Sub(start).Round(time.Millisecond))
	switch {
	case !versionSupported(r.req.Version):
		t.res.add(CodeAPIVersion, t.subject, fmt.Sprintf("registered with API version %q; the kubelet supports %q only", r.req.Version, pluginapi.Version),
			regEv, ev("", "the kubelet answers: %v", r.err))
	case ValidateResourceName(r.req.ResourceName) != nil:
		t.res.add(CodeResourceNameInvalid, t.subject, fmt.Sprintf("resource name %q is not a valid extended resource name", r.req.ResourceName),
			regEv, ev("", "%v", ValidateResourceName(r.req.ResourceName)))
	case r.dialErr != nil:
		// Did it answer later? Then it registered before it served.
		sock := filepath.Join(t.o.KubeletDir, r.req.Endpoint)
		wctx, cancel := context.WithTimeout(ctx, t.o.Timeout)
		err := waitDial(wctx, sock)
		accepted := err == nil
		if err == nil {
			var conn *grpc.ClientConn
			if conn, err = dialReady(wctx, sock); err == nil {
				conn.Close()
			}
		}
		cancel()
		switch {
		case err == nil:
			t.res.add(CodeRegisterBeforeServe, t.subject, fmt.Sprintf("Register came before %s answered; it answered only later", sock),
				regEv, ev(sock, "not ready during Register: %v", r.dialErr), ev("", "the kubelet answers: %v", r.err))
		case accepted:
			t.unreachable = true
			t.res.add(CodeEndpointUnreachable, t.subject, fmt.Sprintf("the registered endpoint %s accepts connections and never completes a gRPC handshake", sock),
				regEv, ev(sock, "during Register: %v; after it, for %s: %v", r.dialErr, t.o.Timeout, err), ev("", "the kubelet answers: %v", r.err))
		default:
			t.unreachable = true
			t.res.add(CodeEndpointUnreachable, t.subject, fmt.Sprintf("the registered endpoint %s never answered", sock),
				regEv, ev(sock, "%v", r.dialErr))
		}
	case r.err != nil:
		t.res.add(CodeOptionsFailed, t.subject, "the kubelet would refuse the registration: "+r.err.Error(), regEv)
	default:
		t.res.add(CodeRegistered, t.subject, fmt.Sprintf("registered %s on %s", r.req.ResourceName, r.req.Endpoint), regEv)
	}
	eps := map[string]bool{}
	var epList []string
	for _, a := range accepted {
		if !eps[a.req.Endpoint] {
			eps[a.req.Endpoint] = true
			epList = append(epList, a.req.Endpoint)
		}
	}
	if len(epList) > 1 {
		var e []report.Evidence
		for _, a := range accepted {
			e = append(e, ev(kubeletSock, "Register of %s from endpoint %s after %s", a.req.ResourceName, a.req.Endpoint, a.at.Sub(start).Round(time.Millisecond)))
		}
		t.res.add(CodeDuplicateRegistration, t.subject, fmt.Sprintf("%d endpoints registered %s: %s", len(epList), t.subject, strings.Join(epList, ", ")), e...)
	}
	// A second Register from a socket the kubelet is connected to.
	for _, twice := range rs {
		if !twice.alreadyConnected {
			continue
		}
		e := []report.Evidence{}
		for _, a := range accepted {
			if a.req.Endpoint == twice.req.Endpoint && a.at.Before(twice.at) {
				e = append(e, ev(kubeletSock, "Register from endpoint %s after %s: accepted", a.req.Endpoint, a.at.Sub(start).Round(time.Millisecond)))
			}
		}
		e = append(e, ev(kubeletSock, "Register from endpoint %s after %s, its ListAndWatch still open: the kubelet answers: %v", twice.req.Endpoint, twice.at.Sub(start).Round(time.Millisecond), twice.err))
		t.res.add(CodeRegisteredTwice, t.subject, fmt.Sprintf("registered twice from %s; the kubelet refuses the second and forgets the first connection", twice.req.Endpoint), e...)
		break
	}
	// The options the kubelet keeps are GetDevicePluginOptions', not
	// Register's; a Register that sends none says nothing to compare.
	if r.err == nil && r.opts != nil && r.req.Options != nil && !sameOptions(r.opts, r.req.Options) {
		t.res.add(CodeOptionsMismatch, t.subject, fmt.Sprintf("Register sent options %s; GetDevicePluginOptions answers %s, which the kubelet uses", optString(r.req.Options), optString(r.opts)),
			regEv, ev(filepath.Join(t.o.KubeletDir, r.req.Endpoint), "GetDevicePluginOptions: %s", optString(r.opts)))
	}
	// Registration -> first ListAndWatch, on the kubelet's own stream.
	if last.lw != nil {
		rs := last.lw.wait(ctx, 0, last.at.Add(t.o.Timeout))
		if len(rs) > 0 {
			last.firstLWT = rs[0].at.Sub(last.at)
			t.res.Measurements = append(t.res.Measurements, Measurement{Name: "registration -> first ListAndWatch", Samples: []time.Duration{last.firstLWT}})
		}
	}
	return last
}

func sameOptions(a, b *pluginapi.DevicePluginOptions) bool {
	return a.PreStartRequired == b.PreStartRequired && a.GetPreferredAllocationAvailable == b.GetPreferredAllocationAvailable
}

func optString(o *pluginapi.DevicePluginOptions) string {
	if o == nil {
		return "{}"
	}
	return fmt.Sprintf("{preStartRequired %t, getPreferredAllocationAvailable %t}", o.PreStartRequired, o.GetPreferredAllocationAvailable)
}

// contract checks the plugin's calls on sock. It reports whether the
// endpoint answered (so that later steps make sense). In kubelet mode
// it uses the kubelet's own connection and ListAndWatch stream of the
// registration, as the kubelet opens one stream per registration and
// watches that one (plugin/v1beta1/client.go Run); with a socket, or
// when the registration was refused, a connection of its own.
func (t *tester) contract(ctx context.Context, sock string, reg *registration) bool {
	subj := t.subject
	if t.unreachable {
		return false
	}
	var (
		c         pluginapi.DevicePluginClient
		lw        *lwRecorder
		connected time.Time
	)
	if reg != nil && reg.conn != nil {
		c, lw, connected = pluginapi.NewDevicePluginClient(reg.conn), reg.lw, reg.at
	} else {
		dctx, cancel := context.WithTimeout(ctx, t.o.Timeout)
		err := waitDial(dctx, sock)
		var conn *grpc.ClientConn
		if err == nil {
			conn, err = dialReady(dctx, sock)
			if err != nil {
				cancel()
				t.res.add(CodeEndpointUnreachable, subj, fmt.Sprintf("%s accepts connections and never completes a gRPC handshake", sock),
					ev(sock, "accepted a connection; no gRPC connection ready within %s: %v", t.o.Timeout, err))
				return false
			}
		}
		cancel()
		if err != nil {
			if reg == nil || reg.dialErr == nil {
				t.res.add(CodeEndpointUnreachable, subj, fmt.Sprintf("%s does not accept connections", sock), ev(sock, "%v", err))
			}
			return false
		}
		defer conn.Close()
		c = pluginapi.NewDevicePluginClient(conn)
		lctx, lcancel := context.WithCancel(ctx)
		defer lcancel()
		lw = newRecorder()
		connected = time.Now()
		go lw.run(lctx, c)
	}
	cctx, cancel := context.WithTimeout(ctx, t.o.Timeout)
	opts, err := c.GetDevicePluginOptions(cctx, &pluginapi.Empty{})
	cancel()
	if err != nil {
		t.res.add(CodeOptionsFailed, subj, "GetDevicePluginOptions: "+err.Error(), ev(sock, "%v", err))
		return false
	}
	t.res.add(CodeOptionsOK, subj, "options "+optString(opts), ev(sock, "GetDevicePluginOptions: %s", optString(opts)))

	rs := lw.wait(ctx, 0, connected.Add(t.o.Timeout))
	if len(rs) == 0 {
		_, lerr, _ := lw.state()
		msg := fmt.Sprintf("no ListAndWatch response within %s", t.o.Timeout)
		if lerr != nil {
			msg = "ListAndWatch: " + lerr.Error()
		}
		t.res.add(CodeListAndWatchFailed, subj, msg, ev(sock, "%s", msg))
		return true
	}
	if reg == nil {
		t.res.Measurements = append(t.res.Measurements, Measurement{Name: "connection -> first ListAndWatch", Samples: []time.Duration{rs[0].at.Sub(connected)}})
	}

	// Watch for changes nobody made.
	watchEnd := time.Now().Add(t.o.Watch)
	for time.Now().Before(watchEnd) {
		cur, _, done := lw.state()
		if done || ctx.Err() != nil {
			break
		}
		lw.wait(ctx, len(cur), watchEnd)
	}
	all, _, _ := lw.state()
	// The lists are judged after the watch, as the kubelet holds them
	// then: a flapping plugin's list may catch every device Unhealthy
	// for a moment, which is its flapping (judged below), not a node
	// without a device to allocate.
	flapping, ids := transitions(all)
	laterHealthy := false
	for _, r := range all[1:] {
		laterHealthy = laterHealthy || len(healthyIDs(r.devs)) > 0
	}
	t.listFindings(sock, all, rs[0].at.Sub(connected), flapping >= 2 && laterHealthy)
	if flapping >= 2 {
		t.res.add(CodeHealthFlapping, subj, fmt.Sprintf("%d health changes in %s without a trigger (%s)", flapping, t.o.Watch, strings.Join(ids, ", ")),
			ev(sock, "%d ListAndWatch responses in %s", len(all), t.o.Watch))
	}
	t.streamEnded(sock, lw)

	t.healthUpdate(ctx, lw, sock)
	all, _, _ = lw.state()
	latest := all[len(all)-1].devs

	healthy := healthyIDs(latest)
	if opts.GetPreferredAllocationAvailable {
		t.preferredCheck(ctx, c, sock, healthy)
	} else {
		t.res.notRun("preferred", subj, report.Explain("the plugin does not advertise GetPreferredAllocation",
			"Nothing to do unless the plugin is meant to choose devices (NUMA or NVLink locality): one that implements GetPreferredAllocation sets GetPreferredAllocationAvailable in its options."))
	}
	allocated := t.allocateChecks(ctx, c, sock, healthy)
	if t.crashed {
		t.res.notRun("prestart", subj, t.res.afterFailure("skipped: the plugin died during Allocate"))
		return false
	}
	if opts.PreStartRequired {
		if len(allocated) == 0 {
			t.res.notRun("prestart", subj, t.res.afterFailure("no device was allocated to start a container with"))
		} else {
			pctx, cancel := context.WithTimeout(ctx, min(t.o.Timeout, pluginapi.KubeletPreStartContainerRPCTimeoutInSecs*time.Second))
			_, err := c.PreStartContainer(pctx, &pluginapi.PreStartContainerRequest{DevicesIds: allocated})
			cancel()
			if err != nil {
				t.res.add(CodePreStartFailed, subj, "PreStartContainer "+strings.Join(allocated, ",")+": "+err.Error(), ev(sock, "%v", err))
			} else {
				t.res.add(CodePreStartOK, subj, "PreStartContainer "+strings.Join(allocated, ",")+" succeeded")
			}
		}
	} else {
		t.res.notRun("prestart", subj, report.Explain("the plugin does not require PreStartContainer",
			"Nothing to do: the kubelet calls PreStartContainer only for a plugin that sets PreStartRequired in its options."))
	}
	// A stream that ended during the calls: the kubelet would have
	// disconnected the plugin by now.
	t.streamEnded(sock, lw)
	return true
}

// streamEnded reports, once, a ListAndWatch stream that ended after its
// first list: the kubelet disconnects the plugin then
// (plugin/v1beta1/client.go Run returns; handler.go runClient; manager.go
// PluginDisconnected, markResourceUnhealthy). A plugin that died in a
// call has PLUGIN_CRASHED, which says so.
func (t *tester) streamEnded(sock string, lw *lwRecorder) {
	rs, err, done := lw.state()
	if !done || t.ended || t.crashed {
		return
	}
	t.ended = true
	how := "the plugin returned from ListAndWatch (status OK)"
	if err != nil && !errors.Is(err, io.EOF) {
		how = "ListAndWatch: " + err.Error()
	}
	t.res.add(CodeListAndWatchEnded, t.subject, fmt.Sprintf("ListAndWatch ended after %d response(s): the kubelet marks every device unhealthy and stops the endpoint", len(rs)),
		ev(sock, "%s", how), ev(sock, "last response %s after the first", rs[len(rs)-1].at.Sub(rs[0].at).Round(time.Millisecond)))
}

func healthyIDs(devs []*pluginapi.Device) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range devs {
		if d.Health == pluginapi.Healthy && d.ID != "" && !seen[d.ID] {
			seen[d.ID] = true
			out = append(out, d.ID)
		}
	}
	return out
}

// transitions counts the health changes across responses, and which
// devices changed.
func transitions(rs []lwResp) (int, []string) {
	n := 0
	seen := map[string]bool{}
	var ids []string
	prev := map[string]string{}
	for i, r := range rs {
		cur := map[string]string{}
		for _, d := range r.devs {
			cur[d.ID] = d.Health
		}
		if i > 0 {
			for id, h := range cur {
				if p, ok := prev[id]; ok && p != h {
					n++
					if !seen[id] && len(ids) < 5 {
						seen[id] = true
						ids = append(ids, id)
					}
				}
			}
		}
		prev = cur
	}
	return n, ids
}

// listFindings judges the lists ListAndWatch sent up to the end of the
// watch as the kubelet takes them (manager.go
// genericDeviceUpdateCallback: each list is the resource's whole set,
// keyed by ID, Healthy only when exactly "Healthy"): every list's IDs,
// health values and topology; a device left out of a later list; and
// the health of the last list, which is what the node advertises.
// flapped: the watch saw the health flap and some device Healthy again;
// the health counts of one moment then say nothing the flapping finding
// does not, and only devices Unhealthy in every list are counted.
func (t *tester) listFindings(sock string, all []lwResp, took time.Duration, flapped bool) {
	subj := t.subject
	latest := all[len(all)-1].devs
	bad := false
	// Each finding once, however many lists repeat it.
	seen := map[string]bool{}
	add := func(code, subject, summary string, e ...report.Evidence) {
		if k := code + "\x00" + subject; !seen[k] {
			seen[k] = true
			t.res.add(code, subject, summary, e...)
		}
	}
	hostNUMA, numaOK, numaErr := pci.NUMANodes(t.o.Root)
	numaChecked := false
	for i, r := range all {
		which := "the first list"
		if i > 0 {
			which = fmt.Sprintf("list %d of %d", i+1, len(all))
		}
		ids := map[string]int{}
		var withNode, without []string
		for _, d := range r.devs {
			ids[d.ID]++
			if !validHealth(d.Health) {
				add(CodeHealthInvalid, subj+" "+d.ID, fmt.Sprintf("device %s has health %q: the kubelet counts it unhealthy", d.ID, d.Health), ev(sock, "%s", which))
				bad = true
			}
			if d.Topology == nil || len(d.Topology.Nodes) == 0 {
				without = append(without, d.ID)
				continue
			}
			withNode = append(withNode, d.ID)
			for _, n := range d.Topology.Nodes {
				if n == nil || !numaOK {
					continue
				}
				numaChecked = true
				if !slices.Contains(hostNUMA, int(n.ID)) {
					add(CodeNUMAUnknown, subj+" "+d.ID, fmt.Sprintf("device %s names NUMA node %d; this host has %v", d.ID, n.ID, hostNUMA),
						ev(pci.NodeOnlinePath, "%v", hostNUMA))
					bad = true
				}
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			n := ids[id]
			switch {
			case id == "":
				add(CodeDeviceIDInvalid, subj, fmt.Sprintf("%d device(s) with an empty ID", n), ev(sock, "%s", which))
				bad = true
			case n > 1:
				add(CodeDeviceIDDuplicate, subj+" "+id, fmt.Sprintf("device ID %q listed %d times: the kubelet counts it once", id, n), ev(sock, "%s", which))
				bad = true
			}
			if len(id) > MaxDeviceIDLen {
				add(CodeDeviceIDLong, subj+" "+truncate(id, 80), fmt.Sprintf("device ID of %d characters (the API documents at most %d)", len(id), MaxDeviceIDLen))
				bad = true
			}
		}
		if len(withNode) > 0 && len(without) > 0 {
			add(CodeNUMAPartial, subj, fmt.Sprintf("%d of %d devices give no NUMA node while the others do: the kubelet's topology hints leave them out", len(without), len(r.devs)),
				ev(sock, "%s: no NUMA node: %s", which, strings.Join(firstN(without, 8), ", ")))
		}
		// A device in this list that the next one leaves out.
		if i+1 < len(all) {
			next := map[string]bool{}
			for _, d := range all[i+1].devs {
				next[d.ID] = true
			}
			var gone []string
			for id := range ids {
				if !next[id] {
					gone = append(gone, id)
				}
			}
			sort.Strings(gone)
			for _, id := range gone {
				add(CodeDeviceRemoved, subj+" "+id, fmt.Sprintf("device %s was listed, then left out of list %d: the kubelet's capacity drops by it", id, i+2),
					ev(sock, "list %d: %d devices; list %d: %d devices", i+1, len(r.devs), i+2, len(all[i+1].devs)))
			}
		}
	}
	if !numaChecked && hasTopology(latest) {
		reason := "the host's NUMA nodes are unknown (" + pci.NodeOnlinePath + " absent)"
		if numaErr != nil {
			reason = "the host's NUMA nodes could not be read: " + numaErr.Error()
		}
		why := report.Explain(reason, "Run the test on the node itself (or with the host's /sys at --root): the devices' topology is judged against the host's NUMA nodes.")
		if numaErr != nil {
			why = report.Unusable(reason, pci.NodeOnlinePath)
		}
		t.res.notRun("numa", subj, why)
	}
	if len(latest) == 0 {
		e := []report.Evidence{ev(sock, "the last of %d ListAndWatch responses: 0 devices", len(all))}
		t.res.add(CodeNoDevices, subj, "ListAndWatch lists no device: capacity 0", e...)
		return
	}
	healthy, unhealthy := 0, 0
	var unhealthyIDs []string
	for _, d := range latest {
		if d.Health == pluginapi.Healthy {
			healthy++
		} else if !flapped || unhealthyThroughout(all, d.ID) {
			unhealthy++
			unhealthyIDs = append(unhealthyIDs, d.ID)
		}
	}
	last := fmt.Sprintf("the last of %d ListAndWatch responses", len(all))
	switch {
	case healthy == 0 && flapped:
		// Every device Unhealthy at that moment, Healthy again since:
		// the flapping finding says it.
	case healthy == 0:
		t.res.add(CodeNoHealthyDevices, subj, fmt.Sprintf("all %d devices are Unhealthy: capacity %d, allocatable 0", len(latest), len(latest)),
			ev(sock, "%s: Unhealthy: %s", last, strings.Join(firstN(unhealthyIDs, 8), ", ")))
		bad = true
	case unhealthy > 0:
		t.res.add(CodeDevicesUnhealthy, subj, fmt.Sprintf("%d of %d devices are Unhealthy", unhealthy, len(latest)),
			ev(sock, "%s: Unhealthy: %s", last, strings.Join(firstN(unhealthyIDs, 8), ", ")))
	}
	if !bad {
		t.res.add(CodeListed, subj, fmt.Sprintf("%d devices listed (%d Healthy) after %s", len(latest), healthy, took.Round(time.Microsecond)),
			ev(sock, "%s: IDs: %s", last, strings.Join(firstN(sortedIDs(latest), 8), ", ")))
	}
}

// unhealthyThroughout reports whether the device was not Healthy in any
// of the lists that name it.
func unhealthyThroughout(all []lwResp, id string) bool {
	for _, r := range all {
		for _, d := range r.devs {
			if d.ID == id && d.Health == pluginapi.Healthy {
				return false
			}
		}
	}
	return true
}

func hasTopology(devs []*pluginapi.Device) bool {
	for _, d := range devs {
		if d.Topology != nil && len(d.Topology.Nodes) > 0 {
			return true
		}
	}
	return false
}

func sortedIDs(devs []*pluginapi.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.ID)
	}
	sort.Strings(out)
	return out
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("... (%d more)", len(s)-n))
}

// healthUpdate pulls the trigger several times and times each change's
// arrival on ListAndWatch. An even number of pulls leaves the device as
// it was.
func (t *tester) healthUpdate(ctx context.Context, lw *lwRecorder, sock string) {
	if t.o.Trigger == nil {
		reason := "no trigger: health-update latency is measured only against accel-doctor's mock"
		if t.o.TriggerNote != "" {
			reason = t.o.TriggerNote
		}
		t.res.notRun("health_update", t.subject, report.NotOffered(reason, "a way to change a device's health on demand",
			"Measure it against accel-doctor's mock (`accel-doctor plugin mock --mode flapping`), whose health the tester can flip."))
		return
	}
	if _, _, done := lw.state(); done {
		t.res.notRun("health_update", t.subject, t.res.afterFailure("the ListAndWatch stream ended: no health change can arrive on it"))
		return
	}
	if cur, _, _ := lw.state(); len(cur[len(cur)-1].devs) == 0 {
		// A trigger that signals a process cannot tell whether anything
		// changed (the mock's SIGUSR1 flips nothing in an empty list):
		// waiting would report a health change that never happened.
		t.res.notRun("health_update", t.subject, t.res.afterFailure("the plugin lists no device whose health could change"))
		return
	}
	const rounds = 6
	var samples []time.Duration
	for i := 0; i < rounds; i++ {
		before, _, _ := lw.state()
		prev := healthMap(before[len(before)-1].devs)
		at := time.Now()
		if err := t.o.Trigger(ctx); err != nil {
			t.res.notRun("health_update", t.subject, report.Explain("the trigger failed: "+err.Error(),
				"The mock's health trigger did not take: run the test again; if it keeps failing, report a bug with the test's output."))
			return
		}
		got := false
		n := len(before)
		for !got {
			rs := lw.wait(ctx, n, at.Add(t.o.Timeout))
			if len(rs) <= n {
				break
			}
			for _, r := range rs[n:] {
				if changed(prev, healthMap(r.devs)) {
					samples = append(samples, r.at.Sub(at))
					got = true
					break
				}
			}
			n = len(rs)
		}
		if !got {
			if _, _, done := lw.state(); done {
				t.streamEnded(sock, lw)
				t.res.notRun("health_update", t.subject, t.res.afterFailure("the ListAndWatch stream ended: no health change can arrive on it"))
				return
			}
			t.res.add(CodeHealthNotReported, t.subject, fmt.Sprintf("a health change was triggered and ListAndWatch sent no update within %s", t.o.Timeout),
				ev(sock, "%s", t.o.TriggerNote))
			return
		}
	}
	m := Measurement{Name: "health change -> ListAndWatch update", Samples: samples}
	t.res.Measurements = append(t.res.Measurements, m)
	t.res.add(CodeHealthUpdate, t.subject, fmt.Sprintf("health changes reached ListAndWatch in p50 %s, max %s (%d samples)", m.Percentile(50).Round(time.Microsecond), m.Percentile(100).Round(time.Microsecond), len(samples)),
		ev(sock, "%s", t.o.TriggerNote))
}

func healthMap(devs []*pluginapi.Device) map[string]string {
	m := make(map[string]string, len(devs))
	for _, d := range devs {
		m[d.ID] = d.Health
	}
	return m
}

func changed(a, b map[string]string) bool {
	for id, h := range b {
		if a[id] != h {
			return true
		}
	}
	return len(a) != len(b)
}

func (t *tester) preferredCheck(ctx context.Context, c pluginapi.DevicePluginClient, sock string, healthy []string) {
	if len(healthy) == 0 {
		t.res.notRun("preferred", t.subject, t.res.afterFailure("no healthy device to choose from"))
		return
	}
	size := min(2, len(healthy))
	must := healthy[len(healthy)-1:] // the last: a plugin that just takes the first N fails it
	req := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: healthy, MustIncludeDeviceIDs: must, AllocationSize: int32(size)}}}
	pctx, cancel := context.WithTimeout(ctx, t.o.Timeout)
	resp, err := c.GetPreferredAllocation(pctx, req)
	cancel()
	asked := ev(sock, "asked for %d of %s, must include %s", size, strings.Join(firstN(healthy, 8), ","), must[0])
	if err != nil {
		t.res.add(CodePreferredFailed, t.subject, "GetPreferredAllocation: "+err.Error(), asked, ev(sock, "%v", err))
		return
	}
	var problems []string
	if len(resp.ContainerResponses) != 1 {
		problems = append(problems, fmt.Sprintf("%d container responses for 1 request", len(resp.ContainerResponses)))
	} else {
		got := resp.ContainerResponses[0].DeviceIDs
		if len(got) != size {
			problems = append(problems, fmt.Sprintf("%d devices for a size of %d", len(got), size))
		}
		if !slices.Contains(got, must[0]) {
			problems = append(problems, "leaves out must-include "+must[0])
		}
		seen := map[string]bool{}
		for _, id := range got {
			if !slices.Contains(healthy, id) {
				problems = append(problems, "names "+id+", which was not available")
			}
			if seen[id] {
				problems = append(problems, "names "+id+" twice")
			}
			seen[id] = true
		}
		asked.Value += "; answered " + strings.Join(got, ",")
	}
	if len(problems) > 0 {
		t.res.add(CodePreferredWrong, t.subject, "GetPreferredAllocation: "+strings.Join(problems, "; "), asked)
		return
	}
	t.res.add(CodePreferredOK, t.subject, "GetPreferredAllocation honours the size and the must-include device", asked)
}

// allocateChecks times Allocate of healthy devices, judges the first
// answer against the host, and returns the devices of that answer.
func (t *tester) allocateChecks(ctx context.Context, c pluginapi.DevicePluginClient, sock string, healthy []string) []string {
	subj := t.subject
	if len(healthy) == 0 {
		t.res.notRun("allocate", subj, t.res.afterFailure("no healthy device to allocate"))
		return nil
	}
	var samples []time.Duration
	var first *pluginapi.AllocateResponse
	var firstIDs []string
	budget := time.Now().Add(2 * time.Second)
	for i := 0; i < t.o.AllocateSamples && (i == 0 || time.Now().Before(budget)); i++ {
		ids := []string{healthy[i%len(healthy)]}
		actx, cancel := context.WithTimeout(ctx, t.o.Timeout)
		at := time.Now()
		resp, err := c.Allocate(actx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		took := time.Since(at)
		cancel()
		if err != nil {
			code := status.Code(err)
			if code == codes.Unavailable && goesSilent(sock) {
				t.crashed = true
				t.res.add(CodeCrashed, subj, fmt.Sprintf("Allocate %s: the plugin died (%s); its socket no longer answers", ids[0], err), ev(sock, "%v", err))
				return nil
			}
			msg := err.Error()
			if code == codes.DeadlineExceeded {
				msg = fmt.Sprintf("no answer within %s (%v)", t.o.Timeout, err)
			}
			t.res.add(CodeAllocateFailed, subj, fmt.Sprintf("Allocate %s: %s", ids[0], msg), ev(sock, "%v", err))
			return nil
		}
		samples = append(samples, took)
		if first == nil {
			first, firstIDs = resp, ids
		}
	}
	m := Measurement{Name: "Allocate", Samples: samples}
	t.res.Measurements = append(t.res.Measurements, m)
	if !t.judgeAllocate(sock, first, firstIDs, m) {
		return firstIDs
	}

	// A container that asks for two: the kubelet sends every device of
	// a container in one request (manager.go allocateContainerResources,
	// endpoint.go allocate).
	if len(healthy) >= 2 {
		ids := healthy[:2]
		actx, cancel := context.WithTimeout(ctx, t.o.Timeout)
		resp, err := c.Allocate(actx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		cancel()
		what := "Allocate of 2 devices " + strings.Join(ids, ",")
		switch {
		case err != nil && status.Code(err) == codes.Unavailable && goesSilent(sock):
			t.crashed = true
			t.res.add(CodeCrashed, subj, fmt.Sprintf("%s: the plugin died (%s); its socket no longer answers", what, err), ev(sock, "%v", err))
			return nil
		case err != nil:
			t.res.add(CodeAllocateFailed, subj, what+": "+err.Error(), ev(sock, "%v", err))
			return firstIDs
		case len(resp.ContainerResponses) == 0:
			t.res.add(CodeAllocateInvalid, subj, what+" answered no container response")
			return firstIDs
		}
	}

	// An ID that was never listed must be refused.
	actx, cancel := context.WithTimeout(ctx, t.o.Timeout)
	_, err := c.Allocate(actx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"accel-doctor-no-such-device"}}}})
	cancel()
	if err == nil {
		t.res.add(CodeUnknownIDAccepted, subj, `Allocate of "accel-doctor-no-such-device", an ID never listed, succeeded`)
	}
	return firstIDs
}

// goesSilent reports whether the socket stops answering within a second.
// A process that dies in the middle of a call breaks the connection while
// the kernel is still closing its other descriptors: the listener can
// accept a connect for a moment after the call saw EOF.
func goesSilent(sock string) bool {
	for end := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !answers(sock) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

func answers(sock string) bool {
	c, err := net.DialTimeout("unix", sock, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// judgeAllocate judges the first answer as the kubelet takes it; it
// reports whether there was a container response to judge.
func (t *tester) judgeAllocate(sock string, resp *pluginapi.AllocateResponse, ids []string, m Measurement) bool {
	subj := t.subject
	lat := ev("", "latency over %d calls: p50 %s, p99 %s", len(m.Samples), m.Percentile(50).Round(time.Microsecond), m.Percentile(99).Round(time.Microsecond))
	// The kubelet fails on none and uses the first of several
	// (manager.go allocateContainerResources).
	switch n := len(resp.ContainerResponses); {
	case n == 0:
		t.res.add(CodeAllocateInvalid, subj, fmt.Sprintf("Allocate %s answered no container response", ids[0]), lat)
		return false
	case n > 1:
		t.res.add(CodeAllocateExtra, subj, fmt.Sprintf("Allocate %s answered %d container responses for 1 request: the kubelet uses the first", ids[0], n), lat)
	}
	cr := resp.ContainerResponses[0]
	bad := false
	// The kubelet keeps the first host path of each container path
	// (pod_devices.go deviceRunContainerOptions).
	devPaths, mountPaths := map[string]string{}, map[string]string{}
	conflict := func(kind string, seen map[string]string, cpath, hpath string) {
		if prev, ok := seen[cpath]; ok {
			if prev != hpath {
				t.res.add(CodeAllocatePathConflict, subj+" "+cpath, fmt.Sprintf("Allocate %s gives %s %s from %s and from %s: the kubelet keeps %s", ids[0], kind, cpath, prev, hpath, prev))
			}
			return
		}
		seen[cpath] = hpath
	}
	var injects []report.Evidence
	for _, d := range cr.Devices {
		if d == nil {
			continue
		}
		injects = append(injects, ev(d.HostPath, "device %s -> %s (%s)", d.HostPath, d.ContainerPath, d.Permissions))
		conflict("device", devPaths, d.ContainerPath, d.HostPath)
		if _, err := t.o.Root.Stat(d.HostPath); err != nil {
			t.res.add(CodeAllocateHostMissing, subj+" "+d.HostPath, fmt.Sprintf("Allocate %s gives device %s, which this host lacks", ids[0], d.HostPath), ev(d.HostPath, "%s", shortErr(err)))
			bad = true
		}
	}
	for _, mt := range cr.Mounts {
		if mt == nil {
			continue
		}
		injects = append(injects, ev(mt.HostPath, "mount %s -> %s (read-only %t)", mt.HostPath, mt.ContainerPath, mt.ReadOnly))
		conflict("mount", mountPaths, mt.ContainerPath, mt.HostPath)
		if _, err := t.o.Root.Stat(mt.HostPath); err != nil {
			t.res.add(CodeAllocateHostMissing, subj+" "+mt.HostPath, fmt.Sprintf("Allocate %s mounts %s, which this host lacks", ids[0], mt.HostPath), ev(mt.HostPath, "%s", shortErr(err)))
			bad = true
		}
	}
	names := make([]string, 0, len(cr.Envs))
	for k := range cr.Envs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		injects = append(injects, ev("", "env %s=%s", k, cr.Envs[k]))
		switch p := envNameProblem(k); {
		case p == "":
		case k == "" || strings.ContainsAny(k, "=\x00"):
			t.res.add(CodeAllocateEnvInvalid, subj, fmt.Sprintf("Allocate gives env %q: %s", k, p))
			bad = true
		default:
			t.res.add(CodeAllocateEnvUnusual, subj, fmt.Sprintf("Allocate gives env %q: %s", k, p))
		}
	}
	for _, cd := range cr.CdiDevices {
		if cd == nil {
			continue
		}
		injects = append(injects, ev("", "CDI device %s", cd.Name))
		chk := cdi.Check(t.o.Root, cd.Name, cdi.Options{Dirs: t.o.CDISpecDirs})
		resolved := false
		var why []report.Evidence
		for _, f := range chk.Facts {
			if f.Kind == cdi.KindDeviceResolved {
				resolved = true
			}
			if f.Kind == cdi.KindDeviceUnresolved || f.Kind == cdi.KindDeviceNameInvalid || f.Kind == cdi.KindDeviceConflict {
				for _, e := range f.Evidence {
					why = append(why, report.Evidence{Path: e.Path, Value: e.Value})
				}
			}
		}
		if resolved {
			t.res.add(CodeAllocateCDIResolved, subj+" "+cd.Name, fmt.Sprintf("CDI device %s resolves on this host", cd.Name))
		} else {
			t.res.add(CodeAllocateCDIUnresolved, subj+" "+cd.Name, fmt.Sprintf("CDI device %s does not resolve against this host's specs (%s)", cd.Name, strings.Join(chk.Dirs, ", ")), why...)
			bad = true
		}
	}
	if m.Percentile(99) > AllocateSlowThreshold*time.Millisecond {
		t.res.add(CodeAllocateSlow, subj, fmt.Sprintf("Allocate p99 %s exceeds %d ms", m.Percentile(99).Round(time.Millisecond), AllocateSlowThreshold), lat)
	}
	if !bad {
		t.res.add(CodeAllocateOK, subj, fmt.Sprintf("Allocate %s answered: %d device specs, %d mounts, %d envs, %d CDI devices", ids[0], len(cr.Devices), len(cr.Mounts), len(cr.Envs), len(cr.CdiDevices)),
			append([]report.Evidence{lat}, injects...)...)
	}
	return true
}

// ReregisterWaitDefault is how long a plugin has to register again after
// a kubelet restart before it counts as never coming back. The kubelet
// itself keeps the resource for its 5-minute endpointStopGracePeriod
// (types.go); a plugin not back within a minute has missed every kubelet
// signal (inotify, its own socket removed, a poll of kubelet.sock).
const ReregisterWaitDefault = time.Minute

// reregistration restarts the fake kubelet as a kubelet restarts: its
// connections end, kubelet.sock and the registered plugins' sockets are
// removed (manager.go CleanupPluginDirectory removes every socket of the
// directory before the new kubelet.sock is served), and kubelet.sock is
// made again; then each resource must register again, be accepted, and
// list its devices on the new stream.
func reregistration(ctx context.Context, o TestOptions, res *TestResult, k *fakeKubelet, names []string) {
	seen := len(k.registrations())
	kubeletSock := filepath.Join(k.dir, KubeletSocket)
	k.stop(false)
	removed := k.removeSockets()
	at := time.Now()
	if err := k.start(); err != nil {
		for _, name := range names {
			res.notRun("reregistered", name, report.Explain("kubelet.sock could not be served again: "+err.Error(),
				"The tester could not bind kubelet.sock again in --device-plugin-dir: check that nothing else serves it (`ls -l DIR/kubelet.sock`, a kubelet on this host) and run the test again."))
		}
		return
	}
	restarted := ev(kubeletSock, "recreated at %s; removed first: kubelet.sock, %s", at.Format(time.RFC3339Nano), orNone(removed))
	wait := o.ReregisterWait
	if wait == 0 {
		wait = ReregisterWaitDefault
	}
	wait = max(wait, o.Timeout)
	deadline := at.Add(wait)
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	refused := map[string]*registration{}
	for len(pending) > 0 {
		// A plugin the kubelet refused may try again, within Timeout;
		// only one not heard from yet is awaited the whole wait.
		until := at.Add(o.Timeout)
		for n := range pending {
			if refused[n] == nil {
				until = deadline
			}
		}
		rs := k.waitRegs(ctx, seen, until)
		if len(rs) <= seen {
			break
		}
		for _, r := range rs[seen:] {
			name := r.req.ResourceName
			if !pending[name] {
				continue
			}
			if r.err != nil {
				// It may try again; the last refusal is the answer.
				refused[name] = r
				continue
			}
			delete(pending, name)
			took := r.at.Sub(at)
			lrs := r.lw.wait(ctx, 0, r.at.Add(o.Timeout))
			if len(lrs) == 0 {
				_, lerr, _ := r.lw.state()
				msg := fmt.Sprintf("no ListAndWatch response within %s", o.Timeout)
				if lerr != nil {
					msg = "ListAndWatch: " + lerr.Error()
				}
				res.add(CodeListAndWatchFailed, name, "after registering again: "+msg, restarted, ev(filepath.Join(k.dir, r.req.Endpoint), "%s", msg))
				continue
			}
			res.Measurements = append(res.Measurements,
				Measurement{Name: "kubelet.sock recreated -> Register", Samples: []time.Duration{took}},
				Measurement{Name: "kubelet.sock recreated -> first ListAndWatch", Samples: []time.Duration{lrs[0].at.Sub(at)}})
			remade := ""
			if slices.Contains(removed, r.req.Endpoint) && exists(filepath.Join(k.dir, r.req.Endpoint)) {
				remade = " (its socket, which the restart removed, served again first, as the kubelet expects)"
			}
			if took > o.Timeout {
				res.add(CodeReregisterSlow, name, fmt.Sprintf("registered again %s after kubelet.sock was recreated (over --timeout %s): until then the restarted kubelet had no healthy device of %s", took.Round(time.Millisecond), o.Timeout, name),
					restarted, ev(kubeletSock, "Register from endpoint %s: accepted", r.req.Endpoint))
				continue
			}
			res.add(CodeReregistered, name, fmt.Sprintf("registered again %s after kubelet.sock was recreated, and listed %d devices%s", took.Round(time.Microsecond), len(lrs[0].devs), remade),
				restarted, ev(kubeletSock, "Register from endpoint %s: accepted", r.req.Endpoint))
		}
		seen = len(rs)
	}
	for _, name := range names {
		if !pending[name] {
			continue
		}
		if r := refused[name]; r != nil {
			res.add(CodeReregisterRefused, name, fmt.Sprintf("registered again after kubelet.sock was recreated, and the kubelet refused it: %v", r.err),
				restarted, ev(kubeletSock, "Register from endpoint %s %s after the restart: %v", r.req.Endpoint, r.at.Sub(at).Round(time.Millisecond), r.err))
			continue
		}
		res.add(CodeNoReregister, name, fmt.Sprintf("no Register of %s within %s of kubelet.sock being recreated", name, wait), restarted)
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no plugin socket"
	}
	return strings.Join(s, ", ")
}
