package dra

import (
	"context"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
)

// Connected is the answer of an endpoint that was only connected to: the
// kernel accepted the connection for a listener. The DRA v1 service has
// no read-only call (NodePrepareResources and NodeUnprepareResources both
// act), so nothing is said on the connection.
const Connected kubelet.Answer = "connected"

// getInfoMethod is the one call made on a registration socket
// (rpc.MethodGetInfo says why it is read-only).
const getInfoMethod = rpc.MethodGetInfo

// defaultTimeout bounds one socket's connect and call.
const defaultTimeout = time.Second

// connectOnly connects to p and closes the connection: the listener's
// state does not change (the kernel queues the connection, or refuses it
// when nobody listens).
func connectOnly(ctx context.Context, root *hostfs.Root, p string, timeout time.Duration) kubelet.Dial {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := root.DialUnix(ctx, p)
	if err != nil {
		return rpc.ClassifyConnect(err)
	}
	nc.Close()
	return kubelet.Dial{Answer: Connected}
}
