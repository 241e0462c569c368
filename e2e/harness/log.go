package harness

import (
	"flag"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

// The kubelet's code logs through klog's global logger (the gRPC handlers
// have no logger in their context), so klog's output is sent to the test
// that owns the Kubelet, through t.Log: shown when it fails or with -v, and
// attributed to it. Verbosity is klog's -v, 1 by default (registrations,
// connections, errors); ACCEL_DOCTOR_E2E_KLOG_V raises it (2 adds each
// ListAndWatch update the manager processes).
var (
	logMu   sync.Mutex
	logT    testing.TB
	logOnce sync.Once
)

type testWriter struct{}

func (testWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	if logT == nil {
		return os.Stderr.Write(p)
	}
	logT.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// logTo sends klog's output to t until t ends. The lock makes sure that no
// write reaches t after its cleanup: t.Log after a test has ended panics.
func logTo(t testing.TB) {
	logOnce.Do(func() {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		v := os.Getenv("ACCEL_DOCTOR_E2E_KLOG_V")
		if v == "" {
			v = "1"
		}
		for name, val := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "v": v} {
			if err := fs.Set(name, val); err != nil {
				panic(err)
			}
		}
		// klog writes a line to the output of its severity and of
		// every lower one; only INFO's reaches the test, once.
		klog.SetOutputBySeverity("INFO", testWriter{})
		for _, sev := range []string{"WARNING", "ERROR", "FATAL"} {
			klog.SetOutputBySeverity(sev, io.Discard)
		}
	})
	logMu.Lock()
	logT = t
	logMu.Unlock()
	t.Cleanup(func() {
		klog.Flush()
		logMu.Lock()
		logT = nil
		logMu.Unlock()
	})
}
