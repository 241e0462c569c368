package dramock

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/dra"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// TestOptions configure Test.
type TestOptions struct {
	// RegistryDir is the plugins_registry directory to watch.
	RegistryDir string
	// Driver, when set, is the driver to test (its registration socket is
	// the one whose GetInfo names it); else the first DRA registration.
	Driver string
	// CDIDirs are the spec directories answered CDI IDs must resolve in
	// (never the host's /var/run/cdi in tests).
	CDIDirs []string
	// DevicePluginSocket, when set, is a device plugin whose
	// ListAndWatch list is compared with the devices the driver prepares.
	DevicePluginSocket string
	// Timeout bounds each wait and call.
	Timeout time.Duration
	// Samples is how many claims are prepared and unprepared for the
	// latencies (at least 1).
	Samples int
	// Root reads the CDI specs (hostfs; "/" on a host).
	Root *hostfs.Root
}

// TestResult is what `plugin test --dra` found.
type TestResult struct {
	Driver       string
	Registration string
	Endpoint     string
	Findings     []report.Finding
	Measurements []deviceplugin.Measurement
}

func (r *TestResult) add(code, subject, summary string, ev ...report.Evidence) {
	c, _ := CodeOf(code)
	f := report.Finding{Check: "dra-plugin." + strings.ToLower(strings.TrimPrefix(code, "DRA_PLUGIN_")), Code: code,
		Layer: report.LayerKube, Status: report.Status(c.Status), Subject: subject, Summary: summary, Evidence: ev}
	if f.Status == report.Warn || f.Status == report.Fail {
		f.Remediation = c.Remediation
	}
	r.Findings = append(r.Findings, f)
}

// notRun records a check that could not run, why, and the fix that
// follows from it.
func (r *TestResult) notRun(check, subject string, why report.Why) {
	f := report.Finding{Check: "dra-plugin." + check, Code: CodeNotRun, Layer: report.LayerKube,
		Subject: subject, Summary: check + ": " + why.Reason}
	f.CouldNotLook(why)
	r.Findings = append(r.Findings, f)
}

func (r *TestResult) failed() bool {
	for _, f := range r.Findings {
		if f.Status == report.Fail {
			return true
		}
	}
	return false
}

func ev(p, format string, a ...any) report.Evidence {
	return report.Evidence{Path: p, Value: fmt.Sprintf(format, a...)}
}

