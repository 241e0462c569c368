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
// The sysfs "driver" link of a PCI function is the pci package's to read;
// FindBinding takes what it read as a plain input and adds every other
// source a host or capture gives (DRIVER= in the device's uevent,
// /proc/driver/nvidia/gpus/<BDF>, a DRM card under the device), saying
// which one decided and, for a capture that kept no driver links, that it
// cannot tell. A module missing from /sys/module is looked up in
// /proc/modules. Line-based parsers split lines without a length limit
// (the file's read bound limits them), so one long line cannot make a
// whole file unreadable. Nothing here judges: internal/diagnose decides
// what a fact means.
package driver
