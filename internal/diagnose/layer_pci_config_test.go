package diagnose

import (
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// AER counters: the planted fault (fatal errors counted), the healthy
// device (correctable ones only), and counters that do not parse.
func TestPCIConfigAER(t *testing.T) {
	dev := "/sys/devices/pci0000:00/" + bdfNV
	for name, c := range map[string]struct {
		fatal, cor string
		code       string
		st         report.Status
	}{
		"fatal errors":   {"RxErr 0\nTOTAL_ERR_FATAL 2\n", "TOTAL_ERR_COR 5\n", codeAERErrors, report.Warn},
		"only corrected": {"TOTAL_ERR_FATAL 0\n", "BadTLP 3\nTOTAL_ERR_COR 3\n", codeAERClean, report.Pass},
		"garbage":        {"\x00\xff not a counter", "zzz", codeAERUnread, report.NotRun},
	} {
		t.Run(name, func(t *testing.T) {
			tr := goodNodesHost()
			tr.files[dev+"/aer_dev_fatal"] = c.fatal
			tr.files[dev+"/aer_dev_nonfatal"] = c.fatal
			tr.files[dev+"/aer_dev_correctable"] = c.cor
			rep, _ := hostileRun(t, tr)
			fs := findingsOf(rep, c.code, bdfNV)
			if len(fs) != 1 || fs[0].Status != c.st {
				t.Errorf("findings %+v, want one %s %s", fs, c.st, c.code)
			}
		})
	}
}
