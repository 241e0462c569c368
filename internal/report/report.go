package report

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// SchemaVersion is the version of the JSON document (docs/report-schema.md).
// Bump it when a field changes meaning or disappears; adding fields does not.
const SchemaVersion = 1

// Status is the outcome of one check on one subject.
type Status string

const (
	Pass   Status = "PASS"
	Warn   Status = "WARN"
	Fail   Status = "FAIL"
	NotRun Status = "NOT_RUN"
)

// rank orders statuses by how much they matter to the verdict.
func (s Status) rank() int {
	switch s {
	case Fail:
		return 3
	case Warn:
		return 2
	case NotRun:
		return 1
	}
	return 0
}

// Worse reports whether s matters more than t.
func (s Status) Worse(t Status) bool { return s.rank() > t.rank() }

// Layer is one isolation layer, in the order of diagnosis.
type Layer int

const (
	LayerPCI Layer = iota + 1
	LayerDriver
	LayerDevNode
	LayerCgroup
	LayerRuntime
	LayerKube
	LayerIOMMU
	LayerFunctional
)

// Layers lists every layer in diagnosis order.
var Layers = []Layer{LayerPCI, LayerDriver, LayerDevNode, LayerCgroup, LayerRuntime, LayerKube, LayerIOMMU, LayerFunctional}

// Name is the layer's short name.
func (l Layer) Name() string {
	switch l {
	case LayerPCI:
		return "host / PCI"
	case LayerDriver:
		return "driver"
	case LayerDevNode:
		return "device nodes"
	case LayerCgroup:
		return "cgroup devices"
	case LayerRuntime:
		return "runtime / CDI"
	case LayerKube:
		return "Kubernetes"
	case LayerIOMMU:
		return "IOMMU / VFIO"
	case LayerFunctional:
		return "functional"
	}
	return fmt.Sprintf("layer %d", int(l))
}

func (l Layer) String() string { return fmt.Sprintf("%d (%s)", int(l), l.Name()) }

// Evidence is one thing that was read or tried: where, and what came back.
type Evidence struct {
	Path  string `json:"path,omitempty"`
	Value string `json:"value"`
}

// Finding is the outcome of one check on one subject.
type Finding struct {
	Check       string     `json:"check"`
	Code        string     `json:"code"`
	Layer       Layer      `json:"layer"`
	Status      Status     `json:"status"`
	Subject     string     `json:"subject"`
	Summary     string     `json:"summary"`
	Evidence    []Evidence `json:"evidence,omitempty"`
	Remediation string     `json:"remediation,omitempty"`
	Reason      string     `json:"reason,omitempty"` // why a check did NOT_RUN
	// Checkpoint is, in a container's report, which of its four
	// checkpoints the finding belongs to (see Checkpoint); 0 elsewhere.
	Checkpoint Checkpoint `json:"checkpoint,omitempty"`
	// CausedBy names, for a finding that follows from another on the same
	// host, the finding it follows from (by code and subject): fixing that
	// one fixes or changes this one. Renderers show a consequence under
	// its cause, and the verdict names the cause.
	CausedBy *Cause `json:"caused_by,omitempty"`
	// Context marks a PASS that states a fact the layer's other checks
	// rest on (the cgroup mode detected, the node rebooted) without
	// judging a device, node or policy: it does not make its layer PASS.
	Context bool `json:"context,omitempty"`
}

// AsContext marks f as context (see Finding.Context) and returns it.
func (f *Finding) AsContext() *Finding {
	f.Context = true
	return f
}

// Cause names the finding another follows from.
type Cause struct {
	Code    string `json:"code"`
	Subject string `json:"subject"`
}

// Because marks f as a consequence of c and returns it.
func (f Finding) Because(c Finding) Finding {
	f.CausedBy = &Cause{Code: c.Code, Subject: c.Subject}
	return f
}

// Follows marks f as a consequence of the finding of that code and
// subject (on a finding just added: out.Add(...).Follows(code, subject)).
func (f *Finding) Follows(code, subject string) *Finding {
	f.CausedBy = &Cause{Code: code, Subject: subject}
	return f
}

// Checkpoint is one of the four steps a container's devices go through:
// the host has them, something asks for them, the runtime applies them,
// and a small request works. A later one never makes up for an earlier one.
type Checkpoint int

const (
	CheckpointHost    Checkpoint = 1 + iota // the host has the device, its driver and its nodes
	CheckpointAsked                         // the spec, a CDI spec or a hook asks for it, pointing at real things
	CheckpointApplied                       // the runtime applied it to the container's process
	CheckpointWorks                         // a small controlled request succeeds
)

// Name says what the checkpoint proves.
func (c Checkpoint) Name() string {
	switch c {
	case CheckpointHost:
		return "the host has the device"
	case CheckpointAsked:
		return "what should inject it"
	case CheckpointApplied:
		return "what the runtime applied"
	case CheckpointWorks:
		return "a small request works"
	}
	return fmt.Sprintf("checkpoint %d", int(c))
}

