package diagnose

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const (
	bdfMI   = "0000:03:00.0"
	sysMI   = "/sys/devices/pci0000:00/" + bdfMI
	relMI   = "6.8.0-45-generic"
	modsMI  = "/lib/modules/" + relMI + "/"
	amdgpuK = "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"
)

// Alias lines in the form depmod writes them from the drivers' PCI ID
// tables (scripts/mod/file2alias.c): amdgpu lists device ids (0x740f is
// the Instinct MI210), nouveau and nvidia claim NVIDIA display classes,
// habanalabs the Gaudi2 id.
const noDriverAliases = `# Aliases extracted from modules themselves.
alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau
alias pci:v00001002d0000740Fsv*sd*bc*sc*i* amdgpu
alias pci:v00001002d000074A1sv*sd*bc*sc*i* amdgpu
alias pci:v00001DA3d00001020sv*sd*bc*sc*i* habanalabs
alias usb:v0BDAp8153d*dc*dsc*dp*ic*isc*ip*in* r8152
`

// noDriverHost: an AMD Instinct MI210 that no driver is bound to (its
// root port binds pcieport, so the tree shows driver links), on a host
// whose kernel has amdgpu installed and nothing keeping it out: amdgpu
// is simply not loaded.
func noDriverHost() *l23Tree {
	tr := newL23Tree()
	tr.pciDev("0000:00:01.1", "0x1022", "0x1483", "0x060400", "pcieport")
	tr.pciDev(bdfMI, "0x1002", "0x740f", "0x038000", "")
	tr.files[sysMI+"/modalias"] = "pci:v00001002d0000740Fsv00001002sd00000C34bc03sc80i00\n"
	tr.files[driver.OSReleasePath] = relMI + "\n"
	tr.files[driver.CmdlinePath] = "BOOT_IMAGE=/boot/vmlinuz-" + relMI + " root=UUID=0f1e ro quiet splash\n"
	tr.files[driver.LockdownPath] = "[none] integrity confidentiality\n"
	tr.files[driver.SigEnforcePath] = "N\n"
	tr.files[modsMI+"modules.alias"] = noDriverAliases
	tr.files[modsMI+"modules.dep"] = amdgpuK + ": kernel/drivers/gpu/drm/drm_exec.ko\nkernel/drivers/gpu/drm/nouveau/nouveau.ko:\nkernel/drivers/accel/habanalabs/habanalabs.ko:\n"
	tr.files[modsMI+"modules.builtin"] = "kernel/drivers/pci/pcieportdrv.ko\n"
	tr.files[modsMI+amdgpuK] = "\x7fELF amdgpu"
	tr.files[modsMI+"kernel/drivers/gpu/drm/nouveau/nouveau.ko"] = "\x7fELF nouveau"
	tr.files["/etc/modprobe.d/blacklist.conf"] = "# This file lists modules which will not be loaded.\nblacklist evbug\nblacklist usbmouse\n"
	tr.files["/sys/module/drm/initstate"] = "live\n"
	tr.files["/proc/devices"] = "Character devices:\n  1 mem\n 10 misc\n226 drm\n\nBlock devices:\n  8 sd\n"
	tr.manifest["/dev/null"] = "c 1:3 0666 0:0"
	return tr
}

// amdgpuLoaded: the module is loaded (and with it amdkfd's /dev/kfd).
func amdgpuLoaded(tr *l23Tree) {
	tr.files["/sys/module/amdgpu/initstate"] = "live\n"
	tr.files["/sys/class/kfd/kfd/dev"] = "240:0\n"
	tr.files["/proc/devices"] = "Character devices:\n  1 mem\n 10 misc\n226 drm\n240 kfd\n\nBlock devices:\n  8 sd\n"
	tr.manifest["/dev/kfd"] = "c 240:0 0666 0:0"
}

type noDriverCase struct {
	name    string
	bdf     string // the device judged; "" is the MI210
	change  func(tr *l23Tree)
	code    string
	summary []string // in the layer-2 finding's summary
	fix     []string // in its remediation
	ev      []string // in its evidence (path: value)
	nodes   []string // layer 3, "code status subject"
}

// consequences is what layer 3 says of an unbound MI210 whose /dev/kfd
// is absent: both nodes missing because amdgpu does not drive it.
var amdConsequences = []string{"DEVNODE_MISSING FAIL " + bdfMI, "DEVNODE_MISSING FAIL /dev/kfd"}

