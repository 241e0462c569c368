// Package kubeletrpc is the node's Kubernetes layer's read-only calls on
// the kubelet's sockets: what is called (Call), what came back (Reply,
// Dial), and how a call travels when the binary that needs it links no
// gRPC client (Exec).
//
// Why a package of its own, with no gRPC in it: the gRPC, protobuf and
// kubelet API packages cost every start of a binary that links them
// about 1.5 ms of package initialisation and 4 MiB of resident memory
// (measured with binaries that only import them, and as check's start:
// README, "Performance"). accel-doctor, the node diagnosis, must start
// fast on every host, and only a Kubernetes node has sockets to call. So
// accel-doctor links this package only; the calls themselves are made by
// internal/kubeletrpc/grpccall, in accel-doctor-kubelet (the node's gRPC
// binary: the device plugin, its mock and tester) and in
// accel-doctor-kube. accel-doctor runs `accel-doctor-kubelet kubelet-rpc`
// once per batch of calls, and only when there is a socket to call.
package kubeletrpc

import (
	"context"
	"errors"
	"fmt"
	"github.com/accel-doctor/accel-doctor/internal/helper"
	"io/fs"
	"path"
	"slices"
	"time"

	"golang.org/x/sys/unix"

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
	// NotDialed: nothing was called, because this process could not make
	// the call (no gRPC client linked and accel-doctor-kubelet not found,
	// or it failed: Err says which). Says nothing about the socket.
	NotDialed Answer = "not-dialed"
)

// CouldNotLook reports whether the answer says nothing about the server:
// this process could not reach the socket (no access, gone since the
// listing) or could not make the call at all.
func (a Answer) CouldNotLook() bool { return a == NoAccess || a == Gone || a == NotDialed }

// Dial is what one call on a socket gave.
type Dial struct {
	Answer Answer `json:"answer"`
	Method string `json:"method"`          // the full gRPC method called
	Code   string `json:"code,omitempty"`  // the gRPC status code, when one came back
	Err    string `json:"error,omitempty"` // the error, as the client saw it
	// Cause is, for NotDialed, why no call was made (CauseOf the
	// error), and Helper the helper it concerns: a Dial is JSON (the
	// helper's answer, a snapshot's capture), where an error's type is
	// lost.
	Cause  Cause   `json:"cause,omitempty"`
	Helper *Helper `json:"helper,omitempty"`
}

// Cause is why a call was not made (Answer NotDialed).
type Cause string

const (
	// CauseNoCaller: this process was given no way to make calls.
	CauseNoCaller Cause = "no-caller"
	// CauseNoHelper: the helper that makes the calls is not installed
	// (a HelperMissingError).
	CauseNoHelper Cause = "no-helper"
	// CauseHelperFailed: the helper ran and gave no answer that can be
	// read (a HelperError).
	CauseHelperFailed Cause = "helper-failed"
	// CauseHelperUntrusted: the helper is there but is not run (who may
	// change it: internal/helper).
	CauseHelperUntrusted Cause = "helper-untrusted"
	// CauseInternal: a bug: the caller gave no reply for a call.
	CauseInternal Cause = "internal"
)

// Helper names the helper binary and the directory it belongs in.
type Helper struct {
	Name string `json:"name"`
	Dir  string `json:"dir,omitempty"`
}

// ErrNoCaller is the error of a process that makes no calls.
var ErrNoCaller = errors.New("this process makes no gRPC calls (no kubelet-rpc caller was given)")

// ErrInternal marks a caller's bug (a reply per call was not given).
var ErrInternal = errors.New("internal error")

// HelperMissingError: the helper binary Name that makes the calls is not
// in Dir (beside the binary that needs it, or $ACCEL_DOCTOR_HELPER_DIR).
type HelperMissingError struct {
	Name    string
	Dir     string
	Purpose string // what it does, for the message
}

func (e *HelperMissingError) Error() string {
	what := ""
	if e.Purpose != "" {
		what = ", which " + e.Purpose + ","
	}
	where := "beside this binary"
	if e.Dir != "" {
		where = "in " + e.Dir + " (beside this binary)"
	}
	return fmt.Sprintf("%s%s is not %s", e.Name, what, where)
}

