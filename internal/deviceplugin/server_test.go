package deviceplugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func TestAllocateConcurrent(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 8, Mode: ModeHealthy})
	evs.wait(t, EventServing, 1)
	c := client(t, m.Socket())
	var wg sync.WaitGroup
	errs := make(chan error, 16*50)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				ids := []string{fmt.Sprintf("mock-%d", (g+i)%8), fmt.Sprintf("mock-%d", (g+i+1)%8)}
				resp, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
				if err != nil {
					errs <- err
					return
				}
				if got := resp.ContainerResponses[0].Envs["MOCK_VISIBLE_DEVICES"]; got != strings.Join(ids, ",") {
					errs <- fmt.Errorf("Allocate %v answered %q", ids, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMalformedRequests(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 2, Mode: ModeHealthy})
	evs.wait(t, EventServing, 1)
	c := client(t, m.Socket())
	ctx := context.Background()
	alloc := func(reqs ...*pluginapi.ContainerAllocateRequest) error {
		_, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: reqs})
		return err
	}
	pref := func(r *pluginapi.ContainerPreferredAllocationRequest) error {
		_, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{r}})
		return err
	}
	long := strings.Repeat("x", 1<<16)
	cases := map[string]error{
		"no container requests":        alloc(),
		"a nil container request":      alloc(nil),
		"no device IDs":                alloc(&pluginapi.ContainerAllocateRequest{}),
		"unknown device":               alloc(&pluginapi.ContainerAllocateRequest{DevicesIds: []string{"gpu-9"}}),
		"a 64 KiB device ID":           alloc(&pluginapi.ContainerAllocateRequest{DevicesIds: []string{long}}),
		"one device twice":             alloc(&pluginapi.ContainerAllocateRequest{DevicesIds: []string{"mock-0", "mock-0"}}),
		"a good then a bad container":  alloc(&pluginapi.ContainerAllocateRequest{DevicesIds: []string{"mock-0"}}, &pluginapi.ContainerAllocateRequest{DevicesIds: []string{"nope"}}),
		"preferred: unknown available": pref(&pluginapi.ContainerPreferredAllocationRequest{AvailableDeviceIDs: []string{"nope"}, AllocationSize: 1}),
		"preferred: unknown must":      pref(&pluginapi.ContainerPreferredAllocationRequest{AvailableDeviceIDs: []string{"mock-0"}, MustIncludeDeviceIDs: []string{"nope"}, AllocationSize: 1}),
		"preferred: size 0":            pref(&pluginapi.ContainerPreferredAllocationRequest{AvailableDeviceIDs: []string{"mock-0"}, AllocationSize: 0}),
		"preferred: size > available":  pref(&pluginapi.ContainerPreferredAllocationRequest{AvailableDeviceIDs: []string{"mock-0"}, AllocationSize: 5}),
		"preferred: must > size":       pref(&pluginapi.ContainerPreferredAllocationRequest{AvailableDeviceIDs: []string{"mock-0", "mock-1"}, MustIncludeDeviceIDs: []string{"mock-0", "mock-1"}, AllocationSize: 1}),
		"preferred: no requests": func() error {
			_, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{})
			return err
		}(),
		"prestart: unknown": func() error {
			_, err := c.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: []string{"nope"}})
			return err
		}(),
	}
	for name, err := range cases {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	// And the server still answers.
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"mock-1"}}}}); err != nil {
		t.Fatalf("Allocate after the malformed ones: %v", err)
	}
}

// A stream the client breaks is dropped from the subscribers; a stream
// open when the server stops ends with an error on the client.
func TestStreamBreaks(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 2, Mode: ModeHealthy})
	evs.wait(t, EventServing, 1)
	ep := m.eps[0]
	c := client(t, m.Socket())
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		recvUntil(t, s, "the first list", func(d []*pluginapi.Device) bool { return len(d) == 2 })
		cancel()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ep.mu.Lock()
		n := len(ep.subs)
		ep.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ListAndWatch subscribers left after every client went away", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s, err := c.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	recvUntil(t, s, "the first list", func(d []*pluginapi.Device) bool { return len(d) == 2 })
	ep.stop()
	if _, err := s.Recv(); err == nil {
		t.Fatal("a stream survived the server's stop")
	}
}

// A client that opens ListAndWatch and never reads holds only its own
// stream: updates keep flowing to a reader, publish never blocks, and
// Allocate answers.
func TestClientThatNeverReads(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 1, Mode: ModeHealthy})
	evs.wait(t, EventServing, 1)
	ep := m.eps[0]
	// A list larger than gRPC's 64 KiB stream window: the first Send to
	// the idle client already fills it.
	big := func(h string) []*pluginapi.Device {
		var out []*pluginapi.Device
		for i := range 2000 {
			out = append(out, &pluginapi.Device{ID: fmt.Sprintf("mock-%d-%s", i, strings.Repeat("p", 40)), Health: h})
		}
		out[0].ID = "mock-0"
		return out
	}
	ep.publish(big(pluginapi.Healthy))
	idle := rawConn(t, m.Socket())
	defer idle.Close()
	if _, err := pluginapi.NewDevicePluginClient(idle).ListAndWatch(context.Background(), &pluginapi.Empty{}); err != nil {
		t.Fatal(err)
	}
	reader := client(t, m.Socket())
	s, err := reader.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	recvUntil(t, s, "the big list", func(d []*pluginapi.Device) bool { return len(d) == 2000 })
	for i := range 1000 {
		h := pluginapi.Healthy
		if i%2 == 0 {
			h = pluginapi.Unhealthy
		}
		ep.publish(big(h)) // returns: it never waits for a stream
	}
	ep.publish(big(pluginapi.Unhealthy)[:3])
	recvUntil(t, s, "the last list", func(d []*pluginapi.Device) bool { return len(d) == 3 })
	if _, err := reader.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"mock-0"}}}}); err != nil {
		t.Fatalf("Allocate with an idle stream open: %v", err)
	}
}

// The plugin refuses to serve a socket another process serves (a second
// instance), and replaces a dead one.
func TestSocketInUse(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 1, Mode: ModeHealthy})
	evs.wait(t, EventServing, 1)
	m2, err := NewMock(dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 1, Mode: ModeHealthy}, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m2.Run(ctx); err == nil || !strings.Contains(err.Error(), "served by another process") {
		t.Fatalf("a second instance on %s: got %v, want a refusal", m.Socket(), err)
	}
}
