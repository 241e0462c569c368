package diagnose

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/iommu"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 1: the host's PCI bus. Is the accelerator there, is its link
// trained as wide and as fast as it can be, and does the kernel know its
// NUMA node?

const (
	CodePCIAccelPresent     = "PCI_ACCEL_PRESENT"
	CodePCINoAccelerator    = "PCI_NO_ACCELERATOR"
	CodePCIDeviceNotFound   = "PCI_DEVICE_NOT_FOUND"
	CodePCIReadError        = "PCI_READ_ERROR"
	CodePCILinkOK           = "PCI_LINK_OK"
	CodePCILinkDegraded     = "PCI_LINK_DEGRADED"
	CodePCILinkSpeedReduced = "PCI_LINK_SPEED_REDUCED"
	CodePCILinkUnknown      = "PCI_LINK_UNKNOWN"
	CodePCINUMAOK           = "PCI_NUMA_OK"
	CodePCINUMAUnknown      = "PCI_NUMA_UNKNOWN"
	CodePCINUMANotRead      = "PCI_NUMA_NOT_READ"
)

var pciCodes = []Code{{
	Code: CodePCIAccelPresent, Layer: report.LayerPCI,
	Title: "an accelerator is present on the PCI bus",
	Explain: `The kernel lists this PCI function under /sys/bus/pci/devices, and its class
code or vendor and device ids make it an accelerator: a display controller
(class 03, GPUs; not a BMC's VGA), a co-processor (0b40), a processing
accelerator (12), a video or multimedia controller (0400, 0480), a BlueField
DPU, or a function of a vendor that makes only accelerators. Being on the bus
proves the device was enumerated and answers config-space reads; it says
nothing yet about its driver, device nodes or access from a container, which
the next layers check. The evidence holds its ids, class, driver, NUMA node,
IOMMU group and SR-IOV state as sysfs reports them.`,
}, {
	Code: CodePCINoAccelerator, Layer: report.LayerPCI,
	Title: "no accelerator on the PCI bus",
	Explain: `No PCI function of this host has the class or the ids of an accelerator. On a
machine meant to have none this is simply the answer. On a machine that
should have one, the device did not enumerate: it is not seated or not
powered, it is disabled in the firmware setup, it fell off the bus after an
error (look for "fell off the bus" or AER messages in dmesg), or, in a VM or a
container, it was never passed through. Nothing above layer 1 can work for a
device the kernel cannot see.`,
	Remediation: "If an accelerator is expected: check `dmesg` for PCIe/AER errors, reseat and power-cycle the card, check the firmware settings (slot enabled, Above-4G decoding for large BARs), and for a VM check the passthrough configuration.",
}, {
	Code: CodePCIDeviceNotFound, Layer: report.LayerPCI,
	Title: "the requested PCI device is not on the bus",
	Explain: `A device was selected with --device, but no function with that address is
listed under /sys/bus/pci/devices. Either the address is mistyped (use the
full form 0000:17:00.0), the device sits in another PCI domain, or it is gone
from the bus: removed, powered off, or dropped after a fatal error.`,
	Remediation: "List the bus with `accel-doctor pci` or `lspci -D` and use an address from it; if the device should be there, check `dmesg` for the moment it disappeared (AER, \"fell off the bus\", surprise removal).",
}, {
	Code: CodePCIReadError, Layer: report.LayerPCI,
	Title: "PCI sysfs attributes could not be read",
	Explain: `Some sysfs files of the PCI bus could not be read or did not parse: a missing
vendor file, a class that is not a number, a symlink loop, a file over the
size bound. With a live /sys this points at a kernel or permission problem;
with a snapshot or a --root tree, at an incomplete capture. The affected
device is still listed with what could be read, and the checks that needed
the missing values say NOT_RUN. When /sys/bus/pci/devices itself cannot be
listed, no PCI check could look at anything.`,
	Remediation: "Run accel-doctor with the host's /sys mounted (in a pod: `--root /host` with a hostPath mount of / or at least /sys); for a snapshot, recapture it with `accel-doctor snapshot`; otherwise read the listed files by hand to see what the kernel returns.",
}, {
	Code: CodePCILinkOK, Layer: report.LayerPCI,
	Title: "PCIe link trained at its full width and speed",
	Explain: `current_link_width and current_link_speed equal the most that both the device
(max_link_width, max_link_speed) and, when it is known, the port above it
support. The link gives the device the bandwidth it was built for.`,
}, {
	Code: CodePCILinkDegraded, Layer: report.LayerPCI,
	Title: "PCIe link trained narrower than it can be",
	Explain: `The link has fewer lanes than both the device and the port above it support
(for example x4 or x1 where both ends are x16), read from current_link_width
and max_link_width in sysfs. Lanes do not come and go with power saving:
width is fixed at link training, so a narrow link usually means a badly
seated card, a damaged slot, connector or riser, a wrong bifurcation setting,
or signal-integrity retraining after errors. Host-to-device copies are
slowed by the missing lanes; the device otherwise works, which is why this
is a warning.`,
	Remediation: "Reseat the card (or the riser/cable), try another slot, check the slot's bifurcation setting in the firmware, and look in `dmesg` and `lspci -vvv` (LnkSta, AER) for retraining and errors; replace the riser or card if the width stays low.",
}, {
	Code: CodePCILinkSpeedReduced, Layer: report.LayerPCI,
	Title: "PCIe link running below its top speed",
	Explain: `current_link_speed is lower than both the device and the port above it can
do, at full width. This is often not a fault: GPUs (NVIDIA and AMD) and some
other devices lower the link speed while idle to save power and raise it
again under load, so a reading taken on an idle device is expected to be low.
A speed that stays low under load points at signal-integrity problems (a
riser, a long cable, a dirty connector) or at a firmware setting that caps
the slot's generation.`,
	Remediation: "Re-check while the device is busy (e.g. during a copy or a benchmark: `nvidia-smi -q -d PCIE` shows the current and max generation); if it stays low under load, check the slot's PCIe generation setting in the firmware, reseat the card, and look for AER errors in `dmesg`.",
}, {
	Code: CodePCILinkUnknown, Layer: report.LayerPCI,
	Title: "PCIe link state not available",
	Explain: `The link could not be judged: the kernel exposes no current/max link
attributes for this function (it is not a PCIe function, or a hypervisor
hides its link), it reports "Unknown" or a width of 0 (link down or the
register reads as reserved), or the files did not parse. Nothing is
concluded about the link.`,
	Remediation: "On bare metal, read `lspci -vvv -s <BDF>` (LnkCap, LnkSta) as root; in a VM the link of a passed-through device is often not visible to the guest: check it on the hypervisor host.",
}, {
	Code: CodePCINUMAOK, Layer: report.LayerPCI,
	Title: "the device's NUMA node is known",
	Explain: `The kernel reports the NUMA node the device is attached to (numa_node in
sysfs), or the host has a single node, where locality does not matter.
Topology-aware placement (the kubelet's Topology Manager, device plugins'
TopologyInfo, NCCL) can keep the device's work on the CPUs and memory next
to it.`,
}, {
	Code: CodePCINUMAUnknown, Layer: report.LayerPCI,
	Title: "the device has no NUMA node on a multi-node host",
	Explain: `On a host with more than one NUMA node, the device's numa_node reads -1
(NUMA_NO_NODE): the firmware did not describe which node the device's root
port belongs to (no ACPI _PXM for the host bridge), or the kernel ignored it.
The device works, but topology-aware scheduling cannot place pods next to it
and cross-socket traffic can cost a large part of the bandwidth. Inside a VM
this is the normal state unless the hypervisor defines a virtual NUMA
topology with device affinity.`,
	Remediation: "Update the system firmware or enable the NUMA/SRAT/proximity options that describe PCIe locality (names vary: \"ACPI SRAT L3 as NUMA\", \"Sub-NUMA clustering\"); check `dmesg | grep -i numa`; in a VM, give the device a NUMA affinity in the hypervisor (e.g. a pxb-pcie bridge with numa_node in QEMU).",
}, {
	Code: CodePCINUMANotRead, Layer: report.LayerPCI,
	Title: "NUMA locality could not be read",
	Explain: `The device's numa_node attribute or the host's list of online NUMA nodes
(/sys/devices/system/node/online) could not be read or parsed, so nothing is
said about the device's locality. A kernel without CONFIG_NUMA has neither
file and a single node; a capture may simply lack them.`,
	Remediation: "Check that /sys is the host's and complete (in a pod, mount the host's /sys); read /sys/bus/pci/devices/<BDF>/numa_node and /sys/devices/system/node/online by hand.",
}}

