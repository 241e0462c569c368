package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Hostile trees give findings naming the path, never silence or a fake
// PASS, and a device that cannot be judged stays in the later layers with
// NOT_RUN. Each case changes one thing in the good two-GPU host of
// layer_devnode_test.go and runs the full check.

// hostileRun runs every check over the tree and returns the report and
// its problems (WARN and FAIL) as "CODE STATUS subject".
func hostileRun(t *testing.T, tr *l23Tree) (*report.Report, []string) {
	t.Helper()
	rep := runFixture(t, tr.build(t), "hostile", Options{})
	return rep, problems(rep)
}

// finding returns the findings with code and subject.
func findingsOf(rep *report.Report, code, subject string) []report.Finding {
	var out []report.Finding
	for _, f := range rep.Findings {
		if f.Code == code && f.Subject == subject {
			out = append(out, f)
		}
	}
	return out
}

// says reports whether a finding's summary, reason or evidence holds s.
func says(f report.Finding, s string) bool {
	if strings.Contains(f.Summary, s) || strings.Contains(f.Reason, s) {
		return true
	}
	for _, e := range f.Evidence {
		if strings.Contains(e.Path, s) || strings.Contains(e.Value, s) {
			return true
		}
	}
	return false
}

func TestHostileGoodHostIsClean(t *testing.T) {
	if _, p := hostileRun(t, goodNodesHost()); len(p) != 0 {
		t.Fatalf("the good host has problems: %v", p)
	}
}

// (a) A driver link that loops, or dangles somewhere that is no driver:
// a finding naming the link, no "bound to driver driver", and the GPU's
// nodes NOT_RUN instead of vanishing.
func TestHostileDriverLink(t *testing.T) {
	link := "/sys/devices/pci0000:00/" + bdfNV + "/driver"
	for name, c := range map[string]struct{ target, says string }{
		"loop":     {"driver", "too many levels of symbolic links"},
		"dangling": {"../../../sys/devices/pci0000:00/" + bdfNV + "/driver", "not at a driver in /sys/bus/pci/drivers"},
	} {
		t.Run(name, func(t *testing.T) {
			tr := goodNodesHost()
			tr.links[link] = c.target
			delete(tr.files, "/proc/driver/nvidia/gpus/"+bdfNV+"/information") // no other source tells
			rep, p := hostileRun(t, tr)
			if want := []string{"PCI_READ_ERROR WARN " + bdfNV}; !slices.Equal(p, want) {
				t.Errorf("problems = %v, want %v", p, want)
			}
			if fs := findingsOf(rep, CodePCIReadError, bdfNV); len(fs) != 1 || !says(fs[0], link) || !says(fs[0], c.says) {
				t.Errorf("the read error does not name the link: %+v", fs)
			}
			fs := findingsOf(rep, CodeDriverUnknown, bdfNV)
			if len(fs) != 1 || fs[0].Status != report.NotRun || !says(fs[0], link) {
				t.Errorf("driver.bound: %+v, want one NOT_RUN naming %s", fs, link)
			}
			if fs := findingsOf(rep, CodeDriverBound, bdfNV); len(fs) != 0 {
				t.Errorf("an unusable link is reported bound: %+v", fs)
			}
			if fs := findingsOf(rep, CodeDevnodeUnknown, bdfNV); len(fs) != 1 || !says(fs[0], "its driver, which is not known") {
				t.Errorf("the GPU dropped out of layer 3: %+v", fs)
			}
			for _, d := range rep.Devices {
				if d.ID == bdfNV && d.Driver != "unknown" {
					t.Errorf("report device driver %q, want unknown", d.Driver)
				}
			}
		})
	}
}

// (b) One line of 64 KiB in /proc/devices: the file is still read, the
// line is named, and the majors of the other lines are still judged.
func TestHostileProcDevicesLongLine(t *testing.T) {
	tr := goodNodesHost()
	tr.files["/proc/devices"] = strings.Replace(tr.files["/proc/devices"], " 10 misc\n", " 10 misc\n"+strings.Repeat("x", 64<<10)+"\n", 1)
	rep, p := hostileRun(t, tr)
	if want := []string{"DEVNODE_MAJORS_UNKNOWN WARN host"}; !slices.Equal(p, want) {
		t.Errorf("problems = %v, want %v", p, want)
	}
	if fs := findingsOf(rep, CodeDevnodeMajorsUnknown, "host"); len(fs) != 1 || !says(fs[0], "/proc/devices") || !says(fs[0], "line 4") {
		t.Errorf("the finding does not name the file and line: %+v", fs)
	} else if len(fs[0].Evidence[0].Value) > 400 {
		t.Errorf("the evidence quotes the whole line (%d bytes)", len(fs[0].Evidence[0].Value))
	}
	if fs := findingsOf(rep, CodeDevnodeOK, "/dev/nvidia-uvm"); len(fs) != 1 || !says(fs[0], "char major 236: nvidia-uvm") {
		t.Errorf("the majors after the long line were lost: %+v", fs)
	}
}

// (b) The same in the NVIDIA procfs: the GPU's minor is still found.
func TestHostileNVIDIAInformationLongLine(t *testing.T) {
	tr := goodNodesHost()
	p := "/proc/driver/nvidia/gpus/" + bdfNV + "/information"
	tr.files[p] = "Model: " + strings.Repeat("H", 64<<10) + "\n" + tr.files[p]
	rep, probs := hostileRun(t, tr)
	if len(probs) != 0 {
		t.Errorf("problems = %v", probs)
	}
	if fs := findingsOf(rep, CodeDevnodeOK, "/dev/nvidia0"); len(fs) != 1 {
		t.Errorf("/dev/nvidia0 not judged after a long information line: %v", l23Findings(rep, "devnode.present"))
	}
}

