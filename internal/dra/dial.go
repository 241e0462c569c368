package dra

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
)

// Connected is the answer of an endpoint that was only connected to: the
// kernel accepted the connection for a listener. The DRA v1 service has
// no read-only call (NodePrepareResources and NodeUnprepareResources both
// act), so nothing is said on the connection.
const Connected kubelet.Answer = "connected"

// getInfoMethod is the one call made on a registration socket. The
// kubelet's plugin watcher calls GetInfo first (pkg/kubelet/pluginmanager/
// operationexecutor/operation_generator.go, GenerateRegisterPluginFunc),
// and it only reads. NotifyRegistrationStatus, the other method, changes
// the plugin's state (kubeletplugin's registration server records it and a
// driver may stop when told it was rejected): never called.
var getInfoMethod = registerapi.Registration_GetInfo_FullMethodName

// defaultTimeout bounds one socket's connect and call.
const defaultTimeout = time.Second

// conn is a gRPC client connection whose first transport is a connection
// made by hand through hostfs.DialUnix, so that ECONNREFUSED and a
// non-socket are told apart from gRPC's own errors.
type conn struct {
	cc    *grpc.ClientConn
	mu    sync.Mutex
	first net.Conn
	derr  error
}

func dialGRPC(ctx context.Context, root *hostfs.Root, p string) (*conn, *kubelet.Dial) {
	nc, err := root.DialUnix(ctx, p)
	if err != nil {
		d := classifyConnect(err)
		return nil, &d
	}
	c := &conn{first: nc}
	cc, err := grpc.NewClient("passthrough:///localhost",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.first != nil {
				n := c.first
				c.first = nil
				return n, nil
			}
			n, err := root.DialUnix(ctx, p)
			c.derr = err
			return n, err
		}))
	if err != nil {
		nc.Close()
		return nil, &kubelet.Dial{Answer: kubelet.Failed, Err: err.Error()}
	}
	c.cc = cc
	return c, nil
}

func (c *conn) Close() {
	c.cc.Close()
	c.mu.Lock()
	if c.first != nil {
		c.first.Close()
		c.first = nil
	}
	c.mu.Unlock()
}

// result classifies the outcome of a call made on c.
func (c *conn) result(method string, err error) kubelet.Dial {
	d := kubelet.Dial{Method: method}
	if err == nil {
		d.Answer, d.Code = kubelet.Answered, codes.OK.String()
		return d
	}
	st, _ := status.FromError(err)
	d.Code, d.Err = st.Code().String(), err.Error()
	switch st.Code() {
	case codes.Unimplemented:
		d.Answer = kubelet.Unimplemented
	case codes.DeadlineExceeded:
		d.Answer = kubelet.TimedOut
	case codes.Unavailable:
		c.mu.Lock()
		derr := c.derr
		c.mu.Unlock()
		if derr != nil {
			cd := classifyConnect(derr)
			cd.Method, cd.Code = method, d.Code
			return cd
		}
		// Connected, and the peer did not speak HTTP/2 (a garbage-
		// speaking socket, or one that closed at once).
		d.Answer = kubelet.Failed
	default:
		d.Answer = kubelet.Answered
	}
	return d
}

// connectOnly connects to p and closes the connection: the listener's
// state does not change (the kernel queues the connection, or refuses it
// when nobody listens).
func connectOnly(ctx context.Context, root *hostfs.Root, p string, timeout time.Duration) kubelet.Dial {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := root.DialUnix(ctx, p)
	if err != nil {
		return classifyConnect(err)
	}
	nc.Close()
	return kubelet.Dial{Answer: Connected}
}

// classifyConnect names what a failed connect means (the vocabulary of
// internal/kubelet).
func classifyConnect(err error) kubelet.Dial {
	d := kubelet.Dial{Err: err.Error()}
	switch {
	case errors.Is(err, hostfs.ErrNotSocket):
		d.Answer = kubelet.NotSocket
	case errors.Is(err, unix.ECONNREFUSED):
		d.Answer = kubelet.Refused
	case errors.Is(err, fs.ErrNotExist):
		d.Answer = kubelet.Gone
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		d.Answer = kubelet.NoAccess
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ETIMEDOUT):
		d.Answer = kubelet.TimedOut
	default:
		d.Answer = kubelet.Failed
	}
	return d
}
