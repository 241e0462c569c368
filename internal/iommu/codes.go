package iommu

// ProposedCode is a finding code this package's facts support, for the
// layer-7 catalog that internal/diagnose keeps (Code, Title, Explain,
// Remediation there). Status is the outcome the code is meant for; the
// lead decides. Remediations name only commands that exist: modprobe,
// driverctl, grubby, update-grub, grub2-mkconfig, lspci, and writes to
// sysfs files the kernel documents.
type ProposedCode struct {
	Code        string
	Status      string // PASS, WARN, FAIL or NOT_RUN
	Title       string
	Explain     string
	Remediation string
}

// Codes are the proposed layer-7 codes, in the order a report shows them.
var Codes = []ProposedCode{{
	Code:   "IOMMU_OFF",
	Status: "FAIL when a device is bound to a VFIO driver, WARN otherwise",
	Title:  "the firmware describes an IOMMU but DMA remapping is off",
	Explain: `The ACPI tables list an IOMMU (DMAR for Intel VT-d, IVRS for AMD-Vi, IORT
with SMMU nodes for Arm, VIOT for virtio-iommu) but /sys/kernel/iommu_groups is
empty: no IOMMU driver translates DMA, so VFIO has no group to open and device
assignment to a VM, Kata or DPDK fails. The evidence says why as far as the host
shows it: intel_iommu=off, amd_iommu=off or iommu=off on the command line; an Intel
kernel whose default is off (CONFIG_INTEL_IOMMU_DEFAULT_ON not set) without
intel_iommu=on; a kernel built without the driver; or a driver that failed (the
kernel log's DMAR or AMD-Vi lines). intel_iommu=sm_on only selects scalable mode:
it does not turn the IOMMU on.`,
	Remediation: "Enable VT-d / AMD-Vi / SMMU in the firmware setup; on Intel add intel_iommu=on (and remove any iommu=off, intel_iommu=off or amd_iommu=off): " +
		"`grubby --update-kernel=ALL --args=intel_iommu=on` (Fedora, RHEL), or add it to GRUB_CMDLINE_LINUX in /etc/default/grub and run `update-grub` (Debian, Ubuntu) or `grub2-mkconfig -o /boot/grub2/grub.cfg`; reboot and check `ls /sys/kernel/iommu_groups`.",
}, {
	Code:   "IOMMU_ABSENT",
	Status: "PASS when nothing needs passthrough, FAIL when a device is bound to a VFIO driver",
	Title:  "no IOMMU: the firmware describes none and the kernel created no group",
	Explain: `No DMAR, IVRS, IORT (with an SMMU) or VIOT table, and no IOMMU group. Nothing
on this host can be assigned with VFIO (except with the unsafe no-IOMMU mode, which
gives no isolation). A virtual machine has an IOMMU only if its hypervisor emulates
one. When the kernel configuration is readable, the evidence also says whether
this kernel has an IOMMU driver at all.`,
	Remediation: "On a physical machine enable VT-d / AMD-Vi / SMMU in the firmware setup; in a VM ask for an emulated IOMMU (QEMU `-device intel-iommu` or `-device virtio-iommu-pci`). Nothing to do when no device needs passthrough.",
}, {
	Code:    "IOMMU_ON",
	Status:  "PASS",
	Title:   "DMA remapping is on",
	Explain: `The kernel created IOMMU groups. The evidence lists the default domain types: identity (iommu=pt, iommu.passthrough=1 or CONFIG_IOMMU_DEFAULT_PASSTHROUGH) keeps the IOMMU on for VFIO while host drivers' DMA is not translated.`,
}, {
	Code:   "IOMMU_CMDLINE_NO_EFFECT",
	Status: "WARN",
	Title:  "an IOMMU kernel parameter does not do what it seems to",
	Explain: `The command line holds an option the IOMMU drivers do not know (amd_iommu=on is
one: the AMD IOMMU is on by default where an IVRS table exists, and the kernel
logs "Unknown option"), or intel_iommu=sm_on without intel_iommu=on on a kernel
whose Intel IOMMU is off by default: scalable mode is a translation mode, not an
on switch.`,
	Remediation: "Replace the option with the one meant (intel_iommu=on; nothing for AMD): `grubby --update-kernel=ALL --remove-args=amd_iommu=on --args=intel_iommu=on` (Fedora, RHEL), or edit GRUB_CMDLINE_LINUX in /etc/default/grub and run `update-grub`.",
}, {
	Code:   "IOMMU_GROUP_NOT_VIABLE",
	Status: "FAIL when a member is bound to a VFIO driver, WARN otherwise",
	Title:  "a group holding an accelerator has a member bound to a host driver",
	Explain: `VFIO takes a whole IOMMU group or nothing: every member must be bound to a VFIO
driver (vfio-pci or a variant such as mlx5_vfio_pci or nvgrace_gpu_vfio_pci),
pci-stub, or no driver; bridges are fine. Since Linux 5.19 the group cannot be
claimed while any member is bound to a driver that uses the kernel's DMA API
(EBUSY, and QEMU reports "group N is not viable"). The evidence names the member,
typically the GPU's HDMI audio function bound to snd_hda_intel.`,
	Remediation: "Rebind the member to vfio-pci: `modprobe vfio-pci`, then `echo vfio-pci > /sys/bus/pci/devices/BDF/driver_override`, `echo BDF > /sys/bus/pci/devices/BDF/driver/unbind`, `echo BDF > /sys/bus/pci/drivers_probe` (or `driverctl set-override BDF vfio-pci`); " +
		"to keep it across reboots add the vfio-pci.ids=VVVV:DDDD,... parameter the evidence gives and, for a modular driver, a \"softdep DRIVER pre: vfio-pci\" line in /etc/modprobe.d/vfio.conf.",
}, {
	Code:   "IOMMU_GROUP_VIABLE",
	Status: "PASS",
	Title:  "every member of the accelerator's group is on a VFIO driver, pci-stub, no driver, or a bridge",
	Explain: `The group can be handed to VFIO as a whole: every member is bound to vfio-pci
(or a vfio-pci variant driver), to pci-stub, or to no driver, and bridges never
count (drivers/vfio/group.c, vfio_group_viable). Opening /dev/vfio/N and
attaching it to a container or an iommufd will not fail for the group's sake;
what is left is the process's side (the node's mode and owner, RLIMIT_MEMLOCK).`,
}, {
	Code:   "IOMMU_GROUP_SHARED",
	Status: "WARN",
	Title:  "the accelerator shares its IOMMU group with other devices",
	Explain: `All of a group goes to the same VM or container. The kernel keeps a device in a
group of its own only when every port between it and the root complex has ACS
Source Validation, P2P Request Redirect, P2P Completion Redirect and Upstream
Forwarding on (REQ_ACS_FLAGS, drivers/iommu/iommu.c), and a multifunction device
only when its functions have them too. The evidence names the first port (or the
device itself) that lacks them, read from its config space (ACS extended
capability 0x000D: capability register at +4, control at +6). Device-specific ACS
quirks and DMA aliases are not modelled: the group in sysfs is the kernel's answer.`,
	Remediation: "Move the card to a slot whose root port or switch downstream port has ACS (`lspci -vvv -s BDF` shows ACSCap/ACSCtl), enable ACS in the firmware setup where it offers it, or assign the whole group. The pcie_acs_override patch only hides the sharing.",
}, {
	Code:   "IOMMU_ACS_PATH_UNISOLATED",
	Status: "WARN",
	Title:  "the accelerator has a group of its own, but a port on its path does not isolate it",
	Explain: `A port between the device and the root complex lacks the ACS isolation controls,
yet the kernel gave the device a group of its own. The kernel's grouping
(drivers/iommu/iommu.c, pci_device_group) judges a switch downstream port by the path
above it, not by its own ACS, so devices below two downstream ports without ACS get
separate groups although they can reach each other peer to peer (the 2025 patch
series "Fix incorrect iommu_groups with PCIe ACS" changes that). The group's
isolation is weaker than it looks.`,
	Remediation: "Treat the devices below that switch as one group: assign them together, or use a slot with ACS; check with `lspci -vvv -s BDF` (ACSCtl).",
}, {
	Code:   "IOMMU_ACS_NOT_READABLE",
	Status: "NOT_RUN",
	Title:  "ACS could not be read: config space beyond 64 bytes needs CAP_SYS_ADMIN",
	Explain: `Without CAP_SYS_ADMIN the kernel returns only the first 64 bytes of a function's
config space (drivers/pci/pci-sysfs.c, pci_read_config); the ACS capability lies in
extended config space, so whether a port isolates cannot be told. This is not "ACS
absent".`,
	Remediation: "Run as root (or with CAP_SYS_ADMIN; in a pod, privileged).",
}, {
	Code:   "IOMMU_ACS_OVERRIDE",
	Status: "WARN",
	Title:  "pcie_acs_override is on the command line",
	Explain: `pcie_acs_override is not a mainline parameter: kernels carrying the out-of-tree ACS
override patch then build groups as if the ports isolated, which the hardware does
not guarantee. Groups on this host say less than they seem.`,
	Remediation: "Remove it for isolation that holds (`grubby --update-kernel=ALL --remove-args=pcie_acs_override`, or edit /etc/default/grub and run `update-grub`); assign shared groups whole instead.",
}, {
	Code:   "PCI_CONFIG_NOT_READABLE",
	Status: "NOT_RUN",
	Title:  "a function's config space is not readable beyond its header",
	Explain: `The config file gave 64 bytes: the kernel's answer without CAP_SYS_ADMIN, or a
capture made that way. Capabilities (PCI Express, ACS, SR-IOV, AER, Resizable BAR)
cannot be read; they are not absent.`,
	Remediation: "Run as root, or take the snapshot as root.",
}, {
	Code:   "PCI_CONFIG_MALFORMED",
	Status: "WARN",
	Title:  "a function's capability list is broken",
	Explain: `A capability pointer loops, points into the header or below 0x100, or a list runs
past the end of what was read. The kernel stops at the same places, so what lies
beyond is invisible to it too. A capture cut short reads as truncated.`,
	Remediation: "Compare with `lspci -vvv -xxxx -s BDF`; a firmware or device fault is for the vendor.",
}, {
	Code:   "PCI_BAR_RESOURCE_MISMATCH",
	Status: "WARN",
	Title:  "a BAR and the kernel's resource for it disagree",
	Explain: `The BAR's space, width or prefetchable bit in config space differs from the flags
of the same resource in sysfs, which the kernel derives from those bits. Address
differences are shown as evidence only: resource holds CPU addresses, which differ
from bus addresses behind a translating host bridge.`,
	Remediation: "Compare `lspci -vvv -s BDF` (Region lines) with /sys/bus/pci/devices/BDF/resource; a device that changed its BARs after enumeration needs a rescan or a reboot.",
}, {
	Code:   "PCI_AER_ERRORS",
	Status: "WARN",
	Title:  "the device has logged PCIe fatal or non-fatal errors",
	Explain: `The kernel's AER counters (aer_dev_fatal, aer_dev_nonfatal) are not zero: the link
or device reported uncorrectable errors since boot. Correctable errors are shown
as evidence.`,
	Remediation: "Check the kernel log for the AER lines of the device; reseat the card or riser; `lspci -vvv -s BDF` shows the current error status.",
}}
