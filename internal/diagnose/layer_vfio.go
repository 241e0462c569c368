package diagnose

import (
	"fmt"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/iommu"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// Layer 7, VFIO readiness: for the devices meant for VFIO (bound to a VFIO
// driver, a vfio-pci driver_override or vfio-pci.ids naming them, or asked
// about with --device on the iommu command), the modules, the binding,
// /dev/vfio/vfio and /dev/vfio/N; and for a process (iommu --pid: a QEMU,
// a DPDK program, a KubeVirt launcher) its locked-memory limit against
// what VFIO pins for it, CAP_IPC_LOCK, and who else holds its groups.
// Nothing here judges a host that means no device for VFIO.

const (
	codeVFIOModule    = "VFIO_MODULE_NOT_LOADED"
	codeVFIONotBound  = "VFIO_DEVICE_NOT_BOUND"
	codeVFIOContainer = "VFIO_CONTAINER_NODE"
	codeVFIOGroupNode = "VFIO_GROUP_NODE"
	codeVFIOMemlock   = "VFIO_MEMLOCK_LOW"
	codeVFIONoIPCLock = "VFIO_NO_IPC_LOCK"
	codeVFIOBusy      = "VFIO_GROUP_BUSY"
	codeVFIOReady     = "VFIO_READY"
)

var vfioCodeNames = []string{codeVFIOModule, codeVFIONotBound, codeVFIOContainer, codeVFIOGroupNode, codeVFIOMemlock, codeVFIONoIPCLock, codeVFIOBusy, codeVFIOReady}

func vfioCodes() []Code {
	out := []Code{{Code: codeVFIOReady, Layer: report.LayerIOMMU, Title: "the VFIO side is ready for the devices meant for it",
		Explain: `Every device meant for VFIO is bound to a VFIO driver, the VFIO modules are
loaded or built in, /dev/vfio/vfio is the container device and every group VFIO
created has its /dev/vfio/N with the kernel's device number. What is left is
the process's side: its access to the nodes and its locked-memory limit (iommu
--pid judges those).`}}
	for _, c := range ioCodesByName(vfioCodeNames...) {
		out = append(out, Code{Code: c.Code, Layer: report.LayerIOMMU, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	return out
}

func vfioCheck() Check {
	return Check{ID: "iommu.vfio", Layer: report.LayerIOMMU, Title: "VFIO readiness for the devices meant for it, and a process's limits",
		Codes: vfioCodeNames, Run: checkVFIO}
}

func checkVFIO(e *Env, out *Out) {
	inv, err := e.PCI()
	v := e.VFIO()
	if err != nil || v == nil {
		return // layer 1 says why the bus could not be read
	}
	var meant []iommu.Binding
	for _, b := range v.Bindings {
		if b.Intended() {
			meant = append(meant, b)
		}
	}
	if len(meant) > 0 {
		problems := judgeVFIOHost(e, out, v, meant)
		if problems == 0 {
			out.Add(codeVFIOReady, report.Pass, "host", fmt.Sprintf("VFIO ready for the %d device(s) meant for it", len(meant)), bindingsEvidence(meant)...)
		}
	}
	if e.Opts.PID > 0 && e.Opts.Passthrough {
		judgeMemlock(e, out, inv, v)
	}
}

func bindingsEvidence(bs []iommu.Binding) []report.Evidence {
	var ev []report.Evidence
	for _, b := range bs {
		ev = append(ev, Ev(b.Address.String(), fmt.Sprintf("%s on %s: %s", b.ID, orElse(b.Driver, "no driver"), strings.Join(b.Why, "; "))))
	}
	return ev
}

// judgeVFIOHost judges the modules, bindings and nodes; it returns how
// many problems it found.
func judgeVFIOHost(e *Env, out *Out, v *iommu.VFIO, meant []iommu.Binding) int {
	n := 0
	// vfio-pci registered answers the module's question, whatever
	// /sys/module shows (a capture without it, a built-in driver).
	registered := vfioPCIRegistered(v)
	moduleMissing := false
	if m := v.Module("vfio_pci"); m != nil && m.State != iommu.ModuleLoaded && m.State != iommu.ModuleBuiltIn && !registered {
		if m.State == iommu.ModuleUnknown {
			reason := orElse(m.Evidence, "/sys/module not readable")
			why := e.missing(reason, m.Path)
			if m.Err != nil {
				why = e.errWhy(reason+": "+m.Err.Error(), m.Err, "", "")
			}
			out.NotRun(codeVFIOModule, "host", "whether vfio-pci is loaded is not known", why, Ev(m.Path, m.Evidence))
		} else {
			out.Add(codeVFIOModule, report.Fail, "host", "vfio-pci is neither loaded nor built in, and devices are meant for it", Ev(m.Path, m.Evidence))
			moduleMissing = true
			n++
		}
	}
	// A device cannot be bound to vfio-pci while DMA remapping is off:
	// vfio-pci's probe finds no IOMMU group and fails (drivers/vfio/
	// group.c, vfio_group_find_or_alloc), unless the unsafe no-IOMMU mode
	// is on. So every device meant for VFIO and not on it follows from the
	// IOMMU state's finding; with the IOMMU on, one that waits with no
	// driver for vfio-pci follows from the module's absence.
	off := ""
	if v.NoIOMMU != iommu.Yes {
		off = iommuUnavailable(e.IOMMU())
	}
	for _, b := range meant {
		if b.VFIO {
			continue
		}
		f := out.Add(codeVFIONotBound, report.Fail, b.Address.String(), fmt.Sprintf("%s is meant for passthrough but bound to %s", b.Address, orElse(b.Driver, "no driver")), bindingsEvidence([]iommu.Binding{b})...)
		switch {
		case off != "":
			f.Follows(off, "host")
		case moduleMissing && b.Driver == "" && b.DriverErr == nil:
			f.Follows(codeVFIOModule, "host")
		}
		n++
	}
	c := v.Container
	switch {
	case c.Present == iommu.No || c.DevMatches() == iommu.No:
		out.Add(codeVFIOContainer, report.Fail, iommu.VFIOContainerDev, iommu.VFIOContainerDev+" is missing or not the VFIO container device", Ev(c.Path, c.String()))
		n++
	case c.Present == iommu.Yes:
		if t, ok := c.Target(); ok && uint32(t.Mode.Perm()) != c.WantMode {
			out.Add(codeVFIOContainer, report.Warn, iommu.VFIOContainerDev, fmt.Sprintf("%s is %04o, not %04o: a VM or DPDK user that is not root cannot open it", c.Path, uint32(t.Mode.Perm()), c.WantMode), Ev(c.Path, c.String()))
			n++
		}
	}
	for _, g := range v.Groups {
		if g.Registered != iommu.Yes {
			continue
		}
		switch node := g.Node; {
		case node.Present == iommu.No || node.DevMatches() == iommu.No:
			out.Add(codeVFIOGroupNode, report.Fail, node.Path, fmt.Sprintf("VFIO group %s has no %s with the kernel's device number", g.Name, node.Path), Ev(node.Path, node.String()), Ev(node.SysfsPath, node.SysfsDev))
			n++
		}
	}
	return n
}

// vfioPCIRegistered reports whether the host shows vfio-pci's driver
// registered, whatever /sys/module says: its directory under
// /sys/bus/pci/drivers exists (it does only while the driver is
// registered, drivers/base/bus.c), or a function is bound to it.
func vfioPCIRegistered(v *iommu.VFIO) bool {
	if v.Driver == iommu.Yes {
		return true
	}
	for _, b := range v.Bindings {
		if b.Driver == "vfio-pci" {
			return true
		}
	}
	return false
}

// guestInput is what the memory check needs when the guest's size is not
// read from QEMU's command line.
const guestInput = "--guest-memory with the memory VFIO will pin for the process (the guest's memory: 16G, 16384M)"

// guestWhy is why the guest memory is not known: the command line could
// not be read (a capture never holds it), or says nothing of it; either
// way the user can give it.
func guestWhy(e *Env, g iommu.Guest) report.Why {
	reason := orElse(g.Why, "the guest memory is not known: give it with --guest-memory")
	switch g.Cmdline.State {
	case runtime.ReadOK, runtime.ReadNotRead, runtime.ReadNotCaptured:
		return report.Input(reason, guestInput)
	}
	w := procWhy(e, g.Cmdline)
	w.Reason = reason
	return w.With("Or give " + guestInput + ".")
}

// judgeMemlock: the process's locked-memory limit against what VFIO will
// pin for it, its CAP_IPC_LOCK, and whether another process holds its
// groups.
func judgeMemlock(e *Env, out *Out, inv *pci.Inventory, v *iommu.VFIO) {
	req := iommu.MemlockRequest{PID: e.Opts.PID, Guest: e.Opts.GuestMemory}
	m := iommu.ReadMemlock(e.Root, inv, v, req)
	subject := fmt.Sprintf("pid %d", m.PID)
	var ev []report.Evidence
	for _, s := range m.Explain {
		ev = append(ev, Ev(m.Limits.Path, s))
	}
	// Decided where the facts suffice: CAP_IPC_LOCK in the initial user
	// namespace or an unlimited limit whatever the guest's size; a limit
	// under the least this process can pin (Memlock.Floor) whatever the
	// guest's size. NOT_RUN only where the answer turns on what is not
	// known: the limit, the capability, or the guest's size.
	short := m.BelowFloor == iommu.Yes || m.BelowCharged == iommu.Yes || m.BelowNeed == iommu.Yes
	switch {
	case m.Exempt == iommu.Yes:
		out.Add(codeVFIOMemlock, report.Pass, subject, "CAP_IPC_LOCK in the initial user namespace: VFIO does not apply RLIMIT_MEMLOCK to its pinning", ev...)
	case m.Limit == nil:
		why := procWhy(e, m.Limits)
		if m.Limits.State == runtime.ReadGone || m.Limits.State == runtime.ReadAbsent {
			why = report.Input(m.Limits.String(), fmt.Sprintf("--pid with a running process (`ps -p %d`)", m.PID))
		}
		out.NotRun(codeVFIOMemlock, subject, "locked-memory limit not judged", why, ev...)
	case m.Limit.Soft == runtime.RLimInfinity:
		out.Add(codeVFIOMemlock, report.Pass, subject, "RLIMIT_MEMLOCK is unlimited: VFIO can pin any guest's memory", ev...)
	case short && m.Exempt != iommu.No:
		// Short unless it has CAP_IPC_LOCK, which could not be told.
		r := m.Status
		if r.OK() {
			r = m.UIDMap
		}
		w := procWhy(e, r)
		w.Reason = "whether the process has CAP_IPC_LOCK in the initial user namespace is not known (" + r.String() + "), and its limit is short without it"
		out.NotRun(codeVFIOMemlock, subject, "locked-memory limit not judged: CAP_IPC_LOCK not known", w, ev...)
	case m.BelowFloor == iommu.Yes:
		out.Add(codeVFIOMemlock, report.Fail, subject, fmt.Sprintf("RLIMIT_MEMLOCK %s is below the %s any guest of this process pins: VFIO_IOMMU_MAP_DMA fails with ENOMEM whatever the guest's size", iommu.HumanBytes(m.Limit.Soft), iommu.HumanBytes(m.Floor)), ev...)
	case m.BelowCharged == iommu.Yes:
		out.Add(codeVFIOMemlock, report.Fail, subject, fmt.Sprintf("RLIMIT_MEMLOCK %s is below the guest memory VFIO pins (%d bytes): VFIO_IOMMU_MAP_DMA fails with ENOMEM", m.Limit, m.Charged), ev...)
	case m.BelowNeed == iommu.Yes:
		out.Add(codeVFIOMemlock, report.Warn, subject, fmt.Sprintf("RLIMIT_MEMLOCK %s covers the guest memory but not it plus the devices' BARs (%d bytes)", m.Limit, m.Need), ev...)
	case !m.ChargedKnown:
		out.NotRun(codeVFIOMemlock, subject, "what VFIO pins for the process is not known", guestWhy(e, m.Guest), ev...)
	default:
		out.Add(codeVFIOMemlock, report.Pass, subject, fmt.Sprintf("RLIMIT_MEMLOCK %s covers the guest memory VFIO pins (%d bytes)", m.Limit, m.Charged), ev...)
	}
	if m.CapIPCLock == iommu.Yes && m.InitialUserNS == iommu.No {
		out.Add(codeVFIONoIPCLock, report.Warn, subject, "CAP_IPC_LOCK only in the process's own user namespace: VFIO's limit check ignores it", ev...)
	}
	holders := iommu.FindHolders(e.Root, v.GroupTargets())
	for _, t := range holders.Targets {
		hs := holders.HeldBy(t)
		mine := false
		for _, h := range hs {
			mine = mine || h.PID == m.PID
		}
		if len(hs) > 0 && !mine {
			out.Add(codeVFIOBusy, report.Fail, t, t+" is held by another process", Ev(t, iommu.GroupBusy(strings.TrimPrefix(t, "/dev/vfio/"), hs)))
		}
	}
}
