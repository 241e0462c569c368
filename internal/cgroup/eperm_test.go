package cgroup

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// TestReadV2WithoutPrivilege: without CAP_SYS_ADMIN/CAP_BPF the kernel
// answers BPF_PROG_QUERY with EPERM. ReadV2 must say EPERM (not "not
// supported") and the policy must stay undecided. The capabilities are
// dropped on one locked thread, which then ends with its goroutine.
func TestReadV2WithoutPrivilege(t *testing.T) {
	requireRoot(t)
	m := testMounts(t)
	if m.Unified == "" {
		t.Skip("no cgroup2 hierarchy is mounted on this host")
	}
	cg := makeCgroup(t, m.Unified)
	type result struct {
		err error
		dec Decision
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- result{err: errors.New("capset: " + err.Error())}
			return
		}
		_, err := ReadV2(hostfs.MustNew("/"), cg)
		p := &Policy{V2Applies: true, V2Err: err}
		done <- result{err: err, dec: p.evaluate(DeviceRef{'c', 1, 3}, AccessRead).Combined}
	}()
	r := <-done
	if r.err != nil && strings.HasPrefix(r.err.Error(), "capset") {
		t.Skip(r.err)
	}
	if !errors.Is(r.err, unix.EPERM) {
		t.Fatalf("ReadV2 without privilege: %v, want an error wrapping EPERM", r.err)
	}
	if strings.Contains(strings.ToLower(r.err.Error()), "not supported") {
		t.Errorf("error says 'not supported': %v", r.err)
	}
	if r.dec.Known || !strings.Contains(r.dec.Reason, "EPERM") && !strings.Contains(r.dec.Reason, "not permitted") {
		t.Errorf("decision without privilege: %+v, want undecided naming EPERM", r.dec)
	}
}
