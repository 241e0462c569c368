package deviceplugin

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
)

// syncBuffer is a log sink the plugin's goroutines may write to while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A CDI resource whose selector takes a PCI function that has no device
// node: on the GPU + audio fixture, a selector of vendor 10de takes the
// GPU (vfio-pci: /dev/vfio/2, and /dev/vfio/vfio shared) and its HDMI
// audio function (snd_hda_intel, which makes no node accel-doctor knows
// of). The audio function is listed Unhealthy with the reason, logged as
// a WARN naming it; the spec declares the GPU alone; Allocate answers the
// GPU's CDI name, which resolves, and refuses the audio function instead
// of answering a name nothing resolves; plugin test finds the Unhealthy
// device and nothing unresolvable. With a selector that takes only the
// audio function, no spec is written, and that is logged.
func TestCDIResourceDeviceWithoutNodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sel    PCISelector
		inSpec []string // the devices the spec declares; none: no spec
	}{
		{"gpu and audio", PCISelector{Vendor: "10de"}, []string{"0000:01:00.0"}},
		{"audio only", PCISelector{Vendor: "10de", Class: "0403"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/gpu-audio-snd-hda-intel"))
			root := fixtureRoot(t, host)
			sel := tc.sel
			cfg := &Config{Resources: []ResourceConfig{{Name: "example.com/gpu", Selector: Selector{PCI: &sel},
				CDI: &CDIConfig{Vendor: "example.com", Class: "gpu"}}}}
			var logs syncBuffer
			evs := newEvents()
			p, err := New(shortDir(t), cfg, Options{Root: root, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Notify: evs.notify, NoUevents: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			evs.wait(t, EventServing, 1)
			sock := p.Socket("example.com/gpu")
			c := client(t, sock)

			// Health: the audio function Unhealthy, with the reason.
			s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			devs := recvUntil(t, s, "the first list", func([]*pluginapi.Device) bool { return true })
			if h := healthOf(devs, "0000:01:00.1"); h != pluginapi.Unhealthy {
				t.Errorf("audio function 0000:01:00.1: %q, want Unhealthy", h)
			}
			want := map[string]string{"0000:01:00.1": pluginapi.Unhealthy}
			if tc.inSpec != nil {
				want["0000:01:00.0"] = pluginapi.Healthy
			}
			if len(devs) != len(want) {
				t.Errorf("listed %d devices, want %d", len(devs), len(want))
			}
			for id, h := range want {
				if got := healthOf(devs, id); got != h {
					t.Errorf("%s: %q, want %s\n%s", id, got, h, logs.String())
				}
			}
			for _, d := range p.monitor.Devices(0) {
				if d.ID == "0000:01:00.1" && !strings.Contains(d.Reason, "no device node of its own") {
					t.Errorf("reason %q", d.Reason)
				}
			}

			// The spec: the devices with nodes, and nothing else.
			specPath := filepath.Join(host, "var/run/cdi", SpecFileName(cfg.Resources[0].CDI))
			b, err := os.ReadFile(specPath)
			if tc.inSpec == nil {
				if err == nil {
					t.Errorf("a spec was written though no device has a node:\n%s", b)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				spec, err := cdi.ParseSpec(b, "spec")
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, d := range spec.Devices {
					got = append(got, d.Name)
				}
				if !slices.Equal(got, tc.inSpec) {
					t.Errorf("spec declares %v, want %v", got, tc.inSpec)
				}
				if d := spec.Devices[0]; len(d.ContainerEdits.DeviceNodes) != 1 || d.ContainerEdits.DeviceNodes[0].Path != "/dev/vfio/2" {
					t.Errorf("GPU's nodes in the spec: %+v", d.ContainerEdits.DeviceNodes)
				}
				// The group node is the GPU's; the container node is every
				// VFIO user's.
				if g := spec.ContainerEdits.DeviceNodes; len(g) != 1 || g[0].Path != "/dev/vfio/vfio" {
					t.Errorf("the spec's global nodes: %+v, want /dev/vfio/vfio alone", g)
				}
			}

			// Allocate names only what the spec declares.
			alloc := func(id string) (*pluginapi.AllocateResponse, error) {
				return c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{id}}}})
			}
			for _, id := range tc.inSpec {
				resp, err := alloc(id)
				if err != nil {
					t.Fatalf("Allocate %s: %v", id, err)
				}
				name := "example.com/gpu=" + id
				if cds := resp.ContainerResponses[0].CdiDevices; len(cds) != 1 || cds[0].Name != name {
					t.Errorf("Allocate %s: CDI devices %v, want %s", id, cds, name)
				}
				resolved := false
				for _, f := range cdi.Check(root, name, cdi.Options{}).Facts {
					resolved = resolved || f.Kind == cdi.KindDeviceResolved
				}
				if !resolved {
					t.Errorf("%s does not resolve against the spec written", name)
				}
			}
			resp, err := alloc("0000:01:00.1")
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no device node of its own") {
				t.Errorf("Allocate of the audio function: %v %v, want FailedPrecondition with the reason", resp, err)
			}

			// The log names the device and why, as a warning.
			warned := func(sub ...string) bool {
				for _, l := range strings.Split(logs.String(), "\n") {
					ok := strings.Contains(l, "level=WARN")
					for _, s := range sub {
						ok = ok && strings.Contains(l, s)
					}
					if ok {
						return true
					}
				}
				return false
			}
			if !warned("device unhealthy", "device=0000:01:00.1", "no device node of its own") {
				t.Errorf("no WARN names 0000:01:00.1 and why:\n%s", logs.String())
			}
			if tc.inSpec == nil && !warned("CDI spec not written", "resource=example.com/gpu") {
				t.Errorf("no WARN says the spec was not written:\n%s", logs.String())
			}

			// plugin test, on the plugin's socket: the Unhealthy device, and
			// nothing unresolvable.
			if tc.inSpec != nil {
				res, err := Test(context.Background(), TestOptions{Socket: sock, Timeout: 5 * time.Second, Watch: 200 * time.Millisecond, Root: root})
				if err != nil {
					t.Fatal(err)
				}
				if got := defects(res); !slices.Equal(got, []string{CodeDevicesUnhealthy}) || !hasCode(res, CodeAllocateCDIResolved) {
					t.Errorf("plugin test: defects %v, want %s alone and %s\n%s", got, CodeDevicesUnhealthy, CodeAllocateCDIResolved, dump(res))
				}
			}
		})
	}
}

