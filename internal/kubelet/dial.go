package kubelet

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

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Answer is how a socket answered.
type Answer string

const (
	// Answered: a gRPC server answered the call.
	Answered Answer = "answered"
	// Unimplemented: a gRPC server answered, without the method asked
	// (codes.Unimplemented): it speaks gRPC but is not that service.
	Unimplemented Answer = "unimplemented"
	// Refused: connect gave ECONNREFUSED: the file is a socket that no
	// process listens on (its server exited and left it behind).
	Refused Answer = "refused"
	// NotSocket: the path is not a socket (a regular file named like one);
	// nothing was dialed.
	NotSocket Answer = "not-socket"
	// Gone: the path vanished between the listing and the dial.
	Gone Answer = "gone"
	// NoAccess: connect or the path walk gave EACCES or EPERM: this process
	// may not look (the socket needs write permission to connect to).
	NoAccess Answer = "no-access"
	// TimedOut: connected, but no gRPC answer came within the timeout (a
	// server that accepts and never speaks, or one stuck).
	TimedOut Answer = "timed-out"
	// Failed: any other error, in Err.
	Failed Answer = "failed"
)

// Dial is what one call on a socket gave.
type Dial struct {
	Answer Answer `json:"answer"`
	Method string `json:"method"`          // the full gRPC method called
	Code   string `json:"code,omitempty"`  // the gRPC status code, when one came back
	Err    string `json:"error,omitempty"` // the error, as the client saw it
}

// OK reports whether a gRPC server answered (the method or
// Unimplemented).
func (d Dial) OK() bool { return d.Answer == Answered || d.Answer == Unimplemented }

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
func newClient(ctx context.Context, root *hostfs.Root, p string) (*client, *Dial) {
	conn, err := root.DialUnix(ctx, p)
	if err != nil {
		d := classifyConnect(err)
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
		return nil, &Dial{Answer: Failed, Err: err.Error()}
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
func (c *client) result(method string, err error) Dial {
	d := Dial{Method: method}
	if err == nil {
		d.Answer, d.Code = Answered, codes.OK.String()
		return d
	}
	st, _ := status.FromError(err)
	d.Code, d.Err = st.Code().String(), err.Error()
	switch st.Code() {
	case codes.Unimplemented:
		d.Answer = Unimplemented
	case codes.DeadlineExceeded:
		d.Answer = TimedOut
	case codes.Unavailable:
		c.mu.Lock()
		derr := c.derr
		c.mu.Unlock()
		if derr != nil {
			cd := classifyConnect(derr)
			cd.Method, cd.Code = method, d.Code
			return cd
		}
		d.Answer = Failed
	default:
		// Any other status is a gRPC server answering with an error of
		// its own: the socket answers.
		d.Answer = Answered
	}
	return d
}

// classifyConnect names what a failed connect means.
func classifyConnect(err error) Dial {
	d := Dial{Err: err.Error()}
	switch {
	case errors.Is(err, hostfs.ErrNotSocket):
		d.Answer = NotSocket
	case errors.Is(err, unix.ECONNREFUSED):
		d.Answer = Refused
	case errors.Is(err, fs.ErrNotExist):
		d.Answer = Gone
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		d.Answer = NoAccess
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ETIMEDOUT):
		// EAGAIN: the listener's backlog is full and it does not accept.
		d.Answer = TimedOut
	default:
		d.Answer = Failed
	}
	return d
}

// defaultTimeout bounds one socket's connect and call. A local gRPC
// server answers in well under a millisecond; a second is what a server
// that is alive but busy may take, and all sockets are dialed at once.
const defaultTimeout = time.Second

// Conn is one connection to a gRPC server on a socket through a root,
// for one read-only call (newClient), shared with the other node reader
// that dials the kubelet's sockets (internal/dra).
type Conn struct{ c *client }

// Connect connects to the socket at host path p; the Dial says why not.
func Connect(ctx context.Context, root *hostfs.Root, p string) (*Conn, *Dial) {
	c, d := newClient(ctx, root, p)
	if d != nil {
		return nil, d
	}
	return &Conn{c}, nil
}

// ClientConn is the connection to make the call on.
func (c *Conn) ClientConn() *grpc.ClientConn { return c.c.cc }

// Close closes it.
func (c *Conn) Close() { c.c.Close() }

// Result classifies the outcome of the call made on it.
func (c *Conn) Result(method string, err error) Dial { return c.c.result(method, err) }

// ClassifyConnect names what a failed connect means.
func ClassifyConnect(err error) Dial { return classifyConnect(err) }