func TestNoDriverCause(t *testing.T) {
	cases := []noDriverCase{{
		name:    "installed, not loaded",
		code:    CodeDriverModuleNotLoaded,
		summary: []string{"amdgpu is installed but not loaded"},
		fix:     []string{"`modprobe amdgpu`"},
		ev:      []string{modsMI + "modules.alias: line 3: alias pci:v00001002d0000740Fsv*sd*bc*sc*i* amdgpu", "/sys/module/amdgpu: absent"},
		nodes:   amdConsequences,
	}, {
		// A capture without the modalias attribute: the kernel's form
		// of it from the ids still matches amdgpu's alias.
		name: "no modalias attribute",
		change: func(tr *l23Tree) {
			delete(tr.files, sysMI+"/modalias")
			tr.files[sysMI+"/subsystem_vendor"] = "0x1002\n"
			tr.files[sysMI+"/subsystem_device"] = "0x0c34\n"
		},
		code:  CodeDriverModuleNotLoaded,
		ev:    []string{sysMI + "/modalias: pci:v00001002d0000740Fsv00001002sd00000C34bc03sc80i00, formed from the device's ids", "line 3: alias pci:v00001002d0000740Fsv*sd*bc*sc*i* amdgpu"},
		nodes: amdConsequences,
	}, {
		name: "blacklisted in /etc/modprobe.d",
		change: func(tr *l23Tree) {
			tr.files["/etc/modprobe.d/x.conf"] = "# left from a display problem\noptions amdgpu dc=0\nblacklist amdgpu\n"
		},
		code:    CodeDriverModuleBlacklisted,
		summary: []string{"amdgpu is blacklisted (/etc/modprobe.d/x.conf line 3: blacklist amdgpu)"},
		fix:     []string{"Remove `blacklist amdgpu` from /etc/modprobe.d/x.conf line 3", "rebuild the initramfs", "`modprobe amdgpu`"},
		ev:      []string{"/etc/modprobe.d/x.conf: line 3: blacklist amdgpu", modsMI + "modules.dep: line 1: " + amdgpuK},
		nodes:   amdConsequences,
	}, {
		name: "install /bin/false in /lib/modprobe.d, blacklist too",
		change: func(tr *l23Tree) {
			tr.files["/lib/modprobe.d/amd.conf"] = "install amdgpu /bin/false\n"
			tr.files["/etc/modprobe.d/x.conf"] = "blacklist amdgpu\n"
		},
		code:    CodeDriverModuleBlacklisted,
		summary: []string{"modprobe runs `/bin/false` instead of loading amdgpu (/lib/modprobe.d/amd.conf line 1)"},
		fix:     []string{"Remove `install amdgpu /bin/false` from /lib/modprobe.d/amd.conf line 1"},
		ev:      []string{"/etc/modprobe.d/x.conf: also (DRIVER_MODULE_BLACKLISTED): line 1: blacklist amdgpu"},
		nodes:   amdConsequences,
	}, {
		// kmod reads the first directory's file of a name: /etc's
		// x.conf hides /lib's.
		name: "a blacklist hidden by /etc's file of the same name",
		change: func(tr *l23Tree) {
			tr.files["/lib/modprobe.d/x.conf"] = "blacklist amdgpu\n"
			tr.files["/etc/modprobe.d/x.conf"] = "# amdgpu wanted here\n"
		},
		code:  CodeDriverModuleNotLoaded,
		nodes: amdConsequences,
	}, {
		name: "modprobe.blacklist on the command line",
		change: func(tr *l23Tree) {
			tr.files[driver.CmdlinePath] = "root=UUID=0f1e ro modprobe.blacklist=nouveau,amdgpu\n"
		},
		code:    CodeDriverModuleBlacklisted,
		summary: []string{"modprobe.blacklist=nouveau,amdgpu on the kernel command line keeps amdgpu from loading"},
		fix:     []string{"Remove modprobe.blacklist=nouveau,amdgpu from the kernel command line", "reboot"},
		ev:      []string{"/proc/cmdline: modprobe.blacklist=nouveau,amdgpu: modprobe treats it as blacklisted"},
		nodes:   amdConsequences,
	}, {
		name:    "module_blacklist on the command line",
		change:  func(tr *l23Tree) { tr.files[driver.CmdlinePath] = "root=UUID=0f1e ro module_blacklist=amdgpu\n" },
		code:    CodeDriverModuleBlacklisted,
		ev:      []string{"/proc/cmdline: module_blacklist=amdgpu: the kernel refuses to load it"},
		summary: []string{"module_blacklist=amdgpu"},
		nodes:   amdConsequences,
	}, {
		name: "nomodeset",
		change: func(tr *l23Tree) {
			tr.files[driver.CmdlinePath] = "BOOT_IMAGE=/vmlinuz root=UUID=0f1e ro nomodeset quiet\n"
		},
		code:    CodeDriverNomodeset,
		summary: []string{"the kernel runs with nomodeset, under which amdgpu does not load"},
		fix:     []string{"Remove nomodeset from the kernel command line", "reboot"},
		ev:      []string{"/proc/cmdline: nomodeset: only firmware framebuffer drivers may run"},
		nodes:   amdConsequences,
	}, {
		name:    "amdgpu.modeset=0",
		change:  func(tr *l23Tree) { tr.files[driver.CmdlinePath] = "root=UUID=0f1e ro amdgpu.modeset=0\n" },
		code:    CodeDriverNomodeset,
		summary: []string{"amdgpu.modeset=0 on the kernel command line"},
		fix:     []string{"Remove amdgpu.modeset=0"},
		nodes:   amdConsequences,
	}, {
		name:   "nomodeset overridden by amdgpu.modeset=1",
		change: func(tr *l23Tree) { tr.files[driver.CmdlinePath] = "root=UUID=0f1e ro nomodeset amdgpu.modeset=1\n" },
		code:   CodeDriverModuleNotLoaded,
		nodes:  amdConsequences,
	}, {
		// After "--" the words are init's, not the kernel's.
		name:   "nomodeset after --",
		change: func(tr *l23Tree) { tr.files[driver.CmdlinePath] = "root=UUID=0f1e ro -- nomodeset\n" },
		code:   CodeDriverModuleNotLoaded,
		nodes:  amdConsequences,
	}, {
		name:    "not installed for the running kernel",
		change:  func(tr *l23Tree) { noAmdgpu(tr) },
		code:    CodeDriverModuleNotInstalled,
		summary: []string{"amdgpu is not installed for kernel " + relMI},
		fix:     []string{"Install amdgpu (it ships with the kernel: on Ubuntu in linux-modules-extra-" + relMI + ";", "for kernel " + relMI, "`modprobe amdgpu`"},
		ev:      []string{modsMI + "modules.alias: no alias of amdgpu matches pci:v00001002d0000740F", modsMI + "modules.dep: no line for amdgpu"},
		nodes:   amdConsequences,
	}, {
		name: "modules.dep names a file that is gone",
		change: func(tr *l23Tree) {
			delete(tr.files, modsMI+amdgpuK)
			tr.files[path.Dir(modsMI+amdgpuK)+"/amdgpu.ko.dpkg-tmp"] = "" // the directory stays
		},
		code:    CodeDriverModuleNotInstalled,
		summary: []string{"modules.dep names " + amdgpuK + " for amdgpu, and the file is absent"},
		ev:      []string{modsMI + amdgpuK + ": absent"},
		nodes:   amdConsequences,
	}, {
		name: "the installed amdgpu does not list the device",
		change: func(tr *l23Tree) {
			tr.files[modsMI+"modules.alias"] = strings.ReplaceAll(noDriverAliases, "alias pci:v00001002d0000740Fsv*sd*bc*sc*i* amdgpu\n", "")
		},
		code:    CodeDriverDeviceUnsupported,
		summary: []string{"the installed amdgpu does not list 1002:740f"},
		fix:     []string{"Install a release of amdgpu that supports 1002:740f"},
		nodes:   amdConsequences,
	}, {
		name: "unsigned under lockdown",
		change: func(tr *l23Tree) {
			tr.files[driver.LockdownPath] = "none [integrity] confidentiality\n"
		},
		code:    CodeDriverModuleUnsigned,
		summary: []string{"amdgpu (" + amdgpuK + ") carries no signature, and the kernel loads only signed modules (lockdown [integrity])"},
		fix:     []string{"mokutil --import", "`modprobe amdgpu`"},
		ev:      []string{modsMI + amdgpuK + ": no \"~Module signature appended~\" trailer", "/sys/kernel/security/lockdown: lockdown [integrity]"},
		nodes:   amdConsequences,
	}, {
		name: "signed under lockdown",
		change: func(tr *l23Tree) {
			tr.files[driver.LockdownPath] = "none integrity [confidentiality]\n"
			tr.files[modsMI+amdgpuK] = "\x7fELF amdgpu" + "sig" + driver.ModuleSigMarker
		},
		code:  CodeDriverModuleNotLoaded,
		ev:    []string{"not read: " + modsMI + amdgpuK + " is signed, and lockdown [confidentiality]; whether the kernel trusts its key"},
		nodes: amdConsequences,
	}, {
		name: "zstd module under lockdown: its signature cannot be read",
		change: func(tr *l23Tree) {
			tr.files[driver.SigEnforcePath] = "Y\n"
			delete(tr.files, modsMI+amdgpuK)
			tr.files[modsMI+amdgpuK+".zst"] = "(zstd)"
			tr.files[modsMI+"modules.dep"] = amdgpuK + ".zst:\n"
		},
		code:  CodeDriverModuleNotLoaded,
		ev:    []string{"not read: whether " + modsMI + amdgpuK + ".zst is signed (module.sig_enforce=Y requires it)", "compressed in a format accel-doctor cannot read (zst)"},
		nodes: amdConsequences,
	}, {
		name: "loaded, its probe failed",
		change: func(tr *l23Tree) {
			amdgpuLoaded(tr)
			tr.files["/var/log/kern.log"] = "Mar  5 10:00:01 node kernel: [    5.2] amdgpu " + bdfMI + ": Direct firmware load for amdgpu/aldebaran_sos.bin failed with error -2\n" +
				"Mar  5 10:00:01 node kernel: [    5.3] amdgpu " + bdfMI + ": probe with driver amdgpu failed with error -2\n"
		},
		code:    CodeDriverProbeFailed,
		summary: []string{"amdgpu is loaded, but its probe of " + bdfMI + " failed with error -2 (/var/log/kern.log line 2)"},
		fix:     []string{"missing firmware", "`echo " + bdfMI + " > /sys/bus/pci/drivers/amdgpu/bind`"},
		ev:      []string{"/var/log/kern.log: line 2: Mar  5 10:00:01 node kernel: [    5.3] amdgpu 0000:03:00.0: probe with driver amdgpu failed with error -2"},
		// amdkfd's node is there: amdgpu is loaded; the GPU's own node
		// is not.
		nodes: []string{"DEVNODE_MISSING FAIL " + bdfMI, "DEVNODE_OK PASS /dev/kfd"},
	}, {
		name: "loaded, its probe failed (before Linux 5.13)",
		change: func(tr *l23Tree) {
			amdgpuLoaded(tr)
			tr.files["/var/log/dmesg"] = "[    6.0] amdgpu: probe of " + bdfMI + " failed with error -22\n"
		},
		code:    CodeDriverProbeFailed,
		summary: []string{"failed with error -22 (/var/log/dmesg line 1)"},
		nodes:   []string{"DEVNODE_MISSING FAIL " + bdfMI, "DEVNODE_OK PASS /dev/kfd"},
	}, {
		name: "loaded, not claimed, driver_override names radeon",
		change: func(tr *l23Tree) {
			amdgpuLoaded(tr)
			tr.files[sysMI+"/driver_override"] = "radeon\n"
			tr.files["/var/log/kern.log"] = "Mar  5 10:00:01 node kernel: [    5.2] pci " + bdfMI + ": [1002:740f] type 00 class 0x038000\n"
		},
		code:    CodeDriverNotClaimed,
		summary: []string{"amdgpu is loaded but has not claimed " + bdfMI + ": its driver_override names radeon"},
		fix:     []string{"echo > /sys/bus/pci/devices/" + bdfMI + "/driver_override"},
		ev:      []string{sysMI + "/driver_override: radeon: only radeon may bind the device"},
		nodes:   []string{"DEVNODE_MISSING FAIL " + bdfMI, "DEVNODE_OK PASS /dev/kfd"},
	}, {
		name: "loaded, not claimed, no probe error in the log",
		change: func(tr *l23Tree) {
			amdgpuLoaded(tr)
			tr.files[sysMI+"/driver_override"] = "(null)\n"
			tr.files["/var/log/kern.log"] = "Mar  5 10:00:01 node kernel: [    5.2] pci " + bdfMI + ": [1002:740f] type 00 class 0x038000\n"
		},
		code:    CodeDriverNotClaimed,
		summary: []string{"amdgpu is loaded but has not claimed " + bdfMI},
		fix:     []string{"`echo " + bdfMI + " > /sys/bus/pci/drivers/amdgpu/bind`"},
		ev:      []string{"no probe error for " + bdfMI + " in /var/log/kern.log"},
		nodes:   []string{"DEVNODE_MISSING FAIL " + bdfMI, "DEVNODE_OK PASS /dev/kfd"},
	}, {
		// /dev/kfd left behind after amdgpu was unloaded: present, no
		// driver holds its major.
		name:   "a node left behind",
		change: func(tr *l23Tree) { tr.manifest["/dev/kfd"] = "c 240:0 0666 0:0" },
		code:   CodeDriverModuleNotLoaded,
		nodes:  []string{"DEVNODE_MISSING FAIL " + bdfMI, "DEVNODE_MAJOR_UNREGISTERED FAIL /dev/kfd"},
	}, {
		// The NVIDIA driver is not installed; nouveau's aliases match,
		// and NVIDIA's own blacklist of nouveau is no cause.
		name: "NVIDIA GPU without nvidia.ko",
		bdf:  "0000:17:00.0",
		change: func(tr *l23Tree) {
			dropMI(tr)
			tr.pciDev("0000:17:00.0", "0x10de", "0x2330", "0x030200", "")
			tr.files["/sys/devices/pci0000:00/0000:17:00.0/modalias"] = "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00\n"
			tr.files["/etc/modprobe.d/nvidia-installer-disable-nouveau.conf"] = "blacklist nouveau\noptions nouveau modeset=0\n"
		},
		code:    CodeDriverModuleNotInstalled,
		summary: []string{"nvidia is not installed for kernel " + relMI},
		fix:     []string{"Install the NVIDIA driver (", "for kernel " + relMI, "`modprobe nvidia`"},
		ev:      []string{modsMI + "modules.alias: no alias of nvidia matches"},
		nodes:   []string{"DEVNODE_MISSING FAIL 0000:17:00.0", "DEVNODE_MISSING FAIL /dev/nvidia-uvm", "DEVNODE_MISSING FAIL /dev/nvidiactl"},
	}, {
		name: "Gaudi 2 with habanalabs not loaded",
		bdf:  "0000:33:00.0",
		change: func(tr *l23Tree) {
			dropMI(tr)
			tr.pciDev("0000:33:00.0", "0x1da3", "0x1020", "0x120000", "")
			tr.files["/sys/devices/pci0000:00/0000:33:00.0/modalias"] = "pci:v00001DA3d00001020sv00001DA3sd00001020bc12sc00i00\n"
			tr.files[modsMI+"kernel/drivers/accel/habanalabs/habanalabs.ko"] = "\x7fELF"
		},
		code:    CodeDriverModuleNotLoaded,
		summary: []string{"habanalabs is installed but not loaded"},
		fix:     []string{"`modprobe habanalabs`"},
		nodes:   []string{"DEVNODE_MISSING FAIL 0000:33:00.0"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := noDriverHost()
			if c.change != nil {
				c.change(tr)
			}
			rep := l23Run(t, tr.build(t), driverChecks(), devnodeChecks())
			bdf := c.bdf
			if bdf == "" {
				bdf = bdfMI
			}
			assertNoDriver(t, rep, bdf, c)
		})
	}
}

