package deviceplugin

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestUeventSocketHearsTheKernel: the listener receives real kernel
// uevents. In a network namespace of the test's own (so that only
// objects it makes are heard, and nothing of the host is touched), a
// veth pair is created and deleted; the kernel's "add" and "remove"
// uevents for it (net devices are tagged with their namespace,
// lib/kobject_uevent.c uevent_net_broadcast_tagged) arrive through
// openUevents and parse.
func TestUeventSocketHearsTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("no ip(8) to create a veth pair with")
	}
	got := make(chan *Uevent, 64)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// This thread enters a new network namespace and is never
		// unlocked: it ends with the goroutine, the namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		s, err := openUevents()
		if err != nil {
			errc <- err
			return
		}
		go s.run(ctx, func(u *Uevent) {
			if u != nil {
				got <- u
			}
		})
		// exec from this locked thread: the child shares its namespace.
		for _, args := range [][]string{{"link", "add", "adt0", "type", "veth", "peer", "name", "adt1"}, {"link", "del", "adt0"}} {
			if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
				errc <- &exec.Error{Name: string(out), Err: err}
				return
			}
		}
		errc <- nil
		<-ctx.Done()
	}()
	if err := <-errc; err != nil {
		t.Skipf("cannot make a veth pair in a namespace of our own: %v", err)
	}
	want := map[string]bool{"add": false, "remove": false}
	deadline := time.After(10 * time.Second)
	for !want["add"] || !want["remove"] {
		select {
		case u := <-got:
			if u.Subsystem == "net" && u.DevPath == "/devices/virtual/net/adt0" {
				want[u.Action] = true
				if u.Env["INTERFACE"] != "adt0" {
					t.Errorf("%s uevent: INTERFACE=%q", u.Action, u.Env["INTERFACE"])
				}
			}
		case <-deadline:
			t.Fatalf("kernel uevents for adt0 heard: %v", want)
		}
	}
}
