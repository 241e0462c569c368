package diagnose

import (
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// Options select what a run looks at.
type Options struct {
	Layers  []report.Layer // empty: every layer the registry has
	Devices []string       // PCI addresses to restrict to; empty: all
	PID     int            // process whose cgroup the cgroup layer judges; 0: our own
	Cgroup  string         // a cgroup path instead of a PID
	Spec    string         // an OCI config.json (host path) for the cgroup drift check
	Probe   bool           // run functional probes (layer 8)
	// DevicesOnly makes Devices exact even when empty: a container's run
	// judges the host devices behind its nodes and no other.
	DevicesOnly bool
	// PCIFields are read in the PCI scan (Env.PCI) beside the whole
	// inventory the checks judge: topo draws its tree from the same scan
	// and adds the bridges' config space (pci.FieldBridgeConfig).
	PCIFields pci.Fields
	// Container is the container a run judges (accel-doctor container):
	// its checks run, and every finding carries its checkpoint.
	Container *runtime.Container
	// Passthrough judges every accelerator as meant for passthrough (the
	// iommu command): a group that is not viable is a FAIL, not a note.
	Passthrough bool
	// GuestMemory is the memory (bytes) a process (--pid) will have VFIO
	// pin, when the user gives it; nil: from QEMU's -m on the live host.
	GuestMemory *uint64
	// CDISpecDirs overrides the CDI spec directories a container's CDI
	// names are resolved in (default: its runtime's, else /etc/cdi and
	// /var/run/cdi).
	CDISpecDirs []string
	// KubeletDir is the kubelet's --root-dir (a host path) layer 6 reads;
	// empty: /var/lib/kubelet.
	KubeletDir string
	// KubeletRPC makes layer 6's read-only calls on the kubelet's sockets
	// (internal/kubeletrpc): in this process where the binary links gRPC,
	// else through accel-doctor-kubelet. Nil: every call is NotDialed and
	// what depends on one is NOT_RUN.
	KubeletRPC kubeletrpc.Caller
}

// Env is what checks share during one run: the host root, the options,
// readers' results (each read once) and the findings so far.
type Env struct {
	Root *hostfs.Root
	Opts Options

	mu       sync.Mutex
	memo     map[string]*memoEntry
	devices  []report.Device
	findings []report.Finding
	// deviceAt is the index in devices of each device ID, and
	// bySubject the indices in findings of each subject's findings, in
	// order: checks ask about one device or subject at a time, and a
	// scan of every device or finding for each would grow with the
	// square of the machine.
	deviceAt  map[string]int
	bySubject map[string][]int
}

// memoEntry is one reader's result. done is closed when v and err are
// set, so that a caller that finds the entry in flight (a prefetch,
// Check.Prefetch) waits for it instead of reading again.
type memoEntry struct {
	done chan struct{}
	v    any
	err  error
	// panicked is what the reader panicked with; every caller panics
	// with it, as a caller of the reader itself would have.
	panicked *readerPanic
}

// readerPanic is a reader's panic, carried to the checks that use its
// result with the stack of the goroutine that ran it.
type readerPanic struct {
	value any
	stack []byte
}

func (p *readerPanic) String() string { return fmt.Sprint(p.value) }

// NewEnv returns an environment for one run over root. Device addresses
// in opts are put in the kernel's form ("18:00.0", "0000:AB:00.0" and
// nvidia-smi's "00000000:18:00.0" all name 0000:18:00.0), so that every
// check compares the same string.
func NewEnv(root *hostfs.Root, opts Options) *Env {
	devs := make([]string, 0, len(opts.Devices))
	for _, d := range opts.Devices {
		if a, err := pci.ParseAddress(d); err == nil {
			d = a.String()
		}
		if !slices.Contains(devs, d) {
			devs = append(devs, d)
		}
	}
	opts.Devices = devs
	return &Env{Root: root, Opts: opts, memo: map[string]*memoEntry{}, deviceAt: map[string]int{}, bySubject: map[string][]int{}}
}

// memo runs fn once per key and env; readers are called through it so that
// several checks can share one scan. A caller that finds fn running in
// another goroutine waits for it. fn must not need, through memo, its own
// key or one whose reader needs it (such a cycle waits for ever): readers
// call lower readers only.
func memo[T any](e *Env, key string, fn func() (T, error)) (T, error) {
	e.mu.Lock()
	m, ok := e.memo[key]
	if !ok {
		m = &memoEntry{done: make(chan struct{})}
		e.memo[key] = m
	}
	e.mu.Unlock()
	if ok {
		<-m.done
	} else {
		func() {
			defer close(m.done)
			defer func() {
				switch p := recover().(type) {
				case nil:
				case *readerPanic: // a lower reader's, already with its stack
					m.panicked = p
				default:
					m.panicked = &readerPanic{value: p, stack: debug.Stack()}
				}
			}()
			m.v, m.err = fn()
		}()
	}
	if m.panicked != nil {
		panic(m.panicked)
	}
	v, _ := m.v.(T)
	return v, m.err
}

// memoDone returns key's result if its reader has run (waiting for one
// in flight), without running it.
func (e *Env) memoDone(key string) (v any, ran bool, err error) {
	e.mu.Lock()
	m, ok := e.memo[key]
	e.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	<-m.done
	if m.panicked != nil {
		return nil, true, fmt.Errorf("its reader stopped with an internal error: %v", m.panicked)
	}
	return m.v, true, m.err
}

// AddDevice records an accelerator for the report's device list.
func (e *Env) AddDevice(d report.Device) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i, ok := e.deviceAt[d.ID]; ok {
		e.devices[i] = d
		return
	}
	if e.deviceAt == nil { // an Env not made by NewEnv
		e.deviceAt = map[string]int{}
	}
	e.deviceAt[d.ID] = len(e.devices)
	e.devices = append(e.devices, d)
}

