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
//     configuration (the defaults the command line does not override);
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
// Parsers (ParseACPIHeader, ParseDMAR, ParseIVRS, ParseIORT, ParseVIOT,
// ParseCmdline, ParseKernelConfig) take bytes or strings and touch
// nothing. The package states facts with their evidence; it never
// judges: the findings (codes.go proposes their catalog) are made in
// internal/diagnose.
package iommu
