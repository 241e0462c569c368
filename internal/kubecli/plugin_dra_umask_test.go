package kubecli

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/dramock"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// Under umask 000, with which bind(2) alone makes a socket anyone may
// connect to, the DRA mock's registration socket and dra.sock are 0600,
// and the kubelet's side (plugin test --dra: GetInfo on the registration
// socket, NotifyRegistrationStatus, prepare and unprepare on dra.sock)
// still works through them.
func TestPluginDRASocketsUnderUmask000(t *testing.T) {
	dir := sockDir(t)
	reg, plug, cdiDir := filepath.Join(dir, "reg"), filepath.Join(dir, "p", "gpu.example.com"), filepath.Join(dir, "cdi")
	mock := testutil.Start(t, "/bin/sh", "-c", `umask 000 && exec "$0" "$@"`, binary(t),
		"plugin", "mock", "--dra", "--driver", "gpu.example.com", "--devices", "2", "--mode", "healthy",
		"--plugins-registry", reg, "--plugin-data-dir", plug, "--cdi-spec-dir", cdiDir, "--node-name", "n1")
	mock.WaitLine(t, "SERVING ")
	mock.WaitLine(t, "REGISTRATION ")
	for _, p := range []string{filepath.Join(plug, "dra.sock"), filepath.Join(reg, "gpu.example.com-reg.sock")} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want a socket with -rw-------", p, fi.Mode())
		}
	}
	tester := start(t, "plugin", "test", "--dra", "--plugins-registry", reg, "--driver", "gpu.example.com",
		"--cdi-spec-dir", cdiDir, "--timeout", "5s", "--samples", "3", "-o", "json")
	code, out := tester.Wait(t)
	if code != 0 {
		t.Fatalf("plugin test --dra exit %d, want 0:\n%s", code, out)
	}
	if got := pluginCodes(t, out); got[dramock.CodeContractOK] != report.Pass {
		t.Errorf("%s: %q, want PASS\n%s", dramock.CodeContractOK, got[dramock.CodeContractOK], out)
	}
	mock.Cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := mock.Wait(t); code != 0 {
		t.Errorf("mock exit %d after SIGTERM, want 0", code)
	}
	for _, d := range []string{reg, plug} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("left in %s: %v", d, ents)
		}
	}
}
