package agent

import (
	"fmt"
	"slices"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// ConditionType is the node condition the agent owns.
const ConditionType = "AcceleratorsReady"

// Condition statuses, as core/v1 ConditionStatus spells them.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Reasons of the condition when no finding's code is the reason.
const (
	// ReasonReady: every judged check passed.
	ReasonReady = "AcceleratorsReady"
	// ReasonNotJudged: every check was NOT_RUN; nothing could be judged.
	ReasonNotJudged = "ChecksNotRun"
)

// maxMessageBytes bounds the condition's message: `kubectl describe
// node` shows it on one line, and the summary annotation (cluster.Summary)
// keeps at most 256 bytes of it.
const maxMessageBytes = 256

// Condition is the AcceleratorsReady condition of one run.
type Condition struct {
	Status  string // True, False or Unknown
	Reason  string
	Message string
}

// Same says whether c and d are the same state: a transition, and so an
// Event, is a change of status or reason (the message carries counts and
// times that change between runs of the same state).
func (c Condition) Same(d Condition) bool { return c.Status == d.Status && c.Reason == d.Reason }

// EventType is the core/v1 Event type for entering c: Warning for False
// and Unknown, Normal for True.
func (c Condition) EventType() string {
	if c.Status == ConditionTrue {
		return "Normal"
	}
	return "Warning"
}

// State is what one run publishes.
type State struct {
	Report    *report.Report
	Condition Condition
	Summary   cluster.Summary
	Duration  time.Duration
	Finished  time.Time
}

// lead is the finding a verdict is about: the first FAIL of the verdict's
// layer (the verdict's layer is the first broken checkpoint's when
// findings carry checkpoints, else the lowest layer with a FAIL), else the
// first WARN; ok false when there is neither.
func lead(r *report.Report) (report.Finding, bool) {
	for _, st := range []report.Status{report.Fail, report.Warn} {
		for _, f := range r.Findings {
			if f.Status == st && (st != report.Fail || f.Layer == r.Verdict.Layer) {
				return f, true
			}
		}
		for _, f := range r.Findings {
			if f.Status == st {
				return f, true
			}
		}
	}
	return report.Finding{}, false
}

// BuildCondition maps a report to the condition: FAIL is False with the
// first failing code as the reason; NOT_RUN (nothing judged) is Unknown;
// PASS and WARN are True (a WARN does not stop the accelerators from
// working; its code is the reason so that it shows).
func BuildCondition(r *report.Report) Condition {
	f, ok := lead(r)
	switch r.Verdict.Status {
	case report.Fail:
		return Condition{Status: ConditionFalse, Reason: f.Code,
			Message: cluster.Cut(fmt.Sprintf("layer %d (%s): %s; %d FAIL(s)", int(f.Layer), f.Layer.Name(), f.Summary, r.Verdict.Counts[report.Fail]), maxMessageBytes)}
	case report.NotRun:
		return Condition{Status: ConditionUnknown, Reason: ReasonNotJudged, Message: cluster.Cut(r.Verdict.Summary, maxMessageBytes)}
	case report.Warn:
		if ok {
			return Condition{Status: ConditionTrue, Reason: f.Code, Message: cluster.Cut("WARN: "+f.Summary, maxMessageBytes)}
		}
	}
	return Condition{Status: ConditionTrue, Reason: ReasonReady, Message: cluster.Cut(r.Verdict.Summary, maxMessageBytes)}
}

// acceleratorKinds are the report.Device kinds cluster.Summary counts.
var acceleratorKinds = map[string]bool{"gpu": true, "accelerator": true, "video": true}

// BuildSummary is the node annotation's value for a report: the verdict,
// its first failing layer and code, how many accelerator functions the
// check found, the extended resources the kubelet knows of, and the
// agent's interval (by which a reader tells a stale summary).
func BuildSummary(r *report.Report, resources []string, at time.Time, interval time.Duration) cluster.Summary {
	s := cluster.Summary{Version: cluster.SummaryVersion, Status: string(r.Verdict.Status), Time: at.UTC().Format(time.RFC3339),
		Interval: int(interval.Round(time.Second) / time.Second)}
	if f, ok := lead(r); ok {
		s.Code, s.Message = f.Code, cluster.Cut(f.Summary, maxMessageBytes)
		if f.Status == report.Fail {
			s.Layer, s.LayerName = int(f.Layer), f.Layer.Name()
		}
	}
	for _, d := range r.Devices {
		if acceleratorKinds[d.Kind] || d.Driver == "vfio-pci" {
			s.Accelerators++
		}
	}
	if len(resources) > 0 {
		s.Resources = slices.Sorted(slices.Values(resources))
	}
	return s
}
