package e2erun

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	probeEnv = "ACCEL_DOCTOR_NOTCACHED_PROBE"
	// probeStamp is the probe's own file: TestE2E's, written by a skip in
	// this same run, must keep its new mtime.
	probeStamp = ".probe-skipped"
)

// TestNotCachedProbe is run by TestSkipIsNotCached only: it skips as
// TestE2E does when its build runs out of time.
func TestNotCachedProbe(t *testing.T) {
	if os.Getenv(probeEnv) == "" {
		t.Skip("run by TestSkipIsNotCached")
	}
	notCached(t, probeStamp)
	t.Skip("as TestE2E does when its build does not fit")
}

// A skip for the build's time is run again by the next go test, never
// replayed from the test cache (which would leave the e2e module never
// built and never run on a machine whose first run skipped).
func TestSkipIsNotCached(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go test twice")
	}
	var outs []string
	for range 2 {
		cmd := exec.Command("go", "test", "-run", "^TestNotCachedProbe$", ".")
		cmd.Env = append(os.Environ(), probeEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go test: %v\n%s", err, out)
		}
		outs = append(outs, string(out))
	}
	if strings.Contains(outs[1], "(cached)") {
		t.Errorf("the second run was replayed from the test cache:\n%s", outs[1])
	}
	// recordInputs lists this directory, whose listing go test hashes with
	// each file's mtime: the probe's file is given back a fixed one, so
	// that this package's own result can be cached.
	fixed := time.Unix(1<<30, 0)
	if err := os.Chtimes(probeStamp, fixed, fixed); err != nil {
		t.Error(err)
	}
}