// Device is an accelerator the report speaks about; findings whose
// Subject is the device's ID, or one of its Nodes, are grouped under it.
type Device struct {
	ID          string   `json:"id"`   // PCI address, e.g. 0000:17:00.0
	Kind        string   `json:"kind"` // gpu, accelerator, video, nic, other
	Vendor      string   `json:"vendor"`
	Name        string   `json:"name"`
	Driver      string   `json:"driver,omitempty"`
	NUMANode    *int     `json:"numa_node,omitempty"`
	Nodes       []string `json:"nodes,omitempty"`
	Description string   `json:"description"`
}

// Owners maps each device's ID and nodes to the device's ID (a node
// shared by several devices belongs to the first): the device a finding
// about that subject is grouped under.
func (r *Report) Owners() map[string]string {
	owner := map[string]string{}
	for _, d := range r.Devices {
		owner[d.ID] = d.ID
		for _, n := range d.Nodes {
			if _, taken := owner[n]; !taken {
				owner[n] = d.ID
			}
		}
	}
	return owner
}

// Verdict names the first layer with a FAIL, and says which asked-for
// layers could not be judged.
type Verdict struct {
	Status    Status         `json:"status"`
	Layer     Layer          `json:"layer,omitempty"`
	LayerName string         `json:"layer_name,omitempty"`
	Summary   string         `json:"summary"`
	Counts    map[Status]int `json:"counts"`
	// Outcomes is one entry per layer asked for, in layer order.
	Outcomes []LayerOutcome `json:"outcomes"`
	// Checkpoint is, in a container's report, the first checkpoint with a
	// FAIL (the verdict then names it before the layer).
	Checkpoint Checkpoint `json:"checkpoint,omitempty"`
	// Cause is, when FAILs follow from another finding (CausedBy), the
	// finding they follow from: the one to fix first.
	Cause *Cause `json:"cause,omitempty"`
}

// LayerOutcome is what one layer came to.
type LayerOutcome struct {
	Layer Layer `json:"layer"`
	// Status is the worst status among the layer's judged findings (PASS,
	// WARN, FAIL); NOT_RUN when every finding of the layer is NOT_RUN, or
	// when one of its checks crashed (CodeCrashed) and none FAILed; ""
	// when the layer had nothing to judge (no accelerator for layers 2-3).
	Status Status `json:"status,omitempty"`
	Judged int    `json:"judged"`  // findings that are PASS (not context), WARN or FAIL
	NotRun int    `json:"not_run"` // findings that are NOT_RUN
	// Reason is why the layer could not be judged, when it could not at
	// all: the reasons of its NOT_RUN findings.
	Reason string `json:"reason,omitempty"`
}

// Report is the result of a run.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	Tool          string    `json:"tool"`
	Command       string    `json:"command"`
	Source        string    `json:"source"` // live host, directory, snapshot
	Root          string    `json:"root"`
	Generated     time.Time `json:"generated"`
	Layers        []Layer   `json:"layers"` // the layers that were asked for
	Devices       []Device  `json:"devices"`
	Findings      []Finding `json:"findings"`
	Verdict       Verdict   `json:"verdict"`
}

