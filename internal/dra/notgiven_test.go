package dra

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
)

// The agent's pod: --root /host assembled from hostPath mounts, the
// kubelet's plugins_registry among them but not dra_manager_state. The
// state is then not captured (never "absent"), and the reason names the
// host path the root was not given and the component that mounts it.
// Built on the real kernel with bind mounts in a private mount namespace
// of this test's thread.
func TestStateNotGivenToAPodsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bind mounts in a private mount namespace")
	}
	host, root := t.TempDir(), t.TempDir()
	for _, d := range []string{host + "/var/lib/kubelet/plugins_registry", root + "/var/lib/kubelet/plugins_registry"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread and its namespace end with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make / private: %v", err)
			return
		}
		if err := unix.Mount(host+"/var/lib/kubelet/plugins_registry", root+"/var/lib/kubelet/plugins_registry", "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind: %v", err)
			return
		}
		r, err := hostfs.New(root)
		if err != nil {
			t.Error(err)
			return
		}
		n, err := Read(context.Background(), r, Options{})
		if err != nil {
			t.Error(err)
			return
		}
		if n.StateState != kubelet.NotCaptured || !strings.Contains(n.StateErr, "/var/lib/kubelet/dra_manager_state was not given") ||
			!strings.Contains(n.StateErr, "deploy/components/dra-state") {
			t.Errorf("state %s (%q): want not captured, naming the path and the component", n.StateState, n.StateErr)
		}
	}()
	<-done
}