// HelperError: the helper at Path ran and its answer could not be used.
type HelperError struct {
	Path string
	Err  error
}

func (e *HelperError) Error() string { return e.Err.Error() }
func (e *HelperError) Unwrap() error { return e.Err }

// CauseOf classifies why a batch could not be called, and the helper
// it concerns.
func CauseOf(err error) (Cause, *Helper) {
	var missing *HelperMissingError
	var failed *HelperError
	var untrusted *helper.UntrustedError
	switch {
	case errors.As(err, &missing):
		return CauseNoHelper, &Helper{Name: missing.Name, Dir: missing.Dir}
	case errors.As(err, &untrusted):
		return CauseHelperUntrusted, &Helper{Name: path.Base(untrusted.Path), Dir: path.Dir(untrusted.Path)}
	case errors.As(err, &failed):
		return CauseHelperFailed, &Helper{Name: path.Base(failed.Path), Dir: path.Dir(failed.Path)}
	case errors.Is(err, ErrNoCaller):
		return CauseNoCaller, nil
	}
	return CauseInternal, nil
}

// OK reports whether a gRPC server answered (the method or
// Unimplemented): the socket is served.
func (d Dial) OK() bool { return d.Answer == Answered || d.Answer == Unimplemented }

// Succeeded reports whether the call itself succeeded (status OK), so
// that its answer's content can be read: a server that answered with an
// error status (a feature gate off, an internal error) is Answered, with
// no content. A capture written without the code counts as OK.
func (d Dial) Succeeded() bool { return d.Answer == Answered && (d.Code == "" || d.Code == "OK") }