// Decide fills in the verdict from the findings. A layer whose every
// finding is NOT_RUN is named with its reason: a verdict never says "no
// layer is broken" over a layer it could not look at, and a run that could
// judge nothing at all is NOT_RUN (exit 2), never PASS.
func (r *Report) Decide() {
	v := Verdict{Status: Pass, Counts: map[Status]int{}}
	for _, f := range r.Findings {
		v.Counts[f.Status]++
		if f.Status == Fail && (v.Layer == 0 || f.Layer < v.Layer) {
			v.Layer = f.Layer
		}
	}
	v.Outcomes = r.outcomes()
	judged, notRun, partial, empty := groupOutcomes(v.Outcomes)
	crashed := r.crashed()
	var tail []string
	for _, o := range notRun {
		tail = append(tail, fmt.Sprintf("layer %d NOT_RUN: %s", int(o.Layer), o.Reason))
	}
	for _, o := range partial {
		tail = append(tail, fmt.Sprintf("%d check(s) of layer %d NOT_RUN", o.NotRun, int(o.Layer)))
	}
	if len(empty) > 0 && len(judged) > 0 {
		tail = append(tail, fmt.Sprintf("nothing to judge in %s", layerList(empty)))
	}
	if len(crashed) > 0 && v.Counts[Fail] > 0 {
		tail = append(tail, strings.Join(crashed, ", ")+" stopped with an internal error")
	}
	switch {
	case v.Counts[Fail] > 0:
		v.Status = Fail
		v.LayerName = v.Layer.Name()
		n := 0
		for _, f := range r.Findings {
			if f.Status == Fail && f.Layer == v.Layer {
				n++
			}
		}
		v.Summary = fmt.Sprintf("first broken layer is %d (%s): %d failure(s) there, %d in all", int(v.Layer), v.Layer.Name(), n, v.Counts[Fail])
		if c, follow, ok := r.mainCause(); ok {
			v.Cause = &Cause{Code: c.Code, Subject: c.Subject}
			v.Summary += fmt.Sprintf("; the cause: %s %s (%d finding(s) follow from it)", c.Code, c.Subject, follow)
		}
		if f, ok := r.firstCheckpointFail(); ok {
			v.Checkpoint, v.Layer, v.LayerName = f.Checkpoint, f.Layer, f.Layer.Name()
			v.Summary = fmt.Sprintf("first broken checkpoint is %d (%s), layer %d (%s): %s; %d failure(s) in all",
				int(f.Checkpoint), f.Checkpoint.Name(), int(f.Layer), f.Layer.Name(), f.Summary, v.Counts[Fail])
		}
	case len(crashed) > 0:
		// What a crashed check would have judged is not known: the run
		// is not PASS (nor WARN), whatever the other checks found.
		v.Status = NotRun
		v.Summary = fmt.Sprintf("%s stopped with an internal error: %s not known", strings.Join(crashed, ", "), plural(len(crashed), "what it would have judged is", "what they would have judged is"))
		if len(judged) > 0 {
			v.Summary += fmt.Sprintf(" (the other checks of %s judged)", layerList(judged))
		}
	case len(judged) == 0:
		v.Status = NotRun
		v.Summary = "nothing could be judged"
		if len(r.Findings) == 0 {
			v.Summary = "nothing was checked"
		}
	case v.Counts[Warn] > 0:
		v.Status = Warn
		v.Summary = fmt.Sprintf("WARN for %s (%d warning(s)), no FAIL", layerList(judged), v.Counts[Warn])
	default:
		v.Summary = "PASS for " + layerList(judged)
	}
	if len(tail) > 0 {
		v.Summary += "; " + strings.Join(tail, "; ")
	}
	r.Verdict = v
}

// CodeCrashed is the code of the finding a check that panicked leaves
// (internal/diagnose turns the panic into it): its layer is NOT_RUN at
// best and the run never PASS.
const CodeCrashed = "CHECK_CRASHED"

