package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Config is an agent's setup.
type Config struct {
	Node     string
	Interval time.Duration
	// Check runs check once (cli.CheckRunner).
	Check func() (*report.Report, *diagnose.Env)
	// API is nil for an agent that only serves metrics.
	API API
	// Log receives one line per run and per API outcome that changes.
	Log io.Writer
	// Backoff bounds the wait between failed publications: it starts at
	// BackoffMin and doubles up to BackoffMax (defaults 1s and 2m).
	BackoffMin, BackoffMax time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// StopGrace bounds how long a publication under way when Run's
	// context ends may still take (default 5s): a DaemonSet pod is
	// stopped with SIGTERM and killed terminationGracePeriodSeconds
	// (30 by default) later, and a condition patch cut off mid-flight
	// leaves the node showing the run before it.
	StopGrace time.Duration
	// Heartbeat is the longest the node's condition and summary go
	// unwritten while neither changes (at least Interval, which is the
	// default: every run writes). A run whose condition and summary are
	// those the node holds writes nothing until a Heartbeat has passed
	// since the last write: 5,000 nodes checked every minute would
	// otherwise PATCH 170 times a second. The summary's interval_s is
	// the Heartbeat, so that a reader judges it stale after 3 of them
	// (cluster.Summary.Stale).
	Heartbeat time.Duration
}

// Agent runs check every interval and publishes each run's State.
type Agent struct {
	cfg     Config
	Metrics *Metrics

	mu   sync.Mutex
	last *State // the last finished run; guarded by mu

	pending chan *State // the newest State not yet published (capacity 1)
}

// New makes an agent; Run starts it.
func New(cfg Config) *Agent {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Heartbeat < cfg.Interval {
		cfg.Heartbeat = cfg.Interval
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 5 * time.Second
	}
	return &Agent{cfg: cfg, Metrics: NewMetrics(cfg.Node), pending: make(chan *State, 1)}
}

// RunOnce runs check and records its State (metrics, health).
func (a *Agent) RunOnce() *State {
	start := a.cfg.Now()
	rep, env := a.cfg.Check()
	end := a.cfg.Now()
	var ids map[string]Identity
	var resources []string
	if env != nil {
		kn, _ := env.Kubelet() // memoized: the run read it already when the kube layer ran
		ids = Identities(env.Root, rep, kn)
		resources = Resources(kn)
	}
	s := &State{Report: rep, Condition: BuildCondition(rep), Summary: BuildSummary(rep, resources, end, a.cfg.Heartbeat), Duration: end.Sub(start), Finished: end}
	s.Summary.DRA = DRASummary(env)
	a.Metrics.Update(s, ids)
	a.mu.Lock()
	a.last = s
	a.mu.Unlock()
	fmt.Fprintf(a.cfg.Log, "check: %s (%s %s) in %v\n", rep.Verdict.Status, s.Condition.Status, s.Condition.Reason, s.Duration.Round(time.Millisecond))
	return s
}

// offer makes s the next State to publish, replacing one not yet taken:
// only the newest matters.
func (a *Agent) offer(s *State) {
	select {
	case <-a.pending:
	default:
	}
	a.pending <- s
}

// Run checks every interval until ctx ends, publishing in the background.
//
// When ctx ends it returns once the publication under way (if any) has
// finished, or Config.StopGrace after, whichever comes first: that is a
// normal stop (the kubelet's SIGTERM), not an error. A check still running
// then is not waited for (checks take no context; they only read), and
// no new check or publication starts.
func (a *Agent) Run(ctx context.Context) {
	published := make(chan struct{})
	if a.cfg.API != nil {
		go func() { defer close(published); a.publishLoop(ctx) }()
	} else {
		close(published)
	}
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		ran := make(chan *State, 1)
		go func() { ran <- a.RunOnce() }()
		select {
		case s := <-ran:
			a.offer(s)
		case <-ctx.Done():
			a.stopped(published)
			return
		}
		select {
		case <-ctx.Done():
			a.stopped(published)
			return
		case <-t.C:
		}
	}
}

// stopped waits for the publish loop to end; it ends within StopGrace of
// ctx's end (publishLoop), so this bound is only a guard.
func (a *Agent) stopped(published <-chan struct{}) {
	select {
	case <-published:
	case <-time.After(a.cfg.StopGrace + time.Second):
		fmt.Fprintf(a.cfg.Log, "stop: the publication did not end within %v\n", a.cfg.StopGrace)
	}
}

