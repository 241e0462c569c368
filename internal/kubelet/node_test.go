package kubelet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

const bootNow = "5c0ffee0-0000-4000-8000-0000000b007e"

// node is a host whose kubelet directory holds every case: the kubelet's
// socket, a healthy NVIDIA plugin, an AMD plugin whose socket is older
// than kubelet.sock, a socket nobody listens on, a regular file named
// like a socket, a directory, the checkpoint, and PodResources; the host
// has gpu0 and gpu2 (gpu1 was replaced).
type node struct {
	dir   string
	calls *calls
	start time.Time // kubelet.sock's mtime
}

func newNode(t testing.TB, cp []byte) *node {
	t.Helper()
	dir, dp, pr := kubeletTree(t)
	n := &node{dir: dir, calls: &calls{}, start: time.Now().Add(-time.Hour).Truncate(time.Second)}
	serve(t, filepath.Join(dp, "kubelet.sock"), n.calls, func(s *grpc.Server) { pluginapi.RegisterRegistrationServer(s, fakeKubelet{}) })
	setMtime(t, filepath.Join(dp, "kubelet.sock"), n.start)
	serve(t, filepath.Join(dp, "nvidia-gpu.sock"), n.calls, func(s *grpc.Server) {
		pluginapi.RegisterDevicePluginServer(s, fakePlugin{opts: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}})
	})
	setMtime(t, filepath.Join(dp, "nvidia-gpu.sock"), n.start.Add(time.Minute))
	serve(t, filepath.Join(dp, "amd.com_gpu"), n.calls, func(s *grpc.Server) {
		pluginapi.RegisterDevicePluginServer(s, fakePlugin{opts: &pluginapi.DevicePluginOptions{PreStartRequired: true}})
	})
	setMtime(t, filepath.Join(dp, "amd.com_gpu"), n.start.Add(-time.Minute))
	deadSocket(t, filepath.Join(dp, "gpu.intel.com-i915.sock"))
	setMtime(t, filepath.Join(dp, "gpu.intel.com-i915.sock"), n.start.Add(2*time.Minute))
	write(t, filepath.Join(dp, "fake.sock"), "not a socket")
	setMtime(t, filepath.Join(dp, "fake.sock"), n.start)
	write(t, filepath.Join(dp, "DEPRECATION"), "a file the kubelet never wrote")
	os.Mkdir(filepath.Join(dp, "subdir"), 0o755)
	if cp != nil {
		write(t, filepath.Join(dp, CheckpointName), string(cp))
	}
	write(t, filepath.Join(dir, "proc/sys/kernel/random/boot_id"), bootNow+"\n")
	serve(t, filepath.Join(pr, "kubelet.sock"), n.calls, func(s *grpc.Server) {
		podresourcesapi.RegisterPodResourcesListerServer(s, fakePodResources{
			list: &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{{
				Name: "trainer-0", Namespace: "ml", Containers: []*podresourcesapi.ContainerResources{{
					Name: "cuda", Devices: []*podresourcesapi.ContainerDevices{{ResourceName: "nvidia.com/gpu",
						DeviceIds: []string{gpu1, gpu0}, Topology: &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: 0}}}}},
				}, {Name: "no-devices"}},
			}}},
			alloc: &podresourcesapi.AllocatableResourcesResponse{Devices: []*podresourcesapi.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{gpu2, gpu0}}}},
		})
	})
	for i, u := range []string{gpu0, gpu2} {
		bdf := []string{"0000:18:00.0", "0000:2a:00.0"}[i]
		write(t, filepath.Join(dir, "proc/driver/nvidia/gpus", bdf, "information"), "Model: \t\t NVIDIA H100\nGPU UUID: \t "+u+"\nBus Location: \t "+bdf+"\n")
	}
	return n
}

