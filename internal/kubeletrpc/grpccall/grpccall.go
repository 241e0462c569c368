// Package grpccall makes the node's Kubernetes layer's read-only calls
// (internal/kubeletrpc) with gRPC and the kubelet's generated API
// packages, in this process. accel-doctor-kubelet and accel-doctor-kube
// link it; accel-doctor runs accel-doctor-kubelet's `kubelet-rpc`
// command instead (Serve), so that the node diagnosis links no gRPC.
package grpccall

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
)

// Caller makes the calls in this process, all at once.
type Caller struct{}

func (Caller) Call(ctx context.Context, root *hostfs.Root, calls []rpc.Call, timeout time.Duration) []rpc.Reply {
	out := make([]rpc.Reply, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { out[i] = call(ctx, root, c, timeout) })
	}
	wg.Wait()
	return out
}

// Serve is the kubelet-rpc command: a Request on in, the Response on out.
func Serve(ctx context.Context, root *hostfs.Root, in io.Reader, out io.Writer) error {
	req, err := rpc.DecodeRequest(in)
	if err != nil {
		return err
	}
	replies := Caller{}.Call(ctx, root, req.Calls, req.Timeout)
	if replies == nil {
		replies = []rpc.Reply{}
	}
	return json.NewEncoder(out).Encode(rpc.Response{Format: rpc.Format, Replies: replies})
}

