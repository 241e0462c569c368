package claim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Meta is what the report says about the run, as for cluster's report.
type Meta = cluster.Meta

// MaxDeviceEvidence bounds the per-device lines of one request's finding;
// the per-selector counts before them cover every device.
const MaxDeviceEvidence = 500

// Report is the explanation as a report of layer 6 (Kubernetes): FAIL when
// the claim cannot be allocated.
func (e *Explanation) Report(m Meta) *report.Report {
	r := &report.Report{
		SchemaVersion: report.SchemaVersion,
		Tool:          m.Tool,
		Command:       "claim",
		Source:        "API server " + m.Source,
		Generated:     m.Now.UTC(),
		Layers:        []report.Layer{report.LayerKube},
		Devices:       []report.Device{},
		Findings:      e.Findings(),
	}
	r.Decide()
	return r
}

// NotRead is the report when the claim or its objects could not be read.
func NotRead(m Meta, subject string, err error) *report.Report {
	r := &report.Report{
		SchemaVersion: report.SchemaVersion, Tool: m.Tool, Command: "claim", Source: "API server " + m.Source,
		Generated: m.Now.UTC(), Layers: []report.Layer{report.LayerKube}, Devices: []report.Device{},
		Findings: []report.Finding{finding("claim.read", "CLAIM_NOT_READ", report.NotRun, subject, fmt.Sprintf("could not read %s: %v", subject, err), nil)},
	}
	r.Findings[0].CouldNotLook(cluster.APIWhy(err.Error(), err))
	r.Decide()
	return r
}

// finding is a finding of code; a WARN or FAIL takes the code's fix, a
// NOT_RUN gets its why's (Finding.CouldNotLook) from its caller.
func finding(check, code string, st report.Status, subject, summary string, ev []report.Evidence) report.Finding {
	f := report.Finding{Check: check, Code: code, Layer: report.LayerKube, Status: st, Subject: subject, Summary: summary, Evidence: ev}
	if c, _ := CodeOf(code); st == report.Warn || st == report.Fail {
		f.Remediation = c.Remediation
	}
	return f
}

// Findings are: the allocation (or, for each request, what keeps it from
// being satisfied), then the allocator's confirmation.
func (e *Explanation) Findings() []report.Finding {
	subject := "resourceclaim/" + e.Namespace + "/" + e.Name
	if e.Allocated {
		var ev []report.Evidence
		if e.AllocatedNode != "" {
			ev = append(ev, report.Evidence{Path: "status.allocation.nodeSelector", Value: e.AllocatedNode})
		}
		for _, d := range e.AllocatedDevices {
			ev = append(ev, report.Evidence{Path: "status.allocation.devices.results", Value: d})
		}
		for _, p := range e.ReservedFor {
			ev = append(ev, report.Evidence{Path: "status.reservedFor", Value: p})
		}
		where := ""
		if e.AllocatedNode != "" {
			where = " on node " + e.AllocatedNode
		}
		return []report.Finding{finding("claim.allocation", "CLAIM_ALLOCATED", report.Pass, subject,
			fmt.Sprintf("allocated%s: %d device(s), reserved for %d consumer(s)", where, len(e.AllocatedDevices), len(e.ReservedFor)), ev)}
	}
	var out []report.Finding
	ok := e.Allocatable()
	for _, r := range e.Requests {
		f := r.finding(subject)
		if ok && f.Status == report.Fail {
			// Another subrequest of its firstAvailable list is
			// satisfied: this alternative is not what blocks.
			f.Status = report.Warn
		}
		out = append(out, f)
	}
	if len(e.Requests) == 0 {
		out = append(out, finding("claim.request", "CLAIM_ALLOCATABLE", report.Pass, subject, "the claim requests no devices", nil))
	}
	out = append(out, e.allocatorFinding(subject))
	return out
}