// (c) A garbage class on a GPU bound to nvidia: a finding naming the
// class file, and the GPU stays in layers 2 and 3.
func TestHostileGarbageClass(t *testing.T) {
	tr := goodNodesHost()
	class := "/sys/devices/pci0000:00/" + bdfNV + "/class"
	tr.files[class] = "\xff\xfenot a class\n"
	rep, p := hostileRun(t, tr)
	if want := []string{"PCI_READ_ERROR WARN " + bdfNV}; !slices.Equal(p, want) {
		t.Errorf("problems = %v, want %v", p, want)
	}
	if fs := findingsOf(rep, CodePCIReadError, bdfNV); len(fs) != 1 || !says(fs[0], class) || !says(fs[0], "malformed") {
		t.Errorf("the read error does not name the class file: %+v", fs)
	}
	if len(findingsOf(rep, CodeDriverBound, bdfNV)) != 1 || len(findingsOf(rep, CodeDevnodeOK, "/dev/nvidia0")) != 1 {
		t.Errorf("the GPU dropped out of layers 2-3: %v", l23Findings(rep, "driver.bound", "devnode.present"))
	}
}

// (c) A garbage class and no driver link, but the NVIDIA driver lists the
// GPU in its procfs: the GPU stays too.
func TestHostileGarbageClassNVIDIAProcfs(t *testing.T) {
	tr := goodNodesHost()
	tr.files["/sys/devices/pci0000:00/"+bdfNV+"/class"] = "garbage\n"
	delete(tr.links, "/sys/devices/pci0000:00/"+bdfNV+"/driver")
	rep, _ := hostileRun(t, tr)
	fs := findingsOf(rep, CodeDriverBound, bdfNV)
	if len(fs) != 1 || !says(fs[0], "/proc/driver/nvidia/gpus/"+bdfNV) {
		t.Errorf("driver.bound: %+v, want a PASS read from the NVIDIA procfs", fs)
	}
	if len(findingsOf(rep, CodeDevnodeOK, "/dev/nvidia0")) != 1 {
		t.Errorf("the GPU dropped out of layer 3: %v", l23Findings(rep, "devnode.present"))
	}
}

// (d) An unparsable numa_node is malformed, not absent: a WARN naming the
// file, and the NUMA check NOT_RUN saying so.
func TestHostileNUMANode(t *testing.T) {
	tr := goodNodesHost()
	numa := "/sys/devices/pci0000:00/" + bdfNV + "/numa_node"
	tr.files[numa] = "zero\n"
	tr.files["/sys/devices/system/node/online"] = "0-1\n"
	for _, d := range []string{bdfAMD} {
		tr.files["/sys/devices/pci0000:00/"+d+"/numa_node"] = "1\n"
	}
	rep, p := hostileRun(t, tr)
	if want := []string{"PCI_READ_ERROR WARN " + bdfNV}; !slices.Equal(p, want) {
		t.Errorf("problems = %v, want %v", p, want)
	}
	fs := findingsOf(rep, CodePCINUMANotRead, bdfNV)
	if len(fs) != 1 || fs[0].Status != report.NotRun || !strings.Contains(fs[0].Reason, "malformed") || strings.Contains(fs[0].Reason, "absent") || !says(fs[0], numa) {
		t.Errorf("pci.numa: %+v, want NOT_RUN saying malformed and naming %s", fs, numa)
	}
	for _, f := range findingsOf(rep, CodePCIAccelPresent, bdfNV) {
		if !says(f, "malformed") {
			t.Errorf("inventory evidence hides the malformed numa_node: %+v", f.Evidence)
		}
	}
}

// (b) A stale nvidia-uvm major and a line of /proc/devices that does not
// parse: the missing major might be on that line, so the node is NOT_RUN,
// not FAIL DEVNODE_MAJOR_UNREGISTERED; the wrong number is still a FAIL.
func TestHostileProcDevicesPartialMajors(t *testing.T) {
	tr := goodNodesHost()
	tr.files["/proc/devices"] = strings.Replace(tr.files["/proc/devices"], "236 nvidia-uvm", "237 nvidia-uvm\n2x6 garbled", 1)
	rep, p := hostileRun(t, tr)
	want := []string{
		"DEVNODE_MAJORS_UNKNOWN WARN host",
		"DEVNODE_WRONG_DEVNUM FAIL /dev/nvidia-uvm",
		"DEVNODE_WRONG_DEVNUM WARN /dev/nvidia-uvm-tools",
	}
	if !slices.Equal(p, want) {
		t.Errorf("problems = %v, want %v", p, want)
	}
	if fs := findingsOf(rep, CodeDevnodeMajorsUnknown, "/dev/nvidia-uvm"); len(fs) != 1 || fs[0].Status != report.NotRun {
		t.Errorf("registration of the node's major: %+v, want NOT_RUN", fs)
	}
}

// A tree whose device manifest has the nodes but no /dev/char at all: the
// links are not judged missing.
func TestCharLinksNotCaptured(t *testing.T) {
	tr := goodNodesHost()
	for p := range tr.manifest {
		if strings.HasPrefix(p, "/dev/char/") {
			delete(tr.manifest, p)
		}
	}
	rep, p := hostileRun(t, tr)
	if len(p) != 0 {
		t.Errorf("problems = %v, want none", p)
	}
	fs := findingsOf(rep, CodeDevnodeUnknown, "/dev/nvidia0")
	if len(fs) != 1 || fs[0].Status != report.NotRun || !says(fs[0], "the capture holds no /dev/char") {
		t.Errorf("char link of /dev/nvidia0: %+v", fs)
	}
}
