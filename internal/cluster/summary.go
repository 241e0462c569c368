package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// SummaryAnnotation is the Node annotation in which accel-doctor's agent
// (`accel-doctor agent`, the DaemonSet) publishes the outcome of its last
// `check` of the node, and which `cluster` reads. Its value is a Summary
// as JSON.
const SummaryAnnotation = "accel-doctor.io/summary"

// SummaryVersion is the version of the Summary schema; a reader refuses a
// summary of a version it does not know rather than guess at its fields.
// Version 2 added DRA; a version-1 summary still reads, without it (an
// agent of an older release: its nodes' DRA registrations are not known).
const SummaryVersion = 2

// MinSummaryVersion is the oldest version ParseSummary reads.
const MinSummaryVersion = 1

// maxSummaryBytes bounds what ParseSummary reads. The API server bounds
// all annotations of an object together to 256 KiB
// (apimachinery/pkg/api/validation TotalAnnotationSizeLimitB); a summary
// is a few hundred bytes, so anything near that limit is not ours.
const maxSummaryBytes = 16 << 10

// Summary is the agent's verdict on its node, compact enough for an
// annotation (docs/cluster.md documents it for other readers):
//
//	{"v":2,"status":"FAIL","layer":4,"layer_name":"cgroup devices",
//	 "code":"CGROUP_DEVICE_DENIED","message":"...","time":"2026-12-01T13:00:00Z",
//	 "accelerators":8,"resources":["nvidia.com/gpu"],"dra":{"drivers":["gpu.nvidia.com"]}}
type Summary struct {
	// Version is SummaryVersion.
	Version int `json:"v"`
	// Status is the check's verdict: PASS, WARN, FAIL or NOT_RUN.
	Status string `json:"status"`
	// Layer and LayerName are the first layer with a FAIL (report.Layer
	// numbering, 1 PCI ... 8 functional); 0 and "" without a FAIL.
	Layer     int    `json:"layer,omitempty"`
	LayerName string `json:"layer_name,omitempty"`
	// Code is the first failing finding's code (the first WARN's without
	// a FAIL); "" when everything passed.
	Code string `json:"code,omitempty"`
	// Message is that finding's summary; the agent writes at most 256
	// bytes and ParseSummary cuts a longer one there.
	Message string `json:"message,omitempty"`
	// Time is when the check ran (RFC 3339, UTC).
	Time string `json:"time"`
	// Interval is how often the agent checks, in seconds (its
	// --interval), so that a reader can tell a summary that is no longer
	// current (Stale); 0 from an agent of an older release.
	Interval int `json:"interval_s,omitempty"`
	// Accelerators is how many accelerator PCI functions the check found
	// on the node (GPUs, NPUs, video, VFIO-bound devices).
	Accelerators int `json:"accelerators"`
	// Resources are the extended resources (device-plugin resource names)
	// the node's plugins registered with the kubelet, as the agent saw in
	// the kubelet's checkpoint; empty when none.
	Resources []string `json:"resources,omitempty"`
	// DRA is what the check saw of the DRA drivers registered with the
	// node's kubelet (version 2 on); nil when the agent did not say.
	DRA *DRA `json:"dra,omitempty"`
}

// DRA is the node's DRA registrations in a summary. It is on every Node
// object, so it is kept to the names: eight drivers of 15-25 characters
// add 166 bytes to a 101-byte summary (TestSummaryDRASize measures it).
type DRA struct {
	// Drivers are the DRA drivers with a live registration the kubelet
	// would accept (plugins_registry socket answering GetInfo as a
	// DRAPlugin of a supported version, its endpoint accepting a
	// connection), sorted; empty when there is none. Meaningless when
	// NotRun is set.
	Drivers []string `json:"drivers"`
	// NotRun says why the registrations could not be judged (the
	// registration directory unreadable or not seen, a socket that could
	// not be dialed): then no driver is known to be registered or not.
	NotRun string `json:"not_run,omitempty"`
}

// DefaultAgentInterval is the agent's --interval default: the interval
// of a summary that does not say (an older agent's).
const DefaultAgentInterval = 60 * time.Second

// staleIntervals is how many intervals old a summary may be and still say
// what the node is: the agent's own health endpoint fails after 3
// (internal/agent Healthy), and then the kubelet restarts it.
const staleIntervals = 3

// maxInterval bounds Interval (a day): the agent's checks are minutes apart.
const maxInterval = 24 * 60 * 60

// Stale reports whether the summary is too old to say what the node is
// now: older than 3 of the agent's intervals (DefaultAgentInterval when it
// does not say), by now (the zero time: time.Now). The agent that wrote it
// has stopped, or cannot publish. A time in the future (clocks apart) is
// not stale. why says how old it is against the limit.
func (s Summary) Stale(now time.Time) (stale bool, why string) {
	t, err := time.Parse(time.RFC3339, s.Time)
	if err != nil {
		return true, "its time does not read" // ParseSummary refuses such a time
	}
	if now.IsZero() {
		now = time.Now()
	}
	iv := DefaultAgentInterval
	if s.Interval > 0 {
		iv = time.Duration(s.Interval) * time.Second
	}
	age, limit := now.Sub(t), staleIntervals*iv
	return age > limit, fmt.Sprintf("%v old, more than 3 of its agent's intervals (%v)", age.Round(time.Second), limit)
}