func dialUnix(p string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+p, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Test acts as the kubelet's side of DRA against one driver: it waits for
// the driver's registration socket, calls GetInfo and then
// NotifyRegistrationStatus (as the kubelet's plugin watcher does: this
// changes the driver's state, which is what a test of it is for), dials
// the endpoint and prepares and unprepares claims it makes up, resolving
// the answered CDI device IDs against CDIDirs.
func Test(ctx context.Context, o TestOptions) (*TestResult, error) {
	if o.RegistryDir == "" || o.Root == nil {
		return nil, fmt.Errorf("a plugins_registry directory and a root are required")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Samples <= 0 {
		o.Samples = 1
	}
	if fi, err := os.Stat(o.RegistryDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (%v)", o.RegistryDir, err)
	}
	res := &TestResult{Driver: o.Driver}
	sock, info, took := waitRegistration(ctx, o)
	subject := o.Driver
	if subject == "" {
		subject = o.RegistryDir
	}
	if sock == "" {
		why := fmt.Sprintf("no socket in %s answered GetInfo as a DRA plugin%s within %v", o.RegistryDir, forDriver(o.Driver), o.Timeout)
		res.add(CodeNotRegistered, subject, why, ev(o.RegistryDir, "%s", listing(o.RegistryDir)))
		return res, nil
	}
	res.Registration = sock
	res.Measurements = append(res.Measurements, deviceplugin.Measurement{Name: "registration socket seen -> GetInfo answered", Samples: []time.Duration{took}})
	if info.err != nil {
		res.add(CodeGetInfoFailed, subject, "GetInfo failed: "+info.err.Error(), ev(sock, "%v", info.err))
		return res, nil
	}
	pi := info.info
	res.Driver, subject = pi.GetName(), pi.GetName()
	infoEv := ev(sock, "type=%s name=%s endpoint=%s supported_versions=%v", pi.GetType(), pi.GetName(), pi.GetEndpoint(), pi.GetSupportedVersions())
	ok := true
	if pi.GetType() != registerapi.DRAPlugin || pi.GetName() == "" || o.Driver != "" && pi.GetName() != o.Driver {
		res.add(CodeWrongType, subject, fmt.Sprintf("GetInfo says type %q name %q", pi.GetType(), pi.GetName()), infoEv)
		ok = false
	}
	if !slices.ContainsFunc(pi.GetSupportedVersions(), func(v string) bool { return slices.Contains(dra.KubeletServices, v) }) {
		res.add(CodeUnsupportedVersion, subject, fmt.Sprintf("supported versions %q name none of %q", pi.GetSupportedVersions(), dra.KubeletServices), infoEv)
		ok = false
	}
	ep := pi.GetEndpoint()
	res.Endpoint = ep
	if fi, err := os.Stat(ep); !filepath.IsAbs(ep) || err != nil || fi.Mode()&os.ModeSocket == 0 {
		res.add(CodeEndpointMissing, subject, fmt.Sprintf("endpoint %q is not a socket", ep), infoEv, ev(ep, "stat: %v", err))
		ok = false
	}
	// The kubelet tells the plugin whether it registered it.
	notify(ctx, o, sock, ok, res, subject)
	if !ok {
		return res, nil
	}
	cc, err := dialUnix(ep)
	if err != nil {
		res.add(CodeEndpointMissing, subject, "dial endpoint: "+err.Error(), ev(ep, "%v", err))
		return res, nil
	}
	defer cc.Close()
	client := drapb.NewDRAPluginClient(cc)
	var dpIDs []string
	if o.DevicePluginSocket != "" {
		dpIDs, err = listDevicePlugin(ctx, o)
		if err != nil {
			res.notRun("double-advertised", o.DevicePluginSocket, report.Explain("device plugin ListAndWatch: "+err.Error(),
				"The device plugin given did not list its devices: check it on its own (`accel-doctor plugin test --device-plugin-socket "+o.DevicePluginSocket+"`), then run this test again."))
		}
	}
	prep := deviceplugin.Measurement{Name: "NodePrepareResources"}
	unprep := deviceplugin.Measurement{Name: "NodeUnprepareResources"}
	// unprepare is never cut short by ctx: a claim this test prepared is
	// unprepared when the test is stopped too, so that the driver does not
	// keep it (and its CDI spec).
	unprepare := func(claim *drapb.Claim) (*drapb.NodeUnprepareResourcesResponse, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Timeout)
		defer cancel()
		return client.NodeUnprepareResources(cctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{claim}})
	}
	for i := range o.Samples {
		if ctx.Err() != nil {
			return res, nil
		}
		claim := &drapb.Claim{Namespace: "accel-doctor-test", Name: fmt.Sprintf("claim-%d", i), Uid: newUID()}
		cctx, cancel := context.WithTimeout(ctx, o.Timeout)
		t0 := time.Now()
		pr, err := client.NodePrepareResources(cctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{claim}})
		prep.Samples = append(prep.Samples, time.Since(t0))
		cancel()
		if ctx.Err() != nil {
			// Stopped during the call: the driver may have prepared it.
			unprepare(claim)
			return res, nil
		}
		cev := ev(ep, "claim %s/%s uid %s", claim.Namespace, claim.Name, claim.Uid)
		if msg := prepareError(pr, err, claim); readsClaims(msg, claim) {
			// The driver looked the claim up in the API server, as every
			// driver built on kubeletplugin does, and the claim the test
			// made up is not there: nothing is known of its prepare.
			res.notRun("prepare", subject, report.Explain("the driver reads each claim from the API server, and the test's claim "+claim.Namespace+"/"+claim.Name+" exists only in the test: "+msg,
				"Prepare a real claim instead: create a ResourceClaim allocated to one of the driver's devices on this node and a pod using it, and read the pod's events (`kubectl describe pod POD`); or run `accel-doctor check --layer kube` on the node after it, which judges the claims the kubelet prepared."))
			return res, nil
		}
		switch r := pr.GetClaims()[claim.Uid]; {
		case err != nil:
			res.add(CodePrepareFailed, subject, "NodePrepareResources: "+err.Error(), cev)
			return res, nil
		case r == nil:
			res.add(CodePrepareIncomplete, subject, "the answer holds no entry for the claim's UID", cev, ev(ep, "answer: %v", pr))
			return res, nil
		case r.GetError() != "":
			res.add(CodePrepareFailed, subject, "NodePrepareResources failed for the claim: "+r.GetError(), cev)
			return res, nil
		case len(r.GetDevices()) == 0:
			res.add(CodePrepareIncomplete, subject, "the claim was prepared with no device", cev)
			return res, nil
		case i == 0:
			judgeDevices(o, res, subject, claim, r.GetDevices(), dpIDs)
		}
		t0 = time.Now()
		ur, err := unprepare(claim)
		unprep.Samples = append(unprep.Samples, time.Since(t0))
		switch r := ur.GetClaims()[claim.Uid]; {
		case err != nil:
			res.add(CodeUnprepareFailed, subject, "NodeUnprepareResources: "+err.Error(), cev)
			return res, nil
		case r == nil || r.GetError() != "":
			res.add(CodeUnprepareFailed, subject, fmt.Sprintf("NodeUnprepareResources for the claim: %q", r.GetError()), cev)
			return res, nil
		}
	}
	res.Measurements = append(res.Measurements, prep, unprep)
	if !res.failed() {
		res.add(CodeContractOK, subject, fmt.Sprintf("registered through %s, prepared and unprepared %d claims", filepath.Base(sock), o.Samples), infoEv)
	}
	return res, nil
}

