package agent

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// FindingLabels are the labels of accel_doctor_check_findings. node, gpu,
// UUID, modelName and pci_bus_id are DCGM exporter's names (its default
// labels, from NVML; see Identity), resource is kube-state-metrics' (the
// label of kube_node_status_capacity), so that a query joins on them
// without label_replace.
var FindingLabels = []string{"node", "layer", "code", "status", "pci_bus_id", "gpu", "UUID", "modelName", "resource"}

// Metrics are the agent's Prometheus metrics, in a registry of their own
// (no Go runtime or process collectors: Prometheus' own node and
// kubelet scrapes cover the process). The exposition is encoded once per
// change (a run, an API outcome) and served from that cache, so a scrape
// costs a copy of a few kilobytes whatever the number of findings.
type Metrics struct {
	node     string
	reg      *prometheus.Registry
	findings *prometheus.GaugeVec
	status   prometheus.Gauge
	duration prometheus.Gauge
	lastRun  prometheus.Gauge
	apiErrs  *prometheus.CounterVec
	apiOK    prometheus.Gauge

	mu   sync.Mutex // serializes updates and the encoding
	page []byte     // the exposition, text format; guarded by mu
	err  error      // the last encoding error; guarded by mu
}

// NewMetrics makes the metrics of the agent on node.
func NewMetrics(node string) *Metrics {
	c := prometheus.Labels{"node": node}
	m := &Metrics{
		node: node,
		reg:  prometheus.NewRegistry(),
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accel_doctor_check_findings",
			Help: "Findings of the last check, by layer (1 PCI ... 8 functional), code, status (PASS, WARN, FAIL, NOT_RUN) and device (empty device labels: a finding about the host, a driver or a layer).",
		}, FindingLabels),
		status: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accel_doctor_check_status", ConstLabels: c,
			Help: "The last check's verdict as node-problem-detector's custom plugins exit: 0 OK (PASS or WARN), 1 NonOK (a FAIL), 2 Unknown (nothing judged).",
		}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accel_doctor_check_duration_seconds", ConstLabels: c,
			Help: "How long the last check took.",
		}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accel_doctor_check_last_run_timestamp_seconds", ConstLabels: c,
			Help: "When the last check finished (Unix time).",
		}),
		apiErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accel_doctor_agent_api_errors_total", ConstLabels: c,
			Help: "Writes to the API server that failed, by what was written (condition, annotation, event).",
		}, []string{"write"}),
		apiOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accel_doctor_agent_api_last_success_timestamp_seconds", ConstLabels: c,
			Help: "When the agent last published its node's state to the API server (Unix time; 0: never).",
		}),
	}
	m.reg.MustRegister(m.findings, m.status, m.duration, m.lastRun, m.apiErrs, m.apiOK)
	for _, w := range []string{"condition", "annotation", "event"} {
		m.apiErrs.WithLabelValues(w) // present at 0, so that rate() sees the first error
	}
	m.encode()
	return m
}

// Update replaces the findings' series with the run's and re-encodes.
func (m *Metrics) Update(s *State, ids map[string]Identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.findings.Reset()
	for _, f := range s.Report.Findings {
		id := ids[deviceOf(s.Report, f)]
		m.findings.WithLabelValues(m.node, strconv.Itoa(int(f.Layer)), f.Code, string(f.Status),
			id.PCIBusID, id.GPU, id.UUID, id.ModelName, id.Resource).Add(1)
	}
	m.status.Set(float64(s.Report.ExitCode()))
	m.duration.Set(s.Duration.Seconds())
	m.lastRun.Set(float64(s.Finished.UnixNano()) / 1e9)
	m.encodeLocked()
}

// APIError counts a failed write.
func (m *Metrics) APIError(write string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apiErrs.WithLabelValues(write).Inc()
	m.encodeLocked()
}

// APISuccess records a publication.
func (m *Metrics) APISuccess(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apiOK.Set(float64(at.UnixNano()) / 1e9)
	m.encodeLocked()
}

func (m *Metrics) encode() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.encodeLocked()
}

func (m *Metrics) encodeLocked() {
	mfs, err := m.reg.Gather()
	if err != nil {
		m.err = err
		return
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			m.err = err
			return
		}
	}
	m.page, m.err = b.Bytes(), nil
}

// Page is the cached exposition.
func (m *Metrics) Page() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.page
}

// ServeHTTP serves the cached exposition (the Prometheus text format,
// which every scraper accepts).
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	page, err := m.page, m.err
	m.mu.Unlock()
	if err != nil && page == nil {
		http.Error(w, "metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	w.Header().Set("Content-Length", strconv.Itoa(len(page)))
	w.Write(page)
}
