// Package pci enumerates the PCI functions of a host and classifies the
// accelerators among them.
//
// It reads, through a *hostfs.Root and nothing else:
//   - /sys/bus/pci/devices/* : one symlink per function into
//     /sys/devices/pci<domain>:<bus>/..., whose path gives the chain of
//     upstream bridges (drivers/pci/probe.c names each device by its BDF);
//   - the function's sysfs attributes (drivers/pci/pci-sysfs.c): vendor,
//     device, subsystem_vendor, subsystem_device, class, revision, modalias,
//     numa_node, local_cpulist, current/max_link_speed, current/max_link_width,
//     sriov_totalvfs, sriov_numvfs, and the links driver, iommu_group,
//     physfn and virtfnN (drivers/pci/iov.c);
//   - /sys/devices/system/node/online for the host's NUMA nodes;
//   - the host's pci.ids (/usr/share/misc/pci.ids, /usr/share/hwdata/pci.ids
//     or /usr/share/pci.ids) for vendor, device and class names.
//
// Config space is not read here. Parsers (ParseAddress, ParseLinkSpeed,
// ParseIDs, ParseList, ParseModalias) take strings or readers and touch
// nothing. Scan returns facts and per-device errors; it never judges: the
// findings are made in internal/diagnose/layer_pci.go.
package pci