// prepareError is the error NodePrepareResources gave for claim: the
// call's, else the claim's own; "" when none.
func prepareError(pr *drapb.NodePrepareResourcesResponse, err error, claim *drapb.Claim) string {
	if err != nil {
		return err.Error()
	}
	if r := pr.GetClaims()[claim.Uid]; r != nil {
		return r.GetError()
	}
	return ""
}

// readsClaims: the error is the kubeletplugin helper's for a claim it
// could not take from the API server (getResourceClaims in
// k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go:
// "retrieve claim NS/NAME: ...", "claim NS/NAME not allocated", "claim
// NS/NAME got replaced"): a driver that reads its claims there, asked for
// one that was never created.
func readsClaims(msg string, claim *drapb.Claim) bool {
	if msg == "" {
		return false
	}
	ref := claim.Namespace + "/" + claim.Name
	return strings.Contains(msg, "retrieve claim "+ref+":") || strings.Contains(msg, "claim "+ref+" not allocated") || strings.Contains(msg, "claim "+ref+" got replaced")
}

func forDriver(d string) string {
	if d == "" {
		return ""
	}
	return " named " + d
}

func listing(dir string) string {
	es, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		return "empty"
	}
	return "holds " + strings.Join(names, ", ")
}

type infoAnswer struct {
	info *registerapi.PluginInfo
	err  error
}

