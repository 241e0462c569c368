package grpccall

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// The method names kubeletrpc spells by hand are the generated ones.
func TestMethodsAreTheGeneratedOnes(t *testing.T) {
	for got, want := range map[string]string{
		rpc.MethodHealthCheck:             grpc_health_v1.Health_Check_FullMethodName,
		rpc.MethodGetDevicePluginOptions:  pluginapi.DevicePlugin_GetDevicePluginOptions_FullMethodName,
		rpc.MethodPodResourcesList:        podresourcesapi.PodResourcesLister_List_FullMethodName,
		rpc.MethodGetAllocatableResources: podresourcesapi.PodResourcesLister_GetAllocatableResources_FullMethodName,
		rpc.MethodGetInfo:                 registerapi.Registration_GetInfo_FullMethodName,
	} {
		if got != want {
			t.Errorf("%q, the generated constant is %q", got, want)
		}
	}
}

// The helper makes read-only calls only: a request naming any other method
// (Register, which changes the kubelet's state; NotifyRegistrationStatus,
// which changes a driver's; Allocate) is refused before anything is dialed.
func TestServeRefusesCallsThatAct(t *testing.T) {
	root := hostfs.MustNew(t.TempDir())
	for _, m := range []string{pluginapi.Registration_Register_FullMethodName, registerapi.Registration_NotifyRegistrationStatus_FullMethodName,
		pluginapi.DevicePlugin_Allocate_FullMethodName, ""} {
		req := `{"format":1,"timeout_ns":1000000000,"calls":[{"path":"/x.sock","method":"` + m + `"}]}`
		var out bytes.Buffer
		if err := Serve(context.Background(), root, strings.NewReader(req), &out); err == nil || out.Len() != 0 {
			t.Errorf("method %q: err %v, out %q", m, err, out.String())
		}
	}
	for _, req := range []string{"", "garbage", `{"format":2,"timeout_ns":1,"calls":[]}`, `{"format":1,"timeout_ns":0,"calls":[]}`,
		`{"format":1,"timeout_ns":1000,"calls":[{"path":"relative.sock","method":"` + rpc.MethodHealthCheck + `"}]}`} {
		if err := Serve(context.Background(), root, strings.NewReader(req), &bytes.Buffer{}); err == nil {
			t.Errorf("request %q was served", req)
		}
	}
}

// A request served as accel-doctor-kubelet serves it, read back as
// accel-doctor reads it: each call's answer, in order.
func TestServeRoundTrip(t *testing.T) {
	dir := testutil.SockDir(t)
	lis, err := net.Listen("unix", filepath.Join(dir, "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, options{})
	go srv.Serve(lis)
	defer srv.Stop()
	ln2, err := net.Listen("unix", filepath.Join(dir, "dead.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ln2.(*net.UnixListener).SetUnlinkOnClose(false)
	ln2.Close() // the file stays, nobody listens: ECONNREFUSED

	calls := []rpc.Call{
		{Path: filepath.Join(dir, "p.sock"), Method: rpc.MethodGetDevicePluginOptions},
		{Path: filepath.Join(dir, "p.sock"), Method: rpc.MethodHealthCheck},
		{Path: filepath.Join(dir, "dead.sock"), Method: rpc.MethodGetInfo},
		{Path: filepath.Join(dir, "none.sock"), Method: rpc.MethodPodResourcesList},
	}
	req, _ := json.Marshal(rpc.Request{Format: rpc.Format, Timeout: 5 * time.Second, Calls: calls})
	var out bytes.Buffer
	if err := Serve(context.Background(), hostfs.MustNew("/"), bytes.NewReader(req), &out); err != nil {
		t.Fatal(err)
	}
	replies, err := rpc.DecodeResponse(out.Bytes(), calls)
	if err != nil {
		t.Fatal(err)
	}
	if r := replies[0]; r.Dial.Answer != rpc.Answered || r.Options == nil || !r.Options.PreStartRequired {
		t.Errorf("GetDevicePluginOptions: %+v", r)
	}
	if r := replies[1]; r.Dial.Answer != rpc.Unimplemented {
		t.Errorf("Health.Check on a server without it: %+v", r.Dial)
	}
	if r := replies[2]; r.Dial.Answer != rpc.Refused || r.Info != nil {
		t.Errorf("GetInfo on a dead socket: %+v", r)
	}
	if r := replies[3]; r.Dial.Answer != rpc.Gone || r.PodResources == nil || r.PodResources.Allocatable.Answer != rpc.Gone ||
		r.PodResources.Allocatable.Method != rpc.MethodGetAllocatableResources {
		t.Errorf("PodResources on no socket: %+v", r)
	}
	// The reply to another call, or fewer replies, are refused.
	if _, err := rpc.DecodeResponse(out.Bytes(), calls[:3]); err == nil {
		t.Error("a response with more replies than calls was read")
	}
	swapped := []rpc.Call{calls[1], calls[0], calls[2], calls[3]}
	if _, err := rpc.DecodeResponse(out.Bytes(), swapped); err == nil {
		t.Error("replies to other calls were read")
	}
}

type options struct {
	pluginapi.UnimplementedDevicePluginServer
}

func (options) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: true}, nil
}