// AddDeviceNode records that a device needs a node of its own (not a
// shared one), so that the report groups the node's findings under it.
func (e *Env) AddDeviceNode(id, node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i, ok := e.deviceAt[id]; ok && !slices.Contains(e.devices[i].Nodes, node) {
		e.devices[i].Nodes = append(e.devices[i].Nodes, node)
	}
}

// WantDevice reports whether the run is restricted away from the device id.
func (e *Env) WantDevice(id string) bool {
	return !e.restricted() || slices.Contains(e.Opts.Devices, id)
}

// restricted: the run names the devices it is about (--device, or a
// container's).
func (e *Env) restricted() bool { return len(e.Opts.Devices) > 0 || e.Opts.DevicesOnly }

// FailedBelow returns the first FAIL recorded for subject at a layer below
// l, so that later layers can say NOT_RUN "earlier layer failed" instead of
// piling consequences on one cause.
func (e *Env) FailedBelow(subject string, l report.Layer) (report.Finding, bool) {
	return e.firstBelow(subject, l, report.Fail)
}

// firstBelow returns the first finding recorded for subject at a layer
// below l with status st.
func (e *Env) firstBelow(subject string, l report.Layer, st report.Status) (report.Finding, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, i := range e.bySubject[subject] {
		if f := e.findings[i]; f.Layer < l && f.Status == st {
			return f, true
		}
	}
	return report.Finding{}, false
}

// addFindings records a check's findings (e.mu held).
func (e *Env) addFindings(fs []report.Finding) {
	if e.bySubject == nil {
		e.bySubject = map[string][]int{}
	}
	for _, f := range fs {
		e.bySubject[f.Subject] = append(e.bySubject[f.Subject], len(e.findings))
		e.findings = append(e.findings, f)
	}
}

// Check is one entry of the registry.
type Check struct {
	ID    string       // stable, unique: "pci.link"
	Layer report.Layer // where its findings belong
	// Checkpoint is where its findings stand in a container's report;
	// zero: the default for its layer (defaultCheckpoint).
	Checkpoint report.Checkpoint
	Title      string   // what it checks, one line
	Codes      []string // every finding code it may emit
	Run        func(e *Env, out *Out)
	// Prefetch, when set, starts the check's reads while the checks
	// before it run: as the run starts, Run calls the prefetches of the
	// checks it will run, in layer order, in one goroutine beside the
	// checks, and the check finds the readers' results memoized (or
	// waits for them). It only calls readers (Env methods through
	// memo); it reports nothing, and a reader's panic reaches the check.
	// A check whose reads are slow and need nothing earlier layers read
	// sets it: they then cost no wall time where a CPU is idle.
	Prefetch func(e *Env)
}

// Out collects one check's findings.
type Out struct {
	check    *Check
	findings []report.Finding
}

