package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/enter"
	"github.com/accel-doctor/accel-doctor/internal/sandbox"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// TestMain lets sandbox.Run re-run this test binary as its helpers, as
// cmd/accel-doctor does.
func TestMain(m *testing.M) {
	// The test binary stands in for accel-doctor when the sandbox and
	// container --probe re-run it for their helpers.
	if sandbox.TrampolineMain() || enter.TrampolineMain() {
		return
	}
	os.Exit(m.Run())
}

func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	testutil.LockSandboxTests(t)
	if _, err := os.Stat("/sys/fs/cgroup/devices/devices.list"); err != nil {
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err != nil {
			t.Skip("no v1 devices controller and no cgroup2 mount here")
		}
	}
}

func TestSandboxCommandProbes(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	zero := filepath.Join(dir, "zero")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	if err := unix.Mknod(zero, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"--v1", "--v2"} {
		out, stderr, code := run(t, "sandbox", v, "--allow", "c 1:3 rw", "--device-node", null, "--device-node", zero, "--access", "rw", "-o", "json")
		if code != 0 {
			t.Errorf("%s: exit %d: %s", v, code, stderr)
			continue
		}
		var res sandbox.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v: %s", v, err, out)
		}
		got := map[string]string{}
		for _, p := range res.Probes {
			got[filepath.Base(p.Node)] = string(p.Verdict.Decision)
		}
		if got["null"] != "ALLOWED" || got["zero"] != "DENIED" {
			t.Errorf("%s: decisions %v", v, got)
		}
		if _, err := os.Stat(res.Cgroup); err == nil {
			t.Errorf("%s: %s left behind", v, res.Cgroup)
		}
	}
	// The command's exit status comes back; its access follows the rules.
	if _, _, code := run(t, "sandbox", "--allow", "c 1:3 rw", "--", "sh", "-c", "echo > "+null); code != 0 {
		t.Errorf("allowed write: exit %d", code)
	}
	if _, _, code := run(t, "sandbox", "--allow", "c 1:3 rw", "--", "sh", "-c", "echo > "+zero); code == 0 {
		t.Error("denied write succeeded")
	}
	if _, _, code := run(t, "sandbox", "--v1", "--v2", "--", "true"); code != 2 {
		t.Errorf("--v1 --v2: exit %d", code)
	}
	if _, _, code := run(t, "sandbox", "--allow", "c 195 rw", "--", "true"); code != 2 {
		t.Errorf("bad rule: exit %d", code)
	}
}
