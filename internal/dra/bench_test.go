package dra

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// BenchmarkRead is the node side on a node with 8 DRA registrations, each
// answering GetInfo with a listening endpoint, a state with 110 prepared
// claims and their specs, and a containerd whose CDI support is judged. Each op dials every socket anew, as check does.
//
//	go test ./internal/dra -run '^$' -bench Read -benchtime 200x
func BenchmarkRead(b *testing.B) {
	dn := newDRANode(b)
	for i := range 7 {
		drv := fmt.Sprintf("d%d.example.com", i)
		os.MkdirAll(filepath.Join(dn.kdir, "plugins", drv), 0o755)
		listen(b, filepath.Join(dn.kdir, "plugins", drv, "dra.sock"))
		dn.register(b, drv+"-reg.sock", &registerapi.PluginInfo{Type: TypeDRA, Name: drv,
			Endpoint: "/var/lib/kubelet/plugins/" + drv + "/dra.sock", SupportedVersions: []string{"v1.DRAPlugin"}})
	}
	var claims []claimInfoState
	for i := range 110 {
		uid := fmt.Sprintf("a1b2c3d4-1111-4222-8333-%012d", i)
		claims = append(claims, claimInfoState{ClaimUID: uid, ClaimName: fmt.Sprintf("c%d", i), Namespace: "ml",
			PodUIDs: map[string]struct{}{"p" + uid: {}},
			DriverState: map[string]driverState{driverName: {Devices: []stateDevice{{PoolName: "node-a", DeviceName: "gpu-0",
				RequestNames: []string{"gpu"}, CDIDeviceIDs: []string{"k8s.gpu.example.com/claim=" + uid + "-gpu-0"}}}}}})
		write(b, filepath.Join(dn.dir, "var/run/cdi", "k8s.gpu.example.com-claim_"+uid+".json"),
			`{"cdiVersion":"0.6.0","kind":"k8s.gpu.example.com/claim","devices":[{"name":"`+uid+`-gpu-0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}]}`)
	}
	write(b, filepath.Join(dn.kdir, StateName), string(stateJSON(b, claims)))
	// The runtime the drivers' CDI specs are judged against (readRuntimeCDI).
	installContainerd(b, dn.dir, "2.1.4~ds1-1", strings.Replace(cdiOff, "false", "true", 1))
	root := hostfs.MustNew(dn.dir)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		n, err := Read(ctx, root, Options{RPC: grpccall.Caller{}, Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		live := 0
		for _, r := range n.Registrations {
			if r.Live() {
				live++
			}
		}
		if live != 8 || len(n.CDI) != 110 || n.CDI[109].Resolve != Resolved {
			b.Fatalf("%d live registrations, %d CDI devices", live, len(n.CDI))
		}
		if rc := n.RuntimeCDI; rc == nil || len(rc.Runtimes) != 1 || len(rc.Drivers) != 8 || rc.Serve(rc.Runtimes[0], driverName).Answer != Serves {
			b.Fatalf("runtime CDI %+v", rc)
		}
	}
}

func BenchmarkParseState(b *testing.B) {
	var claims []claimInfoState
	for i := range 110 {
		claims = append(claims, sampleClaims()[0])
		claims[i].ClaimUID = fmt.Sprintf("u%d", i)
	}
	buf := stateJSON(b, claims)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if s, err := ParseState(buf); err != nil || !s.ChecksumOK {
			b.Fatal(err)
		}
	}
}