// Add records a finding of the check. The remediation of a WARN or FAIL
// defaults to the code's catalog entry; a NOT_RUN never takes it (the
// catalog's fix is for the WARN or FAIL the check would have judged):
// record a NOT_RUN with NotRun, whose why gives its fix.
func (o *Out) Add(code string, st report.Status, subject, summary string, ev ...report.Evidence) *report.Finding {
	f := report.Finding{Check: o.check.ID, Code: code, Layer: o.check.Layer, Status: st, Subject: subject, Summary: summary, Evidence: ev}
	if st == report.Warn || st == report.Fail {
		if c, ok := LookupCode(code); ok {
			f.Remediation = c.Remediation
		}
	}
	o.findings = append(o.findings, f)
	return &o.findings[len(o.findings)-1]
}

// NotRun records that the check could not look, why (the finding's
// reason) and the fix that follows from what blocked it.
func (o *Out) NotRun(code, subject, summary string, why report.Why, ev ...report.Evidence) *report.Finding {
	f := o.Add(code, report.NotRun, subject, summary, ev...)
	f.CouldNotLook(why)
	return f
}

// Ev is shorthand for one evidence line.
func Ev(path, value string) report.Evidence { return report.Evidence{Path: path, Value: value} }

// Meta describes where a run's input came from.
type Meta struct {
	Tool    string
	Command string
	Source  string
	Root    string // what to call the root in the report; default its directory
}

// Run runs the checks (in registry order, which is layer order) and
// returns the report with its verdict.
func Run(e *Env, checks []Check, meta Meta) *report.Report {
	rep := &report.Report{
		SchemaVersion: report.SchemaVersion,
		Tool:          meta.Tool,
		Command:       meta.Command,
		Source:        meta.Source,
		Root:          meta.Root,
		Generated:     time.Now().UTC().Truncate(time.Second),
	}
	layers := e.Opts.Layers
	if len(layers) == 0 {
		for _, c := range checks {
			if !slices.Contains(layers, c.Layer) {
				layers = append(layers, c.Layer)
			}
		}
	}
	sort.Slice(layers, func(i, j int) bool { return layers[i] < layers[j] })
	if rep.Root == "" {
		rep.Root = e.Root.Dir()
	}
	rep.Layers = layers
	ordered := slices.Clone(checks)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Layer < ordered[j].Layer })
	// The prefetches run one after the other, in layer order, in one
	// goroutine: the first is wanted first, and one more goroutine's stack
	// and heap cost a process less than one per check.
	var prefetch []*Check
	for i := range ordered {
		if c := &ordered[i]; c.Prefetch != nil && slices.Contains(layers, c.Layer) {
			prefetch = append(prefetch, c)
		}
	}
	var prefetches sync.WaitGroup
	defer prefetches.Wait() // no read outlives the run
	if len(prefetch) > 0 {
		prefetches.Go(func() {
			for _, c := range prefetch {
				func() {
					// The check gets the same panic from memo and reports it.
					defer func() { _ = recover() }()
					c.Prefetch(e)
				}()
			}
		})
	}
	for i := range ordered {
		c := &ordered[i]
		if !slices.Contains(layers, c.Layer) {
			continue
		}
		fs := runOne(e, c)
		e.mu.Lock()
		e.addFindings(fs)
		e.mu.Unlock()
	}
	e.mu.Lock()
	rep.Findings = append([]report.Finding{}, e.findings...)
	rep.Devices = append([]report.Device{}, e.devices...)
	e.mu.Unlock()
	sort.SliceStable(rep.Devices, func(i, j int) bool { return rep.Devices[i].ID < rep.Devices[j].ID })
	rep.Decide()
	return rep
}

// runOne runs a check, turning a panic into a NOT_RUN finding: a bug in one
// check must not hide what the others found.
func runOne(e *Env, c *Check) (fs []report.Finding) {
	out := &Out{check: c}
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			if rp, ok := p.(*readerPanic); ok {
				stack = rp.stack // where the reader it used panicked
			}
			f := report.Finding{
				Check: c.ID, Code: CodeCheckCrashed, Layer: c.Layer,
				Subject: "host", Summary: fmt.Sprintf("check %s stopped with an internal error", c.ID),
				Evidence: []report.Evidence{{Value: string(stack)}},
			}
			f.CouldNotLook(report.Bug(fmt.Sprintf("panic: %v", p)))
			fs = append(out.findings, f)
		}
	}()
	c.Run(e, out)
	if e.Opts.Container != nil {
		cp := c.Checkpoint
		if cp == 0 {
			cp = defaultCheckpoint(c.Layer)
		}
		for i := range out.findings {
			out.findings[i].Checkpoint = cp
		}
	}
	return out.findings
}
