package cluster

import (
	"fmt"
	"sort"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Meta is what the report says about the run.
type Meta struct {
	Tool   string // "accel-doctor VERSION"
	Source string // the API server's URL
	Now    time.Time
}

// Report is the findings as a report of layer 6 (Kubernetes), with its
// verdict decided: FAIL when a node has a FAIL (an agent's FAIL, a
// resource with nothing allocatable, a plugin pod not Ready).
func (a *Analyzer) Report(m Meta) *report.Report {
	r := &report.Report{
		SchemaVersion: report.SchemaVersion,
		Tool:          m.Tool,
		Command:       "cluster",
		Source:        "API server " + m.Source,
		Generated:     m.Now.UTC(),
		Layers:        []report.Layer{report.LayerKube},
		Devices:       []report.Device{},
		Findings:      a.Findings(),
	}
	if r.Findings == nil {
		r.Findings = []report.Finding{}
	}
	r.Decide()
	return r
}

// ResourceTable is, per node and extended resource, capacity and
// allocatable: the operator's first screen. Nodes without an extended
// resource are left out; nil when no node has one.
func (a *Analyzer) ResourceTable() *report.Table {
	t := &report.Table{Title: []string{"Extended resources per node"}, Header: []string{"NODE", "RESOURCE", "CAPACITY", "ALLOCATABLE", "STATE"}}
	for _, name := range a.nodeNames() {
		for _, r := range a.nodes[name].resources {
			state := "ok"
			switch {
			case r.allocatable.Cmp(r.capacity) >= 0:
			case r.allocatable.IsZero():
				state = "FAIL: nothing allocatable"
			default:
				gap := r.capacity.DeepCopy()
				gap.Sub(r.allocatable)
				state = fmt.Sprintf("WARN: %s not allocatable", gap.String())
			}
			t.Rows = append(t.Rows, []string{name, r.name, r.capacity.String(), r.allocatable.String(), state})
		}
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return t
}

func (a *Analyzer) nodeNames() []string {
	names := make([]string, 0, len(a.nodes))
	for n := range a.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