func pciChecks() []Check {
	return []Check{{
		ID: "pci.inventory", Layer: report.LayerPCI,
		Title: "accelerators present on the PCI bus",
		Codes: []string{CodePCIAccelPresent, CodePCINoAccelerator, CodePCIDeviceNotFound, CodePCIReadError},
		Run:   checkPCIInventory,
	}, {
		ID: "pci.link", Layer: report.LayerPCI,
		Title: "PCIe link width and speed against their maximum",
		Codes: []string{CodePCILinkOK, CodePCILinkDegraded, CodePCILinkSpeedReduced, CodePCILinkUnknown},
		Run:   checkPCILink,
	}, {
		ID: "pci.numa", Layer: report.LayerPCI,
		Title: "NUMA node of each accelerator",
		Codes: []string{CodePCINUMAOK, CodePCINUMAUnknown, CodePCINUMANotRead},
		Run:   checkPCINUMA,
	}}
}

// PCI returns the host's PCI inventory, scanned once per run.
func (e *Env) PCI() (*pci.Inventory, error) {
	return memo(e, "pci.inventory", func() (*pci.Inventory, error) {
		inv, err := pci.ScanFields(e.Root, (pci.AllFields|e.Opts.PCIFields)&^pci.FieldNames)
		if err == nil && e.showsNames(inv) {
			inv.LoadNames(e.Root)
		}
		return inv, err
	})
}

