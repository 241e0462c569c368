package diagnose

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// pciTree writes a small host: files (host path -> content) and symlinks.
func pciTree(t *testing.T, files, links map[string]string) *hostfs.Root {
	t.Helper()
	lines := make(map[string]string, len(files))
	for p, c := range files {
		lines[p] = c + "\n"
	}
	dir := t.TempDir()
	testutil.WriteTree(t, dir, lines, links, "")
	return hostfs.MustNew(dir)
}

// pciHost is a two-node server: a root port (x16, 32 GT/s) with an H100
// trained at x8; an A100 at full width but 2.5 GT/s; a Gaudi on node -1;
// an ASPEED VGA (not an accelerator); a VectorEngine with no link
// attributes and a garbage numa_node.
func pciHost() (files, links map[string]string) {
	files, links = map[string]string{}, map[string]string{}
	dev := func(path string, attrs map[string]string) {
		sys := "/sys/devices/" + path
		for k, v := range attrs {
			files[sys+"/"+k] = v
		}
		bdf := path[strings.LastIndexByte(path, '/')+1:]
		links["/sys/bus/pci/devices/"+bdf] = "../../../devices/" + path
	}
	port := map[string]string{"vendor": "0x8086", "device": "0x347a", "class": "0x060400",
		"current_link_speed": "32.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe", "current_link_width": "16", "max_link_width": "16"}
	dev("pci0000:00/0000:00:01.0", port)
	dev("pci0000:00/0000:00:01.0/0000:17:00.0", map[string]string{"vendor": "0x10de", "device": "0x2330", "class": "0x030200", "numa_node": "0",
		"current_link_speed": "32.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe", "current_link_width": "8", "max_link_width": "16"})
	links["/sys/devices/pci0000:00/0000:00:01.0/0000:17:00.0/driver"] = "../../../../bus/pci/drivers/nvidia"
	dev("pci0000:00/0000:00:02.0", port)
	dev("pci0000:00/0000:00:02.0/0000:18:00.0", map[string]string{"vendor": "0x10de", "device": "0x20b0", "class": "0x030200", "numa_node": "1",
		"current_link_speed": "2.5 GT/s PCIe", "max_link_speed": "16.0 GT/s PCIe", "current_link_width": "16", "max_link_width": "16"})
	dev("pci0000:00/0000:00:03.0", map[string]string{"vendor": "0x1da3", "device": "0x1020", "class": "0x120000", "numa_node": "-1",
		"current_link_speed": "16.0 GT/s PCIe", "max_link_speed": "16.0 GT/s PCIe", "current_link_width": "16", "max_link_width": "16"})
	dev("pci0000:00/0000:00:1f.0", map[string]string{"vendor": "0x1a03", "device": "0x2000", "class": "0x030000"})
	dev("pci0000:00/0000:00:04.0", map[string]string{"vendor": "0x1bcf", "device": "0x001c", "class": "0x0b4000", "numa_node": "zero"})
	files["/sys/devices/system/node/online"] = "0-1"
	files["/usr/share/misc/pci.ids"] = "10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n1da3  Habana Labs Ltd.\n"
	return files, links
}

func pciRun(t *testing.T, root *hostfs.Root, opts Options) (*report.Report, []string) {
	t.Helper()
	rep := Run(NewEnv(root, opts), pciChecks(), Meta{Command: "test"})
	var got []string
	for _, f := range rep.Findings {
		if f.Code == CodeCheckCrashed {
			t.Fatalf("crashed: %s\n%s", f.Reason, f.Evidence[0].Value)
		}
		if f.Status == report.NotRun && f.Reason == "" {
			t.Errorf("NOT_RUN without a reason: %+v", f)
		}
		if f.Status != report.Pass && f.Remediation == "" {
			t.Errorf("%s without remediation", f.Code)
		}
		got = append(got, strings.Join([]string{f.Check, f.Code, string(f.Status), f.Subject}, " "))
	}
	sort.Strings(got)
	return rep, got
}

