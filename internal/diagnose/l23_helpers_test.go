package diagnose

import (
	"sort"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// l23Tree is a host tree for the driver and devnode tests: files and
// symlinks, plus a device manifest (host path -> manifest line fields
// after the path) so that a fault test can change one node.
type l23Tree struct {
	files    map[string]string
	links    map[string]string
	manifest map[string]string
}

func newL23Tree() *l23Tree {
	return &l23Tree{files: map[string]string{}, links: map[string]string{}, manifest: map[string]string{}}
}

// pciDev adds a PCI function under /sys/devices/pci0000:00 with its bus
// link and, when drv is not "", its driver link.
func (tr *l23Tree) pciDev(bdf, vendor, device, class, drv string) string {
	sys := "/sys/devices/pci0000:00/" + bdf
	tr.files[sys+"/vendor"] = vendor + "\n"
	tr.files[sys+"/device"] = device + "\n"
	tr.files[sys+"/class"] = class + "\n"
	tr.links["/sys/bus/pci/devices/"+bdf] = "../../../devices/pci0000:00/" + bdf
	if drv != "" {
		tr.files["/sys/bus/pci/drivers/"+drv+"/bind"] = ""
		tr.links[sys+"/driver"] = "../../../bus/pci/drivers/" + drv
	}
	return sys
}

func (tr *l23Tree) build(t *testing.T) *hostfs.Root {
	t.Helper()
	manifest := ""
	if len(tr.manifest) > 0 {
		var lines []string
		for p, f := range tr.manifest {
			lines = append(lines, p+" "+f)
		}
		sort.Strings(lines)
		manifest = strings.Join(lines, "\n") + "\n"
	}
	dir := t.TempDir()
	testutil.WriteTree(t, dir, tr.files, tr.links, manifest)
	return hostfs.MustNew(dir)
}

// got is "check code status subject" for every finding, sorted, so that a
// test states exactly what it expects.
func l23Findings(rep *report.Report, checkPrefix ...string) []string {
	var out []string
	for _, f := range rep.Findings {
		keep := len(checkPrefix) == 0
		for _, p := range checkPrefix {
			keep = keep || strings.HasPrefix(f.Check, p)
		}
		if keep {
			out = append(out, strings.Join([]string{f.Check, f.Code, string(f.Status), f.Subject}, " "))
		}
	}
	sort.Strings(out)
	return out
}

func l23Run(t *testing.T, root *hostfs.Root, checks ...[]Check) *report.Report {
	t.Helper()
	var all []Check
	for _, c := range checks {
		all = append(all, c...)
	}
	rep := Run(NewEnv(root, Options{}), all, Meta{Command: "test"})
	for _, f := range rep.Findings {
		if f.Code == CodeCheckCrashed {
			t.Fatalf("a check crashed: %s\n%s", f.Reason, f.Evidence[0].Value)
		}
		if f.Status == report.NotRun && f.Reason == "" {
			t.Errorf("NOT_RUN without a reason: %+v", f)
		}
	}
	return rep
}