// showsNames: the run names PCI functions. Not on a host whose bus holds
// no accelerator and nothing bound to a VFIO driver, when no --device is
// asked for, neither passthrough (iommu lists every group's functions)
// nor a container, and no snapshot records (a replay must find pci.ids):
// its report names no function, and the pci.ids lookups were a tenth of
// such a check.
func (e *Env) showsNames(inv *pci.Inventory) bool {
	if len(e.Opts.Devices) > 0 || e.Opts.Passthrough || e.Opts.Container != nil || e.Root.Recording() {
		return true
	}
	for _, d := range inv.Devices {
		if _, ok := pci.IsAccelerator(d); ok || !d.Has(pci.HasClass) || iommu.IsVFIODriver(d.Driver) {
			return true
		}
	}
	return false
}

// Accelerators returns the accelerators the run is about, in address
// order: every function pci.IsAccelerator accepts, or whose class could not
// be read but whose binding shows an accelerator driver (a GPU the NVIDIA
// driver lists in /proc/driver/nvidia/gpus keeps its place in layers 2-3
// whatever its class file says), or, when --device names addresses,
// exactly those functions that exist, whatever their class (the operator
// knows which device they mean, and an accelerator of an unlisted vendor
// must still be checkable). Nil when the scan failed.
func (e *Env) Accelerators() []*pci.Device {
	accs, _ := memo(e, "pci.accelerators", func() ([]*pci.Device, error) {
		inv, err := e.PCI()
		if err != nil || inv == nil {
			return nil, err
		}
		var out []*pci.Device
		for _, d := range inv.Devices {
			if e.restricted() {
				if e.WantDevice(d.Address.String()) {
					out = append(out, d)
				}
			} else if _, ok := e.accelKind(d); ok {
				out = append(out, d)
			}
		}
		return out, nil
	})
	return accs
}

// accelKind classifies a function: by its ids and class (pci.IsAccelerator,
// which also takes the driver link when the class is unknown), and, for a
// function whose class is unknown, by the driver that other sources show.
func (e *Env) accelKind(d *pci.Device) (string, bool) {
	if k, ok := pci.IsAccelerator(d); ok || d.Has(pci.HasClass) {
		return k, ok
	}
	b := e.Binding(d)
	if k, ok := pci.AcceleratorDriver(b.Driver); ok {
		return k, true
	}
	if b.Via == driver.ViaDRM {
		return pci.KindGPU, true // only a display controller registers a DRM card
	}
	return "", false
}

// reportKind is the report kind of a selected device.
func (e *Env) reportKind(d *pci.Device) string {
	if k, ok := e.accelKind(d); ok {
		return k
	}
	return pci.KindOther
}

func checkPCIInventory(e *Env, out *Out) {
	inv, err := e.PCI()
	if err != nil {
		why := e.errWhy("cannot list "+pci.DevicesDir+": "+err.Error(), err, pci.DevicesDir, "")
		if errors.Is(err, fs.ErrNotExist) {
			reason := pci.DevicesDir + " does not exist under this root: not a Linux host root, /sys not mounted, or a capture without it"
			if e.Root.IsLive() {
				why = report.Explain(reason, "Run accel-doctor where sysfs is mounted at /sys: on a Linux host, or in a container with the host's /sys (or its / at --root).")
			} else {
				why = e.missing(reason, pci.DevicesDir)
			}
		}
		out.NotRun(CodePCIReadError, "host", "the PCI bus could not be read", why, Ev(pci.DevicesDir, err.Error()))
		return
	}
	for _, err := range inv.Errors {
		out.Add(CodePCIReadError, report.Warn, "host", "a PCI bus entry or pci.ids could not be read", Ev("", err.Error()))
	}
	devicesNotFound(e, inv, out)
	for _, d := range inv.Devices {
		if len(d.Errors) > 0 && e.WantDevice(d.Address.String()) {
			readErrorFinding(e, out, d)
		}
	}
	accs := e.Accelerators()
	if len(accs) == 0 && e.Opts.DevicesOnly && len(e.Opts.Devices) == 0 {
		return // a container holding no node of a host device: nothing here is its
	}
	if len(accs) == 0 && len(e.Opts.Devices) == 0 {
		out.Add(CodePCINoAccelerator, report.Pass, "host",
			fmt.Sprintf("no accelerator on the PCI bus (%d functions scanned)", len(inv.Devices)),
			Ev(pci.DevicesDir, fmt.Sprintf("%d functions", len(inv.Devices))))
		return
	}
	for _, d := range accs {
		kind := e.reportKind(d)
		desc := describe(d)
		out.Add(CodePCIAccelPresent, report.Pass, d.Address.String(), kind+": "+desc, deviceEvidence(e, inv, d)...)
		rd := report.Device{
			ID: d.Address.String(), Kind: kind, Vendor: vendorLabel(d), Name: deviceLabel(d),
			Driver: reportDriver(e.Binding(d)), Description: desc,
		}
		rd.NUMANode = e.reportNUMA(d)
		e.AddDevice(rd)
	}
}