func write(t testing.TB, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestRead(t *testing.T) {
	cp := sampleData()
	n := newNode(t, kubeletCheckpoint(t, cp, "b00710d0-0000-4000-8000-00000000b007"))
	root := hostfs.MustNew(n.dir)
	got, err := Read(context.Background(), root, Options{RPC: grpccall.Caller{}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dp := "/var/lib/kubelet/device-plugins"
	want := &Node{
		KubeletDir: "/var/lib/kubelet", Dir: dp, DirState: Present,
		Kubelet: &Socket{Path: dp + "/kubelet.sock", Name: "kubelet.sock", Type: "socket", ModTime: n.start,
			Dial: Dial{Answer: Unimplemented, Method: kubeletrpc.MethodHealthCheck, Code: "Unimplemented"}},
		Plugins: []*Socket{
			{Path: dp + "/amd.com_gpu", Name: "amd.com_gpu", Type: "socket", ModTime: n.start.Add(-time.Minute), OlderThanKubelet: true,
				Dial: Dial{Answer: Answered, Method: kubeletrpc.MethodGetDevicePluginOptions, Code: "OK"}, Options: &PluginOptions{PreStartRequired: true},
				Resource: "amd.com/gpu", ResourceHint: `kubevirt device-plugin-manager's "<namespace>_<name>" (AMD's plugin)`},
			{Path: dp + "/fake.sock", Name: "fake.sock", Type: "regular file", ModTime: n.start, Dial: Dial{Answer: NotSocket}},
			{Path: dp + "/gpu.intel.com-i915.sock", Name: "gpu.intel.com-i915.sock", Type: "socket", ModTime: n.start.Add(2 * time.Minute),
				Dial: Dial{Answer: Refused, Method: kubeletrpc.MethodGetDevicePluginOptions}, Resource: "gpu.intel.com/i915",
				ResourceHint: `Intel device plugins' "<namespace>-<type>.sock"`},
			{Path: dp + "/nvidia-gpu.sock", Name: "nvidia-gpu.sock", Type: "socket", ModTime: n.start.Add(time.Minute),
				Dial: Dial{Answer: Answered, Method: kubeletrpc.MethodGetDevicePluginOptions, Code: "OK"}, Options: &PluginOptions{GetPreferredAllocationAvailable: true},
				Resource: "nvidia.com/gpu", ResourceHint: `NVIDIA k8s-device-plugin's "nvidia-<name>.sock"`},
		},
		CheckpointPath: dp + "/" + CheckpointName, CheckpointState: Present,
		BootID: bootNow, BootIDDiffers: true,
		PodResources: &PodResources{Path: "/var/lib/kubelet/pod-resources/kubelet.sock",
			List: Dial{Answer: Answered, Method: kubeletrpc.MethodPodResourcesList, Code: "OK"},
			Containers: []ContainerDevices{{Namespace: "ml", Pod: "trainer-0", Container: "cuda", Resource: "nvidia.com/gpu",
				DeviceIDs: []string{gpu0, gpu1}, NUMA: []int64{0}}},
			Allocatable: Dial{Answer: Answered, Method: kubeletrpc.MethodGetAllocatableResources, Code: "OK"},
			Devices:     []ResourceDevices{{Resource: "nvidia.com/gpu", DeviceIDs: []string{gpu0, gpu2}}}},
		Devices: []DeviceMatch{
			{ID: "fpga-7", Resource: "example.com/fpga", Form: IDOpaque, Host: HostUnknown,
				Evidence:   "the ID has no form the host can show (an index or a plugin's own name): only the plugin knows what it names",
				Registered: ptr(true), Allocatable: ptr(false)},
			{ID: gpu0, Resource: "nvidia.com/gpu", Form: IDGPUUUID, Key: gpu0, Host: HostPresent, BDF: "0000:18:00.0",
				Evidence:   "/proc/driver/nvidia/gpus/0000:18:00.0/information: GPU UUID " + gpu0,
				Registered: ptr(true), Allocatable: ptr(true)},
			{ID: gpu1, Resource: "nvidia.com/gpu", Form: IDGPUUUID, Key: gpu1, Host: HostAbsent,
				Evidence:   "none of the 2 GPU(s) in /proc/driver/nvidia/gpus has this UUID",
				Registered: ptr(true), Allocatable: ptr(false)},
		},
		Allocatable: []DeviceMatch{
			{ID: gpu0, Resource: "nvidia.com/gpu", Form: IDGPUUUID, Key: gpu0, Host: HostPresent, BDF: "0000:18:00.0",
				Evidence: "/proc/driver/nvidia/gpus/0000:18:00.0/information: GPU UUID " + gpu0, Allocatable: ptr(true)},
			{ID: gpu2, Resource: "nvidia.com/gpu", Form: IDGPUUUID, Key: gpu2, Host: HostPresent, BDF: "0000:2a:00.0",
				Evidence: "/proc/driver/nvidia/gpus/0000:2a:00.0/information: GPU UUID " + gpu2, Allocatable: ptr(true)},
		},
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(Node{}, "Checkpoint", "CheckpointModTime"),
		cmpopts.IgnoreFields(Dial{}, "Err"),
		cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	}
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got.CheckpointModTime.IsZero() {
		t.Errorf("the checkpoint's mtime was not read")
	}
	if got.Checkpoint == nil || !got.Checkpoint.ChecksumOK || len(got.Checkpoint.Entries) != 2 {
		t.Errorf("checkpoint: %+v", got.Checkpoint)
	}
	if r := got.Plugins[2].Dial.Err; !strings.Contains(r, "connection refused") {
		t.Errorf("refused socket's error: %q", r)
	}
	// Only read-only calls were made: one per socket.
	wantCalls := []string{
		kubeletrpc.MethodGetAllocatableResources, kubeletrpc.MethodPodResourcesList, grpc_health_v1.Health_Check_FullMethodName, kubeletrpc.MethodGetDevicePluginOptions, kubeletrpc.MethodGetDevicePluginOptions,
	}
	if d := cmp.Diff(sortedCopy(wantCalls), n.calls.list()); d != "" {
		t.Errorf("calls (-want +got)\n%s", d)
	}

	p := got.PluginFor("nvidia")
	if !p.Known || len(p.Sockets) != 1 || p.Sockets[0].Name != "nvidia-gpu.sock" ||
		!cmp.Equal(p.Seen, map[string][]string{"nvidia.com/gpu": {"checkpoint", "allocatable", "socket"}}) {
		t.Errorf("PluginFor(nvidia) = %+v", p)
	}
	if p := got.PluginFor("habanalabs"); !p.Known || len(p.Seen) != 0 || len(p.Sockets) != 0 ||
		p.Vendor.Resources[0] != "habana.ai/gaudi" {
		t.Errorf("PluginFor(habanalabs) = %+v", p)
	}
	if p := got.PluginFor("e1000e"); p.Known {
		t.Errorf("PluginFor(e1000e) = %+v", p)
	}
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }

// A snapshot replays what the sockets answered: the sockets themselves
// are not archived, and the checkpoint's raw bytes (environment values)
// are not kept.
func TestSnapshotReplays(t *testing.T) {
	n := newNode(t, kubeletCheckpoint(t, sampleData(), ""))
	live := hostfs.MustNew(n.dir)
	rec := live.Record()
	want, err := Read(context.Background(), live, Options{RPC: grpccall.Caller{}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := live.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	// The listing leaves an empty placeholder where the file was.
	if b, err := snap.ReadFile("/var/lib/kubelet/device-plugins/" + CheckpointName); err == nil && len(b) > 0 {
		t.Errorf("the snapshot holds the raw checkpoint")
	}
	if bytes.Contains(gunzip(t, buf.Bytes()), []byte("s3cr3t")) {
		t.Errorf("the snapshot holds an environment value of an AllocateResponse")
	}
	got, err := Read(context.Background(), snap, Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Replayed {
		t.Errorf("not replayed from the capture")
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }), cmpopts.IgnoreFields(Node{}, "Replayed")); d != "" {
		t.Errorf("replay differs (-live +replay)\n%s", d)
	}
}

// Without a kubelet: no directory, no socket, no checkpoint: absence, not
// an error; and a capture that never looked is NotCaptured.
func TestReadNothing(t *testing.T) {
	dir := shortTemp(t)
	write(t, filepath.Join(dir, "proc/sys/kernel/random/boot_id"), bootNow)
	os.MkdirAll(filepath.Join(dir, "var/lib/kubelet"), 0o755)
	got, err := Read(context.Background(), hostfs.MustNew(dir), Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if got.DirState != Absent || got.Kubelet != nil || got.CheckpointState != Absent || got.PodResources != nil {
		t.Errorf("%+v", got)
	}
	empty := shortTemp(t)
	got, err = Read(context.Background(), hostfs.MustNew(empty), Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if got.DirState != NotCaptured || got.CheckpointState != NotCaptured || got.BootIDErr == "" {
		t.Errorf("a tree without /var/lib: %+v", got)
	}
	if _, err := Read(context.Background(), hostfs.MustNew(empty), Options{RPC: grpccall.Caller{}, KubeletDir: "rel"}); err == nil {
		t.Errorf("a relative kubelet dir is accepted")
	}
}

// kubelet.sock left by a kubelet that died: refused; a server that
// accepts and never speaks: timed out.
func TestKubeletSocketStates(t *testing.T) {
	dir, dp, _ := kubeletTree(t)
	deadSocket(t, filepath.Join(dp, "kubelet.sock"))
	l := listenSilent(t, filepath.Join(dp, "silent.sock"))
	defer l.Close()
	got, err := Read(context.Background(), hostfs.MustNew(dir), Options{RPC: grpccall.Caller{}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got.Kubelet == nil || got.Kubelet.Dial.Answer != Refused {
		t.Errorf("dead kubelet.sock: %+v", got.Kubelet)
	}
	if len(got.Plugins) != 1 || got.Plugins[0].Dial.Answer != TimedOut {
		t.Errorf("silent socket: %+v", got.Plugins)
	}
}

// A checkpoint that is garbage, too large, or absent.
func TestReadCheckpointStates(t *testing.T) {
	for name, tc := range map[string]struct {
		b     []byte
		state State
		err   string
	}{
		"garbage": {[]byte("\x7fELF garbage"), Unreadable, "not a device-manager checkpoint"},
		"huge":    {bytes.Repeat([]byte(" "), MaxCheckpointSize+1), Unreadable, "larger than"},
		"valid":   {kubeletCheckpoint(t, sampleData(), ""), Present, ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir, dp, _ := kubeletTree(t)
			write(t, filepath.Join(dp, CheckpointName), string(tc.b))
			got, err := Read(context.Background(), hostfs.MustNew(dir), Options{RPC: grpccall.Caller{}})
			if err != nil {
				t.Fatal(err)
			}
			if got.CheckpointState != tc.state || !strings.Contains(got.CheckpointErr, tc.err) {
				t.Errorf("state %s, error %q", got.CheckpointState, got.CheckpointErr)
			}
		})
	}
}

// A snapshot's capture is someone else's bytes: replay gives an error,
// never a panic.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(`{"format":1,"node":{"dir":"/var/lib/kubelet/device-plugins","plugins":[{"name":"a.sock","dial":{"answer":"answered"}}]}}`))
	f.Add([]byte(`{"format":1,"node":{"plugins":[null]}}`))
	f.Add([]byte(`{"format":1}`))
	// The host a replayed capture is matched against: an empty one, the
	// same for every input, read once (readHostDevices keeps what it read;
	// matching only looks it up). A t.TempDir per input was most of an
	// execution.
	hd := readHostDevices(hostfs.MustNew(f.TempDir()))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := replay(b)
		if err != nil {
			return
		}
		n.Resources()
		n.PluginFor("nvidia")
		n.matchDevices(hd)
	})
}

// The live host: whatever it has, Read answers without error, and never
// says "not captured" of a running host.
func TestReadLiveHost(t *testing.T) {
	n, err := Read(context.Background(), hostfs.MustNew("/"), Options{RPC: grpccall.Caller{}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n.DirState == NotCaptured || n.CheckpointState == NotCaptured {
		t.Errorf("the live host is not captured: %+v", n)
	}
	if n.BootID == "" {
		t.Errorf("no boot_id on a running kernel: %s", n.BootIDErr)
	}
	t.Logf("device-plugin dir %s: %s", n.Dir, n.DirState)
}

// A snapshot taken without this reader shows no socket (tar cannot hold
// one): that is "not captured", never "kubelet.sock missing".
func TestSnapshotWithoutCapture(t *testing.T) {
	n := newNode(t, kubeletCheckpoint(t, sampleData(), ""))
	live := hostfs.MustNew(n.dir)
	rec := live.Record()
	// Another reader listed the directory; this one did not run.
	if _, err := live.ReadDir("/var/lib/kubelet/device-plugins"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := live.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	got, err := Read(context.Background(), snap, Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if got.DirState != NotCaptured || got.Kubelet != nil || got.CheckpointState != NotCaptured || got.PodResources != nil {
		t.Errorf("%+v", got)
	}
}