// maxDRADrivers bounds Drivers: a node runs a handful of DRA drivers.
const maxDRADrivers = 64

// DRARegistrations says which DRA drivers are registered on the node, or
// why that is not known: a version-1 summary (an older agent), a summary
// without DRA, or registrations the agent's check could not judge.
func (s Summary) DRARegistrations() (drivers []string, known bool, why string) {
	switch {
	case s.Version < 2:
		return nil, false, fmt.Sprintf("the agent's summary is version %d, which carries no DRA registrations (version 2 does: upgrade the agent)", s.Version)
	case s.DRA == nil:
		return nil, false, "the agent's summary does not say which DRA drivers are registered (its check did not run the Kubernetes layer)"
	case s.DRA.NotRun != "":
		return nil, false, "the agent's check could not judge the node's DRA registrations: " + s.DRA.NotRun
	}
	return s.DRA.Drivers, true, ""
}

// maxMessageBytes is the most of Summary.Message a report shows.
const maxMessageBytes = 256

// Cut shortens s (trimmed of surrounding space) to at most n bytes, at a
// rune boundary, the cut marked "..." within the n: what the agent writes
// and what a reader shows of a message.
func Cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	n -= len("...")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + "..."
}

var validStatus = map[string]bool{"PASS": true, "WARN": true, "FAIL": true, "NOT_RUN": true}

// ParseSummary decodes and validates an annotation's value. Anyone who can
// patch the node can write it, so everything is checked: the version, the
// status, a FAIL that names its layer and code, counts that are not
// negative.
func ParseSummary(s string) (Summary, error) {
	var sum Summary
	if len(s) > maxSummaryBytes {
		return sum, fmt.Errorf("%d bytes, more than the %d a summary may have", len(s), maxSummaryBytes)
	}
	if strings.TrimSpace(s) == "" {
		return sum, errors.New("empty")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&sum); err != nil {
		return Summary{}, fmt.Errorf("not a summary: %w", err)
	}
	if dec.More() {
		return Summary{}, errors.New("not a summary: more than one JSON value")
	}
	switch {
	case sum.Version < MinSummaryVersion || sum.Version > SummaryVersion:
		return Summary{}, fmt.Errorf("schema version %d, this accel-doctor reads versions %d to %d", sum.Version, MinSummaryVersion, SummaryVersion)
	case !validStatus[sum.Status]:
		return Summary{}, fmt.Errorf("status %q is not PASS, WARN, FAIL or NOT_RUN", sum.Status)
	case sum.Status == "FAIL" && (sum.Layer < 1 || sum.Layer > 8 || sum.Code == ""):
		return Summary{}, fmt.Errorf("a FAIL with layer %d and code %q: a FAIL names its layer (1-8) and code", sum.Layer, sum.Code)
	case sum.Layer < 0 || sum.Layer > 8:
		return Summary{}, fmt.Errorf("layer %d is not 1-8", sum.Layer)
	case sum.Accelerators < 0:
		return Summary{}, fmt.Errorf("accelerators %d is negative", sum.Accelerators)
	case sum.Interval < 0 || sum.Interval > maxInterval:
		return Summary{}, fmt.Errorf("interval_s %d is not 0 to %d", sum.Interval, maxInterval)
	}
	if _, err := time.Parse(time.RFC3339, sum.Time); err != nil {
		// Without its time a summary cannot be told current or stale.
		return Summary{}, fmt.Errorf("time %q is not an RFC 3339 time", Cut(sum.Time, 64))
	}
	if d := sum.DRA; d != nil {
		if sum.Version < 2 {
			return Summary{}, fmt.Errorf("dra in a version-%d summary: it is version 2's", sum.Version)
		}
		if len(d.Drivers) > maxDRADrivers {
			return Summary{}, fmt.Errorf("dra lists %d drivers, more than the %d a node runs", len(d.Drivers), maxDRADrivers)
		}
		if d.NotRun != "" && len(d.Drivers) > 0 {
			return Summary{}, errors.New("dra lists drivers and says they were not judged")
		}
		seen := make(map[string]bool, len(d.Drivers))
		for _, n := range d.Drivers {
			// A driver name is a DNS subdomain (resource.k8s.io/v1
			// ResourceSlice.spec.driver: at most 63 characters).
			if n == "" || len(n) > 63 || seen[n] || strings.ContainsFunc(n, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') }) {
				return Summary{}, fmt.Errorf("dra driver %q is not a driver name, or is listed twice", Cut(n, 64))
			}
			seen[n] = true
		}
		d.NotRun = Cut(d.NotRun, maxMessageBytes)
	}
	sum.Message = Cut(sum.Message, maxMessageBytes)
	return sum, nil
}