// crashed lists the checks that crashed, each once, in order.
func (r *Report) crashed() []string {
	var out []string
	for _, f := range r.Findings {
		if f.Code == CodeCrashed && !slices.Contains(out, "check "+f.Check) {
			out = append(out, "check "+f.Check)
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// firstCheckpointFail is the FAIL of the lowest checkpoint (then the
// lowest layer, then the first reported), when findings carry checkpoints.
func (r *Report) firstCheckpointFail() (Finding, bool) {
	var best Finding
	found := false
	for _, f := range r.Findings {
		if f.Status != Fail || f.Checkpoint == 0 {
			continue
		}
		if !found || f.Checkpoint < best.Checkpoint || (f.Checkpoint == best.Checkpoint && f.Layer < best.Layer) {
			best, found = f, true
		}
	}
	return best, found
}

// outcomes sums the findings of every layer asked for (and of any layer
// that has findings without being asked, which Run does not produce).
func (r *Report) outcomes() []LayerOutcome {
	by := map[Layer]*LayerOutcome{}
	var order []Layer
	get := func(l Layer) *LayerOutcome {
		if o, ok := by[l]; ok {
			return o
		}
		by[l] = &LayerOutcome{Layer: l}
		order = append(order, l)
		return by[l]
	}
	for _, l := range r.Layers {
		get(l)
	}
	reasons := map[Layer][]string{} // in order of first appearance
	seen := map[Layer]map[string]int{}
	crash := map[Layer]string{}
	for _, f := range r.Findings {
		o := get(f.Layer)
		if f.Code == CodeCrashed && crash[f.Layer] == "" {
			crash[f.Layer] = fmt.Sprintf("check %s stopped with an internal error (%s)", f.Check, f.Reason)
		}
		if f.Status == NotRun {
			o.NotRun++
			if f.Reason != "" {
				if seen[f.Layer] == nil {
					seen[f.Layer] = map[string]int{}
				}
				if seen[f.Layer][f.Reason] == 0 {
					reasons[f.Layer] = append(reasons[f.Layer], f.Reason)
				}
				seen[f.Layer][f.Reason]++
			}
			continue
		}
		if f.Context && f.Status == Pass {
			continue // a fact, not a judgement: the layer is not PASS by it
		}
		o.Judged++
		if o.Status == "" || f.Status.Worse(o.Status) {
			o.Status = f.Status
		}
	}
	slices.Sort(order)
	out := make([]LayerOutcome, 0, len(order))
	for _, l := range order {
		o := *by[l]
		switch {
		case crash[l] != "" && o.Status != Fail:
			// Whatever its other checks judged, not all that it would
			// have: the crash is the reason first.
			o.Status, o.Reason = NotRun, crash[l]
		case o.Judged == 0 && o.NotRun > 0:
			o.Status = NotRun
			o.Reason = mainReason(reasons[l], seen[l])
		}
		out = append(out, o)
	}
	return out
}

// mainReason is the reason most NOT_RUN findings of a layer give (the
// first of those on a tie), and how many others there are: the verdict is
// one line, the findings carry every reason.
func mainReason(order []string, count map[string]int) string {
	if len(order) == 0 {
		return "its checks could not look"
	}
	best := order[0]
	for _, r := range order[1:] {
		if count[r] > count[best] {
			best = r
		}
	}
	if n := len(order) - 1; n > 0 {
		return fmt.Sprintf("%s (and %d other reason(s))", best, n)
	}
	return best
}

func groupOutcomes(os []LayerOutcome) (judged, notRun, partial, empty []LayerOutcome) {
	for _, o := range os {
		switch {
		case o.Judged > 0:
			judged = append(judged, o)
			if o.NotRun > 0 {
				partial = append(partial, o)
			}
		case o.NotRun > 0:
			notRun = append(notRun, o)
		default:
			empty = append(empty, o)
		}
	}
	return
}

// layerList writes "layer 1", "layers 1-3" or "layers 1, 2 and 4".
func layerList(os []LayerOutcome) string {
	if len(os) == 1 {
		return fmt.Sprintf("layer %d", int(os[0].Layer))
	}
	contiguous := true
	for i := 1; i < len(os); i++ {
		if os[i].Layer != os[i-1].Layer+1 {
			contiguous = false
		}
	}
	if contiguous {
		return fmt.Sprintf("layers %d-%d", int(os[0].Layer), int(os[len(os)-1].Layer))
	}
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = fmt.Sprint(int(o.Layer))
	}
	return "layers " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// Exit codes. They follow node-problem-detector's custom-plugin convention
// (0 OK, 1 NonOK, 2 Unknown) where the meanings meet; docs/report-schema.md ("Exit status") says where they differ.
const (
	ExitOK      = 0 // no FAIL
	ExitProblem = 1 // at least one FAIL
	ExitUnknown = 2 // nothing could be judged, or a usage or internal error
)

// ExitCode is ExitProblem when any finding is a FAIL, ExitUnknown when
// nothing could be judged, else ExitOK.
func (r *Report) ExitCode() int {
	switch r.Verdict.Status {
	case Fail:
		return ExitProblem
	case NotRun:
		return ExitUnknown
	}
	for _, f := range r.Findings {
		if f.Status == Fail {
			return ExitProblem
		}
	}
	return ExitOK
}

// Causes resolves CausedBy within the report: for each finding's index,
// the index of the finding its cause names (the first with that code and
// subject that is WARN or FAIL), or -1 when it names none present. A
// cause that is PASS or NOT_RUN explains nothing and is not followed.
func (r *Report) Causes() []int {
	at := map[Cause]int{}
	for i, f := range r.Findings {
		k := Cause{Code: f.Code, Subject: f.Subject}
		if _, ok := at[k]; !ok && (f.Status == Warn || f.Status == Fail) {
			at[k] = i
		}
	}
	out := make([]int, len(r.Findings))
	for i, f := range r.Findings {
		out[i] = -1
		if f.CausedBy == nil {
			continue
		}
		if j, ok := at[*f.CausedBy]; ok && j != i {
			out[i] = j
		}
	}
	return out
}

// rootOf follows causes from i to the first finding that follows from
// none (a cycle ends where it closes).
func rootOf(causes []int, i int) int {
	seen := map[int]bool{i: true}
	for causes[i] >= 0 && !seen[causes[i]] {
		i = causes[i]
		seen[i] = true
	}
	return i
}

// mainCause is the root of the FAILs that follow from another finding:
// the one of the lowest layer (then the first reported), and how many
// findings follow from it, directly or not. ok is false when no FAIL
// follows from another.
func (r *Report) mainCause() (cause Finding, follow int, ok bool) {
	causes := r.Causes()
	best := -1
	for i, f := range r.Findings {
		if f.Status != Fail || causes[i] < 0 {
			continue
		}
		root := rootOf(causes, i)
		if best < 0 || r.Findings[root].Layer < r.Findings[best].Layer {
			best = root
		}
	}
	if best < 0 {
		return Finding{}, 0, false
	}
	for i := range r.Findings {
		if i != best && causes[i] >= 0 && rootOf(causes, i) == best {
			follow++
		}
	}
	return r.Findings[best], follow, true
}
