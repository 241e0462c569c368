package kubeletrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Exec's replies when the helper cannot answer are NotDialed, with the
// reason, for every call: a helper not found, one that fails (its stderr
// quoted, at most 4 KiB of it, however much it writes), one that answers
// another number of calls; each with its typed cause (CauseNoHelper names
// the helper and its directory), which is what the fix follows from.
func TestExecNotDialed(t *testing.T) {
	calls := []Call{{Path: "/var/lib/kubelet/device-plugins/kubelet.sock", Method: MethodHealthCheck},
		{Path: "/var/lib/kubelet/pod-resources/kubelet.sock", Method: MethodPodResourcesList}}
	root := hostfs.MustNew(t.TempDir())
	script := func(body string) func() (string, error) {
		p := filepath.Join(t.TempDir(), "accel-doctor-kubelet")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return func() (string, error) { return p, nil }
	}
	for _, c := range []struct {
		name  string
		find  func() (string, error)
		want  string
		cause Cause
	}{
		{"not found", func() (string, error) {
			return "", &HelperMissingError{Name: "accel-doctor-kubelet", Dir: "/opt/ad"}
		}, "accel-doctor-kubelet is not in /opt/ad (beside this binary)", CauseNoHelper},
		{"fails", script(`head -c 100000 /dev/zero | tr '\0' x >&2; echo; echo last >&2; exit 3`), "exit status 3", CauseHelperFailed},
		{"answers fewer", script(`cat >/dev/null; echo '{"format":1,"replies":[]}'`), "answered 0 of 2 calls", CauseHelperFailed},
		{"another format", script(`cat >/dev/null; echo '{"format":9,"replies":[]}'`), "different releases", CauseHelperFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			replies := Exec{Find: c.find}.Call(context.Background(), root, calls, time.Second)
			if len(replies) != 2 {
				t.Fatalf("%d replies", len(replies))
			}
			for i, r := range replies {
				if r.Dial.Answer != NotDialed || r.Dial.Method != calls[i].Method || !strings.Contains(r.Dial.Err, c.want) || len(r.Dial.Err) > 5<<10 {
					t.Errorf("reply %d: %+v (%d bytes of error)", i, r.Dial, len(r.Dial.Err))
				}
				if r.Dial.Cause != c.cause || r.Dial.Helper == nil || r.Dial.Helper.Name != "accel-doctor-kubelet" {
					t.Errorf("reply %d: cause %q helper %+v, want %q of accel-doctor-kubelet", i, r.Dial.Cause, r.Dial.Helper, c.cause)
				}
				if c.cause == CauseNoHelper && r.Dial.Helper.Dir != "/opt/ad" {
					t.Errorf("reply %d: helper dir %q", i, r.Dial.Helper.Dir)
				}
			}
			if pr := replies[1].PodResources; pr == nil || pr.List.Answer != NotDialed || pr.Allocatable.Method != MethodGetAllocatableResources {
				t.Errorf("PodResources reply %+v", pr)
			}
		})
	}
	if r := NoCaller.Call(context.Background(), root, calls[:1], time.Second); r[0].Dial.Cause != CauseNoCaller || r[0].Dial.Helper != nil {
		t.Errorf("no caller: %+v", r[0].Dial)
	}
	if got := (Exec{Find: func() (string, error) { t.Fatal("looked for a helper with nothing to call"); return "", nil }}).Call(context.Background(), root, nil, time.Second); got != nil {
		t.Errorf("no calls: %v", got)
	}
}

// A PodResources call answered with an error status (GetAllocatableResources
// behind a feature gate that is off) has no content: its allocatable
// devices are not known, not "none".
func TestAnsweredWithAnErrorHasNoContent(t *testing.T) {
	ok := &PodResources{Allocatable: Dial{Answer: Answered, Code: "OK"}, Devices: []ResourceDevices{{Resource: "r", DeviceIDs: []string{"b", "a", "a"}}}}
	if got := ok.AllocatableIDs(); len(got["r"]) != 2 || got["r"][0] != "a" {
		t.Errorf("answered OK: %v", got)
	}
	gated := &PodResources{Allocatable: Dial{Answer: Answered, Code: "Unknown", Err: "rpc error: code = Unknown desc = feature gate off"}}
	if got := gated.AllocatableIDs(); got != nil {
		t.Errorf("answered with an error: %v, want not known (nil)", got)
	}
	if !gated.Allocatable.OK() || gated.Allocatable.Succeeded() {
		t.Errorf("served but failed: OK %v Succeeded %v", gated.Allocatable.OK(), gated.Allocatable.Succeeded())
	}
}