// reportDriver is the report's driver of a device: its name, "" when it
// is unbound, and "unknown" when a driver may be bound but no source names
// it (the report would otherwise say "no driver" of a device that has one).
func reportDriver(b driver.Binding) string {
	if b.Driver == "" && b.State != driver.Unbound {
		return "unknown"
	}
	return b.Driver
}

func devicesNotFound(e *Env, inv *pci.Inventory, out *Out) {
	for _, want := range e.Opts.Devices {
		a, err := pci.ParseAddress(want)
		if err != nil || inv.Lookup(a) == nil {
			ev := Ev(pci.DevicesDir+"/"+want, "absent")
			if err != nil {
				ev = Ev("", err.Error())
			}
			out.Add(CodePCIDeviceNotFound, report.Fail, want, "no PCI function "+want+" on this host", ev)
		}
	}
}

// readErrorFinding reports the attributes of a function that could not be
// used, each as absent, unreadable or malformed. In a tree that is not the
// live host, mandatory attributes absent (the kernel creates them for every
// function) and links copied as directories are what the capture lacks:
// NOT_RUN, since nothing about the device is wrong. Anything else
// unreadable or malformed is a WARN naming the path.
func readErrorFinding(e *Env, out *Out, d *pci.Device) {
	var ev []report.Evidence
	var parts []string
	onlyAbsent := true
	lacks := d.Path // what the capture lacks: the first attribute
	for _, err := range d.Errors {
		var ae *pci.AttrError
		if !errors.As(err, &ae) {
			ev, onlyAbsent = append(ev, Ev("", err.Error())), false
			parts = append(parts, "its sysfs directory")
			continue
		}
		if lacks == d.Path {
			lacks = ae.Path
		}
		ev = append(ev, Ev(ae.Path, ae.Problem.String()+": "+innerErr(ae.Err)))
		parts = append(parts, ae.Attr+" "+ae.Problem.String())
		onlyAbsent = onlyAbsent && (ae.Problem == pci.Absent || errors.Is(ae, pci.ErrLinkCopied))
	}
	summary := "sysfs attributes not usable: " + strings.Join(parts, ", ")
	if onlyAbsent && !e.Root.IsLive() {
		out.NotRun(CodePCIReadError, d.Address.String(), summary,
			e.missing("the capture lacks attributes the kernel creates for every PCI function; what needs them is not judged", lacks), ev...)
		return
	}
	out.Add(CodePCIReadError, report.Warn, d.Address.String(), summary, ev...)
}

// innerErr drops the path a hostfs error repeats: the evidence names it.
func innerErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

func idsEvidence(inv *pci.Inventory) report.Evidence {
	if inv.IDsPath == "" {
		return Ev("", "no pci.ids under this root: names unavailable, ids only")
	}
	return Ev(inv.IDsPath, "names from this pci.ids")
}

func vendorLabel(d *pci.Device) string {
	switch {
	case d.VendorName != "":
		return d.VendorName
	case d.Has(pci.HasVendor):
		return fmt.Sprintf("%04x", d.Vendor)
	}
	return "unknown"
}

func deviceLabel(d *pci.Device) string {
	switch {
	case d.DeviceName != "":
		return d.DeviceName
	case d.Has(pci.HasDevice):
		return fmt.Sprintf("device %04x", d.Device)
	}
	return "unknown device"
}

// shortVendor turns a pci.ids vendor name into what people call it:
// "Advanced Micro Devices, Inc. [AMD/ATI]" -> "AMD/ATI",
// "NVIDIA Corporation" -> "NVIDIA".
func shortVendor(name string) string {
	if i := strings.LastIndexByte(name, '['); i >= 0 && strings.HasSuffix(name, "]") {
		return name[i+1 : len(name)-1]
	}
	for _, suf := range []string{" Corporation", " Corp.", ", Inc.", " Inc.", " Co., Ltd.", " Co.,Ltd.", " Ltd.", " Ltd", " Limited", " Technologies", " Technology"} {
		name = strings.TrimSuffix(name, suf)
	}
	return name
}

