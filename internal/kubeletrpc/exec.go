package kubeletrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Request is what `accel-doctor-kubelet kubelet-rpc` reads on its
// standard input: the calls, and the per-call timeout. The root is its
// --root flag.
type Request struct {
	Format  int           `json:"format"`
	Timeout time.Duration `json:"timeout_ns"`
	Calls   []Call        `json:"calls"`
}

// Response is what it writes on its standard output.
type Response struct {
	Format  int     `json:"format"`
	Replies []Reply `json:"replies"`
}

// Format is the version of Request and Response; a helper of another
// version is refused (its replies are not read).
const Format = 1

// maxCalls and maxResponse bound a batch and what is read back: a node
// has a few dozen sockets, and a PodResources answer for a node full of
// pods is some hundreds of KiB.
const (
	maxCalls    = 4096
	maxResponse = 64 << 20
)

// Exec is the Caller that runs accel-doctor-kubelet, found by Find, as
// `BINARY --root ROOT kubelet-rpc` with the calls, once per batch. Find
// is called only when there is something to call; it returns a
// *HelperMissingError when there is none. A helper that cannot be found
// or fails gives NotDialed replies that say why (CauseNoHelper,
// CauseHelperFailed).
type Exec struct {
	Find func() (string, error)
}

func (x Exec) Call(ctx context.Context, root *hostfs.Root, calls []Call, timeout time.Duration) []Reply {
	if len(calls) == 0 {
		return nil
	}
	bin, err := x.Find()
	if err != nil {
		return NotDialedReplies(calls, err)
	}
	replies, err := run(ctx, bin, root, calls, timeout)
	if err != nil {
		return NotDialedReplies(calls, &HelperError{Path: bin, Err: err})
	}
	return replies
}

func run(ctx context.Context, bin string, root *hostfs.Root, calls []Call, timeout time.Duration) ([]Reply, error) {
	req, err := json.Marshal(Request{Format: Format, Timeout: timeout, Calls: calls})
	if err != nil {
		return nil, err
	}
	// The helper bounds each call by timeout and makes them all at once;
	// the margin is its start-up and exit.
	ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--root", root.Dir(), "kubelet-rpc")
	// Killed with this process: a check ended by a signal leaves no
	// helper behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdin = bytes.NewReader(req)
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{b: &out, n: maxResponse}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &stderr, n: 4 << 10, drop: true}
	cmd.WaitDelay = time.Second // a helper killed at the timeout ends the wait
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return nil, fmt.Errorf("%s kubelet-rpc: %v: %s", bin, err, msg)
		}
		return nil, fmt.Errorf("%s kubelet-rpc: %v", bin, err)
	}
	return DecodeResponse(out.Bytes(), calls)
}

// DecodeResponse reads a helper's Response to calls, refusing one that
// does not answer each call with its own method.
func DecodeResponse(b []byte, calls []Call) ([]Reply, error) {
	var resp Response
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, fmt.Errorf("the helper's answer is not a kubelet-rpc response: %w", err)
	}
	if resp.Format != Format {
		return nil, fmt.Errorf("the helper answers format %d, this binary reads %d: the two binaries are of different releases", resp.Format, Format)
	}
	if len(resp.Replies) != len(calls) {
		return nil, fmt.Errorf("the helper answered %d of %d calls", len(resp.Replies), len(calls))
	}
	for i, r := range resp.Replies {
		if r.Dial.Method != calls[i].Method {
			return nil, fmt.Errorf("the helper's reply %d is for %q, the call was %q", i, r.Dial.Method, calls[i].Method)
		}
		if calls[i].Method == MethodPodResourcesList && r.PodResources == nil {
			return nil, fmt.Errorf("the helper's reply %d to %s holds no PodResources", i, calls[i].Method)
		}
	}
	return resp.Replies, nil
}

// DecodeRequest reads a Request, refusing one of another format, too
// many calls, or a method that is not one of Methods.
func DecodeRequest(r io.Reader) (*Request, error) {
	var req Request
	dec := json.NewDecoder(io.LimitReader(r, 16<<20))
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("not a kubelet-rpc request: %w", err)
	}
	if req.Format != Format {
		return nil, fmt.Errorf("request format %d, this binary reads %d: the two binaries are of different releases", req.Format, Format)
	}
	if len(req.Calls) > maxCalls {
		return nil, fmt.Errorf("%d calls: more than %d", len(req.Calls), maxCalls)
	}
	if req.Timeout <= 0 || req.Timeout > time.Minute {
		return nil, fmt.Errorf("timeout %v: not in (0, 1m]", req.Timeout)
	}
	for _, c := range req.Calls {
		if !slices.Contains(Methods, c.Method) {
			return nil, fmt.Errorf("method %q is not one of the read-only calls", c.Method)
		}
		if !strings.HasPrefix(c.Path, "/") {
			return nil, fmt.Errorf("socket %q is not a host-absolute path", c.Path)
		}
	}
	return &req, nil
}

// limitedBuffer keeps the first n bytes written; past them it fails
// (stdout: an answer that long is not ours) or, with drop, discards the
// rest (stderr is only quoted).
type limitedBuffer struct {
	b    *bytes.Buffer
	n    int
	drop bool
}

var errTooLong = errors.New("the helper wrote more than the limit")

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); len(p) > room {
		if !l.drop {
			return 0, errTooLong
		}
		l.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.b.Write(p)
}