// A helper that answers every call but writes much on stderr is read: its
// stderr is only ever quoted.
func TestExecChattyHelper(t *testing.T) {
	calls := []Call{{Path: "/var/lib/kubelet/device-plugins/kubelet.sock", Method: MethodHealthCheck},
		{Path: "/var/lib/kubelet/pod-resources/kubelet.sock", Method: MethodPodResourcesList}}
	resp := `{"format":1,"replies":[{"dial":{"answer":"unimplemented","method":"` + MethodHealthCheck + `","code":"Unimplemented"}},` +
		`{"dial":{"answer":"answered","method":"` + MethodPodResourcesList + `","code":"OK"},"pod_resources":{"path":"/p","list":{"answer":"answered","method":"` + MethodPodResourcesList + `","code":"OK"},"allocatable":{"answer":"answered","method":"` + MethodGetAllocatableResources + `","code":"OK"}}}]}`
	p := filepath.Join(t.TempDir(), "accel-doctor-kubelet")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nhead -c 100000 /dev/zero | tr '\\0' x >&2\ncat >/dev/null\necho '"+resp+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	replies := Exec{Find: func() (string, error) { return p, nil }}.Call(context.Background(), hostfs.MustNew(t.TempDir()), calls, time.Second)
	if len(replies) != 2 || replies[0].Dial.Answer != Unimplemented || replies[1].PodResources == nil || !replies[1].PodResources.Allocatable.Succeeded() {
		t.Errorf("replies %+v", replies)
	}
	// A reply to the PodResources call without its content is refused.
	if _, err := DecodeResponse([]byte(`{"format":1,"replies":[{"dial":{"method":"`+MethodHealthCheck+`"}},{"dial":{"method":"`+MethodPodResourcesList+`"}}]}`), calls); err == nil {
		t.Error("a PodResources reply without PodResources was read")
	}
}