// describe is "NVIDIA GH100[H100 SXM5 80GB] [10de:2330]", or with ids and
// class only when names are unavailable.
func describe(d *pci.Device) string {
	var parts []string
	if d.VendorName != "" {
		parts = append(parts, shortVendor(d.VendorName))
	}
	switch {
	case d.DeviceName != "":
		parts = append(parts, d.DeviceName)
	case d.ClassName != "":
		parts = append(parts, d.ClassName)
	case d.Has(pci.HasClass):
		parts = append(parts, fmt.Sprintf("class %06x", d.Class))
	}
	parts = append(parts, "["+d.IDString()+"]")
	return strings.Join(parts, " ")
}

func intOr(p *int, absent string) string {
	if p == nil {
		return absent
	}
	return fmt.Sprint(*p)
}

func deviceEvidence(e *Env, inv *pci.Inventory, d *pci.Device) []report.Evidence {
	class := d.AttrState("class")
	if d.Has(pci.HasClass) {
		class = fmt.Sprintf("0x%06x", d.Class)
		if d.ClassName != "" {
			class += " (" + d.ClassName + ")"
		}
	}
	ev := []report.Evidence{
		Ev(d.BusPath, d.Path),
		Ev(d.AttrPath("vendor")+" + device", d.IDString()),
		Ev(d.AttrPath("class"), class),
	}
	if d.Has(pci.HasSubsystem) {
		sub := fmt.Sprintf("%04x:%04x", d.SubsystemVendor, d.SubsystemDevice)
		if d.SubsystemName != "" {
			sub += " (" + d.SubsystemName + ")"
		}
		ev = append(ev, Ev(d.AttrPath("subsystem_vendor")+" + subsystem_device", sub))
	}
	ev = append(ev, bindingEvidence(e.Binding(d))...)
	ev = append(ev, numaEvidence(d))
	if d.IOMMUGroup != nil {
		ev = append(ev, Ev(d.AttrPath("iommu_group"), fmt.Sprint(*d.IOMMUGroup)))
	}
	if len(d.Bridges) > 0 {
		var bs []string
		for _, b := range d.Bridges {
			s := b.String()
			if br := inv.Lookup(b); br != nil {
				s += " [" + br.IDString() + "]"
			}
			bs = append(bs, s)
		}
		ev = append(ev, Ev("", "upstream: "+strings.Join(bs, " -> ")))
	}
	if d.TotalVFs != nil {
		var vfs []string
		for _, v := range d.VFs {
			vfs = append(vfs, v.String())
		}
		s := fmt.Sprintf("SR-IOV PF: %s of %d VFs enabled", intOr(d.NumVFs, "?"), *d.TotalVFs)
		if len(vfs) > 0 {
			s += ": " + strings.Join(vfs, ", ")
		}
		ev = append(ev, Ev(d.AttrPath("sriov_numvfs"), s))
	}
	if d.PhysFn != nil {
		ev = append(ev, Ev(d.AttrPath("physfn"), "SR-IOV VF of "+d.PhysFn.String()))
	}
	return append(ev, idsEvidence(inv))
}

// numaEvidence is numa_node as read, or whether it is absent,
// unreadable or malformed.
func numaEvidence(d *pci.Device) report.Evidence {
	if d.NUMANode == nil {
		return Ev(d.AttrPath("numa_node"), d.AttrState("numa_node"))
	}
	v := fmt.Sprint(*d.NUMANode)
	if *d.NUMANode < 0 {
		v += " (no node)"
	}
	return Ev(d.AttrPath("numa_node"), v)
}

// linkEvidence is the four sysfs files of a link.
func linkEvidence(d *pci.Device) []report.Evidence {
	sp := func(name string, s *pci.LinkSpeed) report.Evidence {
		if s == nil {
			return Ev(d.AttrPath(name), d.AttrState(name))
		}
		return Ev(d.AttrPath(name), s.Raw)
	}
	w := func(name, raw string) report.Evidence {
		if ae := d.AttrErr(name); ae != nil || raw == "" {
			return Ev(d.AttrPath(name), d.AttrState(name))
		}
		return Ev(d.AttrPath(name), raw)
	}
	return []report.Evidence{
		sp("current_link_speed", d.Link.CurrentSpeed),
		sp("max_link_speed", d.Link.MaxSpeed),
		w("current_link_width", d.Link.CurrentWidthRaw),
		w("max_link_width", d.Link.MaxWidthRaw),
	}
}

