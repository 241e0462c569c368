package cgroup

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the sandbox's trampoline (the
// sandbox re-executes os.Executable, which is this binary under go test)
// and as the helper process of the leak test.
func TestMain(m *testing.M) {
	if SandboxTrampolineMain() {
		return
	}
	if os.Getenv(sandboxTestHelperEnv) != "" {
		os.Exit(sandboxTestHelper())
	}
	os.Exit(m.Run())
}
