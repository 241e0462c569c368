package kubecli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/dramock"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// The DRA pair as processes: the mock's ready lines, plugin test --dra's
// verdict and exit status for a healthy and two planted modes (the
// prepare error's text given with plugin mock's --error, which both its
// sides take), and a clean exit on SIGTERM that removes the sockets.
func TestPluginBinaryDRAMockAndTest(t *testing.T) {
	for _, c := range []struct {
		mode  string
		extra []string
		code  int
		want  string
		st    report.Status
		text  string
	}{
		{"healthy", nil, 0, dramock.CodeContractOK, report.Pass, ""},
		{"no-cdi-spec", nil, 1, dramock.CodeCDIUnresolved, report.Fail, ""},
		{"prepare-error", []string{"--error", "planted: no capacity"}, 1, dramock.CodePrepareFailed, report.Fail, "planted: no capacity"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			dir := sockDir(t)
			reg, plug, cdiDir := filepath.Join(dir, "reg"), filepath.Join(dir, "p", "gpu.example.com"), filepath.Join(dir, "cdi")
			mock := start(t, append([]string{"plugin", "mock", "--dra", "--driver", "gpu.example.com", "--devices", "2", "--mode", c.mode,
				"--plugins-registry", reg, "--plugin-data-dir", plug, "--cdi-spec-dir", cdiDir, "--node-name", "n1"}, c.extra...)...)
			if l := mock.WaitLine(t, "SERVING "); l != "SERVING gpu.example.com "+filepath.Join(plug, "dra.sock") {
				t.Errorf("ready line %q", l)
			}
			mock.WaitLine(t, "REGISTRATION ")
			tester := start(t, "plugin", "test", "--dra", "--plugins-registry", reg, "--driver", "gpu.example.com",
				"--cdi-spec-dir", cdiDir, "--timeout", "5s", "--samples", "3", "-o", "json")
			code, out := tester.Wait(t)
			if code != c.code {
				t.Fatalf("plugin test --dra exit %d, want %d:\n%s", code, c.code, out)
			}
			if got := pluginCodes(t, out); got[c.want] != c.st {
				t.Errorf("%s: %q, want %s\n%s", c.want, got[c.want], c.st, out)
			}
			if !strings.Contains(out, c.text) {
				t.Errorf("the report does not carry %q:\n%s", c.text, out)
			}
			mock.Cmd.Process.Signal(syscall.SIGTERM)
			if code, out := mock.Wait(t); code != 0 || !strings.Contains(out, "STOPPED gpu.example.com") {
				t.Errorf("mock exit %d after SIGTERM:\n%s", code, out)
			}
			for _, d := range []string{reg, plug, cdiDir} {
				if ents, _ := os.ReadDir(d); len(ents) != 0 {
					t.Errorf("left in %s: %v", d, ents)
				}
			}
		})
	}
}
