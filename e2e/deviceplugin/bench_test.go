package deviceplugin

import (
	"slices"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Latencies as the kubelet's device manager sees them (GetCapacity, polled
// every 500 µs by the harness, so each figure is up to that much late).
// With the stub they measure the harness and the manager; with our plugin,
// the plugin too.
//
//	go test -run '^$' -bench . ./deviceplugin   (as root)

// A kubelet restart (manager stopped, a new one started over the same
// directory, wiping the sockets) until the plugin has registered again and
// the manager counts its devices healthy. The goal: <= 1 s.
func BenchmarkKubeletRestartToReregistered(b *testing.B) {
	k, _ := startStub(b, 2)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		k.Restart()
		if _, err := k.WaitCount(ctx(b), stubResource, 2, 2); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	report(b, lat)
}

// A device's health change sent on ListAndWatch until the manager's
// allocatable shows it.
func BenchmarkHealthChangeToAllocatable(b *testing.B) {
	k, p := startStub(b, 2)
	var lat []time.Duration
	healthy := true
	for b.Loop() {
		h, want := pluginapi.Unhealthy, int64(1)
		if !healthy {
			h, want = pluginapi.Healthy, 2
		}
		start := time.Now()
		p.setHealth("stub-1", h)
		if _, err := k.WaitCount(ctx(b), stubResource, 2, want); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		healthy = !healthy
	}
	report(b, lat)
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// With our plugin (`accel-doctor plugin serve`, a process): a device node
// removed (or made again with mknod) until the manager's allocatable
// shows it. This is the whole path: inotify, the plugin's health
// evaluation, ListAndWatch, the manager. The goal: p99 <= 100 ms.
func BenchmarkOursNodeChangeToAllocatable(b *testing.B) {
	k, _ := startOurs(b, 2)
	var lat []time.Duration
	present := true
	for b.Loop() {
		want := int64(1)
		start := time.Now()
		if present {
			rmnod(b, k.Root, "dev/accel/accel1")
		} else {
			mknod(b, k.Root, "dev/accel/accel1")
			want = 2
		}
		if _, err := k.WaitCount(ctx(b), oursResource, 2, want); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		present = !present
	}
	report(b, lat)
}

// With our plugin: a kubelet restart until both of its resources are
// registered again and counted healthy. The goal: <= 1 s.
func BenchmarkOursKubeletRestartToReregistered(b *testing.B) {
	k, _ := startOurs(b, 2)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		k.Restart()
		for _, r := range []string{oursResource, oursCDIResource} {
			if _, err := k.WaitCount(ctx(b), r, 2, 2); err != nil {
				b.Fatal(err)
			}
		}
		lat = append(lat, time.Since(start))
	}
	report(b, lat)
}
