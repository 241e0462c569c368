package iommu

// ProposedCode is a finding code this package's facts support, for the
// layer-7 catalog that internal/diagnose keeps (Code, Title, Explain,
// Remediation there). Status is the outcome the code is meant for; the
// lead decides. Remediations name only commands that exist: modprobe,
// driverctl, grubby, update-grub, grub2-mkconfig, lspci, ls, prlimit,
// setcap, systemctl, chown, chmod, fuser, udevadm, docker, and writes to
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
	Status: "FAIL when passthrough is asked (the iommu command, a process given with --pid, or the host's VFIO configuration: a device bound to or meant for a VFIO driver, vfio-pci ids on the command line or in modprobe.d, a softdep on vfio-pci), WARN otherwise; the VFIO findings it explains follow from it",
	Title:  "the firmware describes an IOMMU but DMA remapping is off",
	Explain: `The ACPI tables list an IOMMU (DMAR for Intel VT-d, IVRS for AMD-Vi, IORT
with SMMU nodes for Arm, VIOT for virtio-iommu) but /sys/kernel/iommu_groups is
empty: no IOMMU driver translates DMA, so VFIO has no group to open and device
assignment to a VM, Kata or DPDK fails. The evidence says why as far as the host
shows it: intel_iommu=off, amd_iommu=off or iommu=off on the command line; an Intel
kernel whose default is off (CONFIG_INTEL_IOMMU_DEFAULT_ON not set) without
intel_iommu=on; a kernel built without the driver; or a driver that failed (the
kernel log's DMAR or AMD-Vi lines). intel_iommu=sm_on only selects scalable mode:
it does not turn the IOMMU on. A device meant for VFIO cannot be bound to vfio-pci
until it is on (vfio-pci's probe finds no IOMMU group): those findings are listed
under this one, as its consequences.`,
	Remediation: "Enable VT-d / AMD-Vi / SMMU in the firmware setup; on Intel add intel_iommu=on (and remove any iommu=off, intel_iommu=off or amd_iommu=off): " +
		"`grubby --update-kernel=ALL --args=intel_iommu=on` (Fedora, RHEL), or add it to GRUB_CMDLINE_LINUX in /etc/default/grub and run `update-grub` (Debian, Ubuntu) or `grub2-mkconfig -o /boot/grub2/grub.cfg`; reboot and check `ls /sys/kernel/iommu_groups`.",
}, {
	Code:   "IOMMU_ABSENT",
	Status: "WARN",
	Title:  "no IOMMU described: the firmware lists none and the kernel created no group",
	Explain: `No DMAR, IVRS, IORT (with an SMMU) or VIOT table, no IOMMU unit in
/sys/class/iommu and no IOMMU group. Whether the platform has an IOMMU is not known:
firmware whose VT-d or AMD-Vi is disabled in its setup hands the kernel no table, so
the machine may have one, switched off (virt-host-validate warns likewise, "Unknown
if this platform has IOMMU support"). What is known is that nothing on this host
can be assigned with VFIO now (except with the unsafe no-IOMMU mode, which gives no
isolation): when the host asks for passthrough (a device bound to or meant for vfio-pci,
vfio-pci ids on the command line or in modprobe.d, a VMM given with iommu --pid) this is a
FAIL, and the VFIO findings are its consequences; the iommu command alone, on a host that
asks for none, leaves it a WARN. A virtual machine has an IOMMU only if its hypervisor emulates one.
When the kernel configuration is readable, the evidence also says whether this
kernel has an IOMMU driver at all.`,
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
(VFIO_GROUP_SET_CONTAINER gives EPERM: iommu_group_claim_dma_owner finds the
group's DMA already owned; QEMU reports "group N is not viable"). The evidence
names the member,
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
}, {
	Code:   "VFIO_MODULE_NOT_LOADED",
	Status: "FAIL when a device is meant for VFIO (bound, driver_override vfio-pci, vfio-pci.ids or --device), no finding otherwise; NOT_RUN when /sys/module is not captured",
	Title:  "the VFIO modules are neither loaded nor built in",
	Explain: `Device assignment through vfio-pci needs vfio (the groups, /dev/vfio/N, and the
container /dev/vfio/vfio), vfio_iommu_type1 (the container's IOMMU backend, which vfio
pulls in by its softdep; without it VFIO_SET_IOMMU fails with ENODEV), vfio_pci_core
and vfio_pci (the driver). A loadable module has /sys/module/NAME/initstate; a
built-in one has none, and is listed in /lib/modules/RELEASE/modules.builtin. Without
the driver, a device whose driver_override says vfio-pci stays unbound, and no
/dev/vfio/N appears.`,
	Remediation: "Load it: `modprobe vfio-pci` (it loads vfio, vfio_iommu_type1 and vfio_pci_core). To load it at every boot: `echo vfio-pci > /etc/modules-load.d/vfio-pci.conf`.",
}, {
	Code:   "VFIO_DEVICE_NOT_BOUND",
	Status: "FAIL",
	Title:  "a device meant for passthrough is not bound to vfio-pci",
	Explain: `Something marks the device for VFIO (its driver_override names vfio-pci, vfio-pci's
ids name its vendor:device, or it was asked about) but it is bound to another driver or
to none. driver_override takes effect at the next probe and does not unbind the
current driver; vfio-pci's ids only take devices that have no driver yet, so a host
driver that loads first (nouveau, nvidia, snd_hda_intel, mlx5_core) keeps the device;
without an IOMMU group vfio-pci's probe fails with EINVAL, so with the IOMMU off or
absent this finding follows from IOMMU_OFF or IOMMU_ABSENT (listed under it); with
vfio-pci not loaded, a device that waits with no driver follows from
VFIO_MODULE_NOT_LOADED. The ids vfio-pci was given,
at load or through /sys/bus/pci/drivers/vfio-pci/new_id, cannot be read back (new_id
is write-only and the ids parameter has no sysfs file): the evidence gives where ids
come from (vfio-pci.ids= on /proc/cmdline, options vfio-pci ids= in modprobe.d) and
the device's driver and driver_override.`,
	Remediation: "Bind it now (as root): `echo vfio-pci > /sys/bus/pci/devices/BDF/driver_override`, `echo BDF > /sys/bus/pci/devices/BDF/driver/unbind`, `echo BDF > /sys/bus/pci/drivers_probe`, or `driverctl set-override BDF vfio-pci`, which also keeps it across reboots. " +
		"At boot: add vfio-pci.ids=VVVV:DDDD to the kernel command line (`grubby --update-kernel=ALL --args=vfio-pci.ids=VVVV:DDDD`, or GRUB_CMDLINE_LINUX and `update-grub`) and, for a modular host driver, a \"softdep DRIVER pre: vfio-pci\" line in /etc/modprobe.d/vfio.conf.",
}, {
	Code:   "VFIO_CONTAINER_NODE",
	Status: "FAIL when /dev/vfio/vfio is absent or not the character device 10:196 while VFIO is in use; WARN for a mode other than 0666",
	Title:  "/dev/vfio/vfio is missing, not the VFIO container device, or not 0666",
	Explain: `/dev/vfio/vfio is the VFIO container, the misc device 10:196 (VFIO_MINOR), which the
kernel creates 0666 (drivers/vfio/container.c; iommufd's compatibility device,
CONFIG_IOMMUFD_VFIO_CONTAINER, too): it grants nothing by itself, the group node
does, so an unprivileged QEMU or DPDK must be able to open it. A mode tightened by a
udev rule or an image makes open(2) fail with EACCES for the VM's user; a missing
node (vfio not loaded, or a container /dev without it) fails with ENOENT.`,
	Remediation: "Load vfio (`modprobe vfio-pci`); check the node with `ls -l /dev/vfio/vfio`; restore the mode with `chmod 0666 /dev/vfio/vfio` and remove the udev rule that changed it (`udevadm test /sys/class/misc/vfio` shows which rule applies). In a container, pass /dev/vfio/vfio along with the group node.",
}, {
	Code:   "VFIO_GROUP_NODE",
	Status: "FAIL when a group VFIO created has no /dev/vfio/N or one with another device number; WARN for an owner or mode the process using it cannot open",
	Title:  "a VFIO group's /dev/vfio/N is missing, wrong, or not the VM's user's",
	Explain: `When a VFIO driver binds a member of IOMMU group N, VFIO creates the group
(/sys/class/vfio/N with its dev) and devtmpfs the node /dev/vfio/N, 0600 root
(drivers/vfio/group.c). Management layers hand it to the VM's user: libvirt chowns it
to qemu, KubeVirt's virt-handler to the launcher's user, a device plugin injects it
into the pod. A node that is missing gives ENOENT, one with another major:minor (a
stale copy in a container's /dev) opens another group or ENXIO, and one whose owner
and mode exclude the process gives EACCES. Whether a given process may open it is
the runtime layer's mode check of that process's /dev (its credentials, its user
namespace).`,
	Remediation: "Check `ls -l /dev/vfio/` against /sys/class/vfio/N/dev; recreate a missing node by rebinding the device (`echo BDF > /sys/bus/pci/drivers/vfio-pci/unbind`, then `echo BDF > /sys/bus/pci/drivers/vfio-pci/bind`) or with `udevadm trigger --subsystem-match=vfio`; give it to the VM's user with `chown USER /dev/vfio/N` (libvirt and KubeVirt do this themselves when they own the VM).",
}, {
	Code:   "VFIO_MEMLOCK_LOW",
	Status: "FAIL when the process lacks CAP_IPC_LOCK in the initial user namespace and its soft RLIMIT_MEMLOCK is below the least any guest of it pins (whatever the guest's size) or below the guest memory; WARN when it covers the guest memory but not guest memory plus the BARs; PASS when unlimited, covering, or CAP_IPC_LOCK exempts it; NOT_RUN when the limit or the capability could not be read, or the guest's size is needed and not known",
	Title:  "the process's locked-memory limit is below what VFIO pins for it",
	Explain: `Mapping memory for a device's DMA pins it. VFIO type1 charges every pinned RAM page
to the process's locked memory and past the soft RLIMIT_MEMLOCK fails
VFIO_IOMMU_MAP_DMA with ENOMEM (drivers/vfio/vfio_iommu_type1.c, vfio_pin_pages_remote);
the kernel logs "vfio_pin_pages_remote: RLIMIT_MEMLOCK (N) exceeded" and QEMU
"VFIO_MAP_DMA failed: Cannot allocate memory". iommufd's IOMMU_IOAS_MAP fails the same
way, charging the user's locked memory, shared by all of that user's processes
(drivers/iommu/iommufd/pages.c). A QEMU guest's whole memory (-m) is mapped at start.
The assigned devices' BARs are mapped too but not charged (MMIO, not RAM); libvirt
budgets 1 GiB over the guest memory for them. Some limits are short whatever the
guest: the kernel counts the limit in pages, so one under a page pins nothing, and a
QEMU running x86 guests pins at least 72 KiB (8 KiB of RAM, the least QEMU accepts,
and 64 KiB of firmware mapped as RAM). Below that the guest's size is not needed.
The evidence gives the limit, the guest memory, each device's memory BARs and the
sums.`,
	Remediation: "Raise the limit of the process: now, `prlimit --pid PID --memlock=BYTES:BYTES` (as root); for a systemd service, LimitMEMLOCK= in a drop-in (`systemctl edit UNIT`); for a Docker container, `docker run --ulimit memlock=-1:-1`; libvirt sets it for a guest with host devices (guest memory + 1 GiB) unless the domain's memtune hard_limit is lower. Or give the process CAP_IPC_LOCK in the initial user namespace.",
}, {
	Code:   "VFIO_NO_IPC_LOCK",
	Status: "WARN when the process has CAP_IPC_LOCK only in a user namespace of its own, or lacks it while its limit is short (with VFIO_MEMLOCK_LOW); no finding otherwise",
	Title:  "the process has no CAP_IPC_LOCK that VFIO honours",
	Explain: `VFIO type1 records at each VFIO_IOMMU_MAP_DMA whether the process has CAP_IPC_LOCK
(vfio_dma_do_map: dma->lock_cap = capable(CAP_IPC_LOCK)) and then skips the
locked-memory limit; iommufd does the same (iopt_alloc_pages). capable() asks the
initial user namespace: a process in a user namespace of its own (a rootless or
user-namespaced container) may show CAP_IPC_LOCK in CapEff and still be held to its
RLIMIT_MEMLOCK. The evidence gives CapEff and the process's uid_map.`,
	Remediation: "Raise RLIMIT_MEMLOCK instead (`prlimit --pid PID --memlock=BYTES:BYTES`), or run the process in the initial user namespace with CAP_IPC_LOCK (added to a container without a user namespace of its own; `setcap cap_ipc_lock+ep BINARY` for a program started by hand).",
}, {
	Code:   "VFIO_GROUP_BUSY",
	Status: "FAIL when --pid names a process that does not hold the group while another does; evidence otherwise (the group is in use)",
	Title:  "another process holds the VFIO group open",
	Explain: `VFIO allows one open file per group: a second open(2) of /dev/vfio/N fails with
EBUSY while another file has it open, or while one of its devices is open through its
cdev /dev/vfio/devices/vfioM, and the reverse (drivers/vfio/group.c,
vfio_group_fops_open and vfio_device_block_group). VFIO_GROUP_SET_CONTAINER fails
with EPERM when the group's DMA is already claimed (iommu_group_claim_dma_owner,
drivers/iommu/iommu.c: a host driver on a member, or another user such as an iommufd
bind of one of its devices), and with EINVAL when the same file already set a
container. The evidence names the holders: their PID, command and fd, read from
/proc/PID/fd links; processes whose fds could not be read (another user's, without
root) are counted, and a holder among them cannot be named.`,
	Remediation: "See who holds it: `fuser -v /dev/vfio/N` or `ls -l /proc/PID/fd`; stop that process (a previous QEMU, a leftover virt-launcher, a DPDK application) or give the group to it instead.",
}}
