package diagnose

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/iommu"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 7: is the IOMMU present and on, and can each group that holds an
// accelerator be handed to VFIO (every member on vfio-pci, pci-stub or no
// driver), and if a group is shared, which bridge on the path to the root
// port leaves it so (ACS). The facts are internal/iommu's; the statuses
// follow what the operator meant: a group whose members are on a VFIO
// driver is meant for passthrough, and a problem there is a FAIL; a GPU
// its host driver uses is not, and its group's make-up is information.
// The iommu command judges every accelerator as meant for passthrough
// (Options.Passthrough).

const (
	codeIOMMUOn        = "IOMMU_ON"
	codeIOMMUOff       = "IOMMU_OFF"
	codeIOMMUAbsent    = "IOMMU_ABSENT"
	codeIOMMUCmdline   = "IOMMU_CMDLINE_NO_EFFECT"
	codeGroupViable    = "IOMMU_GROUP_VIABLE"
	codeGroupNotViable = "IOMMU_GROUP_NOT_VIABLE"
	codeGroupShared    = "IOMMU_GROUP_SHARED"
	codeACSUnisolated  = "IOMMU_ACS_PATH_UNISOLATED"
	codeACSNotReadable = "IOMMU_ACS_NOT_READABLE"
	codeACSOverride    = "IOMMU_ACS_OVERRIDE"
	codeGroupsUnknown  = "IOMMU_STATE_UNKNOWN"
	codeGroupInHostUse = "IOMMU_GROUP_IN_HOST_USE"
)

