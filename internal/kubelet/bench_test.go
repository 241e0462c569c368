package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// BenchmarkRead is the whole layer on a node with kubelet.sock, 8
// answering plugin sockets, PodResources and a checkpoint: the goal is
// 20 ms an op. Each op dials every socket anew, as check does.
//
//	go test ./internal/kubelet -run '^$' -bench Read -benchtime 200x
func BenchmarkRead(b *testing.B) {
	n := newNode(b, kubeletCheckpoint(b, sampleData(), ""))
	dp := filepath.Join(n.dir, "var/lib/kubelet/device-plugins")
	// newNode has 2 answering plugins, a dead one and a file; 6 more.
	for i := range 6 {
		serve(b, filepath.Join(dp, fmt.Sprintf("example.com-dev%d.sock", i)), n.calls, func(s *grpc.Server) {
			pluginapi.RegisterDevicePluginServer(s, fakePlugin{opts: &pluginapi.DevicePluginOptions{}})
		})
	}
	root := hostfs.MustNew(n.dir)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		nd, err := Read(ctx, root, Options{RPC: grpccall.Caller{}, Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		answered := 0
		for _, s := range nd.Plugins {
			if s.Dial.Answer == Answered {
				answered++
			}
		}
		if answered != 8 || !nd.Kubelet.Dial.OK() || nd.PodResources.List.Answer != Answered {
			b.Fatalf("%d plugins answered, kubelet %+v", answered, nd.Kubelet.Dial)
		}
	}
}

func BenchmarkParseCheckpoint(b *testing.B) {
	// A full node: 110 pods of 8 GPUs each.
	d := checkpointData{RegisteredDevices: map[string][]string{}}
	for p := range 110 {
		d.PodDeviceEntries = append(d.PodDeviceEntries, PodDevicesEntry{PodUID: fmt.Sprintf("pod-%d", p), ContainerName: "c",
			ResourceName: "nvidia.com/gpu", DeviceIDs: DevicesPerNUMA{0: {gpu0, gpu1, gpu2, "a", "b", "c", "d", "e"}}, AllocResp: allocResp()})
	}
	buf := kubeletCheckpoint(b, d, "")
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		cp, err := ParseCheckpoint(buf)
		if err != nil || !cp.ChecksumOK {
			b.Fatal(err)
		}
	}
}
