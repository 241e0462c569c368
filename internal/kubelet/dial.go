package kubelet

import (
	"time"

	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
)

// The calls on the kubelet's sockets are internal/kubeletrpc's: this
// package decides what to call and reads the replies; a Caller makes the
// calls (in this process with gRPC, or through accel-doctor-kubelet), so
// that this package links no gRPC.
type (
	Answer        = rpc.Answer
	Dial          = rpc.Dial
	Caller        = rpc.Caller
	PluginOptions = rpc.PluginOptions
)

const (
	Answered      = rpc.Answered
	Unimplemented = rpc.Unimplemented
	Refused       = rpc.Refused
	NotSocket     = rpc.NotSocket
	Gone          = rpc.Gone
	NoAccess      = rpc.NoAccess
	TimedOut      = rpc.TimedOut
	Failed        = rpc.Failed
	NotDialed     = rpc.NotDialed
)

// defaultTimeout bounds one socket's connect and call. A local gRPC
// server answers in well under a millisecond; a second is what a server
// that is alive but busy may take, and all sockets are dialed at once.
const defaultTimeout = time.Second