func (r Request) finding(claimSubject string) report.Finding {
	subject := claimSubject + " request " + r.Name
	ev := []report.Evidence{{Path: "deviceClassName", Value: r.Class}, {Path: "allocationMode", Value: string(r.Mode)}}
	if r.Mode == "ExactCount" {
		ev = append(ev, report.Evidence{Path: "count", Value: fmt.Sprint(r.Count)})
	}
	for _, s := range r.Selectors {
		ev = append(ev, report.Evidence{Path: "selector", Value: s})
	}
	for _, s := range r.CompileErrors {
		ev = append(ev, report.Evidence{Path: "compile error", Value: s})
	}
	if !r.ClassMissing && len(r.CompileErrors) == 0 {
		ev = append(ev, report.Evidence{Path: "devices", Value: fmt.Sprintf("%d in the slices, %d match, %d of them free; most free on one node: %d (%s)", r.Devices, r.Matching, r.Free, r.BestFree, r.BestNode)})
		ev = append(ev, exclusionCounts(r.Exclusions)...)
		for i, x := range r.Exclusions {
			if i == MaxDeviceEvidence {
				ev = append(ev, report.Evidence{Path: "excluded", Value: fmt.Sprintf("... and %d more devices", len(r.Exclusions)-i)})
				break
			}
			ev = append(ev, report.Evidence{Path: x.Node + "/" + x.Driver + "/" + x.Pool + "/" + x.Device, Value: x.String()})
		}
	}
	switch r.Problem {
	case "":
		return finding("claim.request", "CLAIM_ALLOCATABLE", report.Pass, subject,
			fmt.Sprintf("%d matching device(s) free on node %s for %s", r.BestFree, r.BestNode, r.want()), ev)
	case "CLAIM_CLASS_MISSING":
		return finding("claim.request", r.Problem, report.Fail, subject, fmt.Sprintf("device class %s does not exist", r.Class), ev)
	case "CLAIM_SELECTOR_ERROR":
		return finding("claim.request", r.Problem, report.Fail, subject, "a selector does not compile or fails on a device: the scheduler's allocator stops there", ev)
	case "CLAIM_NO_MATCHING_DEVICE":
		return finding("claim.request", r.Problem, report.Fail, subject, fmt.Sprintf("none of the %d devices passes the selectors of class %s and the request", r.Devices, r.Class), ev)
	case "CLAIM_TOO_MANY_DEVICES":
		return finding("claim.request", r.Problem, report.Fail, subject,
			fmt.Sprintf("%s asked, but at most %d matching device(s) on one node (%s)", r.want(), r.BestFree, r.BestNode), ev)
	default: // CLAIM_DEVICES_IN_USE
		return finding("claim.request", r.Problem, report.Fail, subject,
			fmt.Sprintf("%s asked; %d match, but other claims hold %d of them", r.want(), r.Matching, r.Matching-r.Free), ev)
	}
}

func (r Request) want() string {
	if r.Mode == "All" {
		return "all matching devices"
	}
	return fmt.Sprintf("%d device(s)", r.Count)
}

// String says why the device was excluded.
func (x Exclusion) String() string {
	switch x.By {
	case "allocated":
		return "allocated to another claim"
	case "error":
		return fmt.Sprintf("selector #%d %q failed: %s", x.Index, x.Expression, x.Error)
	}
	what := "selector"
	if x.Capacity {
		what = "capacity selector"
	}
	return fmt.Sprintf("excluded by %s %s #%d: %s", x.By, what, x.Index, x.Expression)
}

// exclusionCounts are, per excluding selector, how many devices it excluded.
func exclusionCounts(xs []Exclusion) []report.Evidence {
	n := map[string]int{}
	for _, x := range xs {
		k := "allocated to another claim"
		switch x.By {
		case "class", "request":
			k = fmt.Sprintf("%s selector #%d: %s", x.By, x.Index, x.Expression)
		case "error":
			k = fmt.Sprintf("%s selector #%d failed", x.By, x.Index)
		}
		n[k]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]report.Evidence, 0, len(keys))
	for _, k := range keys {
		out = append(out, report.Evidence{Path: "excluded devices", Value: fmt.Sprintf("%d by %s", n[k], k)})
	}
	return out
}

func (e *Explanation) allocatorFinding(subject string) report.Finding {
	a := e.Allocator
	if !a.Ran {
		f := finding("claim.allocator", "CLAIM_ALLOCATOR_NOT_RUN", report.NotRun, subject, "the allocator did not run: "+a.Reason, nil)
		why := a.Why
		if why.Reason == "" {
			why = report.Explain(a.Reason, "The selectors' findings above stand without it; the scheduler's own answer is in the pod's events (`kubectl describe pod POD`).")
		}
		f.CouldNotLook(why)
		return f
	}
	var said string
	var ev []report.Evidence
	switch {
	case a.Error != "":
		said = "fails: " + a.Error
		ev = append(ev, report.Evidence{Path: "allocator error", Value: a.Error})
	case a.Node != "":
		said = "allocates it on node " + a.Node + ": " + strings.Join(a.Devices, ", ")
		for _, d := range a.Devices {
			ev = append(ev, report.Evidence{Path: "allocator on " + a.Node, Value: d})
		}
	default:
		said = fmt.Sprintf("finds no node for it (run on %d of %d nodes; the other %d have fewer devices in their slices than the claim needs)", a.Tried, a.Nodes, a.Nodes-a.Tried)
	}
	if e.Agrees() {
		code := "CLAIM_ALLOCATABLE"
		st := report.Pass
		if !e.Allocatable() {
			// The per-request findings carry the FAIL; this one
			// confirms it and is judged the same.
			code = e.firstProblem()
			st = report.Fail
		}
		return finding("claim.allocator", code, st, subject, "the scheduler's allocator, run offline, agrees: it "+said, ev)
	}
	return finding("claim.allocator", "CLAIM_ALLOCATOR_DISAGREES", report.Warn, subject, "the scheduler's allocator, run offline, disagrees: it "+said, ev)
}

func (e *Explanation) firstProblem() string {
	for _, r := range e.Requests {
		if r.Problem != "" {
			return r.Problem
		}
	}
	return "CLAIM_NO_MATCHING_DEVICE"
}