// iommuCodes are internal/iommu's proposed layer-7 codes, with the two
// this layer adds.
func iommuCodes() []Code {
	out := []Code{
		{Code: codeGroupsUnknown, Layer: report.LayerIOMMU, Title: "whether the IOMMU is on could not be read",
			Explain: `Neither /sys/kernel/iommu_groups nor the functions' iommu_group links could be
read under this root (a capture without them, or a permission error), so
whether DMA remapping is on, and which devices share a group, is not known.`,
			Remediation: "Run accel-doctor on the host, or recapture the snapshot there (`accel-doctor snapshot snap.tar.gz`)."},
		{Code: codeGroupInHostUse, Layer: report.LayerIOMMU, Title: "the accelerator's group is in use by host drivers, not set up for passthrough",
			Explain: `The group holds an accelerator its host driver uses (nvidia, amdgpu, ...), and no
member is bound to a VFIO driver: nobody has set it up for passthrough, which
is the normal state of a GPU used by containers. The evidence says what
passthrough would take (every member on vfio-pci: the commands and the
vfio-pci.ids line), so that a node meant for VMs or DPDK can be prepared.`},
	}
	for _, c := range iommu.Codes {
		if strings.HasPrefix(c.Code, "IOMMU_") { // the PCI_ ones are layer 1's (layer_pci_config.go)
			out = append(out, Code{Code: c.Code, Layer: report.LayerIOMMU, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
		}
	}
	return out
}

// ioCodesByName are internal/iommu's proposed entries with these codes.
func ioCodesByName(names ...string) []iommu.ProposedCode {
	var out []iommu.ProposedCode
	for _, c := range iommu.Codes {
		for _, n := range names {
			if c.Code == n {
				out = append(out, c)
			}
		}
	}
	return out
}

func iommuChecks() []Check {
	return []Check{
		{ID: "iommu.state", Layer: report.LayerIOMMU, Title: "the IOMMU is present and on",
			Codes: []string{codeIOMMUOn, codeIOMMUOff, codeIOMMUAbsent, codeIOMMUCmdline, codeGroupsUnknown, codeACSOverride}, Run: checkIOMMUState,
			// The firmware tables, the groups and, with the IOMMU off,
			// /proc/config.gz's inflation: the slowest reads of a check
			// on a host without accelerators, and on a live host they
			// need no PCI scan (Env.IOMMU); then the VFIO side, which
			// waits for the scan and runs beside layers 2-6.
			Prefetch: func(e *Env) { e.IOMMU(); e.VFIO() }},
		{ID: "iommu.groups", Layer: report.LayerIOMMU, Title: "each accelerator's IOMMU group can be handed to VFIO",
			Codes: []string{codeGroupViable, codeGroupNotViable, codeGroupInHostUse, codeGroupShared, codeACSUnisolated, codeACSNotReadable},
			Run:   checkIOMMUGroups},
	}
}

// IOMMU reads the IOMMU state once per run.
func (e *Env) IOMMU() *iommu.State {
	s, _ := memo(e, "iommu.state", func() (*iommu.State, error) {
		// Only a tree's functions stand in for its groups (iommu.Read):
		// a live host's state does not wait for the PCI scan.
		var inv *pci.Inventory
		if !e.Root.IsLive() {
			inv, _ = e.PCI()
		}
		// With nothing asked of passthrough, a firmware that describes no
		// IOMMU is the whole answer (iommu.ReadOptions).
		return iommu.ReadWith(e.Root, inv, iommu.ReadOptions{NoKernelWhenAbsent: !e.Opts.Passthrough}), nil
	})
	return s
}

// VFIO reads the host's VFIO side once per run; with Passthrough (the
// iommu command) every accelerator counts as asked about.
func (e *Env) VFIO() *iommu.VFIO {
	v, _ := memo(e, "iommu.vfio", func() (*iommu.VFIO, error) {
		inv, err := e.PCI()
		if err != nil || inv == nil {
			return nil, err
		}
		var asked []pci.Address
		if e.Opts.Passthrough {
			for _, d := range e.Accelerators() {
				asked = append(asked, d.Address)
			}
		}
		return iommu.ReadVFIO(e.Root, e.IOMMU(), inv, asked...), nil
	})
	return v
}

// vfioBound reports whether something on the host says a PCI function is
// meant for VFIO (bound to a VFIO driver, a driver_override or
// vfio-pci.ids naming it): someone means to pass devices through here.
func (e *Env) vfioBound() (string, bool) {
	v := e.VFIO()
	if v == nil {
		return "", false
	}
	for _, b := range v.Bindings {
		switch {
		case b.VFIO:
			return b.Address.String() + " (" + b.Driver + ")", true
		case iommu.IsVFIODriver(b.Override):
			return b.Address.String() + " (driver_override " + b.Override + ", bound to " + orElse(b.Driver, "no driver") + ")", true
		case len(b.IDsFrom) > 0:
			return b.Address.String() + " (named by vfio-pci's ids, bound to " + orElse(b.Driver, "no driver") + ")", true
		}
	}
	return "", false
}

// passthroughAsked says whether passthrough is asked of this host, and
// by what: the iommu command (Options.Passthrough, with or without a
// process given with --pid), or the host's own VFIO configuration: a
// function bound to or meant for a VFIO driver (vfioBound), vfio-pci ids
// on the command line or in modprobe.d even when no function here
// matches them, a modprobe.d softdep that loads vfio-pci before a host
// driver. With passthrough asked, an IOMMU that is off or absent is the
// FAIL that the VFIO findings follow from.
func (e *Env) passthroughAsked() (string, bool) {
	if why, ok := e.vfioBound(); ok {
		return why, true
	}
	if v := e.VFIO(); v != nil {
		for _, src := range v.IDs {
			if len(src.IDs) > 0 {
				return "vfio-pci ids " + src.Raw + " (" + src.From + ")", true
			}
		}
		if len(v.Softdeps) > 0 {
			return v.Softdeps[0].String(), true
		}
	}
	switch {
	case e.Opts.Passthrough && e.Opts.PID > 0:
		return fmt.Sprintf("asked (accel-doctor iommu --pid %d)", e.Opts.PID), true
	case e.Opts.Passthrough:
		return askedByCommand, true
	}
	return "", false
}

// askedByCommand is passthroughAsked's answer when only the iommu
// command asks: no VFIO configuration on the host, no VMM given.
const askedByCommand = "asked (accel-doctor iommu)"

// iommuUnavailable is the code of the state finding when DMA remapping
// is off (IOMMU_OFF, or IOMMU_ABSENT when nothing describes an IOMMU);
// "" when it is on or not known. The VFIO findings that follow from it
// name it as their cause.
func iommuUnavailable(s *iommu.State) string {
	switch {
	case s == nil || s.On != iommu.No:
		return ""
	case s.Vendor == "" && len(s.Units) == 0:
		return codeIOMMUAbsent
	}
	return codeIOMMUOff
}

func reasonsEvidence(s *iommu.State) []report.Evidence {
	var ev []report.Evidence
	for _, r := range s.Reasons {
		ev = append(ev, Ev("", r))
	}
	return ev
}

func checkIOMMUState(e *Env, out *Out) {
	s := e.IOMMU()
	ev := reasonsEvidence(s)
	asked, meant := e.passthroughAsked()
	if meant {
		ev = append(ev, Ev("", "meant for passthrough: "+asked))
	}
	// A finding that is the cause of the VFIO ones (iommuUnavailable):
	// with passthrough asked it is the FAIL; without, the host is not
	// judged for passthrough and an IOMMU that is off or not described
	// is worth a WARN, never a PASS (virt-host-validate likewise warns
	// that it is unknown whether the platform has IOMMU support).
	st := report.Warn
	if meant {
		st = report.Fail
	}
	switch code := iommuUnavailable(s); {
	case s.On == iommu.Yes:
		out.Add(codeIOMMUOn, report.Pass, "host", fmt.Sprintf("%s on: %d IOMMU group(s)", orElse(s.Vendor, "IOMMU"), len(s.Groups)), ev...)
	case s.On == iommu.Unknown:
		out.NotRun(codeGroupsUnknown, "host", "whether the IOMMU is on is not known", e.iommuWhy(s), ev...)
		return
	case code == codeIOMMUAbsent && meant && asked != askedByCommand:
		out.Add(codeIOMMUAbsent, st, "host", "no IOMMU group, and nothing describes an IOMMU (firmware with VT-d or AMD-Vi disabled lists none): nothing here can be handed to VFIO", ev...)
	case code == codeIOMMUAbsent:
		// Nothing describes an IOMMU: whether the platform has one is
		// not known (firmware with VT-d or AMD-Vi disabled lists none).
		// The iommu command alone makes that a WARN, as virt-host-validate
		// does; a VFIO configuration on the host, or a VMM given, makes
		// it the FAIL above.
		st = report.Warn
		fw := "the firmware describes none"
		if s.Firmware.Describes() != iommu.No {
			fw = "the firmware's tables could not be read"
		}
		out.Add(codeIOMMUAbsent, st, "host", "unknown whether this platform has an IOMMU: "+fw+" and the kernel made no group", ev...)
	case s.Vendor == "":
		var names []string
		for _, u := range s.Units {
			names = append(names, u.Name)
		}
		ev = append(ev, Ev(iommu.ClassDir, "lists the IOMMU units "+strings.Join(names, ", ")+", yet the kernel created no IOMMU group"))
		out.Add(codeIOMMUOff, st, "host", "the kernel registered IOMMU unit(s) "+strings.Join(names, ", ")+", but DMA remapping is off (no IOMMU group)", ev...)
	default:
		out.Add(codeIOMMUOff, st, "host", s.Vendor+" described by the firmware, but DMA remapping is off (no IOMMU group)", ev...)
	}
	c := s.Cmdline
	var notes []report.Evidence
	for _, n := range c.Notes {
		notes = append(notes, Ev("/proc/cmdline", n))
	}
	smOnAlone := c.IntelScalable == iommu.Yes && c.IntelOn != iommu.Yes && s.On != iommu.Yes
	if smOnAlone || len(c.Unknown) > 0 {
		what := "intel_iommu=sm_on without intel_iommu=on: scalable mode selected, the IOMMU not turned on"
		if !smOnAlone {
			what = "IOMMU option(s) the kernel does not know and ignores: " + strings.Join(c.Unknown, ", ")
		}
		out.Add(codeIOMMUCmdline, report.Warn, "host", what, notes...)
	}
	if c.ACSOverride {
		out.Add(codeACSOverride, report.Warn, "host", "pcie_acs_override is on the command line: groups may look more isolated than the hardware is", notes...)
	}
}

// iommuWhy is why whether the IOMMU is on is not known: the groups'
// directory could not be listed, or a tree holds neither it nor any
// iommu_group link.
func (e *Env) iommuWhy(s *iommu.State) report.Why {
	reason := orElse(s.UnknownWhy, orElse(firstReason(s), "no IOMMU group listing and no iommu_group links under this root"))
	if errors.Is(s.GroupsErr, fs.ErrNotExist) {
		return e.missing(reason, iommu.GroupsDir)
	}
	if s.GroupsErr != nil {
		return e.errWhy(reason, s.GroupsErr, iommu.GroupsDir, "")
	}
	return e.missing(reason, iommu.GroupsDir)
}

// groupWhy is why a group's viability is not known: a member whose
// driver could not be read, or members that could not be listed.
func (e *Env) groupWhy(gv iommu.GroupViability) report.Why {
	const reason = "a member's driver could not be read"
	for _, m := range gv.Unknown {
		if m.DriverErr != nil {
			return e.errWhy(reason+": "+m.Name+": "+m.DriverErr.Error(), m.DriverErr, "", "")
		}
	}
	if gv.DevicesErr != nil {
		return e.errWhy("the members could not be listed: "+gv.DevicesErr.Error(), gv.DevicesErr, gv.Path+"/devices", "")
	}
	return report.Unusable(reason, gv.Path+"/devices").FromCapture(e.snapshot())
}

// isolationWhy is why an ACS path could not be read: config space
// beyond 64 bytes needs CAP_SYS_ADMIN (a capture taken without it keeps
// only those 64 bytes), another read error, or a bridge not read.
func (e *Env) isolationWhy(iso iommu.Isolation) report.Why {
	reason := iso.Summary()
	for _, h := range iso.Hops {
		if h.State != iommu.HopUnknown {
			continue
		}
		if errors.Is(h.Err, pci.ErrConfigUnprivileged) {
			return report.Privilege(reason, capSysAdmin).FromCapture(!e.Root.IsLive())
		}
		if h.Err != nil {
			return e.errWhy(reason, h.Err, "", capSysAdmin)
		}
		return report.Unusable(reason, pci.DevicesDir+"/"+h.Address.String()).FromCapture(e.snapshot())
	}
	return report.Unusable(reason, "")
}

func firstReason(s *iommu.State) string {
	if len(s.Reasons) > 0 {
		return s.Reasons[0]
	}
	return ""
}

func checkIOMMUGroups(e *Env, out *Out) {
	s := e.IOMMU()
	if s.On != iommu.Yes {
		return // the state's finding says why there are no groups to judge
	}
	inv, err := e.PCI()
	if err != nil || inv == nil {
		// Which accelerator is in which group, and what its members are
		// bound to, is read from the PCI functions.
		reason := "the PCI functions could not be read"
		if err != nil {
			reason += ": " + err.Error()
		}
		out.NotRun(codeGroupNotViable, "iommu groups", "the groups' viability cannot be judged without the PCI functions",
			report.Unusable(reason, pci.DevicesDir).FromCapture(e.snapshot()), Ev(pci.DevicesDir, reason))
		return
	}
	for _, gv := range iommu.Viabilities(e.Root, s, inv, iommu.NewConfigReader(e.Root)) {
		if !e.wantGroup(gv) {
			continue
		}
		judgeGroup(e, out, gv)
	}
}

// wantGroup: a run restricted to devices judges their groups only.
func (e *Env) wantGroup(gv iommu.GroupViability) bool {
	for _, a := range gv.Accelerators {
		if e.WantDevice(a.String()) {
			return true
		}
	}
	return false
}

func judgeGroup(e *Env, out *Out, gv iommu.GroupViability) {
	subject := fmt.Sprintf("iommu group %d", gv.Group)
	var ev []report.Evidence
	for _, m := range gv.Members {
		ev = append(ev, Ev(gv.Path+"/devices/"+m.Name, m.Why))
	}
	meant := gv.Intended || e.Opts.Passthrough
	switch {
	case gv.Verdict == iommu.Viable:
		out.Add(codeGroupViable, report.Pass, subject, fmt.Sprintf("group %d (%s) can be assigned to VFIO: every member on vfio-pci, pci-stub or no driver", gv.Group, accelList(gv)), ev...)
	case gv.Verdict == iommu.NotViable && meant:
		out.Add(codeGroupNotViable, report.Fail, subject, fmt.Sprintf("group %d (%s) is not viable for VFIO: %s", gv.Group, accelList(gv), blockers(gv)), append(ev, fixEvidence(gv.Fix)...)...)
	case gv.Verdict == iommu.NotViable:
		out.Add(codeGroupInHostUse, report.Pass, subject, fmt.Sprintf("group %d (%s) is in use by host drivers (%s); passthrough would need every member on vfio-pci", gv.Group, accelList(gv), blockers(gv)),
			append(ev, fixEvidence(gv.Fix)...)...)
	default:
		out.NotRun(codeGroupNotViable, subject, fmt.Sprintf("group %d: viability not known", gv.Group), e.groupWhy(gv), ev...)
	}
	if gv.Shared {
		st := report.Pass
		if meant {
			st = report.Warn
		}
		out.Add(codeGroupShared, st, subject, fmt.Sprintf("group %d holds more than %s's own functions", gv.Group, accelList(gv)), isolationEvidence(gv)...)
	}
	if !meant && !gv.Shared {
		return // a group of its own, used by the host: its ACS path changes nothing
	}
	for _, iso := range gv.Isolation {
		judgeIsolation(e, out, subject, iso, meant, gv.Shared)
	}
}

func judgeIsolation(e *Env, out *Out, subject string, iso iommu.Isolation, meant, shared bool) {
	ev := []report.Evidence{Ev(iso.Device.String(), iso.Summary())}
	switch {
	case iso.Unknown && iso.Breaker == nil:
		out.NotRun(codeACSNotReadable, subject, iso.Device.String()+": the ACS path could not be read", e.isolationWhy(iso), ev...)
	case iso.Breaker != nil && (meant || shared):
		st := report.Pass
		if meant {
			st = report.Warn
		}
		out.Add(codeACSUnisolated, st, subject, fmt.Sprintf("%s: %s does not isolate it (%s)", iso.Device, iso.Breaker.Address, iso.Breaker.Role), ev...)
	}
}

func accelList(gv iommu.GroupViability) string {
	var s []string
	for _, a := range gv.Accelerators {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}

func blockers(gv iommu.GroupViability) string {
	var s []string
	for _, m := range gv.Blocking {
		s = append(s, m.Name+" on "+orElse(m.Driver, "?"))
	}
	if len(s) == 0 {
		return "no member named"
	}
	return strings.Join(s, ", ")
}

func fixEvidence(f *iommu.Fix) []report.Evidence {
	if f == nil {
		return nil
	}
	var ev []report.Evidence
	for _, c := range f.Commands {
		ev = append(ev, Ev("fix now", c))
	}
	if f.Param != "" {
		ev = append(ev, Ev("fix at boot", f.Param))
	}
	for _, s := range f.Softdeps {
		ev = append(ev, Ev("/etc/modprobe.d", s))
	}
	for _, b := range f.BuiltIn {
		ev = append(ev, Ev("", b+" is built into the kernel: vfio-pci.ids cannot beat it, driver_override can"))
	}
	return ev
}

func isolationEvidence(gv iommu.GroupViability) []report.Evidence {
	var ev []report.Evidence
	for _, iso := range gv.Isolation {
		ev = append(ev, Ev(iso.Device.String(), iso.Summary()))
	}
	return ev
}
