package agent

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// BenchmarkScrape is one /metrics request on an 8-GPU node (the faults
// fixture: every device's findings, FAILs among them), through the handler.
func BenchmarkScrape(b *testing.B) {
	a := New(Config{Node: "node-1", Interval: time.Minute, Check: checkOf(b, "demo-h100x8-faults")})
	a.RunOnce()
	h := a.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Body.Len() == 0 {
			b.Fatalf("scrape: %d, %d bytes", rec.Code, rec.Body.Len())
		}
	}
	b.ReportMetric(float64(len(a.Metrics.Page())), "bytes/page")
}

// BenchmarkRun is one check and the metrics' update and encoding: the
// cost each interval pays so that scrapes pay nothing.
func BenchmarkRun(b *testing.B) {
	a := New(Config{Node: "node-1", Interval: time.Minute, Check: checkOf(b, "demo-h100x8-faults")})
	b.ReportAllocs()
	for b.Loop() {
		a.RunOnce()
	}
}
