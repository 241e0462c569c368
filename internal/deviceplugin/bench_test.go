package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The speed goals, measured (go test -bench . -run '^$'
// ./internal/deviceplugin/); each reports its p50 and p99 over the
// iterations:
//
//	BenchmarkHealthChangeToUpdate  a node removed or made -> the ListAndWatch update   goal p99 <= 100 ms
//	BenchmarkReregister            kubelet restart (wipe, kubelet.sock) -> Register     goal p99 <= 1 s
//	BenchmarkAllocate              Allocate over the socket, 8 x H100 fixture           goal p99 <= 1 ms
//
// The plugin's RSS with 16 devices is measured on the process, in
// internal/cli (BenchmarkPluginServeRSS).

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	m := Measurement{Samples: d}
	b.ReportMetric(float64(m.Percentile(50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(m.Percentile(99).Microseconds())/1000, "p99-ms")
}

// BenchmarkHealthChangeToUpdate: real nodes (mknod) under a temp dev,
// removed and made again; the time from the syscall to the ListAndWatch
// response that shows the change, on the client's side of the socket.
func BenchmarkHealthChangeToUpdate(b *testing.B) {
	needRoot(b)
	host := shortDir(b)
	for i := range 16 {
		mknodChar(b, filepath.Join(host, fmt.Sprintf("dev/accel/accel%d", i)))
	}
	cfg := &Config{RescanInterval: Duration(time.Hour), Resources: []ResourceConfig{{Name: "example.com/accel", Selector: Selector{DeviceNodes: []string{"/dev/accel/accel*"}}}}}
	p, evs := runPlugin(b, shortDir(b), cfg, fixtureRoot(b, host))
	evs.wait(b, EventServing, 1)
	s, err := client(b, p.Socket("example.com/accel")).ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		b.Fatal(err)
	}
	recvUntil(b, s, "16 devices", func(d []*pluginapi.Device) bool { return len(d) == 16 })
	node := filepath.Join(host, "dev/accel/accel7")
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at := time.Now()
		os.Remove(node)
		recvUntil(b, s, "accel7 Unhealthy", func(d []*pluginapi.Device) bool { return healthOf(d, "accel_accel7") == pluginapi.Unhealthy })
		lat = append(lat, time.Since(at))
		at = time.Now()
		mknodChar(b, node)
		recvUntil(b, s, "accel7 Healthy", func(d []*pluginapi.Device) bool { return healthOf(d, "accel_accel7") == pluginapi.Healthy })
		lat = append(lat, time.Since(at))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkReregister: the kubelet's restart as it happens (kubelet.sock
// and every socket removed, kubelet.sock served again), to the Register
// the kubelet accepts.
func BenchmarkReregister(b *testing.B) {
	dir := shortDir(b)
	k := startKubelet(b, dir)
	runMock(b, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 2, Mode: ModeHealthy})
	waitAccepted(b, k, 1)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := accepted(k)
		k.stop(false)
		wipe(b, dir)
		at := time.Now()
		if err := k.start(); err != nil {
			b.Fatal(err)
		}
		waitAccepted(b, k, n+1)
		lat = append(lat, time.Since(at))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkAllocate: one-GPU Allocate calls of our plugin over its
// socket (DeviceSpecs: the GPU's node, nvidiactl, nvidia-uvm, env).
func BenchmarkAllocate(b *testing.B) {
	host := copyTree(b, filepath.Join(repoRoot(b), "testdata/hosts/nvidia-h100x8"))
	cfg := h100Config()
	cfg.Resources = cfg.Resources[:1]
	p, evs := runPlugin(b, shortDir(b), cfg, fixtureRoot(b, host))
	evs.wait(b, EventServing, 1)
	c := client(b, p.Socket("example.com/gpu"))
	ids := []string{}
	for _, d := range p.monitor.Devices(0) {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	ctx := context.Background()
	for i := range 100 { // the connection and the first calls' allocations are not Allocate's cost
		c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{ids[i%len(ids)]}}}})
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at := time.Now()
		if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{ids[i%len(ids)]}}}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(at))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}
