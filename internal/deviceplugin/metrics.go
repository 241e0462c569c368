package deviceplugin

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the plugin's Prometheus metrics. The label "resource" is
// the extended resource name, as the kubelet's own device-plugin metrics
// label it (pkg/kubelet/metrics: device_plugin_registration_total and
// device_plugin_alloc_duration_seconds use "resource_name"; this plugin
// keeps the shorter name that DCGM exporter and kube-state-metrics users
// join on for resources).
type Metrics struct {
	devices       *prometheus.GaugeVec
	allocations   *prometheus.CounterVec
	registrations *prometheus.CounterVec
	transitions   *prometheus.CounterVec
}

// NewMetrics makes the metrics and registers them with reg (nil: not
// registered, for tests and the mock).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accel_doctor_plugin_devices",
			Help: "Devices the plugin lists to the kubelet, by health (Healthy, Unhealthy).",
		}, []string{"resource", "health"}),
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accel_doctor_plugin_allocations_total",
			Help: "Allocate calls answered, by result (ok, or the gRPC code of the refusal).",
		}, []string{"resource", "result"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accel_doctor_plugin_registrations_total",
			Help: "Register calls made to the kubelet, by result (ok, error).",
		}, []string{"resource", "result"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accel_doctor_plugin_health_transitions_total",
			Help: "Device health changes seen, by the health a device went to.",
		}, []string{"resource", "health"}),
	}
	if reg != nil {
		reg.MustRegister(m.devices, m.allocations, m.registrations, m.transitions)
	}
	return m
}
