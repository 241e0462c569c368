package diagnose

import (
	"errors"
	"fmt"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 1, config space: for each accelerator, the PCIe errors the kernel
// counted since boot (AER), the BARs against the kernel's resources, and
// a capability list that does not hold together. A config space the
// kernel shows only 64 bytes of (no CAP_SYS_ADMIN) says nothing here: the
// ACS judgement, which needs it, says so where it matters (layer 7).

const (
	codeAERErrors    = "PCI_AER_ERRORS"
	codeAERClean     = "PCI_AER_CLEAN"
	codeAERUnread    = "PCI_AER_UNREADABLE"
	codeBARMismatch  = "PCI_BAR_RESOURCE_MISMATCH"
	codeConfigBroken = "PCI_CONFIG_MALFORMED"
)

func pciConfigCodes() []Code {
	out := []Code{{Code: codeAERClean, Layer: report.LayerPCI, Title: "the device has logged no uncorrectable PCIe error since boot",
		Explain: `The kernel's AER counters for the device (aer_dev_fatal and aer_dev_nonfatal under
its sysfs directory, drivers/pci/pcie/aer.c) are zero: the link and the device
reported no uncorrectable error since boot. Correctable errors, if any, are in
the evidence.`}}
	out = append(out, Code{Code: codeAERUnread, Layer: report.LayerPCI, Title: "the device's AER counters could not be read",
		Explain: `The device has AER counter files (aer_dev_correctable, aer_dev_fatal,
aer_dev_nonfatal under its sysfs directory) but they could not be read or do not
parse, so whether it logged PCIe errors since boot is not known.`,
		Remediation: "Read them as root on the host (`cat /sys/bus/pci/devices/BDF/aer_dev_*`), or recapture the snapshot there."})
	for _, c := range ioCodesByName(codeAERErrors, codeBARMismatch, codeConfigBroken) {
		out = append(out, Code{Code: c.Code, Layer: report.LayerPCI, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	return out
}

func pciConfigCheck() Check {
	return Check{ID: "pci.config", Layer: report.LayerPCI, Title: "PCIe errors, BARs and capabilities of each accelerator",
		Codes: []string{codeAERErrors, codeAERClean, codeAERUnread, codeBARMismatch, codeConfigBroken}, Run: checkPCIConfig}
}

func checkPCIConfig(e *Env, out *Out) {
	for _, d := range e.Accelerators() {
		id := d.Address.String()
		judgeAER(e, out, d, id)
		c, err := pci.ReadConfig(e.Root, d)
		var ce *pci.ConfigError
		if errors.As(err, &ce) && !errors.Is(err, pci.ErrConfigUnprivileged) {
			out.Add(codeConfigBroken, report.Warn, id, id+": its capability list does not hold together", Ev(d.AttrPath("config"), err.Error()))
		}
		if c == nil {
			continue
		}
		res, rerr := pci.ReadResources(e.Root, d)
		if rerr != nil {
			continue // no resource file (a capture without it): nothing to compare
		}
		_, mm, _ := pci.Regions(c, res, d.AttrPath("resource"))
		var hard []string
		var ev []report.Evidence
		for _, m := range mm {
			ev = append(ev, Ev(m.Path, m.String()))
			if !m.Soft {
				hard = append(hard, m.What)
			}
		}
		if len(hard) > 0 {
			out.Add(codeBARMismatch, report.Warn, id, fmt.Sprintf("%s: config space and the kernel's resources disagree on %s", id, strings.Join(hard, ", ")), ev...)
		}
	}
}

func judgeAER(e *Env, out *Out, d *pci.Device, id string) {
	stats, errs := pci.ReadAERStats(e.Root, d)
	if len(stats) == 0 && len(errs) > 0 {
		var msgs []string
		for _, err := range errs {
			msgs = append(msgs, err.Error())
		}
		out.NotRun(codeAERUnread, id, id+": AER counters not read", e.errWhy(strings.Join(msgs, "; "), errs[0], "", ""))
		return
	}
	if len(stats) == 0 {
		return // no AER counters (no AER capability, an older kernel, a capture without them)
	}
	var bad []string
	var ev []report.Evidence
	for _, s := range stats {
		ev = append(ev, Ev(s.Path, fmt.Sprintf("%d", s.Total)))
		if s.Total > 0 && (strings.Contains(s.Attr, "fatal") || strings.Contains(s.Attr, "nonfatal")) {
			bad = append(bad, fmt.Sprintf("%s %d", strings.TrimPrefix(s.Attr, "aer_dev_"), s.Total))
		}
	}
	if len(bad) > 0 {
		out.Add(codeAERErrors, report.Warn, id, fmt.Sprintf("%s: uncorrectable PCIe errors since boot: %s", id, strings.Join(bad, ", ")), ev...)
		return
	}
	out.Add(codeAERClean, report.Pass, id, id+": no uncorrectable PCIe error since boot", ev...)
}
