package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// TestPCITableShowsReadErrors: the table marks what could not be used
// ("?", not "-" as for absent), names the attributes in its ERRORS
// column, and lists every error with its path under the table; JSON has
// them in "errors".
func TestPCITableShowsReadErrors(t *testing.T) {
	dir := t.TempDir()
	const gpu = "/sys/devices/pci0000:00/0000:00:02.0"
	const ok = "/sys/devices/pci0000:00/0000:00:03.0"
	testutil.WriteTree(t, dir, map[string]string{
		gpu + "/vendor": "0x10de\n", gpu + "/device": "0x2330\n", gpu + "/class": "0xzz\n", gpu + "/numa_node": "zero\n",
		ok + "/vendor": "0x8086\n", ok + "/device": "0x1592\n", ok + "/class": "0x020000\n",
	}, map[string]string{
		"/sys/bus/pci/devices/0000:00:02.0": "../../../devices/pci0000:00/0000:00:02.0",
		"/sys/bus/pci/devices/0000:00:03.0": "../../../devices/pci0000:00/0000:00:03.0",
		gpu + "/driver":                     "driver", // a loop
	}, "")
	out, stderr, code := run(t, "pci", "--root", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	var row, good string
	for _, l := range lines {
		if strings.HasPrefix(l, "0000:00:02.0") {
			row = l
		}
		if strings.HasPrefix(l, "0000:00:03.0") {
			good = l
		}
	}
	f := strings.Fields(row)
	// ADDRESS IDS CLASS NAME DRIVER NUMA IOMMU LINK ACCEL ERRORS...
	if len(f) < 10 || f[1] != "10de:2330" || f[2] != "?" || f[4] != "?" || f[5] != "?" || f[6] != "-" {
		t.Errorf("row %q: want class, driver and NUMA shown as ? and IOMMU as -", row)
	}
	for _, want := range []string{"class malformed", "numa_node malformed", "driver unreadable"} {
		if !strings.Contains(row, want) {
			t.Errorf("row %q lacks %q", row, want)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(good), " -") {
		t.Errorf("a function without errors: %q", good)
	}
	for _, want := range []string{gpu + "/class", gpu + "/numa_node", gpu + "/driver: too many levels of symbolic links"} {
		if !strings.Contains(out, "0000:00:02.0: ") || !strings.Contains(out, want) {
			t.Errorf("the error list lacks %q:\n%s", want, out)
		}
	}

	out, _, _ = run(t, "pci", "--root", dir, "-o", "json")
	var rows []pciRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0].Errors) != 3 || len(rows[1].Errors) != 0 {
		t.Errorf("JSON errors: %+v", rows)
	}
}
