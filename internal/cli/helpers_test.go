package cli

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// The binaries as processes (internal/testutil builds both once).
func binary(t testing.TB) string { return testutil.Binaries(t, "../..") }

func sockDir(t *testing.T) string { return testutil.SockDir(t) }

func start(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	return testutil.Start(t, binary(t), args...)
}

func pluginCodes(t *testing.T, js string) map[string]report.Status {
	t.Helper()
	return testutil.CodesAs[report.Status](t, js)
}
