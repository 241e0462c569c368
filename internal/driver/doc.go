// Package driver reads what the kernel and the host's file system say about
// the drivers of accelerators: kernel modules under /sys/module (loaded or
// built in, version, initstate), the PCI driver's module link under
// /sys/bus/pci/drivers, the NVIDIA kernel module's own procfs files
// (/proc/driver/nvidia/version and /proc/driver/nvidia/gpus/<BDF>/information),
// and the user-space libraries (libcuda, libnvidia-ml) that must match the
// kernel module, found through the root's /etc/ld.so.cache or by scanning
// the usual library directories.
//
// Every reader takes a *hostfs.Root; parsers take bytes and touch nothing.
// The bound driver of a PCI function is the pci package's business (the
// sysfs "driver" link); this package takes the driver name as a plain input.
// Nothing here judges: internal/diagnose decides what a fact means.
package driver
