package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// pciNames is `pci -o json`'s vendor and device name of each function.
func pciNames(t *testing.T, args ...string) map[string][2]string {
	t.Helper()
	out, stderr, code := run(t, append([]string{"pci", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("pci %v: exit %d: %s", args, code, stderr)
	}
	var rows []struct {
		Address    string `json:"address"`
		VendorName string `json:"vendor_name"`
		DeviceName string `json:"device_name"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	names := map[string][2]string{}
	for _, r := range rows {
		names[r.Address] = [2]string{r.VendorName, r.DeviceName}
	}
	return names
}

// checkDevice is `check --device bdf`'s report (JSON) and its text.
func checkDevice(t *testing.T, bdf string, args ...string) (report.Device, string) {
	t.Helper()
	args = append([]string{"check", "--device", bdf}, args...)
	out, stderr, _ := run(t, append(args, "-o", "json")...)
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %v (stderr %q)", args, err, stderr)
	}
	if len(rep.Devices) != 1 {
		t.Fatalf("%v: devices %+v", args, rep.Devices)
	}
	text, _, _ := run(t, args...)
	return rep.Devices[0], text
}

// TestCheckDeviceNamesItAsPCIDoes: check --device names the function
// from pci.ids, as pci does: on the demo's GPU, and on a host whose bus
// holds no accelerator, where check reads pci.ids only because --device
// names a function (the scan that looks the function up is the one the
// report names it from).
func TestCheckDeviceNamesItAsPCIDoes(t *testing.T) {
	dir := t.TempDir()
	const isa = "/sys/devices/pci0000:00/0000:00:01.0"
	testutil.WriteTree(t, dir, map[string]string{
		isa + "/vendor": "0x8086\n", isa + "/device": "0x7000\n", isa + "/class": "0x060100\n",
		"/usr/share/misc/pci.ids": "8086  Intel Corporation\n\t7000  82371SB PIIX3 ISA [Natoma/Triton II]\n",
	}, map[string]string{
		"/sys/bus/pci/devices/0000:00:01.0": "../../../devices/pci0000:00/0000:00:01.0",
	}, "")
	for _, c := range []struct {
		name, bdf string
		root      []string
	}{
		{"demo GPU", "0000:ab:00.0", []string{"--snapshot", "demo"}},
		{"no accelerator on the bus", "00:01.0", []string{"--root", dir}},
	} {
		t.Run(c.name, func(t *testing.T) {
			names := pciNames(t, c.root...)
			d, text := checkDevice(t, c.bdf, append(c.root, "--layer", "pci")...)
			want, ok := names[d.ID]
			if !ok || want[1] == "" {
				t.Fatalf("pci names %s %q", d.ID, want)
			}
			if d.Vendor != want[0] || d.Name != want[1] || !strings.Contains(d.Description, want[1]) {
				t.Errorf("check names %s vendor %q, name %q (%q); pci: %q", d.ID, d.Vendor, d.Name, d.Description, want)
			}
			if !strings.Contains(text, d.ID+"  "+d.Description) || !strings.Contains(text, want[1]) {
				t.Errorf("text does not name %s %q:\n%s", d.ID, want[1], text)
			}
		})
	}
}
