package dra

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// calls records every gRPC method a test server was asked.
type calls struct {
	mu sync.Mutex
	m  []string
}

func (c *calls) add(m string) {
	c.mu.Lock()
	c.m = append(c.m, m)
	c.mu.Unlock()
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.m...)
	sort.Strings(out)
	return out
}

// fakeRegistrar is a driver's registration service: GetInfo answers info;
// NotifyRegistrationStatus must never be called by a reader.
type fakeRegistrar struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo
	t    testing.TB
}

func (f fakeRegistrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return f.info, nil
}

func (f fakeRegistrar) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	f.t.Error("NotifyRegistrationStatus called: Read must never change a plugin's state")
	return &registerapi.RegistrationStatusResponse{}, nil
}

// serveRegistrar serves a registration socket at p, recording calls in c.
func serveRegistrar(t testing.TB, p string, c *calls, info *registerapi.PluginInfo) {
	t.Helper()
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		c.add(info.FullMethod)
		return h(ctx, req)
	}))
	registerapi.RegisterRegistrationServer(s, fakeRegistrar{info: info, t: t})
	go s.Serve(l)
	t.Cleanup(s.Stop)
}

// listen binds a socket that accepts connections and never speaks: a
// driver's DRA service socket as far as a connect can tell, or a stuck
// registrar.
func listen(t testing.TB, p string) {
	t.Helper()
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
}

// garbage binds a socket that answers every connection with bytes that
// are not HTTP/2 and closes it.
func garbage(t testing.TB, p string) {
	t.Helper()
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\nnot a gRPC server\r\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
}

// deadSocket leaves a socket nobody listens on, as a driver that exited
// without removing it does.
func deadSocket(t testing.TB, p string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}

func shortTemp(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
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

func setMtime(t testing.TB, p string, m time.Time) {
	t.Helper()
	if err := os.Chtimes(p, m, m); err != nil {
		t.Fatal(err)
	}
}

// stateJSON writes a state as the kubelet does (NewCheckpoint: JSON of the
// data, CRC-32 IEEE over it; MarshalCheckpoint: JSON of Data and Checksum).
// The kubelet's own output for the same shape is in testdata/state.
func stateJSON(t testing.TB, claims []claimInfoState) []byte {
	t.Helper()
	d, err := json.Marshal(stateData{Kind: StateKind, APIVersion: StateAPIVersion, ClaimInfoStateList: claims})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(stateFile{Data: string(d), Checksum: crc32.ChecksumIEEE(d)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	driverName = "gpu.example.com"
	claimUID   = "a1b2c3d4-1111-4222-8333-444455556666"
	gpuUUID0   = "GPU-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0a00"
	gpuUUID1   = "GPU-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0a01"
	bdf0       = "0000:3b:00.0"
	bdf1       = "0000:86:00.0"
	cdiID0     = "k8s.gpu.example.com/claim=" + claimUID + "-gpu-0"
	bootTime   = 1_790_000_000 // btime of the tree's /proc/stat
)

func sampleClaims() []claimInfoState {
	return []claimInfoState{{
		ClaimUID: claimUID, ClaimName: "train-gpu", Namespace: "ml",
		PodUIDs: map[string]struct{}{"0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd": {}},
		DriverState: map[string]driverState{driverName: {Devices: []stateDevice{{
			PoolName: "node-a", DeviceName: "gpu-0", RequestNames: []string{"gpu"}, CDIDeviceIDs: []string{cdiID0},
		}}}},
	}}
}

// claimSpec is the per-claim CDI spec a DRA driver writes into
// /var/run/cdi when it prepares the claim: GPU 0's nodes.
const claimSpec = `{"cdiVersion":"0.6.0","kind":"k8s.gpu.example.com/claim","devices":[{"name":"` + claimUID + `-gpu-0",
 "containerEdits":{"env":["EXAMPLE_VISIBLE_DEVICES=0"],"deviceNodes":[{"path":"/dev/nvidia0"},{"path":"/dev/nvidiactl"}]}}]}`

// draNode is a node with one healthy DRA driver: its registration socket
// answers GetInfo naming its endpoint, the endpoint listens, the state
// holds one prepared claim whose CDI spec is in /var/run/cdi, and the host
// has two NVIDIA GPUs.
type draNode struct {
	dir   string
	kdir  string
	calls *calls
	start time.Time
}

func newDRANode(t testing.TB) *draNode {
	t.Helper()
	dir := shortTemp(t)
	n := &draNode{dir: dir, kdir: filepath.Join(dir, "var/lib/kubelet"), calls: &calls{}}
	for _, d := range []string{"plugins_registry", "plugins/" + driverName, "device-plugins"} {
		if err := os.MkdirAll(filepath.Join(n.kdir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "etc/cdi"), 0o755)
	write(t, filepath.Join(dir, "proc/stat"), fmt.Sprintf("cpu  1 2 3 4\nbtime %d\nprocesses 9\n", bootTime))
	for i, g := range []struct{ bdf, uuid string }{{bdf0, gpuUUID0}, {bdf1, gpuUUID1}} {
		write(t, filepath.Join(dir, "proc/driver/nvidia/gpus", g.bdf, "information"),
			fmt.Sprintf("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t %s\nVideo BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\n", g.uuid, g.bdf, i))
	}
	n.start = time.Unix(bootTime+60, 0)
	listen(t, filepath.Join(n.kdir, "device-plugins/kubelet.sock"))
	setMtime(t, filepath.Join(n.kdir, "device-plugins/kubelet.sock"), n.start)
	n.register(t, driverName+"-reg.sock", &registerapi.PluginInfo{Type: TypeDRA, Name: driverName,
		Endpoint: "/var/lib/kubelet/plugins/" + driverName + "/dra.sock", SupportedVersions: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}})
	listen(t, filepath.Join(n.kdir, "plugins", driverName, "dra.sock"))
	write(t, filepath.Join(n.kdir, StateName), string(stateJSON(t, sampleClaims())))
	setMtime(t, filepath.Join(n.kdir, StateName), time.Unix(bootTime+120, 0))
	write(t, filepath.Join(dir, "var/run/cdi/k8s.gpu.example.com-claim_"+claimUID+".json"), claimSpec)
	return n
}

func (n *draNode) register(t testing.TB, name string, info *registerapi.PluginInfo) {
	t.Helper()
	p := filepath.Join(n.kdir, "plugins_registry", name)
	serveRegistrar(t, p, n.calls, info)
	setMtime(t, p, n.start.Add(time.Minute))
}
