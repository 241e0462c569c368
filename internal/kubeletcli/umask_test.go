package kubeletcli

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// startUmask000 starts the binary with args under umask 000, the umask
// with which bind(2) alone makes a socket anyone may connect to.
func startUmask000(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	return testutil.Start(t, "/bin/sh", append([]string{"-c", `umask 000 && exec "$0" "$@"`, binary(t)}, args...)...)
}

// wantSocketMode: p is a socket of mode 0600.
func wantSocketMode(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want a socket with -rw-------", p, fi.Mode())
	}
}

// Under umask 000 the sockets plugin test (kubelet.sock), plugin mock and
// plugin serve make are 0600, and the kubelet side still works through
// them: the tester's Register, the dial back, ListAndWatch, Allocate and
// the registration again after kubelet.sock is made anew all pass.
func TestPluginSocketsUnderUmask000(t *testing.T) {
	host := sockDir(t)
	if out, err := exec.Command("cp", "-a", hosts+"nvidia-h100x8/.", host).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cfg := filepath.Join(host, "plugin.yaml")
	if err := os.WriteFile(cfg, []byte(`resources:
- name: example.com/gpu
  selector: {pci: {vendor: "10de", class: "0302", drivers: [nvidia]}}
  container: {deviceIDsEnv: ACCEL_VISIBLE_DEVICES}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		plugin []string
		socket string
	}{
		{"mock", []string{"plugin", "mock", "--resource", "fake.example.com/gpu", "--devices", "2", "--mode", "healthy"}, "accel-doctor-mock-fake.example.com_gpu.sock"},
		{"serve", []string{"--root", host, "plugin", "serve", "--config", cfg}, "accel-doctor-example.com_gpu.sock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := sockDir(t)
			tester := startUmask000(t, "--root", host, "plugin", "test", "--device-plugin-dir", dir, "--timeout", "5s", "--watch", "300ms", "-o", "json")
			kubelet := filepath.Join(dir, deviceplugin.KubeletSocket)
			testutil.WaitFile(t, kubelet)
			wantSocketMode(t, kubelet)
			plugin := startUmask000(t, append(c.plugin, "--device-plugin-dir", dir)...)
			sock := filepath.Join(dir, c.socket)
			if l := plugin.WaitLine(t, "REGISTERED "); !strings.HasSuffix(l, " "+sock) {
				t.Errorf("ready line %q, want one naming %s", l, sock)
			}
			wantSocketMode(t, sock)
			code, out := tester.Wait(t)
			if code != 0 {
				t.Fatalf("plugin test exit %d:\n%s", code, out)
			}
			got := pluginCodes(t, out)
			for _, code := range []string{deviceplugin.CodeRegistered, deviceplugin.CodeAllocateOK, deviceplugin.CodeReregistered} {
				if got[code] != report.Pass {
					t.Errorf("%s: %q, want PASS\n%s", code, got[code], out)
				}
			}
			// The socket made again after kubelet.sock was recreated.
			wantSocketMode(t, sock)
			plugin.Cmd.Process.Signal(syscall.SIGTERM)
			if code, _ := plugin.Wait(t); code != 0 {
				t.Errorf("exit %d after SIGTERM, want 0", code)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left in the directory: %v", ents)
			}
		})
	}
}
