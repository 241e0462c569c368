package cluster

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParseSummary(t *testing.T) {
	ok := `{"v":1,"status":"FAIL","layer":4,"layer_name":"cgroup devices","code":"CGROUP_DEVICE_DENIED","message":"m","time":"2026-12-01T13:00:00Z","accelerators":8,"resources":["nvidia.com/gpu"],"future":"ignored"}`
	s, err := ParseSummary(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "FAIL" || s.Layer != 4 || s.Code != "CGROUP_DEVICE_DENIED" || s.Accelerators != 8 || len(s.Resources) != 1 {
		t.Errorf("ParseSummary = %+v", s)
	}
	long, err := ParseSummary(`{"v":1,"status":"WARN","code":"C","time":"2026-12-01T13:00:00Z","message":"` + strings.Repeat("é", 200) + `"}`)
	if err != nil || len(long.Message) > maxMessageBytes+3 || !strings.HasSuffix(long.Message, "é...") {
		t.Errorf("long message: %v, %d bytes: %q", err, len(long.Message), long.Message)
	}
	for _, tc := range []struct{ in, err string }{
		{"", "empty"},
		{"{", "not a summary"},
		{`{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z"} {}`, "more than one JSON value"},
		{`{"v":3,"status":"PASS","time":"2026-12-01T13:00:00Z"}`, "schema version 3"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","interval_s":-1}`, "interval_s -1"},
		{`{"v":2,"status":"PASS","time":"13:00"}`, "not an RFC 3339 time"},
		{`{"v":2,"status":"PASS"}`, "not an RFC 3339 time"},
		{`{"v":0,"status":"PASS","time":"2026-12-01T13:00:00Z"}`, "schema version 0"},
		{`{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":[]}}`, "version 2's"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":["a.example.com","a.example.com"]}}`, "listed twice"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":["GPU/x"]}}`, "not a driver name"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":[""]}}`, "not a driver name"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":["a.b"],"not_run":"x"}}`, "not judged"},
		{`{"v":1,"status":"BROKEN","time":"2026-12-01T13:00:00Z"}`, `status "BROKEN"`},
		{`{"v":1,"status":"FAIL","time":"2026-12-01T13:00:00Z"}`, "a FAIL names its layer"},
		{`{"v":1,"status":"FAIL","layer":9,"code":"X","time":"2026-12-01T13:00:00Z"}`, "a FAIL names its layer"},
		{`{"v":1,"status":"PASS","layer":-1,"time":"2026-12-01T13:00:00Z"}`, "layer -1"},
		{`{"v":1,"status":"PASS","accelerators":-2,"time":"2026-12-01T13:00:00Z"}`, "negative"},
		{`{"v":1,"status":"PASS","message":"` + strings.Repeat("x", maxSummaryBytes) + `"}`, "more than"},
		{`[1]`, "not a summary"},
	} {
		if _, err := ParseSummary(tc.in); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseSummary(%.60q) error %v, want one saying %q", tc.in, err, tc.err)
		}
	}
}

func FuzzParseSummary(f *testing.F) {
	f.Add(`{"v":1,"status":"FAIL","layer":4,"code":"C","time":"2026-12-01T13:00:00Z","accelerators":1}`)
	f.Add(`{"v":1,"status":"PASS"}`)
	f.Add(`null`)
	f.Add(`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":["gpu.nvidia.com"]}}`)
	f.Add(`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":[],"not_run":"why"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		sum, err := ParseSummary(s)
		if err != nil {
			return
		}
		if !validStatus[sum.Status] || sum.Version < MinSummaryVersion || sum.Version > SummaryVersion || (sum.Status == "FAIL" && sum.Code == "") {
			t.Fatalf("accepted an invalid summary: %+v", sum)
		}
	})
}

// Which DRA drivers a summary says are registered, by version: a
// version-1 summary and one without dra do not know; a judged empty list
// is "none", which is not "not known".
func TestSummaryDRARegistrations(t *testing.T) {
	for _, c := range []struct {
		in      string
		drivers []string
		known   bool
		why     string
	}{
		{`{"v":1,"status":"PASS","time":"2026-12-01T13:00:00Z"}`, nil, false, "version 1"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z"}`, nil, false, "does not say"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":[],"not_run":"plugins_registry: permission denied"}}`, nil, false, "permission denied"},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":[]}}`, []string{}, true, ""},
		{`{"v":2,"status":"PASS","time":"2026-12-01T13:00:00Z","dra":{"drivers":["gpu.nvidia.com"]}}`, []string{"gpu.nvidia.com"}, true, ""},
	} {
		s, err := ParseSummary(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		d, known, why := s.DRARegistrations()
		if known != c.known || !slices.Equal(d, c.drivers) || (c.drivers != nil) != (d != nil) || !strings.Contains(why, c.why) {
			t.Errorf("%s: %v %v %q", c.in, d, known, why)
		}
	}
}

// The annotation is on every Node: what eight DRA drivers add to it.
func TestSummaryDRASize(t *testing.T) {
	base := Summary{Version: SummaryVersion, Status: "PASS", Time: "2026-12-01T13:00:00Z", Accelerators: 8, Resources: []string{"nvidia.com/gpu"}}
	with := base
	with.DRA = &DRA{Drivers: []string{"gpu.nvidia.com", "compute-domain.nvidia.com", "gpu.intel.com", "gpu.amd.com",
		"neuron.aws.amazon.com", "tpu.google.com", "rdma.mellanox.com", "dra.net"}}
	a, _ := json.Marshal(base)
	b, _ := json.Marshal(with)
	added := len(b) - len(a)
	t.Logf("summary %d bytes; with 8 DRA drivers %d (+%d)", len(a), len(b), added)
	if added > 256 {
		t.Errorf("8 drivers add %d bytes", added)
	}
	if _, err := ParseSummary(string(b)); err != nil {
		t.Error(err)
	}
}
