package deploytest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

// repoRoot is the repository's root, two levels above this package.
const repoRoot = "../.."

// version is what the test binaries report (-X ...cli.Version), so that a
// test can tell its own build from any accel-doctor on PATH.
const version = "deploytest-1"

// binaries returns the directory holding accel-doctor, accel-doctor-kubelet
// and accel-doctor-kube stamped with version, built by internal/testbin
// once for the run. static builds them with CGO_ENABLED=0, as they ship,
// for what runs in an empty root (the image); otherwise with go test's own
// settings (product_test.go has go test compile their packages first).
func binaries(t *testing.T, static bool) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the three binaries")
	}
	return testbin.Dir(t, repoRoot, testbin.Options{Static: static, Version: version})
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
