package sandbox

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the sandbox's trampoline (the
// sandbox re-executes os.Executable, which is this binary under go test)
// and as the helper process of the leak test.
func TestMain(m *testing.M) {
	if TrampolineMain() {
		return
	}
	if os.Getenv(testHelperEnv) != "" {
		os.Exit(testHelper())
	}
	os.Exit(m.Run())
}