// kubeletCalls are the calls accel-doctor makes on a node: one of each
// method, on the sockets the kubelet and a device plugin serve.
var kubeletCalls = []Call{
	{Path: "/var/lib/kubelet/device-plugins/kubelet.sock", Method: MethodHealthCheck},
	{Path: "/var/lib/kubelet/device-plugins/nvidia-gpu.sock", Method: MethodGetDevicePluginOptions},
	{Path: "/var/lib/kubelet/pod-resources/kubelet.sock", Method: MethodPodResourcesList},
	{Path: "/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock", Method: MethodGetInfo},
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// FuzzDecodeRequest asserts of what the kubelet-rpc helper reads on its
// standard input:
//   - a request it accepts is one it may act on: this format, at most
//     maxCalls calls, a timeout in (0, 1m], only the read-only methods, on
//     host-absolute paths;
//   - an accepted request, written again as accel-doctor writes it
//     (json.Marshal), is read back the same (round trip);
//   - it reads at most 16 MiB, whatever it is given;
//   - anything else is an error with no request, never a panic.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []Request{
		{Format: Format, Timeout: 5 * time.Second, Calls: kubeletCalls},
		{Format: Format, Timeout: time.Minute, Calls: kubeletCalls[:1]},
		{Format: Format, Timeout: time.Second},
		{Format: 2, Timeout: time.Second, Calls: kubeletCalls},
		{Format: Format, Timeout: 0, Calls: kubeletCalls},
		{Format: Format, Timeout: time.Second, Calls: []Call{{Path: "kubelet.sock", Method: MethodHealthCheck}}},
		{Format: Format, Timeout: time.Second, Calls: []Call{{Path: "/k.sock", Method: "/v1beta1.Registration/Register"}}},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":1,"timeout_ns":1e9,"calls":[]}`))
	f.Add([]byte(`{"format":1,"timeout_ns":1000000000,"calls":null} trailing`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &countingReader{r: bytes.NewReader(b)}
		req, err := DecodeRequest(in)
		if in.n > 16<<20 {
			t.Fatalf("read %d bytes", in.n)
		}
		if err != nil {
			if req != nil {
				t.Fatalf("request %+v with error %v", req, err)
			}
			return
		}
		if req.Format != Format || len(req.Calls) > maxCalls || req.Timeout <= 0 || req.Timeout > time.Minute {
			t.Fatalf("accepted format %d, %d calls, timeout %v", req.Format, len(req.Calls), req.Timeout)
		}
		for _, c := range req.Calls {
			if !slices.Contains(Methods, c.Method) || !strings.HasPrefix(c.Path, "/") {
				t.Fatalf("accepted call %+v", c)
			}
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeRequest(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("%s, written back as %s: %v", b, out, err)
		}
		if d := cmp.Diff(req, again, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip (-first +again):\n%s", d)
		}
	})
}

// FuzzDecodeResponse asserts of what accel-doctor reads back from the
// helper, for calls the fuzzer picks (one method per byte of methods):
//   - a response it accepts answers each call, in order, with the call's
//     own method, and a PodResources call with its content;
//   - an accepted response, written again as the helper writes it, is read
//     back the same (round trip);
//   - AllocatableIDs of any reply is per resource sorted and without
//     repeats, and nil where GetAllocatableResources did not succeed;
//   - anything else is an error with no replies, never a panic.
func FuzzDecodeResponse(f *testing.F) {
	methods := make([]byte, len(kubeletCalls))
	for i, c := range kubeletCalls {
		methods[i] = byte(slices.Index(Methods, c.Method))
	}
	ok := Dial{Answer: Answered, Code: "OK"}
	with := func(d Dial, m string) Dial { d.Method = m; return d }
	answered := Response{Format: Format, Replies: []Reply{
		{Dial: Dial{Answer: Unimplemented, Method: MethodHealthCheck, Code: "Unimplemented", Err: "rpc error: code = Unimplemented desc = unknown service grpc.health.v1.Health"}},
		{Dial: with(ok, MethodGetDevicePluginOptions), Options: &PluginOptions{GetPreferredAllocationAvailable: true}},
		{Dial: with(ok, MethodPodResourcesList), PodResources: &PodResources{Path: kubeletCalls[2].Path,
			List: with(ok, MethodPodResourcesList), Containers: []ContainerDevices{{Namespace: "default", Pod: "cuda", Container: "cuda",
				Resource: "nvidia.com/gpu", DeviceIDs: []string{"GPU-3f7a2c10-5c1d-4e0f-9a7b-8d2e4b6a9100"}, NUMA: []int64{0}}},
			Allocatable: with(ok, MethodGetAllocatableResources), Devices: []ResourceDevices{{Resource: "nvidia.com/gpu",
				DeviceIDs: []string{"GPU-3f7a2c11-5c1d-4e0f-9a7b-8d2e4b6a9101", "GPU-3f7a2c10-5c1d-4e0f-9a7b-8d2e4b6a9100"}, NUMA: []int64{0}}}}},
		{Dial: with(ok, MethodGetInfo), Info: &RegistrationInfo{Type: "DRAPlugin", Name: "gpu.nvidia.com",
			Endpoint: "/var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock", SupportedVersions: []string{"v1.DRAPlugin"}}},
	}}
	for _, r := range []Response{answered,
		{Format: Format, Replies: NotDialedReplies(kubeletCalls, &HelperError{Path: "/opt/ad/accel-doctor-kubelet", Err: errors.New("exit status 2")})},
		{Format: 9, Replies: answered.Replies},
		{Format: Format, Replies: answered.Replies[:2]},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, methods)
	}
	f.Add([]byte(`{"format":1,"replies":[{"dial":{"method":"`+MethodPodResourcesList+`"}}]}`), []byte{2})
	f.Fuzz(func(t *testing.T, b, methods []byte) {
		calls := make([]Call, len(methods))
		for i, m := range methods {
			calls[i] = Call{Path: "/var/lib/kubelet/x.sock", Method: Methods[int(m)%len(Methods)]}
		}
		replies, err := DecodeResponse(b, calls)
		if err != nil {
			if replies != nil {
				t.Fatalf("replies %+v with error %v", replies, err)
			}
			return
		}
		if len(replies) != len(calls) {
			t.Fatalf("%d replies to %d calls", len(replies), len(calls))
		}
		for i, r := range replies {
			if r.Dial.Method != calls[i].Method || calls[i].Method == MethodPodResourcesList && r.PodResources == nil {
				t.Fatalf("reply %d %+v to call %+v", i, r, calls[i])
			}
			ids := r.PodResources.AllocatableIDs()
			if ids != nil && !r.PodResources.Allocatable.Succeeded() {
				t.Fatalf("reply %d: allocatable %v from a call that did not succeed", i, ids)
			}
			for res, l := range ids {
				if !slices.IsSorted(l) || len(slices.Compact(slices.Clone(l))) != len(l) {
					t.Fatalf("reply %d: %s: %v", i, res, l)
				}
			}
		}
		out, err := json.Marshal(Response{Format: Format, Replies: replies})
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeResponse(out, calls)
		if err != nil {
			t.Fatalf("%s, written back as %s: %v", b, out, err)
		}
		if d := cmp.Diff(replies, again, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip (-first +again):\n%s", d)
		}
	})
}