// checkPCILink compares the trained link with what both ends support.
// The ceiling is min(device max, upstream port max) when the port is in
// the inventory with readable maxima: a x16 card in a x8 slot trained at
// x8 is what the slot allows, not a fault (said in the evidence).
//
// Width and speed are judged differently: the width is fixed at link
// training and a narrow link is a physical problem (WARN
// PCI_LINK_DEGRADED); the speed is lowered at idle by GPUs' power
// management (ASPM/dynamic link speed), so a low speed at full width is a
// gentler WARN PCI_LINK_SPEED_REDUCED that says to re-check under load.
// Virtual functions have no link of their own (SR-IOV: the VF's link
// registers are reserved) and are skipped; their PF is judged.
func checkPCILink(e *Env, out *Out) {
	inv, err := e.PCI()
	if err != nil {
		return // pci.inventory has said NOT_RUN for the whole bus
	}
	for _, d := range e.Accelerators() {
		if !d.IsVF() {
			judgeLink(e, inv, out, d)
		}
	}
}

// linkAttrs are the four sysfs attributes of a PCIe link.
var linkAttrs = []string{"current_link_speed", "max_link_speed", "current_link_width", "max_link_width"}

// linkCeiling is the most a link can train to: the device's maximum,
// lowered to the upstream port's when the port supports less.
type linkCeiling struct {
	width, mtps int
	limited     []string // what the port limits, for the summary
}

func ceiling(inv *pci.Inventory, d *pci.Device, widthKnown, speedKnown bool) (linkCeiling, *report.Evidence) {
	var c linkCeiling
	if widthKnown {
		c.width = *d.Link.MaxWidth
	}
	if speedKnown {
		c.mtps = d.Link.MaxSpeed.MTps
	}
	if len(d.Bridges) == 0 {
		return c, nil
	}
	port := inv.Lookup(d.Bridges[len(d.Bridges)-1])
	if port == nil {
		return c, nil
	}
	pl := port.Link
	if widthKnown && pl.MaxWidth != nil && *pl.MaxWidth > 0 && *pl.MaxWidth < c.width {
		c.width = *pl.MaxWidth
		c.limited = append(c.limited, fmt.Sprintf("x%d", c.width))
	}
	if speedKnown && pl.MaxSpeed != nil && pl.MaxSpeed.Known() && pl.MaxSpeed.MTps < c.mtps {
		c.mtps = pl.MaxSpeed.MTps
		c.limited = append(c.limited, pl.MaxSpeed.String())
	}
	if len(c.limited) == 0 {
		return c, nil
	}
	ev := Ev(port.AttrPath("max_link_width"), "upstream port "+port.Address.String()+" supports at most "+strings.Join(c.limited, ", "))
	return c, &ev
}

func judgeLink(e *Env, inv *pci.Inventory, out *Out, d *pci.Device) {
	bdf := d.Address.String()
	ev := linkEvidence(d)
	l := d.Link
	if l.CurrentSpeed == nil && l.MaxSpeed == nil && l.CurrentWidth == nil && l.MaxWidth == nil {
		reason := "no link attributes in sysfs: not a PCIe function, or a hypervisor that hides the link"
		instead := "Nothing to do for a function that is not PCI Express; in a VM, read the link on the hypervisor's host (`lspci -vv -s BDF` there: LnkSta)."
		if !e.Root.IsLive() {
			reason += ", or a capture that did not keep them"
			instead += " A capture may not have kept them: take it again on the host with `accel-doctor snapshot node.tar.gz`."
		}
		why := report.NotOffered(reason, "the PCIe link attributes", instead)
		for _, a := range linkAttrs {
			if ae := d.AttrErr(a); ae != nil {
				reason = "link attributes not usable: " + a + " " + ae.Problem.String() + ": " + ae.Error()
				why = e.errWhy(reason, ae, ae.Path, "")
			}
		}
		out.NotRun(CodePCILinkUnknown, bdf, "PCIe link state not available", why, ev...)
		return
	}
	widthKnown := l.CurrentWidth != nil && l.MaxWidth != nil && *l.CurrentWidth > 0 && *l.MaxWidth > 0
	speedKnown := l.CurrentSpeed != nil && l.MaxSpeed != nil && l.CurrentSpeed.Known() && l.MaxSpeed.Known()
	if !widthKnown && !speedKnown {
		out.NotRun(CodePCILinkUnknown, bdf, "PCIe link state not available",
			report.Explain("the kernel reports the link as unknown or down (speed \"Unknown\" or width 0), or its values did not parse",
				"Read the link by hand as root: `lspci -vv -s "+bdf+"` (LnkSta); a link that is down shows in the kernel log (`dmesg | grep "+bdf+"`)."), ev...)
		return
	}
	c, portEv := ceiling(inv, d, widthKnown, speedKnown)
	if portEv != nil {
		ev = append(ev, *portEv)
	}
	var cur []string
	if speedKnown {
		cur = append(cur, l.CurrentSpeed.String())
	}
	if widthKnown {
		cur = append(cur, fmt.Sprintf("x%d", *l.CurrentWidth))
	}
	maxSpeed := (pci.LinkSpeed{MTps: c.mtps}).String()
	switch {
	case widthKnown && *l.CurrentWidth < c.width:
		s := fmt.Sprintf("link trained at x%d of x%d", *l.CurrentWidth, c.width)
		if speedKnown && l.CurrentSpeed.MTps < c.mtps {
			s += fmt.Sprintf(", %s of %s", l.CurrentSpeed, maxSpeed)
		}
		out.Add(CodePCILinkDegraded, report.Warn, bdf, s, ev...)
	case speedKnown && l.CurrentSpeed.MTps < c.mtps:
		out.Add(CodePCILinkSpeedReduced, report.Warn, bdf,
			fmt.Sprintf("link at %s of %s (full width); devices lower the speed when idle: re-check under load",
				l.CurrentSpeed, maxSpeed), ev...)
	case !widthKnown || !speedKnown:
		out.NotRun(CodePCILinkUnknown, bdf, "PCIe link only partly known ("+strings.Join(cur, " ")+")",
			report.Explain("the kernel reports the other half of the link as unknown", "Read the link by hand as root: `lspci -vv -s "+bdf+"` (LnkSta) shows both speed and width."), ev...)
	default:
		s := "link at " + strings.Join(cur, " ") + ", its maximum"
		if len(c.limited) > 0 {
			s += " (limited by the upstream port)"
		}
		out.Add(CodePCILinkOK, report.Pass, bdf, s, ev...)
	}
}

