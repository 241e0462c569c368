package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssFile:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// trimImage gives back the executable's clean pages, and the process
// runs on: its code and read-only data fault in again from the file (the
// test binary runs a whole command line afterwards).
func TestTrimImage(t *testing.T) {
	before := rssFileKiB(t)
	trimImage()
	after := rssFileKiB(t)
	if after >= before {
		t.Errorf("RssFile %d KiB before, %d KiB after: nothing given back", before, after)
	}
	if out, _, code := run(t, "explain", "KUBELET_PLUGIN_SOCKET_STALE"); code != 0 || !strings.HasPrefix(out, "KUBELET_PLUGIN_SOCKET_STALE") {
		t.Errorf("after the trim: exit %d, %q", code, out)
	}
	t.Logf("RssFile %d KiB -> %d KiB", before, after)
}
