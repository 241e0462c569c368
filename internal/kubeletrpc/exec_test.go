package kubeletrpc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
