package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// accel-doctor hands the commands that link the Kubernetes client to
// accel-doctor-kube beside it (internal/cli KubeBinary): the user's
// command line, exit status and output are the other binary's; without
// it, a usage error says how to build it.
func TestHandOverToKubeBinary(t *testing.T) {
	planted := "../../internal/lint/testdata/planted/LINT_PRIVILEGED_GPU.yaml"
	r := runBin(t, []string{"PATH=/usr/bin:/bin"}, "lint", "-f", planted)
	if r.code != 2 || !strings.Contains(r.stderr, "accel-doctor-kube") || !strings.Contains(r.stderr, "go build") {
		t.Errorf("without accel-doctor-kube: exit %d, stderr %q", r.code, r.stderr)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-tags=grpcnotrace", "-ldflags=-s -w", "-o", dir+"/", ".", "../accel-doctor-kube")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(filepath.Join(dir, "accel-doctor"), args...)
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return o.String(), e.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), 0
	}
	if out, stderr, code := run("lint", "-f", planted); code != 0 || !strings.Contains(out, "WARN LINT_PRIVILEGED_GPU") {
		t.Errorf("lint through accel-doctor: exit %d\n%s%s", code, out, stderr)
	}
	if _, _, code := run("lint", "-f", "../../internal/lint/testdata/planted"); code != 1 {
		t.Errorf("lint's FAIL exit status did not come through: %d", code)
	}
	if out, _, code := run("explain", "lint_privileged_gpu"); code != 0 || !strings.HasPrefix(out, "LINT_PRIVILEGED_GPU") {
		t.Errorf("explain of a kube code: exit %d, %q", code, out)
	}
	if out, _, code := run("--help"); code != 0 || !strings.Contains(out, "cluster") || !strings.Contains(out, "lint") {
		t.Errorf("help does not list the handed-over commands: %q", out)
	}
}
