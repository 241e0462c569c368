package agent

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// BenchmarkScrapeHTTP scrapes /metrics of the built agent over HTTP on
// loopback, a new connection per scrape (Prometheus keeps its connection:
// this is the worse case), for an 8-GPU node with faults, and reports the
// agent's VmRSS and VmHWM after the scrapes.
// --metrics-only: the API server is not what it measures.
func BenchmarkScrapeHTTP(b *testing.B) {
	harness.AccelDoctor(b)
	addr := freeAddr(b)
	p := harness.StartAccelDoctor(b, "--root", repoFile(b, "testdata/hosts/demo-h100x8-faults"), "agent",
		"--node-name", "node-1", "--interval", "1s", "--metrics-address", addr, "--metrics-only")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := apiserver.WaitFor(ctx, 20*time.Second, func(context.Context) (bool, error) {
		code, page, err := scrape(addr, "/metrics")
		return err == nil && code == 200 && len(series(page, "accel_doctor_check_findings")) > 0, nil
	}); err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a few runs
	tr := &http.Transport{DisableKeepAlives: true}
	cl := &http.Client{Transport: tr}
	b.ResetTimer()
	for b.Loop() {
		resp, err := cl.Get("http://" + addr + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := resp.Body.Read(make([]byte, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != 200 || n == 0 {
			b.Fatalf("scrape %d", resp.StatusCode)
		}
	}
	b.StopTimer()
	if rss, hwm, err := vmRSS(p.Pid()); err == nil {
		b.ReportMetric(float64(rss), "VmRSS-KiB")
		b.ReportMetric(float64(hwm), "VmHWM-KiB")
	}
}
