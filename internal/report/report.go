package report

import (
	"fmt"
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

// Verdict names the first layer with a FAIL.
type Verdict struct {
	Status    Status         `json:"status"`
	Layer     Layer          `json:"layer,omitempty"`
	LayerName string         `json:"layer_name,omitempty"`
	Summary   string         `json:"summary"`
	Counts    map[Status]int `json:"counts"`
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

// Decide fills in the verdict from the findings.
func (r *Report) Decide() {
	v := Verdict{Status: Pass, Counts: map[Status]int{}}
	for _, f := range r.Findings {
		v.Counts[f.Status]++
		if f.Status == Fail && (v.Layer == 0 || f.Layer < v.Layer) {
			v.Layer = f.Layer
		}
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
	case v.Counts[Warn] > 0:
		v.Status = Warn
		v.Summary = fmt.Sprintf("no layer is broken; %d warning(s)", v.Counts[Warn])
	case len(r.Findings) == 0:
		v.Summary = "nothing was checked"
		v.Status = NotRun
	default:
		v.Summary = "no layer is broken"
		if v.Counts[NotRun] > 0 {
			v.Summary += fmt.Sprintf("; %d check(s) could not run", v.Counts[NotRun])
		}
	}
	r.Verdict = v
}

// ExitCode is 1 when any finding is a FAIL, else 0.
func (r *Report) ExitCode() int {
	for _, f := range r.Findings {
		if f.Status == Fail {
			return 1
		}
	}
	return 0
}
