package diagnose

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// kubeNode is a node's kubelet directory under a fixture host, with real
// sockets: gRPC servers that answer as the kubelet and plugins do, and
// sockets nobody listens on.
type kubeNode struct {
	t    *testing.T
	root string // the host's root
	fs   *hostfs.Root
	dir  string // its /var/lib/kubelet/device-plugins
	t0   time.Time
}

// pluginOptions answers GetDevicePluginOptions, the one call check makes
// on a plugin socket.
type pluginOptions struct {
	pluginapi.UnimplementedDevicePluginServer
}

func (pluginOptions) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func newKubeNode(t *testing.T, h fixture.Host) *kubeNode {
	t.Helper()
	// Short: a socket's path must fit sun_path (108 bytes).
	base, err := os.MkdirTemp("", "kn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	root := filepath.Join(base, "h")
	fs, err := fixture.NewRoot(root, h)
	if err != nil {
		t.Fatal(err)
	}
	n := &kubeNode{t: t, root: root, fs: fs, dir: filepath.Join(root, "var/lib/kubelet/device-plugins"), t0: time.Now().Add(-time.Hour).Truncate(time.Second)}
	if err := os.MkdirAll(n.dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return n
}

// serve binds name and serves gRPC on it (the plugin service when plugin),
// with the given mtime.
func (n *kubeNode) serve(name string, plugin bool, mtime time.Time) {
	n.t.Helper()
	p := filepath.Join(n.dir, name)
	l, err := net.Listen("unix", p)
	if err != nil {
		n.t.Fatal(err)
	}
	s := grpc.NewServer()
	if plugin {
		pluginapi.RegisterDevicePluginServer(s, pluginOptions{})
	}
	go s.Serve(l)
	n.t.Cleanup(s.Stop)
	n.touch(name, mtime)
}

// dead leaves a socket behind that nobody listens on, as a plugin that
// exited does.
func (n *kubeNode) dead(name string, mtime time.Time) {
	n.t.Helper()
	l, err := net.Listen("unix", filepath.Join(n.dir, name))
	if err != nil {
		n.t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	n.touch(name, mtime)
}

func (n *kubeNode) touch(name string, mtime time.Time) {
	n.t.Helper()
	if err := os.Chtimes(filepath.Join(n.dir, name), mtime, mtime); err != nil {
		n.t.Fatal(err)
	}
}

func (n *kubeNode) checkpoint(cp *kubelet.Checkpoint, mtime time.Time, corrupt bool) {
	n.t.Helper()
	b, err := kubelet.EncodeCheckpoint(cp)
	if err != nil {
		n.t.Fatal(err)
	}
	if corrupt {
		b = []byte(strings.Replace(string(b), `"Checksum":`, `"Checksum":1`, 1))
	}
	if err := os.WriteFile(filepath.Join(n.dir, kubelet.CheckpointName), b, 0o600); err != nil {
		n.t.Fatal(err)
	}
	n.touch(kubelet.CheckpointName, mtime)
}

// h100UUID is the UUID the fixture's driver gives the GPU of a minor.
func h100UUID(minor int) string {
	return fmt.Sprintf("GPU-%08x-5c1d-4e0f-9a7b-%012x", 0x3f7a2c10+minor, 0x8d2e4b6a9100+minor)
}

// healthyKube is a node where the NVIDIA plugin registered after the
// kubelet started, and one pod holds GPU 0.
func healthyKube(n *kubeNode) {
	n.serve(kubelet.KubeletSocketName, false, n.t0)
	n.serve("nvidia-gpu.sock", true, n.t0.Add(time.Second))
	var all []string
	for m := range 8 {
		all = append(all, h100UUID(m))
	}
	n.checkpoint(&kubelet.Checkpoint{
		Entries:    []kubelet.Allocation{{PodUID: "p-1", Container: "cuda", Resource: "nvidia.com/gpu", DeviceIDs: []string{h100UUID(0)}, NUMA: map[string][]int64{h100UUID(0): {0}}}},
		Registered: map[string][]string{"nvidia.com/gpu": all},
	}, n.t0.Add(5*time.Second), false)
}

// kubeFindings runs check over the node and keeps layer 6's findings as
// "CODE STATUS" -> count.
func kubeFindings(t *testing.T, n *kubeNode, name string) (map[string]int, []report.Finding) {
	t.Helper()
	rep := runFixture(t, n.fs, name, Options{})
	got := map[string]int{}
	var fs []report.Finding
	for _, f := range rep.Findings {
		if f.Layer == report.LayerKube {
			got[f.Code+" "+string(f.Status)]++
			fs = append(fs, f)
		}
	}
	return got, fs
}

func kubeKeys(m map[string]int) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s x%d", k, v))
	}
	sort.Strings(out)
	return out
}

// The healthy node has no FAIL or WARN in layer 6; each planted fault is
// the finding it is, and the inputs check cannot read are NOT_RUN.
func TestKubeLayer(t *testing.T) {
	h, ok := fixture.ByName(fixture.NameNVIDIAx8)
	if !ok {
		t.Fatal("no fixture")
	}
	for _, c := range []struct {
		name  string
		plant func(n *kubeNode)
		want  []string // findings that must be there
		clean bool     // no FAIL or WARN besides want
	}{
		{"healthy", healthyKube, []string{"KUBELET_SOCKET_OK PASS", "KUBELET_PLUGIN_OK PASS", "KUBELET_PODRESOURCES_UNAVAILABLE NOT_RUN"}, true},
		{"no plugin", func(n *kubeNode) {
			n.serve(kubelet.KubeletSocketName, false, n.t0)
		}, []string{"KUBELET_NO_PLUGIN_FOR_ACCELERATOR FAIL"}, true},
		{"stale socket", func(n *kubeNode) {
			// What the kubelet leaves when a plugin missed its restart:
			// the resource restored from the checkpoint with no device.
			n.serve(kubelet.KubeletSocketName, false, n.t0)
			n.serve("nvidia-gpu.sock", true, n.t0.Add(-time.Minute))
			n.checkpoint(&kubelet.Checkpoint{Registered: map[string][]string{"nvidia.com/gpu": {}}}, n.t0.Add(5*time.Second), false)
		}, []string{"KUBELET_PLUGIN_SOCKET_STALE FAIL"}, true},
		{"socket bound between the sweep and kubelet.sock", func(n *kubeNode) {
			healthyKube(n)
			n.touch("nvidia-gpu.sock", n.t0.Add(-2*time.Millisecond))
		}, []string{"KUBELET_PLUGIN_OK PASS"}, true},
		{"socket older, but its devices are the running kubelet's", func(n *kubeNode) {
			healthyKube(n)
			n.touch("nvidia-gpu.sock", n.t0.Add(-time.Hour))
		}, []string{"KUBELET_PLUGIN_OK PASS"}, true},
		{"resource with no plugin (running kubelet)", func(n *kubeNode) {
			n.serve(kubelet.KubeletSocketName, false, n.t0)
			n.checkpoint(&kubelet.Checkpoint{Registered: map[string][]string{"nvidia.com/gpu": {h100UUID(0)}}}, n.t0.Add(5*time.Second), false)
		}, []string{"KUBELET_RESOURCE_NO_PLUGIN FAIL"}, true},
		{"resource with no plugin (restored after a restart)", func(n *kubeNode) {
			n.serve(kubelet.KubeletSocketName, false, n.t0)
			n.checkpoint(&kubelet.Checkpoint{Registered: map[string][]string{"nvidia.com/gpu": {}}}, n.t0.Add(-time.Minute), false)
		}, []string{"KUBELET_RESOURCE_NO_PLUGIN WARN"}, true},
		{"dead socket", func(n *kubeNode) {
			n.serve(kubelet.KubeletSocketName, false, n.t0)
			n.dead("nvidia-gpu.sock", n.t0.Add(time.Second))
		}, []string{"KUBELET_PLUGIN_SOCKET_DEAD FAIL"}, true},
		{"duplicate", func(n *kubeNode) {
			healthyKube(n)
			n.serve("accel-doctor-mock-example.com_gpu.sock", true, n.t0.Add(time.Second))
			n.serve("accel-doctor-mock-example.com_gpu@2.sock", true, n.t0.Add(2*time.Second))
			b, _ := os.ReadFile(filepath.Join(n.dir, kubelet.CheckpointName))
			cp, _ := kubelet.ParseCheckpoint(b)
			cp.Registered["example.com/gpu"] = []string{"mock-0"}
			n.checkpoint(cp, n.t0.Add(5*time.Second), false)
		}, []string{"KUBELET_PLUGIN_DUPLICATE WARN"}, true},
		{"registration refused", func(n *kubeNode) {
			healthyKube(n)
			n.serve("accel-doctor-example.com_fpga.sock", true, n.t0.Add(time.Second))
		}, []string{"KUBELET_PLUGIN_NOT_REGISTERED FAIL"}, true},
		{"registration not confirmable", func(n *kubeNode) {
			healthyKube(n)
			n.serve("accel-doctor-example.com_fpga.sock", true, n.t0.Add(time.Minute))
		}, []string{"KUBELET_PLUGIN_REGISTRATION_UNKNOWN NOT_RUN"}, true},
		{"absent device", func(n *kubeNode) {
			healthyKube(n)
			gone := "GPU-00000000-0000-4000-8000-00000000dead"
			n.checkpoint(&kubelet.Checkpoint{
				Entries:    []kubelet.Allocation{{PodUID: "p-1", Container: "cuda", Resource: "nvidia.com/gpu", DeviceIDs: []string{gone}}},
				Registered: map[string][]string{"nvidia.com/gpu": {h100UUID(0)}},
			}, n.t0.Add(5*time.Second), false)
		}, []string{"KUBELET_CHECKPOINT_ABSENT_DEVICE FAIL"}, true},
		{"corrupt checkpoint", func(n *kubeNode) {
			healthyKube(n)
			b, _ := os.ReadFile(filepath.Join(n.dir, kubelet.CheckpointName))
			cp, _ := kubelet.ParseCheckpoint(b)
			n.checkpoint(cp, n.t0.Add(5*time.Second), true)
		}, []string{"KUBELET_CHECKPOINT_CORRUPT FAIL"}, true},
		{"checkpoint that does not parse", func(n *kubeNode) {
			healthyKube(n)
			if err := os.WriteFile(filepath.Join(n.dir, kubelet.CheckpointName), []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"KUBELET_CHECKPOINT_CORRUPT FAIL"}, false},
		{"checkpoint path is a directory", func(n *kubeNode) {
			healthyKube(n)
			p := filepath.Join(n.dir, kubelet.CheckpointName)
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, []string{"KUBELET_CHECKPOINT_CORRUPT NOT_RUN"}, false},
		{"plugin socket speaking no gRPC", func(n *kubeNode) {
			healthyKube(n)
			l, err := net.Listen("unix", filepath.Join(n.dir, "garbage.sock"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Write([]byte("HTTP/1.0 400 not gRPC\r\n\r\n"))
					c.Close()
				}
			}()
			n.touch("garbage.sock", n.t0.Add(time.Second))
		}, []string{"KUBELET_PLUGIN_NOT_ANSWERING FAIL"}, false},
		{"a file named like a plugin socket", func(n *kubeNode) {
			healthyKube(n)
			if err := os.WriteFile(filepath.Join(n.dir, "left-over.sock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"KUBELET_PLUGIN_SOCKET_NOT_SOCKET WARN"}, false},
		{"kubelet stopped", func(n *kubeNode) {
			n.dead("nvidia-gpu.sock", n.t0)
		}, []string{"KUBELET_SOCKET_MISSING FAIL", "KUBELET_PLUGIN_SOCKET_DEAD FAIL"}, true},
		{"kubelet killed", func(n *kubeNode) {
			n.dead(kubelet.KubeletSocketName, n.t0)
			n.serve("nvidia-gpu.sock", true, n.t0.Add(time.Second))
		}, []string{"KUBELET_SOCKET_NOT_ANSWERING FAIL"}, true},
		{"not a node", func(n *kubeNode) {
			os.RemoveAll(filepath.Dir(n.dir)) // /var/lib stays
		}, []string{"KUBELET_NOT_A_NODE NOT_RUN"}, true},
		{"not captured", func(n *kubeNode) {
			os.RemoveAll(filepath.Join(n.root, "var"))
		}, []string{"KUBELET_NOT_READ NOT_RUN"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newKubeNode(t, h.Clone())
			c.plant(n)
			got, fs := kubeFindings(t, n, h.Name)
			t.Logf("%v", kubeKeys(got))
			for _, w := range c.want {
				if got[w] == 0 {
					t.Errorf("no %s; layer 6 gave %v", w, kubeKeys(got))
				}
			}
			if c.clean {
				for _, f := range fs {
					k := f.Code + " " + string(f.Status)
					if (f.Status == report.Fail || f.Status == report.Warn) && !contains(c.want, k) {
						t.Errorf("unexpected %s: %s", k, f.Summary)
					}
				}
			}
			for _, f := range fs {
				if f.Status == report.Fail && len(f.Evidence) == 0 {
					t.Errorf("%s without evidence", f.Code)
				}
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// PodResources that answered with an error status, or could not be
// called, are NOT_RUN, never read as an empty answer.
func TestPodResourcesAnsweredWithAnError(t *testing.T) {
	for _, c := range []struct {
		name string
		list kubelet.Dial
		want string
	}{
		{"ok", kubelet.Dial{Answer: kubelet.Answered, Code: "OK"}, ""},
		{"error status", kubelet.Dial{Answer: kubelet.Answered, Code: "Unknown", Err: "rpc error: code = Unknown desc = broken"}, "KUBELET_PODRESOURCES_UNAVAILABLE NOT_RUN"},
		{"not dialed", kubelet.Dial{Answer: kubelet.NotDialed, Err: "accel-doctor-kubelet not found"}, "KUBELET_PODRESOURCES_UNAVAILABLE NOT_RUN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := &Out{check: &Check{ID: "kube.node", Layer: report.LayerKube}}
			(&Env{Root: hostfs.MustNew(t.TempDir())}).judgePodResources(out, &kubelet.Node{KubeletDir: "/var/lib/kubelet", PodResources: &kubelet.PodResources{Path: "/var/lib/kubelet/pod-resources/kubelet.sock", List: c.list}})
			var got []string
			for _, f := range out.findings {
				got = append(got, f.Code+" "+string(f.Status))
			}
			if strings.Join(got, ",") != c.want {
				t.Errorf("findings %q, want %q", got, c.want)
			}
		})
	}
}