// ClassifyConnect names what a failed connect means.
func ClassifyConnect(err error) Dial {
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

// The calls, by full gRPC method name. They are spelled here, not taken
// from the generated packages, so that this package links none of them;
// grpccall's tests hold each equal to the generated constant.
const (
	// MethodHealthCheck is grpc.health.v1 Health.Check: the one call made
	// on the device manager's kubelet.sock. The kubelet's registration
	// server (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go)
	// registers only v1beta1.Registration, whose one method, Register,
	// changes the kubelet's state: it is never called. A health Check is
	// read-only by definition; the kubelet answers it Unimplemented,
	// which proves a gRPC server is serving the socket as well as an
	// answer would.
	MethodHealthCheck = "/grpc.health.v1.Health/Check"
	// MethodGetDevicePluginOptions is the one call made on a device
	// plugin's socket: it takes Empty and changes nothing (the kubelet
	// itself calls it when a plugin registers: ManagerImpl.PluginConnected).
	MethodGetDevicePluginOptions = "/v1beta1.DevicePlugin/GetDevicePluginOptions"
	// MethodPodResourcesList and MethodGetAllocatableResources are the
	// PodResources calls: both take an empty request and only read the
	// kubelet's state (pkg/kubelet/apis/podresources/server_v1.go). A
	// Call of MethodPodResourcesList makes both, on one connection.
	MethodPodResourcesList        = "/v1.PodResourcesLister/List"
	MethodGetAllocatableResources = "/v1.PodResourcesLister/GetAllocatableResources"
	// MethodGetInfo is the one call made on a plugin registration socket.
	// The kubelet's plugin watcher calls GetInfo first (pkg/kubelet/
	// pluginmanager/operationexecutor/operation_generator.go,
	// GenerateRegisterPluginFunc), and it only reads.
	// NotifyRegistrationStatus, the other method, changes the plugin's
	// state (a driver may stop when told it was rejected): never called.
	MethodGetInfo = "/pluginregistration.Registration/GetInfo"
)

// Methods are the calls a Caller makes; any other is refused.
var Methods = []string{MethodHealthCheck, MethodGetDevicePluginOptions, MethodPodResourcesList, MethodGetInfo}

// Call is one call to make: Method on the socket at host path Path
// (resolved inside the root).
type Call struct {
	Path   string `json:"path"`
	Method string `json:"method"`
}

// Reply is what a Call gave: Dial always; the answer's content when the
// method answered.
type Reply struct {
	Dial Dial `json:"dial"`
	// Health is Health.Check's status ("SERVING", ...).
	Health string `json:"health,omitempty"`
	// Options is GetDevicePluginOptions' answer.
	Options *PluginOptions `json:"options,omitempty"`
	// PodResources is both PodResources calls' (its List and Allocatable
	// Dials are the calls'; Dial is List's).
	PodResources *PodResources `json:"pod_resources,omitempty"`
	// Info is GetInfo's answer.
	Info *RegistrationInfo `json:"info,omitempty"`
}

// PluginOptions is a device plugin's DevicePluginOptions.
type PluginOptions struct {
	PreStartRequired                bool `json:"pre_start_required,omitempty"`
	GetPreferredAllocationAvailable bool `json:"get_preferred_allocation_available,omitempty"`
}

// RegistrationInfo is a registration socket's GetInfo answer
// (pluginregistration/v1 PluginInfo).
type RegistrationInfo struct {
	Type              string   `json:"type"`
	Name              string   `json:"name"`
	Endpoint          string   `json:"endpoint,omitempty"`
	SupportedVersions []string `json:"supported_versions,omitempty"`
}

// PodResources is what the kubelet's PodResources service answered.
type PodResources struct {
	Path string `json:"path"`
	// List is the List call; Containers what it gave: every container that
	// holds devices of a device plugin.
	List       Dial               `json:"list"`
	Containers []ContainerDevices `json:"containers,omitempty"`
	// Allocatable is the GetAllocatableResources call (a feature gate,
	// KubeletPodResourcesGetAllocatable, before 1.28: an older kubelet may
	// answer it with an error); Devices what it gave: per resource, the
	// devices the device manager counts as allocatable, which are the
	// healthy ones (ManagerImpl.GetAllocatableDevices filters allDevices by
	// healthyDevices), allocated or not.
	Allocatable Dial              `json:"allocatable"`
	Devices     []ResourceDevices `json:"devices,omitempty"`
}

// AllocatableIDs is, per resource, the device IDs GetAllocatableResources
// gave (nil when it did not answer).
func (p *PodResources) AllocatableIDs() map[string][]string {
	if p == nil || !p.Allocatable.Succeeded() {
		return nil
	}
	out := map[string][]string{}
	for _, d := range p.Devices {
		out[d.Resource] = append(out[d.Resource], d.DeviceIDs...)
	}
	for r, ids := range out {
		slices.Sort(ids)
		out[r] = slices.Compact(ids)
	}
	return out
}

// ContainerDevices is one container's devices of one resource.
type ContainerDevices struct {
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"device_ids"`
	NUMA      []int64  `json:"numa,omitempty"`
}

// ResourceDevices is one entry of GetAllocatableResources.
type ResourceDevices struct {
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"device_ids"`
	NUMA      []int64  `json:"numa,omitempty"`
}

// Caller makes calls through a root, all at once, each connect and call
// bounded by timeout; the i-th reply is the i-th call's. It never fails
// as a whole: what could not be called says why in its Dial.
type Caller interface {
	Call(ctx context.Context, root *hostfs.Root, calls []Call, timeout time.Duration) []Reply
}

// NotDialedReplies are the replies of calls that could not be made, for
// err (CauseOf says why).
func NotDialedReplies(calls []Call, err error) []Reply {
	cause, helper := CauseOf(err)
	out := make([]Reply, len(calls))
	for i, c := range calls {
		out[i].Dial = Dial{Answer: NotDialed, Method: c.Method, Err: err.Error(), Cause: cause, Helper: helper}
		if c.Method == MethodPodResourcesList {
			a := out[i].Dial
			a.Method = MethodGetAllocatableResources
			out[i].PodResources = &PodResources{Path: c.Path, List: out[i].Dial, Allocatable: a}
		}
	}
	return out
}

// NoCaller is what a reader calls with when it was given no Caller.
var NoCaller Caller = None{Err: ErrNoCaller}

// None is the Caller of a process that cannot make calls: every reply is
// NotDialed with its reason.
type None struct{ Err error }

func (n None) Call(_ context.Context, _ *hostfs.Root, calls []Call, _ time.Duration) []Reply {
	err := n.Err
	if err == nil {
		err = ErrNoCaller
	}
	return NotDialedReplies(calls, err)
}
