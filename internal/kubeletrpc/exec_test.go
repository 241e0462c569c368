package kubeletrpc

import (
	"context"
	"errors"
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
// another number of calls.
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
		name string
		find func() (string, error)
		want string
	}{
		{"not found", func() (string, error) { return "", errors.New("not beside this binary") }, "not beside this binary"},
		{"fails", script(`head -c 100000 /dev/zero | tr '\0' x >&2; echo; echo last >&2; exit 3`), "exit status 3"},
		{"answers fewer", script(`cat >/dev/null; echo '{"format":1,"replies":[]}'`), "answered 0 of 2 calls"},
		{"another format", script(`cat >/dev/null; echo '{"format":9,"replies":[]}'`), "different releases"},
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
			}
			if pr := replies[1].PodResources; pr == nil || pr.List.Answer != NotDialed || pr.Allocatable.Method != MethodGetAllocatableResources {
				t.Errorf("PodResources reply %+v", pr)
			}
		})
	}
	if got := (Exec{Find: func() (string, error) { t.Fatal("looked for a helper with nothing to call"); return "", nil }}).Call(context.Background(), root, nil, time.Second); got != nil {
		t.Errorf("no calls: %v", got)
	}
}