func call(ctx context.Context, root *hostfs.Root, c rpc.Call, timeout time.Duration) rpc.Reply {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, d := newClient(ctx, root, c.Path)
	if d != nil {
		d.Method = c.Method
		r := rpc.Reply{Dial: *d}
		if c.Method == rpc.MethodPodResourcesList {
			a := *d
			a.Method = rpc.MethodGetAllocatableResources
			r.PodResources = &rpc.PodResources{Path: c.Path, List: *d, Allocatable: a}
		}
		return r
	}
	defer cl.Close()
	switch c.Method {
	case rpc.MethodHealthCheck:
		resp, err := grpc_health_v1.NewHealthClient(cl.cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		r := rpc.Reply{Dial: cl.result(c.Method, err)}
		if err == nil {
			r.Health = resp.GetStatus().String()
		}
		return r
	case rpc.MethodGetDevicePluginOptions:
		o, err := pluginapi.NewDevicePluginClient(cl.cc).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
		r := rpc.Reply{Dial: cl.result(c.Method, err)}
		if err == nil {
			r.Options = &rpc.PluginOptions{PreStartRequired: o.GetPreStartRequired(),
				GetPreferredAllocationAvailable: o.GetGetPreferredAllocationAvailable()}
		}
		return r
	case rpc.MethodPodResourcesList:
		pr := podResources(ctx, cl, c.Path)
		return rpc.Reply{Dial: pr.List, PodResources: pr}
	case rpc.MethodGetInfo:
		info, err := registerapi.NewRegistrationClient(cl.cc).GetInfo(ctx, &registerapi.InfoRequest{})
		r := rpc.Reply{Dial: cl.result(c.Method, err)}
		if err == nil {
			r.Info = &rpc.RegistrationInfo{Type: info.GetType(), Name: info.GetName(), Endpoint: info.GetEndpoint(),
				SupportedVersions: info.GetSupportedVersions()}
		}
		return r
	}
	return rpc.Reply{Dial: rpc.Dial{Answer: rpc.NotDialed, Method: c.Method, Err: "not one of the read-only calls", Cause: rpc.CauseInternal}}
}

func podResources(ctx context.Context, c *client, p string) *rpc.PodResources {
	pr := &rpc.PodResources{Path: p}
	cl := podresourcesapi.NewPodResourcesListerClient(c.cc)
	list, err := cl.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	pr.List = c.result(rpc.MethodPodResourcesList, err)
	if err == nil {
		for _, pod := range list.GetPodResources() {
			for _, ctr := range pod.GetContainers() {
				for _, dev := range ctr.GetDevices() {
					pr.Containers = append(pr.Containers, rpc.ContainerDevices{Namespace: pod.GetNamespace(), Pod: pod.GetName(),
						Container: ctr.GetName(), Resource: dev.GetResourceName(), DeviceIDs: sorted(dev.GetDeviceIds()),
						NUMA: numaOf(dev.GetTopology())})
				}
			}
		}
		sort.SliceStable(pr.Containers, func(i, j int) bool {
			a, b := pr.Containers[i], pr.Containers[j]
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			if a.Pod != b.Pod {
				return a.Pod < b.Pod
			}
			return a.Container < b.Container
		})
	}
	alloc, err := cl.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	pr.Allocatable = c.result(rpc.MethodGetAllocatableResources, err)
	if err == nil {
		for _, dev := range alloc.GetDevices() {
			pr.Devices = append(pr.Devices, rpc.ResourceDevices{Resource: dev.GetResourceName(), DeviceIDs: sorted(dev.GetDeviceIds()),
				NUMA: numaOf(dev.GetTopology())})
		}
		sort.SliceStable(pr.Devices, func(i, j int) bool { return pr.Devices[i].Resource < pr.Devices[j].Resource })
	}
	return pr
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func numaOf(t *podresourcesapi.TopologyInfo) []int64 {
	var out []int64
	for _, n := range t.GetNodes() {
		out = append(out, n.GetID())
	}
	return out
}

// client is a gRPC client whose connection is made through the root
// (hostfs.DialUnix): the path is resolved inside the root and must be a
// socket.
type client struct {
	cc    *grpc.ClientConn
	mu    sync.Mutex
	first net.Conn // the connection made by hand, until gRPC takes it
	derr  error    // the last connect error, for classification
}

// newClient connects to the socket at host path p. The connect is done
// first, by hand, so that ECONNREFUSED and a non-socket are told apart
// from gRPC's own errors; gRPC then uses that connection. Nothing is
// retried: one connection, one call.
func newClient(ctx context.Context, root *hostfs.Root, p string) (*client, *rpc.Dial) {
	conn, err := root.DialUnix(ctx, p)
	if err != nil {
		d := rpc.ClassifyConnect(err)
		return nil, &d
	}
	c := &client{first: conn}
	cc, err := grpc.NewClient("passthrough:///localhost",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.first != nil {
				cn := c.first
				c.first = nil
				return cn, nil
			}
			cn, err := root.DialUnix(ctx, p)
			c.derr = err
			return cn, err
		}))
	if err != nil {
		conn.Close()
		return nil, &rpc.Dial{Answer: rpc.Failed, Err: err.Error()}
	}
	c.cc = cc
	return c, nil
}

func (c *client) Close() {
	c.cc.Close()
	c.mu.Lock()
	if c.first != nil {
		c.first.Close() // gRPC never dialed
		c.first = nil
	}
	c.mu.Unlock()
}

// result classifies the error of a call made through c.
func (c *client) result(method string, err error) rpc.Dial {
	d := rpc.Dial{Method: method}
	if err == nil {
		d.Answer, d.Code = rpc.Answered, codes.OK.String()
		return d
	}
	st, _ := status.FromError(err)
	d.Code, d.Err = st.Code().String(), err.Error()
	switch st.Code() {
	case codes.Unimplemented:
		d.Answer = rpc.Unimplemented
	case codes.DeadlineExceeded:
		d.Answer = rpc.TimedOut
	case codes.Unavailable:
		c.mu.Lock()
		derr := c.derr
		c.mu.Unlock()
		if derr != nil {
			cd := rpc.ClassifyConnect(derr)
			cd.Method, cd.Code = method, d.Code
			return cd
		}
		d.Answer = rpc.Failed
	default:
		// Any other status is a gRPC server answering with an error of
		// its own: the socket answers.
		d.Answer = rpc.Answered
	}
	return d
}