// checkPCINUMA: a device without a node matters only where there is more
// than one node. On a single-node host it is PASS (locality cannot be
// wrong there); when the node list cannot be read, NOT_RUN. A device whose
// numa_node the tree lacks is placed by its local CPUs (cpuLocality).
func checkPCINUMA(e *Env, out *Out) {
	if _, err := e.PCI(); err != nil {
		return
	}
	accs := e.Accelerators()
	if len(accs) == 0 {
		return
	}
	nodes, ok, err := e.numaNodes()
	nodesEv := Ev(pci.NodeOnlinePath, "absent")
	switch {
	case err != nil:
		nodesEv = Ev(pci.NodeOnlinePath, err.Error())
	case ok:
		nodesEv = Ev(pci.NodeOnlinePath, fmt.Sprintf("%d online node(s): %v", len(nodes), nodes))
	}
	for _, d := range accs {
		bdf := d.Address.String()
		numaEv := numaEvidence(d)
		switch {
		case err != nil || !ok:
			out.NotRun(CodePCINUMANotRead, bdf, "NUMA locality not checked", e.numaWhy(err), numaEv, nodesEv)
		case len(nodes) <= 1:
			out.Add(CodePCINUMAOK, report.Pass, bdf, "single-NUMA-node host: locality does not matter", numaEv, nodesEv)
		case d.NUMANode == nil:
			judgeCPULocality(e, out, d, len(nodes), numaEv, nodesEv)
		default:
			judgeNUMANode(out, d, nodes, numaEv, nodesEv)
		}
	}
}

// numaWhy is why the host's NUMA nodes are not known: a read error, a
// capture without them, or a kernel without NUMA.
func (e *Env) numaWhy(err error) report.Why {
	if err != nil {
		return e.errWhy("the host's NUMA nodes could not be read: "+err.Error(), err, pci.NodeOnlinePath, "")
	}
	reason := pci.NodeOnlinePath + " is absent: a kernel without CONFIG_NUMA, or a capture without it"
	if _, gap := captureGap(e.Root, pci.NodeOnlinePath); gap {
		return e.missing(reason, pci.NodeOnlinePath)
	}
	return report.NotOffered(reason, "NUMA (a kernel built without CONFIG_NUMA)", "Nothing to do: without NUMA every CPU is as near to the device as any other.")
}

// numaNodes is the host's online NUMA nodes, read once.
func (e *Env) numaNodes() ([]int, bool, error) {
	type r struct {
		nodes []int
		ok    bool
	}
	v, err := memo(e, "pci.numa-nodes", func() (r, error) {
		n, ok, err := pci.NUMANodes(e.Root)
		return r{n, ok}, err
	})
	return v.nodes, v.ok, err
}

