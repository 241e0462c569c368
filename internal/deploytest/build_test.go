package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository's root, two levels above this package.
const repoRoot = "../.."

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// version is what the test binaries report (-X ...cli.Version), so that a
// test can tell its own build from any accel-doctor on PATH.
const version = "deploytest-1"

// binaries builds accel-doctor and accel-doctor-kube once, static, as the
// README builds them, into one directory, and returns it.
func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds both binaries (about a minute cold)")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "accel-doctor-deploytest-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-tags=grpcnotrace",
			"-ldflags=-s -w -X github.com/accel-doctor/accel-doctor/internal/cli.Version="+version,
			"-o", buildDir+"/", "./cmd/accel-doctor", "./cmd/accel-doctor-kubelet", "./cmd/accel-doctor-kube")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return buildDir
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// copyFile copies src to dst with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}