func TestPCIChecks(t *testing.T) {
	files, links := pciHost()
	rep, got := pciRun(t, pciTree(t, files, links), Options{})
	want := []string{
		"pci.inventory PCI_ACCEL_PRESENT PASS 0000:00:03.0",
		"pci.inventory PCI_ACCEL_PRESENT PASS 0000:00:04.0",
		"pci.inventory PCI_ACCEL_PRESENT PASS 0000:17:00.0",
		"pci.inventory PCI_ACCEL_PRESENT PASS 0000:18:00.0",
		"pci.inventory PCI_READ_ERROR WARN 0000:00:04.0",
		"pci.link PCI_LINK_DEGRADED WARN 0000:17:00.0",
		"pci.link PCI_LINK_OK PASS 0000:00:03.0",
		"pci.link PCI_LINK_SPEED_REDUCED WARN 0000:18:00.0",
		"pci.link PCI_LINK_UNKNOWN NOT_RUN 0000:00:04.0",
		"pci.numa PCI_NUMA_NOT_READ NOT_RUN 0000:00:04.0",
		"pci.numa PCI_NUMA_OK PASS 0000:17:00.0",
		"pci.numa PCI_NUMA_OK PASS 0000:18:00.0",
		"pci.numa PCI_NUMA_UNKNOWN WARN 0000:00:03.0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	zero := 0
	wantDev := report.Device{ID: "0000:17:00.0", Kind: "gpu", Vendor: "NVIDIA Corporation", Name: "GH100 [H100 SXM5 80GB]",
		Driver: "nvidia", NUMANode: &zero, Description: "NVIDIA GH100 [H100 SXM5 80GB] [10de:2330]"}
	var gotDev *report.Device
	for i := range rep.Devices {
		if rep.Devices[i].ID == "0000:17:00.0" {
			gotDev = &rep.Devices[i]
		}
		if rep.Devices[i].ID == "0000:00:03.0" && rep.Devices[i].NUMANode != nil {
			t.Errorf("node -1 reported as %d", *rep.Devices[i].NUMANode)
		}
	}
	if len(rep.Devices) != 4 || gotDev == nil {
		t.Fatalf("devices: %+v", rep.Devices)
	}
	if diff := cmp.Diff(wantDev, *gotDev); diff != "" {
		t.Errorf("device (-want +got):\n%s", diff)
	}
	for _, f := range rep.Findings {
		if f.Code == CodePCILinkDegraded {
			if !strings.Contains(f.Summary, "x8 of x16") || len(f.Evidence) != 4 || !strings.HasSuffix(f.Evidence[2].Path, "/0000:17:00.0/current_link_width") || f.Evidence[2].Value != "8" {
				t.Errorf("degraded finding: %+v", f)
			}
		}
	}
	if rep.ExitCode() != 0 {
		t.Errorf("warnings only, exit code %d", rep.ExitCode())
	}
}

// A x16 card in a slot whose port does only x8 is what the slot allows.
func TestPCILinkLimitedByPort(t *testing.T) {
	files, links := pciHost()
	files["/sys/devices/pci0000:00/0000:00:01.0/max_link_width"] = "8"
	_, got := pciRun(t, pciTree(t, files, links), Options{Devices: []string{"0000:17:00.0"}})
	want := []string{
		"pci.inventory PCI_ACCEL_PRESENT PASS 0000:17:00.0",
		"pci.link PCI_LINK_OK PASS 0000:17:00.0",
		"pci.numa PCI_NUMA_OK PASS 0000:17:00.0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func TestPCINoAccelerator(t *testing.T) {
	root := pciTree(t, map[string]string{
		"/sys/devices/pci0000:00/0000:00:1f.0/vendor": "0x1a03",
		"/sys/devices/pci0000:00/0000:00:1f.0/device": "0x2000",
		"/sys/devices/pci0000:00/0000:00:1f.0/class":  "0x030000",
	}, map[string]string{"/sys/bus/pci/devices/0000:00:1f.0": "../../../devices/pci0000:00/0000:00:1f.0"})
	rep, got := pciRun(t, root, Options{})
	if diff := cmp.Diff([]string{"pci.inventory PCI_NO_ACCELERATOR PASS host"}, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if rep.ExitCode() != 0 || len(rep.Devices) != 0 {
		t.Errorf("exit %d, devices %v", rep.ExitCode(), rep.Devices)
	}
}

func TestPCINoBus(t *testing.T) {
	_, got := pciRun(t, hostfs.MustNew(t.TempDir()), Options{})
	if diff := cmp.Diff([]string{"pci.inventory PCI_READ_ERROR NOT_RUN host"}, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func TestPCIDeviceSelection(t *testing.T) {
	files, links := pciHost()
	// A non-accelerator named explicitly is checked; an absent one FAILs.
	rep, got := pciRun(t, pciTree(t, files, links), Options{Devices: []string{"0000:00:1f.0", "0000:99:00.0"}})
	want := []string{
		"pci.inventory PCI_ACCEL_PRESENT PASS 0000:00:1f.0",
		"pci.inventory PCI_DEVICE_NOT_FOUND FAIL 0000:99:00.0",
		"pci.link PCI_LINK_UNKNOWN NOT_RUN 0000:00:1f.0",
		"pci.numa PCI_NUMA_NOT_READ NOT_RUN 0000:00:1f.0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if len(rep.Devices) != 1 || rep.Devices[0].Kind != "other" {
		t.Errorf("devices %+v", rep.Devices)
	}
}

func TestPCISingleNode(t *testing.T) {
	files, links := pciHost()
	files["/sys/devices/system/node/online"] = "0"
	_, got := pciRun(t, pciTree(t, files, links), Options{Devices: []string{"0000:00:03.0"}})
	if !strings.Contains(strings.Join(got, "\n"), "pci.numa PCI_NUMA_OK PASS 0000:00:03.0") {
		t.Errorf("node -1 on a single-node host must pass: %v", got)
	}
	delete(files, "/sys/devices/system/node/online")
	_, got = pciRun(t, pciTree(t, files, links), Options{Devices: []string{"0000:00:03.0"}})
	if !strings.Contains(strings.Join(got, "\n"), "pci.numa PCI_NUMA_NOT_READ NOT_RUN 0000:00:03.0") {
		t.Errorf("no node list must be NOT_RUN: %v", got)
	}
}

// TestPCINUMAByLocalCPUs: a device whose numa_node the tree lacks is
// placed by its local CPUs (cpumask_of_node of its node); CPUs of two
// nodes place it nowhere; no local CPUs is NOT_RUN.
func TestPCINUMAByLocalCPUs(t *testing.T) {
	const gpu = "/sys/devices/pci0000:00/0000:00:01.0/0000:17:00.0"
	for _, c := range []struct {
		name, attr, cpus, want string
	}{
		{"local_cpulist on node 1", "local_cpulist", "8-11", "pci.numa PCI_NUMA_OK PASS 0000:17:00.0"},
		{"local_cpus mask on node 0", "local_cpus", "0000000f", "pci.numa PCI_NUMA_OK PASS 0000:17:00.0"},
		{"CPUs of both nodes", "local_cpulist", "0-15", "pci.numa PCI_NUMA_NOT_READ NOT_RUN 0000:17:00.0"},
		{"no local CPUs", "", "", "pci.numa PCI_NUMA_NOT_READ NOT_RUN 0000:17:00.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files, links := pciHost()
			delete(files, gpu+"/numa_node")
			files["/sys/devices/system/node/node0/cpulist"] = "0-7"
			files["/sys/devices/system/node/node1/cpulist"] = "8-15"
			if c.attr != "" {
				files[gpu+"/"+c.attr] = c.cpus
			}
			rep, got := pciRun(t, pciTree(t, files, links), Options{Devices: []string{"0000:17:00.0"}})
			if !strings.Contains(strings.Join(got, "\n"), c.want) {
				t.Fatalf("findings %v, want %q", got, c.want)
			}
			wantNode := map[string]int{"local_cpulist on node 1": 1, "local_cpus mask on node 0": 0}
			n, placed := wantNode[c.name]
			if d := rep.Devices[0]; placed != (d.NUMANode != nil) || placed && *d.NUMANode != n {
				t.Errorf("report NUMA %v, want %d (placed %v)", d.NUMANode, n, placed)
			}
		})
	}
}

// pci.ids is read when the run names a function: a bus with an
// accelerator, a --device, a snapshot being recorded; not for a bus of
// bridges and a BMC's display only, whose report names none (and says
// nothing of pci.ids).
func TestNamesOnlyWhenShown(t *testing.T) {
	files, links := pciHost()
	withGPU := pciTree(t, files, links)
	for bdf := range links {
		if strings.HasPrefix(bdf, "/sys/bus/pci/devices/") && !strings.HasSuffix(bdf, "0000:00:1f.0") && !strings.HasSuffix(bdf, "0000:00:01.0") {
			delete(links, bdf)
		}
	}
	bare := pciTree(t, files, links)
	for _, c := range []struct {
		name   string
		root   *hostfs.Root
		opts   Options
		record bool
		want   bool
	}{
		{"accelerators", withGPU, Options{}, false, true},
		{"none", bare, Options{}, false, false},
		{"none, --device", bare, Options{Devices: []string{"0000:00:1f.0"}}, false, true},
		{"none, passthrough", bare, Options{Passthrough: true}, false, true},
		{"none, recording", bare, Options{}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := hostfs.MustNew(c.root.Dir())
			if c.record {
				root.Record()
			}
			e := NewEnv(root, c.opts)
			rep := Run(e, pciChecks(), Meta{Command: "test"})
			inv, err := e.PCI()
			if err != nil {
				t.Fatal(err)
			}
			if got := inv.IDsPath != ""; got != c.want {
				t.Errorf("pci.ids read %v (%q), want %v", got, inv.IDsPath, c.want)
			}
			for _, f := range rep.Findings {
				if f.Code == CodePCINoAccelerator {
					for _, ev := range f.Evidence {
						if strings.Contains(ev.Value, "pci.ids") {
							t.Errorf("%s names pci.ids: %+v", f.Code, ev)
						}
					}
				}
			}
		})
	}
}