func judgeNUMANode(out *Out, d *pci.Device, nodes []int, numaEv, nodesEv report.Evidence) {
	bdf := d.Address.String()
	switch {
	case *d.NUMANode < 0:
		out.Add(CodePCINUMAUnknown, report.Warn, bdf,
			fmt.Sprintf("no NUMA node (numa_node -1) on a host with %d nodes", len(nodes)), numaEv, nodesEv)
	case !slices.Contains(nodes, *d.NUMANode):
		out.Add(CodePCINUMAUnknown, report.Warn, bdf,
			fmt.Sprintf("NUMA node %d is not among the online nodes %v", *d.NUMANode, nodes), numaEv, nodesEv)
	default:
		ev := []report.Evidence{numaEv, nodesEv}
		if d.LocalCPUs != "" {
			ev = append(ev, Ev(d.AttrPath("local_cpulist"), d.LocalCPUs))
		}
		out.Add(CodePCINUMAOK, report.Pass, bdf, fmt.Sprintf("on NUMA node %d of %d", *d.NUMANode, len(nodes)), ev...)
	}
}

func judgeCPULocality(e *Env, out *Out, d *pci.Device, nnodes int, numaEv, nodesEv report.Evidence) {
	bdf := d.Address.String()
	loc := e.cpuLocality(d)
	ev := append([]report.Evidence{numaEv, nodesEv}, loc.ev...)
	if !loc.known {
		reason := "numa_node is " + d.AttrState("numa_node") + "; " + loc.why
		why := report.Explain(reason, "Read the device's NUMA node on the host by hand: `cat "+d.AttrPath("numa_node")+" "+d.AttrPath("local_cpulist")+"`; `lspci -vv -s "+bdf+"` names it too.")
		if ae := d.AttrErr("numa_node"); ae != nil {
			why = e.errWhy(reason, ae, ae.Path, "")
		}
		out.NotRun(CodePCINUMANotRead, bdf, "NUMA node of the device not read", why, ev...)
		return
	}
	out.Add(CodePCINUMAOK, report.Pass, bdf,
		fmt.Sprintf("on NUMA node %d, one of %d online nodes, by its local CPUs (numa_node %s)", loc.node, nnodes, d.AttrState("numa_node")), ev...)
}

// locality is the NUMA node a device's local CPUs place it on.
type locality struct {
	node  int
	known bool
	why   string // when !known
	ev    []report.Evidence
}

// cpuLocality places a device whose numa_node is not known by its local
// CPUs: the kernel prints cpumask_of_node(dev_to_node(dev)) as local_cpus
// (drivers/pci/pci-sysfs.c), so the one node whose CPUs hold them all is
// the device's node. CPUs spread over several nodes (the kernel's answer
// for a device without a node) place it nowhere. Only a device whose
// numa_node is unknown is placed this way: numa_node, when read, is the
// kernel's own answer.
func (e *Env) cpuLocality(d *pci.Device) locality {
	l, _ := memo(e, "pci.cpu-locality:"+d.Address.String(), func() (locality, error) {
		return cpuLocality(e, d), nil
	})
	return l
}

func cpuLocality(e *Env, d *pci.Device) locality {
	cpus, ok, err := d.LocalCPUList()
	attr, raw := "local_cpulist", d.LocalCPUs
	if d.LocalCPUs == "" {
		attr, raw = "local_cpus", d.LocalCPUMask
	}
	switch {
	case err != nil:
		return locality{why: "its local CPUs do not parse: " + err.Error()}
	case !ok || len(cpus) == 0:
		return locality{why: "no local_cpulist or local_cpus to place it by"}
	}
	ev := []report.Evidence{Ev(d.AttrPath(attr), fmt.Sprintf("%s (CPUs %s)", raw, listString(cpus)))}
	nodes, _, _ := e.numaNodes()
	var holders []int
	for _, n := range nodes {
		ncpus, err := pci.NodeCPUs(e.Root, n)
		if err == nil && len(ncpus) > 0 && containsAll(ncpus, cpus) {
			holders = append(holders, n)
			ev = append(ev, Ev(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", n), listString(ncpus)))
		}
	}
	if len(holders) != 1 {
		return locality{why: fmt.Sprintf("its local CPUs %s are not those of exactly one node (%d hold them all)", listString(cpus), len(holders)), ev: ev}
	}
	return locality{node: holders[0], known: true, ev: ev}
}

func containsAll(set, sub []int) bool {
	have := make(map[int]bool, len(set))
	for _, c := range set {
		have[c] = true
	}
	for _, c := range sub {
		if !have[c] {
			return false
		}
	}
	return true
}

// listString prints a sorted CPU list in the kernel's list format.
func listString(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, fmt.Sprint(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// reportNUMA is the device's node for the report: numa_node when it names
// one, else the node its local CPUs place it on, on a multi-node host.
func (e *Env) reportNUMA(d *pci.Device) *int {
	if d.NUMANode != nil {
		if *d.NUMANode < 0 {
			return nil // the kernel's "no node": the report omits it
		}
		n := *d.NUMANode
		return &n
	}
	if nodes, ok, err := e.numaNodes(); err != nil || !ok || len(nodes) <= 1 {
		return nil
	}
	if l := e.cpuLocality(d); l.known {
		return &l.node
	}
	return nil
}
