package dra

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
)

// The agent's pod: --root /host assembled from hostPath mounts, the
// kubelet's plugins_registry among them but not dra_manager_state. The
// state is then not captured (never "absent"), and the reason names the
// host path the root was not given and the component that mounts it.
// Built on the real kernel with bind mounts in a private mount namespace:
// the test binary runs itself again under unshare -m, so that every
// thread of the process (Read's goroutines run on any of them, and the
// mount table is read through /proc/thread-self) sees the same mounts, as
// in the agent's container.
func TestStateNotGivenToAPodsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bind mounts in a private mount namespace")
	}
	if os.Getenv(notGivenChild) == "" {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("needs unshare(1) (util-linux)")
		}
		cmd := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0], "-test.run=^TestStateNotGivenToAPodsRoot$", "-test.count=1")
		cmd.Env = append(os.Environ(), notGivenChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
		}
		return
	}
	host, root := t.TempDir(), t.TempDir()
	for _, d := range []string{host + "/var/lib/kubelet/plugins_registry", root + "/var/lib/kubelet/plugins_registry"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(host+"/var/lib/kubelet/plugins_registry", root+"/var/lib/kubelet/plugins_registry", "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind: %v", err)
	}
	// Before the TempDirs go (cleanups run last first); the namespace
	// and its mount end with this process anyway.
	t.Cleanup(func() { _ = unix.Unmount(root+"/var/lib/kubelet/plugins_registry", unix.MNT_DETACH) })
	r, err := hostfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Read(context.Background(), r, Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if n.StateState != kubelet.NotCaptured || !strings.Contains(n.StateErr, "/var/lib/kubelet/dra_manager_state was not given") ||
		!strings.Contains(n.StateErr, "deploy/components/dra-state") {
		t.Errorf("state %s (%q): want not captured, naming the path and the component", n.StateState, n.StateErr)
	}
}

// notGivenChild marks the run of TestStateNotGivenToAPodsRoot inside its
// own mount namespace.
const notGivenChild = "ACCEL_DOCTOR_TEST_NOTGIVEN_CHILD"
