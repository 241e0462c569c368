// Package driver reads what the kernel and the host's file system say about
// the drivers of accelerators: kernel modules under /sys/module (loaded or
// built in, version, initstate), the PCI driver's module link under
// /sys/bus/pci/drivers, the NVIDIA kernel module's own procfs files
// (/proc/driver/nvidia/version and /proc/driver/nvidia/gpus/<BDF>/information),
// and the user-space libraries (libcuda, libnvidia-ml) that must match the
// kernel module, found through the root's /etc/ld.so.cache or by scanning
// the usual library directories. For a device no driver is bound to, it
// reads what says why (kmod.go): the running kernel's release
// (/proc/sys/kernel/osrelease), its modules.alias, modules.builtin.alias,
// modules.dep and modules.builtin under /lib/modules/<release>, the
// blacklist and install commands of every modprobe.d file kmod reads, the
// kernel command line's blacklists and nomodeset, the lockdown state and
// module.sig_enforce, a module file's signature trailer, the device's
// modalias and driver_override, and the kernel log files a host keeps
// under /var/log (a snapshot keeps only their probe and NVRM lines).
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
