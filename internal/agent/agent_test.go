package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	dto "github.com/prometheus/client_model/go"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// checkOf runs check over a fixture host of testdata/hosts, as the agent
// does (cli.CheckRunner: a fresh Env per run).
func checkOf(t testing.TB, host string) func() (*report.Report, *diagnose.Env) {
	t.Helper()
	root, err := hostfs.New(filepath.Join("..", "..", "testdata", "hosts", host))
	if err != nil {
		t.Fatal(err)
	}
	return func() (*report.Report, *diagnose.Env) {
		env := diagnose.NewEnv(root, diagnose.Options{KubeletRPC: grpccall.Caller{}})
		return diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Tool: "test", Command: "agent"}), env
	}
}

// notRunOnly is a report whose every finding is NOT_RUN.
func notRunOnly() (*report.Report, *diagnose.Env) {
	r := &report.Report{Layers: []report.Layer{report.LayerCgroup}, Findings: []report.Finding{{
		Check: "cgroup.policy", Code: "CGROUP_POLICY_UNREADABLE", Layer: report.LayerCgroup, Status: report.NotRun,
		Subject: "host", Summary: "the policy could not be read", Reason: "no /proc",
	}}}
	r.Decide()
	return r, nil
}

func TestStateOfPlantedFaults(t *testing.T) {
	a := New(Config{Node: "n1", Interval: time.Minute, Check: checkOf(t, "demo-h100x8-faults")})
	s := a.RunOnce()
	if s.Report.Verdict.Status != report.Fail {
		t.Fatalf("fixture verdict %s, want FAIL: %s", s.Report.Verdict.Status, s.Report.Verdict.Summary)
	}
	// The reason is the first FAIL of the verdict's layer.
	var want report.Finding
	for _, f := range s.Report.Findings {
		if f.Status == report.Fail && f.Layer == s.Report.Verdict.Layer {
			want = f
			break
		}
	}
	c := s.Condition
	if c.Status != ConditionFalse || c.Reason != want.Code || c.Reason == "" {
		t.Errorf("condition %+v, want False with reason %s", c, want.Code)
	}
	if len(c.Message) > maxMessageBytes || !strings.Contains(c.Message, want.Summary[:min(20, len(want.Summary))]) {
		t.Errorf("message %q: want at most %d bytes naming %q", c.Message, maxMessageBytes, want.Summary)
	}
	// The annotation is what cluster reads: it must parse there.
	got := roundTrip(t, s.Summary)
	if got.Status != "FAIL" || got.Layer != int(want.Layer) || got.Code != want.Code || got.Accelerators != 8 {
		t.Errorf("summary %+v, want FAIL layer %d code %s, 8 accelerators", got, want.Layer, want.Code)
	}
	if len(got.Resources) == 0 || got.Resources[0] != "nvidia.com/gpu" {
		t.Errorf("summary resources %v, want nvidia.com/gpu from the kubelet's checkpoint", got.Resources)
	}
	// The FAIL is a series with status FAIL, and the exit-code gauge is 1.
	mfs := gather(t, a.Metrics)
	if v := value(mfs, "accel_doctor_check_status", nil); v != 1 {
		t.Errorf("accel_doctor_check_status %v, want 1 (NonOK)", v)
	}
	if v := value(mfs, "accel_doctor_check_findings", map[string]string{"code": want.Code, "status": "FAIL", "node": "n1"}); v < 1 {
		t.Errorf("no FAIL series for %s", want.Code)
	}
}

func TestStateOfHealthyHost(t *testing.T) {
	a := New(Config{Node: "n2", Interval: time.Minute, Check: checkOf(t, "nvidia-h100x8-k8s-cgroupv1")})
	s := a.RunOnce()
	if s.Report.Verdict.Status != report.Pass {
		t.Fatalf("fixture verdict %s, want PASS: %s", s.Report.Verdict.Status, s.Report.Verdict.Summary)
	}
	if s.Condition.Status != ConditionTrue || s.Condition.Reason != ReasonReady {
		t.Errorf("condition %+v, want True %s", s.Condition, ReasonReady)
	}
	got := roundTrip(t, s.Summary)
	if got.Status != "PASS" || got.Layer != 0 || got.Code != "" || got.Accelerators != 8 {
		t.Errorf("summary %+v, want PASS with no layer or code, 8 accelerators", got)
	}
	mfs := gather(t, a.Metrics)
	if v := value(mfs, "accel_doctor_check_status", nil); v != 0 {
		t.Errorf("accel_doctor_check_status %v, want 0", v)
	}
	if v := value(mfs, "accel_doctor_check_findings", map[string]string{"status": "FAIL"}); v != 0 {
		t.Errorf("%v FAIL series on a healthy host", v)
	}
	// Every GPU has its DCGM identity: eight UUIDs, gpu 0-7, NVML's bus ID.
	uuids, gpus := map[string]bool{}, map[string]bool{}
	for _, m := range family(mfs, "accel_doctor_check_findings").GetMetric() {
		l := labels(m)
		if l["UUID"] == "" {
			continue
		}
		uuids[l["UUID"]], gpus[l["gpu"]] = true, true
		if !strings.HasPrefix(l["UUID"], "GPU-") || !strings.HasPrefix(l["pci_bus_id"], "00000000:") || l["modelName"] == "" {
			t.Errorf("series %v: want a GPU- UUID, an NVML bus ID and a model", l)
		}
	}
	if len(uuids) != 8 || len(gpus) != 8 || !gpus["0"] || !gpus["7"] {
		t.Errorf("UUIDs %v, gpu indexes %v: want 8 of each, 0-7", uuids, gpus)
	}
}

