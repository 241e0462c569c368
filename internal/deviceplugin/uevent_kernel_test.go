package deviceplugin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
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

// loopUevents attaches a loop device to a file of the test's own and
// detaches it (losetup), which makes the kernel send "change" uevents for
// block/loopN: a device uevent, of no network namespace. It returns the
// device's path below /sys ("/devices/virtual/block/loopN").
func loopUevents(t *testing.T) string {
	t.Helper()
	losetup, err := exec.LookPath("losetup")
	if err != nil {
		t.Skip("no losetup(8) to cause a device uevent with")
	}
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(losetup, "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("losetup --find --show: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	if out, err := exec.Command(losetup, "--detach", dev).CombinedOutput(); err != nil {
		t.Fatalf("losetup --detach %s: %v: %s", dev, err, out)
	}
	return "/devices/virtual/block/" + filepath.Base(dev)
}

// TestUeventDeviceEventsByNetworkNamespace: which network namespaces the
// kernel sends a device's uevents to, the fact the plugin's DaemonSet is
// built on. lib/kobject_uevent.c sends the uevent of a device that
// belongs to no network namespace (kobject_uevent_net_broadcast, untagged)
// to the uevent socket of every network namespace on uevent_sock_list,
// and uevent_net_init puts there the namespaces owned by the initial user
// namespace only. So a listener in a network namespace of its own (a
// pod's without hostNetwork) hears a loop device's uevents, and one in a
// network namespace owned by a new user namespace (a pod with
// hostUsers: false may get one) hears none. Measured on Linux 6.18: 3
// "change" uevents for loop0 in each of the host's and a new network
// namespace, 0 in the user namespace's.
func TestUeventDeviceEventsByNetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, a loop device)")
	}
	// The control: a network namespace of its own, owned by the host's
	// user namespace, as a pod's is.
	got := make(chan *Uevent, 256)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		s, err := openUevents()
		if err != nil {
			errc <- err
			return
		}
		errc <- nil
		s.run(ctx, func(u *Uevent) {
			if u != nil {
				got <- u
			}
		})
	}()
	if err := <-errc; err != nil {
		t.Skipf("a network namespace of our own: %v", err)
	}
	// The other listener: this test binary again, in a new user namespace
	// and a network namespace it owns.
	child := exec.Command(os.Args[0], "-test.run=^TestUeventListenHelper$")
	child.Env = append(os.Environ(), "ACCEL_DOCTOR_UEVENT_HELPER=1")
	child.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Skipf("a user namespace of our own: %v", err)
	}
	defer child.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the listener in a new user namespace did not start: %q", lines.Text())
	}

	devpath := loopUevents(t)
	heard := 0
	for deadline := time.After(10 * time.Second); heard == 0; {
		select {
		case u := <-got:
			if u.DevPath == devpath {
				heard++
			}
		case <-deadline:
			t.Fatalf("no uevent for %s in a network namespace of the host's user namespace", devpath)
		}
	}
	// netlink_broadcast queued the uevent on every listening socket in the
	// same call: the other listener has had it, if it was sent to it.
	stdin.Close()
	var other []string
	for lines.Scan() {
		if strings.HasSuffix(lines.Text(), "@"+devpath) {
			other = append(other, lines.Text())
		}
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("the listener in a new user namespace: %v", err)
	}
	if len(other) > 0 {
		t.Errorf("a network namespace owned by a new user namespace heard %q: the kernel sends device uevents there", other)
	}
	t.Logf("uevents for %s: heard in a network namespace of the host's user namespace, %d in one of a new user namespace", devpath, len(other))
}

// TestUeventListenHelper is the listener TestUeventDeviceEventsByNetworkNamespace
// starts in a new user namespace: it prints "ready" once its socket is
// bound, then, when its stdin closes, every uevent it heard.
func TestUeventListenHelper(t *testing.T) {
	if os.Getenv("ACCEL_DOCTOR_UEVENT_HELPER") != "1" {
		t.Skip("the helper process of TestUeventDeviceEventsByNetworkNamespace")
	}
	s, err := openUevents()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var heard []string
	go s.run(ctx, func(u *Uevent) {
		if u != nil {
			mu.Lock()
			heard = append(heard, u.Action+"@"+u.DevPath)
			mu.Unlock()
		}
	})
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	time.Sleep(200 * time.Millisecond) // what was queued is read
	cancel()
	mu.Lock()
	defer mu.Unlock()
	for _, h := range heard {
		fmt.Println(h)
	}
}