// A CDI spec that cannot be written (here the spec directory is a file)
// is logged as an error, and Allocate refuses the device the spec should
// have declared rather than answer a name nothing resolves.
func TestCDIAllocateRefusedWithoutSpec(t *testing.T) {
	host := copyTree(t, filepath.Join(repoRoot(t), "testdata/hosts/gpu-audio-snd-hda-intel"))
	if err := os.MkdirAll(filepath.Join(host, "var/run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "var/run/cdi"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Resources: []ResourceConfig{{Name: "example.com/gpu", Selector: Selector{PCI: &PCISelector{Vendor: "10de", Class: "0300"}},
		CDI: &CDIConfig{Vendor: "example.com", Class: "gpu"}}}}
	var logs syncBuffer
	p, err := New(shortDir(t), cfg, Options{Root: fixtureRoot(t, host), Logger: slog.New(slog.NewTextHandler(&logs, nil)), NoUevents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.monitor.watcher.Close()
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "CDI spec not written") {
		t.Errorf("the failed write is not logged as an error:\n%s", logs.String())
	}
	if d := p.monitor.Devices(0); len(d) != 1 || d[0].Health != pluginapi.Healthy {
		t.Fatalf("devices %+v, want the GPU, Healthy", d)
	}
	_, err = p.resources[0].allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:01:00.0"}}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "could not be written") {
		t.Errorf("Allocate: %v, want FailedPrecondition: the spec could not be written", err)
	}
}