func TestStateNotRunOnlyIsUnknown(t *testing.T) {
	a := New(Config{Node: "n3", Interval: time.Minute, Check: notRunOnly})
	s := a.RunOnce()
	if s.Condition.Status != ConditionUnknown || s.Condition.Reason != ReasonNotJudged {
		t.Errorf("condition %+v, want Unknown %s", s.Condition, ReasonNotJudged)
	}
	if got := roundTrip(t, s.Summary); got.Status != "NOT_RUN" {
		t.Errorf("summary status %s, want NOT_RUN", got.Status)
	}
	if v := value(gather(t, a.Metrics), "accel_doctor_check_status", nil); v != 2 {
		t.Errorf("accel_doctor_check_status %v, want 2 (Unknown)", v)
	}
}

func TestNVMLBusIDAndSanitize(t *testing.T) {
	for in, want := range map[string]string{"0000:18:00.0": "00000000:18:00.0", "0001:ab:1f.7": "00000001:AB:1F.7", "junk": "junk", "zz:00:00.0": "zz:00:00.0"} {
		if got := NVMLBusID(in); got != want {
			t.Errorf("NVMLBusID(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"nvidia.com/gpu": "nvidia_com_gpu", "amd.com/gpu": "amd_com_gpu", "9x": "_x"} {
		if got := SanitizeResource(in); got != want {
			t.Errorf("SanitizeResource(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeAPI records writes; fail makes every call fail.
type fakeAPI struct {
	mu                  sync.Mutex
	fail                bool
	cond                Condition
	since               time.Time
	has                 bool
	patches, annotation int
	events              []Condition
	summary             cluster.Summary
}

var errDown = errors.New("connection refused")

func (f *fakeAPI) Condition(context.Context) (Condition, time.Time, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return Condition{}, time.Time{}, false, errDown
	}
	return f.cond, f.since, f.has, nil
}

func (f *fakeAPI) PatchCondition(_ context.Context, c Condition, since, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errDown
	}
	f.cond, f.since, f.has = c, since, true
	f.patches++
	return nil
}

func (f *fakeAPI) Annotate(_ context.Context, s cluster.Summary) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errDown
	}
	f.summary = s
	f.annotation++
	return nil
}

func (f *fakeAPI) Event(_ context.Context, c Condition, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errDown
	}
	f.events = append(f.events, c)
	return nil
}

func TestPublishEventsOnTransitionsOnly(t *testing.T) {
	api := &fakeAPI{}
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	p := publisher{api: api, m: NewMetrics("n"), log: io.Discard, now: func() time.Time { return now }}
	fail := &State{Report: &report.Report{}, Condition: Condition{Status: ConditionFalse, Reason: "DRIVER_LIBRARY_MISMATCH"}}
	ok := &State{Report: &report.Report{}, Condition: Condition{Status: ConditionTrue, Reason: ReasonReady}}

	for i, s := range []*State{fail, fail, ok, ok, fail} {
		now = now.Add(time.Minute)
		if err := p.publish(context.Background(), s); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if api.patches != 5 || api.annotation != 5 {
		t.Errorf("%d condition patches, %d annotations: want 5 of each (a heartbeat each run)", api.patches, api.annotation)
	}
	if len(api.events) != 3 || api.events[0].Reason != "DRIVER_LIBRARY_MISMATCH" || api.events[1].Reason != ReasonReady || api.events[2].Reason != "DRIVER_LIBRARY_MISMATCH" {
		t.Errorf("events %+v: want one per transition (FAIL, ready, FAIL)", api.events)
	}
	// The transition time is the last change's, not the last heartbeat's.
	if want := time.Date(2026, 12, 1, 14, 5, 0, 0, time.UTC); !api.since.Equal(want) {
		t.Errorf("lastTransitionTime %v, want %v", api.since, want)
	}

	// An agent restarted with the node already False emits no Event for
	// the same state.
	p2 := publisher{api: api, m: NewMetrics("n"), log: io.Discard, now: func() time.Time { return now }}
	if err := p2.publish(context.Background(), fail); err != nil {
		t.Fatal(err)
	}
	if len(api.events) != 3 {
		t.Errorf("restart: %d events, want still 3", len(api.events))
	}
}

func TestPublishBacksOffAndRecovers(t *testing.T) {
	api := &fakeAPI{fail: true}
	a := New(Config{Node: "n", Interval: 20 * time.Millisecond, Check: notRunOnly, API: api,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, func() bool {
		return value(gather(t, a.Metrics), "accel_doctor_agent_api_errors_total", map[string]string{"write": "condition"}) >= 3
	})
	// Meanwhile the metrics and the health endpoint answer.
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	for _, p := range []string{"/metrics", "/healthz"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s while the API is down: %d", p, resp.StatusCode)
		}
	}
	api.mu.Lock()
	api.fail = false
	api.mu.Unlock()
	waitFor(t, func() bool { api.mu.Lock(); defer api.mu.Unlock(); return len(api.events) == 1 })
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.cond.Status != ConditionUnknown || api.events[0].Status != ConditionUnknown {
		t.Errorf("after recovery: condition %+v, events %+v; want Unknown and one Event", api.cond, api.events)
	}
}

func TestHealthz(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	a := New(Config{Node: "n", Interval: time.Minute, Check: notRunOnly, Now: func() time.Time { return now }})
	get := func() int {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		return rec.Code
	}
	if c := get(); c != http.StatusServiceUnavailable {
		t.Errorf("before any run: %d, want 503", c)
	}
	a.RunOnce()
	now = now.Add(3 * time.Minute)
	if c := get(); c != 200 {
		t.Errorf("3 intervals after the run: %d, want 200", c)
	}
	now = now.Add(time.Second)
	if c := get(); c != http.StatusServiceUnavailable {
		t.Errorf("past 3 intervals: %d, want 503", c)
	}
}

func roundTrip(t *testing.T, s cluster.Summary) cluster.Summary {
	t.Helper()
	b, err := jsonMarshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cluster.ParseSummary(string(b))
	if err != nil {
		t.Fatalf("cluster cannot read the agent's summary %s: %v", b, err)
	}
	return got
}

func gather(t *testing.T, m *Metrics) []*dto.MetricFamily {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func family(mfs []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return &dto.MetricFamily{}
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// value sums the samples of name whose labels include want.
func value(mfs []*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range family(mfs, name).GetMetric() {
		l := labels(m)
		match := true
		for k, v := range want {
			match = match && l[k] == v
		}
		if match {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A WARN does not stop the accelerators: True, with the WARN's code as
// the reason so that it shows in `kubectl describe node`.
func TestConditionWarnIsTrueWithItsCode(t *testing.T) {
	r := &report.Report{Layers: []report.Layer{report.LayerDevNode}, Findings: []report.Finding{
		{Code: "DEVNODE_OK", Layer: report.LayerDevNode, Status: report.Pass, Subject: "/dev/nvidia0"},
		{Code: "DEVNODE_NO_CHAR_LINK", Layer: report.LayerDevNode, Status: report.Warn, Subject: "/dev/nvidia0", Summary: "no /dev/char link"},
	}}
	r.Decide()
	c := BuildCondition(r)
	if c.Status != ConditionTrue || c.Reason != "DEVNODE_NO_CHAR_LINK" {
		t.Errorf("condition %+v, want True DEVNODE_NO_CHAR_LINK", c)
	}
	s := BuildSummary(r, nil, time.Now(), time.Minute)
	if s.Status != "WARN" || s.Code != "DEVNODE_NO_CHAR_LINK" || s.Layer != 0 {
		t.Errorf("summary %+v, want WARN with the code and no layer (a layer names a FAIL)", s)
	}
	if long := cluster.Cut(strings.Repeat("é", 300), maxMessageBytes); len(long) > maxMessageBytes || !utf8.ValidString(long) {
		t.Errorf("cut: %d bytes, valid UTF-8 %v", len(long), utf8.ValidString(long))
	}
}

// slowAPI holds PatchCondition until release is closed or its context
// ends, and records how it ended.
type slowAPI struct {
	fakeAPI
	started chan struct{} // closed when the first patch begins
	release chan struct{}
	once    sync.Once
	ctxErr  chan error // the patch context's error when the patch returned
}

func (s *slowAPI) PatchCondition(ctx context.Context, c Condition, since, now time.Time) error {
	s.once.Do(func() { close(s.started) })
	select {
	case <-s.release:
		s.ctxErr <- ctx.Err()
		return s.fakeAPI.PatchCondition(ctx, c, since, now)
	case <-ctx.Done():
		s.ctxErr <- ctx.Err()
		return ctx.Err()
	}
}

func newSlowAPI() *slowAPI {
	return &slowAPI{started: make(chan struct{}), release: make(chan struct{}), ctxErr: make(chan error, 10)}
}

// A stop (the kubelet's SIGTERM cancels Run's context) lets the
// publication under way finish on a context that is still live, then Run
// returns without starting another.
func TestRunFinishesThePublicationUnderWayOnStop(t *testing.T) {
	api := newSlowAPI()
	a := New(Config{Node: "n", Interval: time.Hour, Check: notRunOnly, API: api, StopGrace: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	<-api.started
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while its publication was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(api.release)
	<-done
	if err := <-api.ctxErr; err != nil {
		t.Errorf("the patch under way saw its context end (%v): it should run to completion", err)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.patches != 1 || api.annotation != 1 || len(api.events) != 1 {
		t.Errorf("after the stop: %d patches, %d annotations, %d events; want the one publication whole (1, 1, 1)", api.patches, api.annotation, len(api.events))
	}
}

// A publication that does not end is cut off StopGrace after the stop.
func TestRunBoundsThePublicationOnStop(t *testing.T) {
	api := newSlowAPI() // never released
	a := New(Config{Node: "n", Interval: time.Hour, Check: notRunOnly, API: api, StopGrace: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	<-api.started
	cancel()
	<-done
	if err := <-api.ctxErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the patch's context ended with %v, want context.Canceled after the grace", err)
	}
	if api.patches != 0 {
		t.Errorf("%d patches recorded, want 0 (cut off)", api.patches)
	}
}

// With a heartbeat, a run that changes nothing on the node writes nothing
// until the heartbeat has passed since the last write; a change, or a
// write that failed, is written at once.
func TestPublishWritesOnChangeAndHeartbeat(t *testing.T) {
	api := &fakeAPI{}
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	p := publisher{api: api, m: NewMetrics("n"), log: io.Discard, now: func() time.Time { return now }, heartbeat: 5 * time.Minute}
	okState := func() *State {
		return &State{Report: &report.Report{}, Condition: Condition{Status: ConditionTrue, Reason: ReasonReady},
			Summary: cluster.Summary{Version: cluster.SummaryVersion, Status: "PASS", Time: now.Format(time.RFC3339), Interval: 300, Accelerators: 8}}
	}
	run := func(s *State) {
		t.Helper()
		if err := p.publish(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 { // 14:00 .. 14:04: one write
		run(okState())
		now = now.Add(time.Minute)
	}
	if api.patches != 1 || api.annotation != 1 {
		t.Fatalf("5 unchanged runs within the heartbeat: %d patches, %d annotations, want 1 and 1", api.patches, api.annotation)
	}
	run(okState()) // 14:05: a heartbeat since 14:00
	if api.patches != 2 || api.annotation != 2 || api.summary.Time != "2026-12-01T14:05:00Z" {
		t.Fatalf("after the heartbeat: %d patches, %d annotations, summary time %s", api.patches, api.annotation, api.summary.Time)
	}
	now = now.Add(time.Minute)
	changed := okState()
	changed.Summary.Accelerators = 7 // a GPU fell off the bus: the summary changes, the condition not
	run(changed)
	if api.annotation != 3 || api.summary.Accelerators != 7 {
		t.Fatalf("a changed summary was not written: %d annotations, %+v", api.annotation, api.summary)
	}
	now = now.Add(time.Minute)
	failed := okState()
	failed.Condition = Condition{Status: ConditionFalse, Reason: "DRIVER_NOT_BOUND"}
	failed.Summary.Accelerators = 7
	run(failed)
	if api.patches != 4 || len(api.events) != 2 || api.events[1].Reason != "DRIVER_NOT_BOUND" { // the first run's, and this
		t.Fatalf("a transition was not written: %d patches, %d events", api.patches, len(api.events))
	}
	// A write that fails is not remembered: the next run writes.
	api.fail = true
	now = now.Add(time.Minute)
	again := okState()
	if err := p.publish(context.Background(), again); err == nil {
		t.Fatal("publish through a failing API succeeded")
	}
	api.fail = false
	now = now.Add(time.Minute)
	run(again)
	if api.cond.Reason != ReasonReady || api.summary.Accelerators != 8 {
		t.Errorf("after a failed write: %+v, %+v", api.cond, api.summary)
	}
}