// dropMI removes the MI210 from the host.
func dropMI(tr *l23Tree) {
	delete(tr.links, "/sys/bus/pci/devices/"+bdfMI)
	for p := range tr.files {
		if strings.HasPrefix(p, sysMI) {
			delete(tr.files, p)
		}
	}
}

// noAmdgpu removes amdgpu from the kernel's modules.
func noAmdgpu(tr *l23Tree) {
	tr.files[modsMI+"modules.alias"] = strings.ReplaceAll(noDriverAliases, "alias pci:v00001002d0000740Fsv*sd*bc*sc*i* amdgpu\nalias pci:v00001002d000074A1sv*sd*bc*sc*i* amdgpu\n", "")
	tr.files[modsMI+"modules.dep"] = "kernel/drivers/gpu/drm/nouveau/nouveau.ko:\nkernel/drivers/accel/habanalabs/habanalabs.ko:\n"
	delete(tr.files, modsMI+amdgpuK)
}

// assertNoDriver checks the layer-2 finding of bdf against c, that every
// layer-3 finding of an unbound device's nodes follows from its device's
// layer-2 finding (a PASS from none), and that the verdict names a
// layer-2 cause.
func assertNoDriver(t *testing.T, rep *report.Report, bdf string, c noDriverCase) {
	t.Helper()
	var l2 *report.Finding
	l2codes := map[string]string{}
	for i, f := range rep.Findings {
		if f.Check == "driver.bound" {
			l2codes[f.Subject] = f.Code
			if f.Subject == bdf {
				l2 = &rep.Findings[i]
			}
		}
	}
	if l2 == nil {
		t.Fatalf("no driver.bound finding for %s: %v", bdf, l23Findings(rep))
	}
	if l2.Code != c.code || l2.Status != report.Fail {
		t.Errorf("layer 2: %s %s %q, want %s FAIL", l2.Code, l2.Status, l2.Summary, c.code)
	}
	for _, s := range c.summary {
		if !strings.Contains(l2.Summary, s) {
			t.Errorf("summary %q lacks %q", l2.Summary, s)
		}
	}
	for _, s := range c.fix {
		if !strings.Contains(l2.Remediation, s) {
			t.Errorf("fix %q lacks %q", l2.Remediation, s)
		}
	}
	var evs []string
	for _, e := range l2.Evidence {
		evs = append(evs, e.Path+": "+e.Value)
	}
	for _, s := range c.ev {
		if !slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, s) }) {
			t.Errorf("evidence lacks %q:\n%s", s, strings.Join(evs, "\n"))
		}
	}
	var nodes []string
	for _, f := range rep.Findings {
		if f.Check != "devnode.present" {
			continue
		}
		nodes = append(nodes, f.Code+" "+string(f.Status)+" "+f.Subject)
		switch {
		case f.Status == report.Pass && f.CausedBy != nil:
			t.Errorf("a PASS follows from something: %+v", f)
		case f.Code == CodeDevnodeMissing || f.Code == CodeDevnodeMajorUnregistered:
			if f.CausedBy == nil || l2codes[f.CausedBy.Subject] != f.CausedBy.Code {
				t.Errorf("%s %s follows from %+v, not from a layer-2 finding (%v)", f.Code, f.Subject, f.CausedBy, l2codes)
			}
			if !strings.HasPrefix(f.Remediation, "Fix "+f.CausedBy.Code) {
				t.Errorf("%s %s: fix %q is not its cause's", f.Code, f.Subject, f.Remediation)
			}
		}
	}
	if d := cmp.Diff(sortedCopy(c.nodes), sortedCopy(nodes)); d != "" {
		t.Errorf("layer 3 (-want +got):\n%s", d)
	}
	if rep.Verdict.Cause == nil || l2codes[rep.Verdict.Cause.Subject] != rep.Verdict.Cause.Code {
		t.Errorf("verdict cause %+v, want a layer-2 finding", rep.Verdict.Cause)
	}
}