// waitRegistration polls the directory (the kubelet's watcher reacts to
// fsnotify; polling every 20 ms measures the same within that) until a
// socket answers GetInfo as a DRA plugin (of Driver, when set). A socket
// that answers otherwise is remembered: when nothing better appears, its
// answer is judged.
func waitRegistration(ctx context.Context, o TestOptions) (string, infoAnswer, time.Duration) {
	start := time.Now()
	deadline := start.Add(o.Timeout)
	tried := map[string]bool{}
	var lastSock string
	var last infoAnswer
	for time.Now().Before(deadline) && ctx.Err() == nil {
		es, _ := os.ReadDir(o.RegistryDir)
		for _, e := range es {
			p := filepath.Join(o.RegistryDir, e.Name())
			if e.Type()&os.ModeSocket == 0 || tried[p] {
				continue
			}
			cc, err := dialUnix(p)
			if err != nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, min(o.Timeout, 2*time.Second))
			info, err := registerapi.NewRegistrationClient(cc).GetInfo(cctx, &registerapi.InfoRequest{})
			cancel()
			cc.Close()
			took := time.Since(start)
			if err == nil && info.GetType() == registerapi.DRAPlugin && (o.Driver == "" || info.GetName() == o.Driver) {
				return p, infoAnswer{info: info}, took
			}
			// A connection error is retried until the deadline (the
			// socket may be bound before its server listens); a gRPC
			// answer is final.
			if status.Code(err) != codes.Unavailable {
				tried[p] = true
			}
			if o.Driver == "" || err != nil && strings.HasPrefix(e.Name(), o.Driver+"-") || info.GetName() == o.Driver {
				lastSock, last = p, infoAnswer{info: info, err: err}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lastSock != "" {
		return lastSock, last, time.Since(start)
	}
	return "", infoAnswer{}, 0
}

func notify(ctx context.Context, o TestOptions, sock string, ok bool, res *TestResult, subject string) {
	cc, err := dialUnix(sock)
	if err != nil {
		res.add(CodeNotifyFailed, subject, "dial registration socket: "+err.Error())
		return
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	st := &registerapi.RegistrationStatus{PluginRegistered: ok}
	if !ok {
		st.Error = "accel-doctor plugin test --dra: registration refused (see findings)"
	}
	if _, err := registerapi.NewRegistrationClient(cc).NotifyRegistrationStatus(cctx, st); err != nil {
		res.add(CodeNotifyFailed, subject, "NotifyRegistrationStatus: "+err.Error(), ev(sock, "%v", err))
	}
}

// judgeDevices resolves the answered CDI IDs and compares the devices with
// the device plugin's.
func judgeDevices(o TestOptions, res *TestResult, subject string, claim *drapb.Claim, devs []*drapb.Device, dpIDs []string) {
	dirs := o.CDIDirs
	if dirs == nil {
		dirs = cdi.DefaultSpecDirs
	}
	reg := cdi.Load(o.Root, dirs)
	for _, d := range devs {
		if len(d.GetCdiDeviceIds()) == 0 {
			continue
		}
		for _, id := range d.GetCdiDeviceIds() {
			r := reg.Resolve(id)
			if r.Device != nil {
				continue
			}
			kind, _, _ := strings.Cut(id, "=")
			var bad []report.Evidence
			for _, sf := range reg.Specs {
				if sf.Err != nil && (sf.Vendor+"/"+sf.Class == kind || strings.Contains(sf.Path, claim.Uid)) {
					bad = append(bad, ev(sf.Path, "%v", sf.Err))
				}
			}
			if len(bad) > 0 {
				res.add(CodeCDIInvalidSpec, subject, fmt.Sprintf("device %s/%s: the spec of %s does not load", d.GetPoolName(), d.GetDeviceName(), id), bad...)
			}
			res.add(CodeCDIUnresolved, subject, fmt.Sprintf("device %s/%s: %v", d.GetPoolName(), d.GetDeviceName(), r.Err),
				ev(strings.Join(dirs, ", "), "%d spec files, %d resolvable names", len(reg.Specs), len(reg.Devices)))
		}
	}
	if len(dpIDs) == 0 {
		return
	}
	for _, d := range devs {
		for _, hit := range sharedIDs(reg, d, dpIDs) {
			res.add(CodeDoubleAdvertised, subject, fmt.Sprintf("device %s/%s is also device-plugin device %s", d.GetPoolName(), d.GetDeviceName(), hit.id),
				ev(o.DevicePluginSocket, "ListAndWatch lists %s", hit.id), ev(hit.where, "%s", hit.how))
		}
	}
}

type hit struct{ id, where, how string }

// sharedIDs: a device-plugin ID equal to the DRA device's name, or to an
// element of an env value its CDI edits set (comma-separated lists, as
// NVIDIA_VISIBLE_DEVICES and the mocks' MOCK_VISIBLE_DEVICES are).
func sharedIDs(reg *cdi.Registry, d *drapb.Device, dp []string) []hit {
	var out []hit
	seen := map[string]bool{}
	for _, id := range dp {
		if id == d.GetDeviceName() && !seen[id] {
			seen[id] = true
			out = append(out, hit{id, "NodePrepareResources", "device name " + id})
		}
	}
	for _, cid := range d.GetCdiDeviceIds() {
		dev := reg.Devices[cid]
		if dev == nil {
			continue
		}
		for _, env := range dev.Edits().Env {
			k, v, _ := strings.Cut(env, "=")
			for _, tok := range strings.Split(v, ",") {
				if slices.Contains(dp, tok) && !seen[tok] {
					seen[tok] = true
					out = append(out, hit{tok, dev.Spec.Path, fmt.Sprintf("%s sets %s=%s", cid, k, v)})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// listDevicePlugin takes a device plugin's first ListAndWatch answer.
func listDevicePlugin(ctx context.Context, o TestOptions) ([]string, error) {
	cc, err := dialUnix(o.DevicePluginSocket)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	s, err := pluginapi.NewDevicePluginClient(cc).ListAndWatch(cctx, &pluginapi.Empty{})
	if err != nil {
		return nil, err
	}
	r, err := s.Recv()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range r.GetDevices() {
		ids = append(ids, d.GetID())
	}
	return ids, nil
}

func newUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
