package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// SummaryAnnotation is the Node annotation in which accel-doctor's agent
// (`accel-doctor agent`, the DaemonSet) publishes the outcome of its last
// `check` of the node, and which `cluster` reads. Its value is a Summary
// as JSON.
const SummaryAnnotation = "accel-doctor.io/summary"

// SummaryVersion is the version of the Summary schema; a reader refuses a
// summary of a version it does not know rather than guess at its fields.
const SummaryVersion = 1

// maxSummaryBytes bounds what ParseSummary reads. The API server bounds
// all annotations of an object together to 256 KiB
// (apimachinery/pkg/api/validation TotalAnnotationSizeLimitB); a summary
// is a few hundred bytes, so anything near that limit is not ours.
const maxSummaryBytes = 16 << 10

// Summary is the agent's verdict on its node, compact enough for an
// annotation (docs/cluster.md documents it for other readers):
//
//	{"v":1,"status":"FAIL","layer":4,"layer_name":"cgroup devices",
//	 "code":"CGROUP_DEVICE_DENIED","message":"...","time":"2026-12-01T13:00:00Z",
//	 "accelerators":8,"resources":["nvidia.com/gpu"]}
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
	// Accelerators is how many accelerator PCI functions the check found
	// on the node (GPUs, NPUs, video, VFIO-bound devices).
	Accelerators int `json:"accelerators"`
	// Resources are the extended resources (device-plugin resource names)
	// the node's plugins registered with the kubelet, as the agent saw in
	// the kubelet's checkpoint; empty when none.
	Resources []string `json:"resources,omitempty"`
}

// maxMessageBytes is the most of Summary.Message a report shows.
const maxMessageBytes = 256

// cut shortens s to at most n bytes, at a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
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
	case sum.Version != SummaryVersion:
		return Summary{}, fmt.Errorf("schema version %d, this accel-doctor reads version %d", sum.Version, SummaryVersion)
	case !validStatus[sum.Status]:
		return Summary{}, fmt.Errorf("status %q is not PASS, WARN, FAIL or NOT_RUN", sum.Status)
	case sum.Status == "FAIL" && (sum.Layer < 1 || sum.Layer > 8 || sum.Code == ""):
		return Summary{}, fmt.Errorf("a FAIL with layer %d and code %q: a FAIL names its layer (1-8) and code", sum.Layer, sum.Code)
	case sum.Layer < 0 || sum.Layer > 8:
		return Summary{}, fmt.Errorf("layer %d is not 1-8", sum.Layer)
	case sum.Accelerators < 0:
		return Summary{}, fmt.Errorf("accelerators %d is negative", sum.Accelerators)
	}
	sum.Message = cut(sum.Message, maxMessageBytes)
	return sum, nil
}