// publishLoop publishes each State offered. A failure is retried after a
// wait that doubles from BackoffMin to BackoffMax (with jitter, so that a
// fleet of agents does not return to a recovering API server at once),
// with the newest State by then; a success resets the wait.
//
// A publication is not cut off when ctx ends: it runs on a context of its
// own that ends StopGrace later, so that a stop between the condition
// patch and the annotation does not leave the node half-written. No
// retry and no new publication starts after ctx has ended.
func (a *Agent) publishLoop(ctx context.Context) {
	p := publisher{api: a.cfg.API, m: a.Metrics, log: a.cfg.Log, now: a.cfg.Now, heartbeat: a.cfg.Heartbeat}
	wait := time.Duration(0)
	var s *State
	for {
		select {
		case <-ctx.Done():
			return
		case s = <-a.pending:
		}
		for {
			err := a.publishBounded(ctx, &p, s)
			if ctx.Err() != nil {
				if err != nil {
					fmt.Fprintf(a.cfg.Log, "publish at stop: %v\n", err)
				}
				return
			}
			if err == nil {
				wait = 0
				break
			}
			wait = min(max(2*wait, a.cfg.BackoffMin), a.cfg.BackoffMax)
			d := wait/2 + rand.N(wait/2+1)
			fmt.Fprintf(a.cfg.Log, "publish: %v (again in %v)\n", err, d.Round(time.Millisecond))
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			select {
			case s = <-a.pending: // a newer run came meanwhile: publish that
			default:
			}
		}
	}
}

// publishBounded publishes s on a context that outlives ctx by StopGrace.
func (a *Agent) publishBounded(ctx context.Context, p *publisher, s *State) error {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(a.cfg.StopGrace, cancel)
		context.AfterFunc(pctx, func() { t.Stop() })
	})
	defer stop()
	return p.publish(pctx, s)
}

// publisher remembers what the node shows, so that an Event marks a
// transition only.
type publisher struct {
	api API
	m   *Metrics
	log io.Writer
	now func() time.Time

	known bool      // cur and since are what the node holds
	cur   Condition // the node's condition
	since time.Time // its lastTransitionTime
	// eventDue: the condition changed on the node and its Event is not
	// created yet (a failed write is retried with the next attempt).
	eventDue bool
	prev     Condition // what it changed from, for the log

	// heartbeat: write at least this often (Config.Heartbeat); written
	// and wrote: the summary last written whole, and when.
	heartbeat time.Duration
	written   *cluster.Summary
	wrote     time.Time
}

// unchanged: the node holds s's condition and summary (but for the
// summary's time), written less than a heartbeat ago.
func (p *publisher) unchanged(s *State, now time.Time) bool {
	if p.written == nil || !p.cur.Same(s.Condition) || p.eventDue || now.Sub(p.wrote) >= p.heartbeat {
		return false
	}
	a, b := *p.written, s.Summary
	a.Time, b.Time = "", ""
	return reflect.DeepEqual(a, b)
}

func (p *publisher) publish(ctx context.Context, s *State) error {
	if !p.known {
		c, since, ok, err := p.api.Condition(ctx)
		if err != nil {
			p.m.APIError("condition")
			return err
		}
		p.known = true
		if ok {
			p.cur, p.since = c, since
		}
	}
	now := p.now()
	if p.unchanged(s, now) {
		return nil
	}
	transition := !p.cur.Same(s.Condition)
	since := p.since
	if transition || since.IsZero() {
		since = now
	}
	if err := p.api.PatchCondition(ctx, s.Condition, since, now); err != nil {
		p.m.APIError("condition")
		p.known = false // read the node again: the patch may have landed
		return err
	}
	if transition {
		p.eventDue, p.prev = true, p.cur
	}
	p.cur, p.since = s.Condition, since
	if err := p.api.Annotate(ctx, s.Summary); err != nil {
		p.m.APIError("annotation")
		p.written = nil
		return err
	}
	sum := s.Summary
	p.written, p.wrote = &sum, now
	if p.eventDue {
		if err := p.api.Event(ctx, s.Condition, now); err != nil {
			p.m.APIError("event")
			return err
		}
		p.eventDue = false
		fmt.Fprintf(p.log, "event: %s %s -> %s %s\n", p.prev.Status, p.prev.Reason, s.Condition.Status, s.Condition.Reason)
	}
	p.m.APISuccess(now)
	return nil
}

// Healthy says whether the last run finished within 3 intervals.
func (a *Agent) Healthy() (bool, string) {
	a.mu.Lock()
	s := a.last
	a.mu.Unlock()
	if s == nil {
		return false, "no check has finished yet"
	}
	age := a.cfg.Now().Sub(s.Finished)
	if age > 3*a.cfg.Interval {
		return false, fmt.Sprintf("the last check finished %v ago, more than 3 intervals (%v)", age.Round(time.Second), 3*a.cfg.Interval)
	}
	return true, fmt.Sprintf("the last check finished %v ago: %s", age.Round(time.Millisecond), s.Report.Verdict.Status)
}

// Handler serves /metrics and /healthz.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.Metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := a.Healthy()
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, why)
	})
	return mux
}

// Serve serves Handler on ln until ctx ends; it then stops listening and
// returns when the requests in flight have been answered (2s at most).
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		// Serve returns as Shutdown begins; Shutdown returns when it is done.
		<-shut
		return nil
	}
	return err
}
