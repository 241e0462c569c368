package cluster

import (
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
	long, err := ParseSummary(`{"v":1,"status":"WARN","code":"C","time":"t","message":"` + strings.Repeat("é", 200) + `"}`)
	if err != nil || len(long.Message) > maxMessageBytes+3 || !strings.HasSuffix(long.Message, "é...") {
		t.Errorf("long message: %v, %d bytes: %q", err, len(long.Message), long.Message)
	}
	for _, tc := range []struct{ in, err string }{
		{"", "empty"},
		{"{", "not a summary"},
		{`{"v":1,"status":"PASS","time":"t"} {}`, "more than one JSON value"},
		{`{"v":2,"status":"PASS","time":"t"}`, "schema version 2"},
		{`{"v":1,"status":"BROKEN","time":"t"}`, `status "BROKEN"`},
		{`{"v":1,"status":"FAIL","time":"t"}`, "a FAIL names its layer"},
		{`{"v":1,"status":"FAIL","layer":9,"code":"X","time":"t"}`, "a FAIL names its layer"},
		{`{"v":1,"status":"PASS","layer":-1,"time":"t"}`, "layer -1"},
		{`{"v":1,"status":"PASS","accelerators":-2,"time":"t"}`, "negative"},
		{`{"v":1,"status":"PASS","message":"` + strings.Repeat("x", maxSummaryBytes) + `"}`, "more than"},
		{`[1]`, "not a summary"},
	} {
		if _, err := ParseSummary(tc.in); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseSummary(%.60q) error %v, want one saying %q", tc.in, err, tc.err)
		}
	}
}

func FuzzParseSummary(f *testing.F) {
	f.Add(`{"v":1,"status":"FAIL","layer":4,"code":"C","time":"t","accelerators":1}`)
	f.Add(`{"v":1,"status":"PASS"}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, s string) {
		sum, err := ParseSummary(s)
		if err != nil {
			return
		}
		if !validStatus[sum.Status] || sum.Version != SummaryVersion || (sum.Status == "FAIL" && sum.Code == "") {
			t.Fatalf("accepted an invalid summary: %+v", sum)
		}
	})
}