// The text report lists the nodes under their cause, and the verdict
// names the cause.
func TestNoDriverTextReport(t *testing.T) {
	tr := noDriverHost()
	tr.files["/etc/modprobe.d/x.conf"] = "blacklist amdgpu\n"
	rep := l23Run(t, tr.build(t), driverChecks(), devnodeChecks())
	var b strings.Builder
	if err := report.WriteText(&b, rep, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"the cause: DRIVER_MODULE_BLACKLISTED " + bdfMI + " (2 finding(s) follow from it)",
		"\n  FAIL DRIVER_MODULE_BLACKLISTED",
		"\n    FAIL DEVNODE_MISSING",
		"follows from: DRIVER_MODULE_BLACKLISTED " + bdfMI,
		"required node /dev/kfd of " + bdfMI + " is missing: amdgpu, which creates it, is not bound to it",
		bdfMI + " has no node /dev/dri/renderD<minor>: amdgpu names it when it binds the device",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

// What cannot be read never makes up a cause: the finding stays the
// observed FAIL (no driver is bound), names what was not read, and
// gives the vendor's fix; nothing panics.
func TestNoDriverUnreadable(t *testing.T) {
	cases := []struct {
		name   string
		change func(tr *l23Tree)
		code   string
		ev     []string
	}{{
		name: "a capture with nothing but sysfs",
		change: func(tr *l23Tree) {
			for p := range tr.files {
				if !strings.HasPrefix(p, "/sys/devices") && !strings.HasPrefix(p, "/sys/bus") {
					delete(tr.files, p)
				}
			}
			tr.manifest = map[string]string{}
		},
		code: CodeDriverNone,
		ev:   []string{"not determined: the kernel release: read /proc/sys/kernel/osrelease", "not determined: whether amdgpu is loaded"},
	}, {
		name: "modules.alias garbage, the rest fine",
		change: func(tr *l23Tree) {
			tr.files[modsMI+"modules.alias"] = "\x7fELF\x02\x01\x01\x00 not an alias file\n\xff\xfe\n"
		},
		code: CodeDriverModuleNotLoaded,
		ev:   []string{"not read: modules.alias: " + modsMI + "modules.alias: 2 line(s) not understood"},
	}, {
		name: "modules.alias absent, modules.dep a loop",
		change: func(tr *l23Tree) {
			delete(tr.files, modsMI+"modules.alias")
			delete(tr.files, modsMI+"modules.dep")
			tr.links[modsMI+"modules.dep"] = "modules.dep"
		},
		code: CodeDriverNone,
		ev:   []string{"not determined: modules.alias: read " + modsMI + "modules.alias: no such file", "not determined: modules.dep: read " + modsMI + "modules.dep"},
	}, {
		name: "modprobe.d a loop, a conf a loop",
		change: func(tr *l23Tree) {
			tr.links["/run/modprobe.d"] = "modprobe.d"
			tr.links["/etc/modprobe.d/loop.conf"] = "loop.conf"
		},
		code: CodeDriverModuleNotLoaded,
		ev:   []string{"not read: modprobe configuration: list /run/modprobe.d", "not read: modprobe configuration: read /etc/modprobe.d/loop.conf"},
	}, {
		name: "release is a path, command line a directory",
		change: func(tr *l23Tree) {
			tr.files[driver.OSReleasePath] = "../../../etc\n"
			delete(tr.files, driver.CmdlinePath)
			tr.files[driver.CmdlinePath+"/x"] = ""
		},
		code: CodeDriverNone,
		ev:   []string{"is not a kernel release"},
	}, {
		name: "modules.alias and kern.log over their limits",
		change: func(tr *l23Tree) {
			amdgpuLoaded(tr)
			tr.files[modsMI+"modules.alias"] = ""
			tr.files["/var/log/kern.log"] = ""
		},
		code: CodeDriverNotClaimed,
		ev:   []string{"not read: the kernel log /var/log/kern.log", "larger than the read limit"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := noDriverHost()
			c.change(tr)
			root := tr.build(t)
			if c.name == "modules.alias and kern.log over their limits" {
				// Sparse files: refused by size before any read.
				for p, n := range map[string]int64{modsMI + "modules.alias": driver.ModulesFileLimit + 1, "/var/log/kern.log": driver.KernelLogLimit + 1} {
					if err := os.Truncate(filepath.Join(root.Dir(), p), n); err != nil {
						t.Fatal(err)
					}
				}
			}
			rep := l23Run(t, root, driverChecks(), devnodeChecks())
			var l2 *report.Finding
			for i, f := range rep.Findings {
				if f.Check == "driver.bound" && f.Subject == bdfMI {
					l2 = &rep.Findings[i]
				}
			}
			if l2 == nil || l2.Code != c.code || l2.Status != report.Fail {
				t.Fatalf("layer 2: %+v, want %s FAIL", l2, c.code)
			}
			var evs []string
			for _, e := range l2.Evidence {
				evs = append(evs, e.Path+": "+e.Value)
			}
			all := strings.Join(evs, "\n")
			for _, s := range c.ev {
				if !strings.Contains(all, s) {
					t.Errorf("evidence lacks %q:\n%s", s, all)
				}
			}
			if c.code == CodeDriverNone && (!strings.Contains(l2.Summary, "was not determined") || !strings.Contains(l2.Remediation, "modprobe amdgpu")) {
				t.Errorf("summary %q, fix %q", l2.Summary, l2.Remediation)
			}
			if strings.Contains(l2.Remediation, "modprobe nvidia") {
				t.Errorf("an AMD GPU's fix names nvidia: %q", l2.Remediation)
			}
		})
	}
}

// A device of a vendor accel-doctor knows no driver for keeps the
// generic fix, names no other vendor's driver, and its nodes are not
// made up: layer 3 skips them, naming the layer-2 finding.
func TestNoDriverUnknownVendor(t *testing.T) {
	tr := noDriverHost()
	dropMI(tr)
	tr.pciDev("0000:41:00.0", "0x1e52", "0x401e", "0x120000", "") // Tenstorrent
	tr.files["/sys/devices/pci0000:00/0000:41:00.0/modalias"] = "pci:v00001E52d0000401Esv00001E52sd00000015bc12sc00i00\n"
	rep := l23Run(t, tr.build(t), driverChecks(), devnodeChecks())
	want := []string{
		"devnode.present DEVNODE_SKIPPED NOT_RUN 0000:41:00.0",
		"driver.bound DRIVER_NONE FAIL 0000:41:00.0",
	}
	if d := cmp.Diff(want, l23Findings(rep, "driver.bound", "devnode.present")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, f := range rep.Findings {
		if f.Code == CodeDriverNone && (!strings.Contains(f.Summary, "knows no driver for vendor 1e52") || strings.Contains(f.Remediation, "nvidia") || strings.Contains(f.Remediation, "amdgpu")) {
			t.Errorf("%q, fix %q", f.Summary, f.Remediation)
		}
	}
}

// The corpus' real captures of working machines gain no FAIL from the
// no-driver judgement, and no capture crashes it: every accelerator the
// captures show bound, or whose binding they cannot tell, keeps its
// layer-2 code, and none of the no-driver codes appears where the
// capture does not show an unbound device.
func TestNoDriverCorpus(t *testing.T) {
	dir := testutil.CorpusDir(t)
	var archives []string
	for _, pat := range []string{"ghw/*.tar.gz", "hwloc/linux/*.tar.bz2", "nfd/*.tar.gz", "procfs/*.tar.gz"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		archives = append(archives, m...)
	}
	if len(archives) < 10 {
		t.Fatalf("only %d archives", len(archives))
	}
	for _, a := range archives {
		rel, _ := filepath.Rel(dir, a)
		t.Run(rel, func(t *testing.T) {
			tree := testutil.Unpack(t, a)
			if tree == "" {
				t.Skip("no sys/bus/pci in this capture")
			}
			e := NewEnv(hostfs.MustNew(tree), Options{})
			rep := Run(e, append(driverChecks(), devnodeChecks()...), Meta{Command: "test"})
			for _, f := range rep.Findings {
				if f.Code == CodeCheckCrashed {
					t.Fatalf("crashed: %s\n%s", f.Reason, f.Evidence[0].Value)
				}
				if !slices.Contains(noDriverCodes, f.Code) {
					continue
				}
				var d = findAccel(e, f.Subject)
				if d == nil || e.Binding(d).State != driver.Unbound {
					t.Errorf("%s on %s, which the capture does not show unbound", f.Code, f.Subject)
				}
			}
			if tt, ok := corpusHealthy(t, rel); ok && tt {
				for _, f := range rep.Findings {
					if f.Status == report.Fail {
						t.Errorf("a working machine's capture has a FAIL: %s %s: %s", f.Code, f.Subject, f.Summary)
					}
				}
			}
		})
	}
}

func findAccel(e *Env, bdf string) *pci.Device {
	for _, d := range e.Accelerators() {
		if d.Address.String() == bdf {
			return d
		}
	}
	return nil
}

// corpusHealthy reads a capture's "# healthy:" from its truth table.
func corpusHealthy(t *testing.T, capture string) (bool, bool) {
	files, _ := filepath.Glob(filepath.Join(truthDir, "*.tsv"))
	for _, f := range files {
		tt := readTruth(t, f)
		if tt.capture == capture {
			return tt.healthy, true
		}
	}
	return false, false
}

// copyTree copies a read-only corpus tree (files, directories, symlinks)
// so that a test may change one thing in it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// A fault planted in a real capture (ghw's VM with a Tesla P100): the
// GPU's driver link removed, the kernel's modules and a blacklist of
// nvidia added. The real modalias picks nvidia, not nouveau; the cause is
// the blacklist line (whether nvidia is loaded cannot be told: the
// capture holds no /sys/module); the GPU's own node follows from it, and
// the shared NVIDIA nodes are NOT_RUN because the capture holds no /dev.
func TestNoDriverFaultInRealCapture(t *testing.T) {
	src := testutil.Unpack(t, filepath.Join(testutil.CorpusDir(t), "ghw", "linux-amd64-accel-nvidia.tar.gz"))
	dir := copyTree(t, src)
	const gpu = "0000:06:00.0"
	if err := os.Remove(filepath.Join(dir, "sys/devices/pci0000:00/0000:00:01.5", gpu, "driver")); err != nil {
		t.Fatal(err)
	}
	mods := "lib/modules/5.15.0-91-generic/"
	testutil.WriteTree(t, dir, map[string]string{
		"/proc/sys/kernel/osrelease":            "5.15.0-91-generic\n",
		"/proc/cmdline":                         "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro\n",
		"/" + mods + "modules.alias":            noDriverAliases + "alias pci:v000010DEd*sv*sd*bc03sc00i00* nvidia\nalias pci:v000010DEd*sv*sd*bc03sc02i00* nvidia\n",
		"/" + mods + "modules.dep":              "updates/dkms/nvidia.ko:\nkernel/drivers/gpu/drm/nouveau/nouveau.ko:\n",
		"/" + mods + "updates/dkms/nvidia.ko":   "\x7fELF",
		"/etc/modprobe.d/blacklist-nvidia.conf": "# no GPU on this VM's host side\nblacklist nvidia\n",
	}, nil, "")
	rep := l23Run(t, hostfs.MustNew(dir), driverChecks(), devnodeChecks())
	assertNoDriver(t, rep, gpu, noDriverCase{
		code:    CodeDriverModuleBlacklisted,
		summary: []string{"nvidia is blacklisted (/etc/modprobe.d/blacklist-nvidia.conf line 2: blacklist nvidia)"},
		fix:     []string{"Remove `blacklist nvidia` from /etc/modprobe.d/blacklist-nvidia.conf line 2"},
		ev:      []string{"modalias: pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02i00", "modules.alias: line 8: alias pci:v000010DEd*sv*sd*bc03sc02i00* nvidia", "not read: whether nvidia is loaded: the capture holds no /sys/module"},
		nodes:   []string{"DEVNODE_MAJORS_UNKNOWN NOT_RUN host", "DEVNODE_MISSING FAIL " + gpu, "DEVNODE_UNKNOWN NOT_RUN /dev/nvidia-uvm", "DEVNODE_UNKNOWN NOT_RUN /dev/nvidiactl"},
	})
}

// A device the host means for VFIO (the IOMMU-off host's driver_override
// names vfio-pci) is not judged against its vendor's driver: layer 2 says
// so and follows from layer 7's VFIO_DEVICE_NOT_BOUND, and its native
// nodes are not made up (layer 3 skips them).
func TestNoDriverMeantForVFIO(t *testing.T) {
	rep := runFixture(t, hostfs.MustNew(filepath.Join(hostsDir, fixture.NameIOMMUOff)), fixture.NameIOMMUOff, Options{})
	var l2 *report.Finding
	for i, f := range rep.Findings {
		if f.Check == "driver.bound" {
			l2 = &rep.Findings[i]
		}
		if f.Check == "devnode.present" && f.Code != CodeDevnodeSkipped && f.Code != CodeDevnodeMajorsUnknown {
			t.Errorf("layer 3 judged a node of a device meant for VFIO: %s %s %s", f.Code, f.Status, f.Subject)
		}
	}
	if l2 == nil || l2.Code != CodeDriverMeantForVFIO || l2.Status != report.Fail {
		t.Fatalf("layer 2: %+v", l2)
	}
	if l2.CausedBy == nil || *l2.CausedBy != (report.Cause{Code: codeVFIONotBound, Subject: "0000:01:00.0"}) {
		t.Errorf("caused by %+v", l2.CausedBy)
	}
	if !strings.Contains(l2.Summary, "driver_override names vfio-pci") || strings.Contains(l2.Remediation, "modprobe nvidia") || !strings.Contains(l2.Remediation, "driver_override") {
		t.Errorf("%q, fix %q", l2.Summary, l2.Remediation)
	}
	if rep.Verdict.Cause == nil || rep.Verdict.Cause.Code == CodeDriverMeantForVFIO {
		t.Errorf("verdict cause %+v: the VFIO side is the cause", rep.Verdict.Cause)
	}

	// vfio-pci's ids in modprobe.d name the MI210, blacklisting amdgpu
	// on purpose: meant for VFIO, not a blacklist finding.
	tr := noDriverHost()
	tr.files["/etc/modprobe.d/vfio.conf"] = "options vfio-pci ids=1002:740f\nblacklist amdgpu\n"
	rep = l23Run(t, tr.build(t), driverChecks(), devnodeChecks())
	want := []string{"devnode.present DEVNODE_SKIPPED NOT_RUN " + bdfMI, "driver.bound DRIVER_MEANT_FOR_VFIO FAIL " + bdfMI}
	if d := cmp.Diff(want, l23Findings(rep, "driver.bound", "devnode.present")); d != "" {
		t.Errorf("vfio-pci ids (-want +got):\n%s", d)
	}
	for _, f := range rep.Findings {
		if f.Code == CodeDriverMeantForVFIO && !strings.Contains(f.Summary, "vfio-pci's ids name 1002:740f (/etc/modprobe.d/vfio.conf") {
			t.Errorf("summary %q", f.Summary)
		}
	}
}
