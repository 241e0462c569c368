// Package pci enumerates the PCI functions of a host and classifies the
// accelerators among them.
//
// It reads, through a *hostfs.Root and nothing else:
//   - /sys/bus/pci/devices/* : one symlink per function into
//     /sys/devices/pci<domain>:<bus>/..., whose path gives the chain of
//     upstream bridges (drivers/pci/probe.c names each device by its BDF);
//   - the function's sysfs attributes (drivers/pci/pci-sysfs.c): vendor,
//     device, subsystem_vendor, subsystem_device, class, revision, modalias,
//     numa_node, local_cpulist (local_cpus when it is absent),
//     current/max_link_speed, current/max_link_width,
//     sriov_totalvfs, sriov_numvfs, and the links driver, iommu_group,
//     physfn and virtfnN (drivers/pci/iov.c); on request config,
//     resource and the aer_dev_* / aer_rootport_total_err_* statistics
//     (drivers/pci/pcie/aer.c);
//   - /sys/devices/system/node/online for the host's NUMA nodes, and
//     node<N>/cpulist for their CPUs;
//   - the host's pci.ids (/usr/share/misc/pci.ids, /usr/share/hwdata/pci.ids
//     or /usr/share/pci.ids) for vendor, device and class names.
//
// ScanFields reads only some of them (Fields): topo shows no subsystem
// ids, revision or VF counts and does not read them. A function's
// attributes are read by name in its directory, held open as a
// hostfs.Dir (one path component to look up per attribute instead of the
// whole path), and a sysfs text attribute in one read (Dir.ReadAttr).
// Functions are read by a few goroutines: sysfs reads are syscall-bound,
// and on 2 cores the scan of hwloc's 8-VE capture (28 functions) takes
// half the wall time of reading them one by one (measured with
// BenchmarkTopoVECapture/Scan, workers 8 against 1).
//
// Attributes that could not be used are recorded per device as an
// *AttrError that says whether the attribute is absent (a mandatory one),
// unreadable (permission, size bound, a link loop, a link copied as a
// directory) or malformed, with its path: Device.AttrErr and AttrState.
// A driver link counts only when it leads to a driver in
// /sys/bus/pci/drivers. A function whose class is unknown is classified by
// its driver or an accelerator-only vendor, so that it does not drop out
// of the layers that judge accelerators.
//
// pci.ids is read by this package's own parser rather than by
// github.com/jaypipes/pcidb, which parses the same file, for three reasons
// measured on Debian 12's pci.ids (2023.04.10, 1.36 MB), loading it and
// naming the 17 vendor:device pairs of an 8-GPU server, with `go test
// -bench LoadAndLookup -benchmem -count 5` in a throwaway module outside
// this repository (pcidb is not a dependency; the module replaces this one
// and imports internal/pci beside pcidb v1.1.1), on a 2-core VM:
//
//	ours, keeping only those pairs (what Scan does)   0.70 ms    29 KB      594 allocs
//	ours, the whole file                              7.0 ms   4.3 MB   68,284 allocs
//	pcidb.New(WithPath), the whole file              20.5 ms  12.1 MB  189,177 allocs
//
// Both name every pair the same. First, pcidb has no way to keep only the
// ids a host has, so a check pays for the whole database (30x the time,
// 400x the memory of a filtered parse); second, pcidb indexes by strings
// built per entry where this parser keys integers and copies only the
// names it keeps; third, pcidb slices lines at fixed offsets and panics on
// a short line ("10\n", "\tab\n": slice bounds out of range), while the
// pci.ids under a --root tree or a snapshot is untrusted input: here a
// malformed line is skipped and reported and the rest kept (FuzzParseIDs).
//
// Scan does not read config space; ReadConfig does, for the functions a
// caller asks about (config.go, caps.go, bars.go): the sysfs config
// attribute, parsed by ParseConfig into the header, the capability list
// from 0x34 and the extended list from 0x100 (each walk bounded: a loop,
// a pointer into the header and a short file end it with a
// *ConfigError), and decoded by Express, ACS, SR-IOV, ARI, AER and
// ResizableBARs; BARs are joined with the `resource` attribute (Regions),
// and the link, SR-IOV and AER registers are checked against the sysfs
// attributes derived from them (CheckLink, Check, ReadAERStats).
// Without CAP_SYS_ADMIN the kernel returns the first 64 bytes of config
// (drivers/pci/pci-sysfs.c, pci_read_config): what lies beyond is then
// ErrConfigUnprivileged, never absent; a 256-byte config has no extended
// space, for the kernel either; absent, unreadable, truncated and
// malformed are the Problems of AttrError and ConfigError. ConfigSpec
// encodes a config space from a readable description, for fixtures.
//
// Parsers (ParseAddress, ParseLinkSpeed, ParseIDs, ParseList, ParseMask,
// ParseModalias, ParseConfig, ParseResources, ParseAERStats) take bytes,
// strings or readers and touch nothing. Scan returns facts and per-device
// errors; it never judges: the findings are made in
// internal/diagnose/layer_pci.go.
package pci
