// Package iommu reads whether a host's IOMMU is present and on, its
// groups, and whether the groups that hold accelerators can be handed to
// VFIO, with the ACS picture that explains why a group is shared.
//
// It reads, through a *hostfs.Root and nothing else:
//   - /sys/firmware/acpi/tables/{DMAR,IVRS,IORT,VIOT}: presence from the
//     listing (anyone), header and a census of the remapping structures
//     from the table (root only: the files are 0400);
//   - /sys/class/iommu/*: the IOMMU units a driver registered, and the
//     devices each translates;
//   - /sys/kernel/iommu_groups/N/{type,devices/*}: the groups, each
//     group's default domain type (DMA, DMA-FQ, identity, blocked) and
//     members, and a member's driver link when it is not a PCI function
//     pci.Scan read;
//   - /proc/cmdline: intel_iommu=, amd_iommu=, iommu=,
//     iommu.passthrough=, iommu.strict=, vfio-pci.ids=,
//     pcie_acs_override=, read as the kernel's handlers read them
//     (Documentation/admin-guide/kernel-parameters.txt);
//   - /proc/sys/kernel/osrelease and /boot/config-RELEASE, else
//     /proc/config.gz: the IOMMU options of the kernel's build
//     configuration (the defaults the command line does not override),
//     read only to explain an IOMMU that is off (and always while a
//     snapshot records);
//   - through internal/pci: the functions' sysfs attributes, driver links
//     and config space (ACS, Express port type, multifunction bit);
//     /sys/bus/pci/drivers/NAME/module and /sys/module/NAME/initstate
//     (is a blocking driver a module vfio-pci can be loaded before).
//
// Read returns a State: the facts and an explanation of whether DMA
// remapping is on (groups exist) and, when it is not, why as far as the
// host shows it: `intel_iommu=sm_on` selects scalable mode and does not
// turn the IOMMU on; `iommu=pt` keeps it on with identity default
// domains; a DMAR table with no groups means the IOMMU is off, turned off
// on the command line, or off by the kernel's default
// (CONFIG_INTEL_IOMMU_DEFAULT_ON), which only a readable kernel
// configuration tells. Viabilities judges each group that holds an
// accelerator (viability.go) and explains its sharing (isolation.go).
//
// VFIO readiness (vfio.go) reads /sys/module/{vfio,vfio_iommu_type1,
// vfio_pci_core,vfio_pci,iommufd} (initstate, parameters) and
// /lib/modules/RELEASE/modules.builtin, /sys/bus/pci/drivers/vfio-pci,
// each function's driver_override and vfio-dev/vfioN, vfio-pci's ids from
// /proc/cmdline and the modprobe.d directories (the ids vfio-pci holds
// cannot be read back: new_id is write-only), /sys/class/vfio/N and
// /sys/class/misc/{vfio,iommu}, and the nodes /dev/vfio/vfio,
// /dev/vfio/N, /dev/vfio/devices/vfioN and /dev/iommu (lstat only; a
// tree's device manifest stands in for them). FindHolders reads the
// /proc/*/fd links (readlink only, bounded; fd tables it may not read are
// counted, not guessed) to name the processes holding a group open.
// ReadMemlock (memlock.go) reads a process's /proc/PID/{status,limits,
// uid_map} with internal/runtime's parsers, its command line for QEMU's
// -m (live only: a snapshot never holds one), and the `resource` files of
// the devices it holds, and states its locked-memory limit against what
// VFIO pins for it.
//
// Parsers (ParseACPIHeader, ParseDMAR, ParseIVRS, ParseIORT, ParseVIOT,
// ParseCmdline, ParseKernelConfig, ParsePCIIDs, ParseModprobeConf,
// ParseModulesBuiltin, ParseProcCmdline, ParseQEMUMemory, ParseQEMUSize)
// take bytes or strings and touch nothing. The package states facts with their evidence; it never
// judges: the findings (codes.go proposes their catalog) are made in
// internal/diagnose.
package iommu
