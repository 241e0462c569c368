package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// startKubelet serves kubelet.sock in dir with the tester's registration
// server (it judges Register as the kubelet does).
func startKubelet(t testing.TB, dir string) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{dir: dir, timeout: 10 * time.Second, ctx: context.Background(), wake: make(chan struct{}, 1)}
	if err := k.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.stop(true) })
	return k
}

// wipe is what a starting kubelet does to its directory: every socket
// goes (manager.go CleanupPluginDirectory), then kubelet.sock is served.
func wipe(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type()&os.ModeSocket != 0 {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func accepted(k *fakeKubelet) int {
	n := 0
	for _, r := range k.registrations() {
		if r.err == nil {
			n++
		}
	}
	return n
}

func waitAccepted(t testing.TB, k *fakeKubelet, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for accepted(k) < n {
		if time.Now().After(deadline) {
			var errs []string
			for _, r := range k.registrations() {
				if r.err != nil {
					errs = append(errs, r.err.Error())
				}
			}
			t.Fatalf("%d registrations accepted in 20s, want %d (%d calls; refused: %v)", accepted(k), n, len(k.registrations()), errs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A kubelet restart (kubelet.sock and every socket removed, kubelet.sock
// served again) is followed by the socket made again, then a Register
// that the kubelet accepts; three times in a row.
func TestReregistersAfterKubeletRestart(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 2, Mode: ModeHealthy})
	waitAccepted(t, k, 1)
	for i := 2; i <= 4; i++ {
		// The plugin must have had the kubelet's answer before that
		// kubelet goes: stopped between accepting a Register and sending
		// the reply, it leaves the plugin an EOF (REGISTER_FAILED) for a
		// registration it did accept, which is a lost reply, not a
		// missed re-registration (seen under load).
		evs.wait(t, EventRegistered, i-1)
		k.stop(false)
		wipe(t, dir)
		// The plugin serves again at once, kubelet or not.
		deadline := time.Now().Add(10 * time.Second)
		for !answers(m.Socket()) {
			if time.Now().After(deadline) {
				t.Fatal("the socket was not made again after the wipe")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := k.start(); err != nil {
			t.Fatal(err)
		}
		waitAccepted(t, k, i)
	}
	evs.wait(t, EventRegistered, 4)
}

// Started before the kubelet: it serves, says WAITING, and registers
// when kubelet.sock appears.
func TestRegistersWhenKubeletComesLater(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 1, Mode: ModeHealthy})
	evs.wait(t, EventWaiting, 1)
	if !answers(m.Socket()) {
		t.Fatal("not serving while waiting for the kubelet")
	}
	k := startKubelet(t, dir)
	waitAccepted(t, k, 1)
}

// The no-reregister mock registers once, when it starts beside a kubelet
// or when kubelet.sock first appears after it, and does not come back
// after a restart.
func TestNoReregisterMockStaysAway(t *testing.T) {
	for _, mockFirst := range []bool{false, true} {
		dir := shortDir(t)
		var k *fakeKubelet
		if !mockFirst {
			k = startKubelet(t, dir)
		}
		_, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 1, Mode: ModeNoReregister})
		if mockFirst {
			evs.wait(t, EventWaiting, 1)
			k = startKubelet(t, dir)
		}
		waitAccepted(t, k, 1)
		k.stop(false)
		wipe(t, dir)
		if err := k.start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if n := len(k.registrations()); n != 1 {
			t.Fatalf("mock first %t: %d registrations, want the first one only", mockFirst, n)
		}
	}
}

// The register-before-serve mock started before the kubelet waits for
// kubelet.sock, however long, and registers once, before it serves: the
// Create event of that kubelet.sock, which it reads after it served, is
// not taken for a kubelet restart (a second Register, accepted, would
// hide the defect).
func TestRegisterBeforeServeMockStartedFirst(t *testing.T) {
	dir := shortDir(t)
	m, evs := runMock(t, dir, MockConfig{Resource: "fake.example.com/gpu", Devices: 1, Mode: ModeRegisterBeforeServe})
	evs.wait(t, EventWaiting, 1)
	if exists(m.Socket()) {
		t.Fatal("the mock serves before it registered")
	}
	k := &fakeKubelet{dir: dir, timeout: 300 * time.Millisecond, ctx: context.Background(), wake: make(chan struct{}, 1)}
	if err := k.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.stop(true) })
	evs.wait(t, EventServing, 1)
	time.Sleep(500 * time.Millisecond)
	rs := k.registrations()
	if len(rs) != 1 || rs[0].dialErr == nil {
		t.Fatalf("%d registrations, want one, made before the socket answered: %+v", len(rs), rs)
	}
}
