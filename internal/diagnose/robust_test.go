package diagnose

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// TestHostileTree: a symlink loop under /sys/bus/pci/devices, a 1 GiB
// attribute, garbage in class and a missing vendor give findings, not a
// panic or a hang.
func TestHostileTree(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:02.0")
	bad := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:03.0")
	for _, d := range []string{dev, bad, filepath.Join(dir, "sys/bus/pci/devices")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dev, "vendor"), "0x10de\n")
	write(filepath.Join(dev, "device"), "0x2330\n")
	write(filepath.Join(dev, "class"), "0x030200\n")
	f, err := os.Create(filepath.Join(dev, "config"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1 << 30) // sparse
	f.Close()
	f, _ = os.Create(filepath.Join(dev, "numa_node"))
	f.Truncate(1 << 30)
	f.Close()
	write(filepath.Join(bad, "class"), "not a class \x00\xff\n") // and no vendor
	links := map[string]string{
		"sys/bus/pci/devices/0000:00:02.0":           "../../../devices/pci0000:00/0000:00:02.0",
		"sys/bus/pci/devices/0000:00:03.0":           "../../../devices/pci0000:00/0000:00:03.0",
		"sys/bus/pci/devices/0000:00:04.0":           "0000:00:05.0",
		"sys/bus/pci/devices/0000:00:05.0":           "0000:00:04.0",
		"sys/devices/pci0000:00/0000:00:02.0/driver": "../../../sys/devices/pci0000:00/0000:00:02.0/driver",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	root := hostfs.MustNew(dir)
	done := make(chan *report.Report)
	go func() { done <- runFixture(t, root, "hostile", Options{}) }()
	select {
	case rep := <-done:
		var readErrs int
		for _, f := range rep.Findings {
			if f.Code == "PCI_READ_ERROR" {
				readErrs++
			}
		}
		if readErrs == 0 {
			t.Errorf("no PCI_READ_ERROR on a hostile tree: %+v", rep.Findings)
		}
	case <-time.After(20 * time.Second): // a hang guard, not a speed goal
		t.Fatal("check did not finish on a hostile tree")
	}
}
