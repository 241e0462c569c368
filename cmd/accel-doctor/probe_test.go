package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

// TestProbeInAScratchImage: the static binary alone in an otherwise
// empty root (a FROM scratch image: no libc, no loader, no /etc) runs
// `probe`, examines its empty /dev and says so: exit 2, every step
// NOT_RUN with its reason, the CUDA step's naming the places searched.
func TestProbeInAScratchImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	root := t.TempDir()
	for _, d := range []string{"dev", "proc"} {
		os.Mkdir(filepath.Join(root, d), 0o755)
	}
	b, err := os.ReadFile(accelDoctor(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "accel-doctor"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("chroot", root, "/accel-doctor", "probe", "--termination-log", "").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2: %s", err, out)
	}
	for _, want := range []string{"PROBE_NO_NODES", "libcuda.so.1 not found in /etc/ld.so.cache (absent)", "PROBE_NVML_NOT_RUN"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// BenchmarkProbeCommand is `accel-doctor probe` as an initContainer runs
// it, on this machine's /dev: the whole process, start to exit. The
// binary's size is reported beside the time (goal: 20 ms, 10 MiB).
//
//	go test -run XXX -bench ProbeCommand ./cmd/accel-doctor
func BenchmarkProbeCommand(b *testing.B) {
	// The README's build: its size is the figure.
	bin := filepath.Join(testbin.Dir(b, "../..", testbin.Options{Release: true, Packages: []string{"./cmd/accel-doctor"}}), "accel-doctor")
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cmd := exec.Command(bin, "probe", "--termination-log", "", "-o", "json")
		if err := cmd.Run(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "MiB")
}
