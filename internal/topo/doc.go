// Package topo builds a host's PCIe tree and the device-to-device affinity
// matrix from the PCI inventory, for any vendor.
//
// It reads, through internal/pci and a *hostfs.Root and nothing else:
//   - the inventory of pci.ScanFields (Fields: what the tree shows, not
//     the whole inventory): every function's resolved sysfs path
//     (/sys/devices/pci<domain>:<bus>/<BDF>/.../<BDF>, which the kernel
//     nests as the hardware does: drivers/pci/probe.c names each host
//     bridge "pci%04x:%02x" in pci_register_host_bridge and each function
//     "%04x:%02x:%02x.%d" in pci_setup_device, and makes a function the
//     child of the bridge above it), class, names, driver, numa_node,
//     local CPUs, iommu_group and link;
//   - the config space of each bridge (pci.ReadConfig), for the PCI
//     Express Device/Port Type that tells a root port, a switch's upstream
//     and downstream ports and a PCIe-to-PCI bridge apart;
//   - /sys/devices/system/node/online and node<N>/cpulist for the NUMA
//     nodes (pci.NUMANodes, pci.NodeCPUs);
//   - the net/ and infiniband/ entries of each network function, for the
//     names users know NICs by (mlx5_0, ens1f0).
//
// Build arranges the functions under their root complexes (the host
// bridges, pciDDDD:BB), and tells each bridge's role: from the port type
// in config space when it is readable, else from its place in the chain
// (roles.go): without CAP_SYS_ADMIN only the first 64 bytes of config are
// readable (drivers/pci/pci-sysfs.c, pci_read_config) and the capability
// list is beyond them, so a reader that is not root, and most captures,
// get the chain's answer, which each node records (Node.RoleFrom). A
// switch is its upstream port and the downstream ports below it. NUMA
// nodes, IOMMU groups, accelerators (pci.IsAccelerator) and NICs (base
// class 0x02: Ethernet 0x0200, InfiniBand 0x0207, ...) are marked, and
// the functions a check failed or warned on (Options.Failing, Warning).
//
// Matrix computes, for every accelerator and NIC, the class of the path to
// every other one in nvidia-smi topo -m's vocabulary (affinity.go, where
// each class is defined), from the tree alone: no vendor library is
// loaded. NVLink (nvidia-smi's NV#) is not in sysfs: the NVIDIA driver
// exposes it through NVML only, so the matrix never shows it and says so.
//
// The package states facts; it never judges. Rendering is internal/report's.
package topo
