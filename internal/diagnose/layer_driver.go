package diagnose

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/devnode"
	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 2: the driver. Is a driver bound to each accelerator, is its
// module there, and do the NVIDIA user-space libraries match the kernel
// module?

const (
	CodeDriverBound           = "DRIVER_BOUND"
	CodeDriverNone            = "DRIVER_NONE"
	CodeDriverUnknown         = "DRIVER_UNKNOWN"
	CodeDriverNouveau         = "DRIVER_NOUVEAU"
	CodeDriverVFIOBound       = "DRIVER_VFIO_BOUND"
	CodeDriverModuleLoaded    = "DRIVER_MODULE_LOADED"
	CodeDriverModuleBuiltin   = "DRIVER_MODULE_BUILTIN"
	CodeDriverModuleNotLive   = "DRIVER_MODULE_NOT_LIVE"
	CodeDriverModuleUnknown   = "DRIVER_MODULE_UNKNOWN"
	CodeDriverLibraryMatch    = "DRIVER_LIBRARY_MATCH"
	CodeDriverLibraryMismatch = "DRIVER_LIBRARY_MISMATCH"
	CodeDriverLibraryUnknown  = "DRIVER_LIBRARY_UNKNOWN"
	CodeDriverNVIDIAProc      = "DRIVER_NVIDIA_PROC_MISSING"

	// Why no driver is bound (judgeNoDriver): one code per cause.
	CodeDriverModuleNotInstalled = "DRIVER_MODULE_NOT_INSTALLED"
	CodeDriverDeviceUnsupported  = "DRIVER_DEVICE_UNSUPPORTED"
	CodeDriverModuleBlacklisted  = "DRIVER_MODULE_BLACKLISTED"
	CodeDriverNomodeset          = "DRIVER_NOMODESET"
	CodeDriverModuleUnsigned     = "DRIVER_MODULE_UNSIGNED"
	CodeDriverModuleNotLoaded    = "DRIVER_MODULE_NOT_LOADED"
	CodeDriverProbeFailed        = "DRIVER_PROBE_FAILED"
	CodeDriverNotClaimed         = "DRIVER_NOT_CLAIMED"
	CodeDriverMeantForVFIO       = "DRIVER_MEANT_FOR_VFIO"
)

// noDriverCodes are the codes of a device no driver is bound to.
var noDriverCodes = []string{CodeDriverNone, CodeDriverModuleNotInstalled, CodeDriverDeviceUnsupported, CodeDriverModuleBlacklisted,
	CodeDriverNomodeset, CodeDriverModuleUnsigned, CodeDriverModuleNotLoaded, CodeDriverProbeFailed, CodeDriverNotClaimed, CodeDriverMeantForVFIO}

const vendorNVIDIA = 0x10de

var driverCodes = []Code{{
	Code: CodeDriverBound, Layer: report.LayerDriver,
	Title: "a kernel driver is bound to the accelerator",
	Explain: `A kernel driver has claimed the PCI function: its sysfs "driver" link names
it, or, where a capture kept no such link, another source the kernel writes
only for a bound device does (DRIVER= in the device's uevent, the NVIDIA
driver's /proc/driver/nvidia/gpus/<BDF>, a DRM card registered under the
device); the evidence says which. The kernel can then create the device's
nodes. A bound driver is
necessary, not sufficient: the driver may still have failed to initialise the
hardware, and the user-space stack must match it (see DRIVER_LIBRARY_*).`,
}, {
	Code: CodeDriverNone, Layer: report.LayerDriver,
	Title: "no kernel driver is bound to the accelerator, and why was not determined",
	Explain: `The PCI function has no "driver" link in sysfs
(/sys/bus/pci/devices/<BDF>/driver): no kernel driver has claimed it, so no
device node exists for it and nothing in user space, inside or outside a
container, can use it. accel-doctor looks for the cause in the root's files:
the vendor's driver for the device (the aliases of modules.alias that match
the device's modalias, else the vendor's own driver for its class), whether
it is installed for the running kernel (modules.dep), loaded (/sys/module,
/proc/modules), refused by modprobe.d or the kernel command line, stopped by
nomodeset, unsigned under lockdown, or failed its probe (the kernel log).
This code is the finding when none of those could be read or none applies:
the evidence lists what was not read. Other codes (DRIVER_MODULE_*,
DRIVER_NOMODESET, DRIVER_PROBE_FAILED, DRIVER_NOT_CLAIMED,
DRIVER_DEVICE_UNSUPPORTED) name a cause that was found. A device whose
vendor has no driver accel-doctor knows gets this code too.`,
	Remediation: "Load the vendor's driver for the device (`modprobe <driver>`) and read `dmesg` for its probe errors; check that its package supports this device ID and was built for `uname -r`; with Secure Boot, sign the module or enrol its key.",
}, {
	Code: CodeDriverModuleNotInstalled, Layer: report.LayerDriver,
	Title: "no driver is bound: the vendor's driver is not installed for the running kernel",
	Explain: `No kernel driver is bound to the device, and the module of its vendor's
driver is not installed for the kernel that runs (/proc/sys/kernel/osrelease
names it; its modules are under /lib/modules/<release>): modules.dep has no
line for it, or names a file that is absent, or modules.alias names it and
modules.dep does not. Typical after a kernel upgrade whose DKMS build of the
driver failed or was never made, after the driver package was removed, or on
a distribution that ships the module in a separate package
(linux-modules-extra on Ubuntu). udev cannot load what is not there.`,
	Remediation: "Install the driver for the running kernel (the fix names the package), then `modprobe <driver>`; with DKMS, `dkms status` shows which kernels it was built for.",
}, {
	Code: CodeDriverDeviceUnsupported, Layer: report.LayerDriver,
	Title: "no driver is bound: the installed driver does not list this device",
	Explain: `No kernel driver is bound to the device, and the vendor's driver installed
for the running kernel does not list it: no alias of that module in
modules.alias (or modules.builtin.alias for a built-in driver) matches the
device's modalias. A driver's aliases are its PCI ID table (the kernel's
scripts/mod/file2alias.c writes them from MODULE_DEVICE_TABLE), so the
installed release predates the device, or the device needs another driver
of the vendor. udev does not load a module for a device it does not list,
and the module does not bind it when loaded.`,
	Remediation: "Install a release of the driver that supports the device's vendor:device ID (a newer kernel or the vendor's DKMS package); `modinfo <driver> | grep alias` lists the IDs the installed one drives.",
}, {
	Code: CodeDriverModuleBlacklisted, Layer: report.LayerDriver,
	Title: "no driver is bound: the vendor's driver is blacklisted",
	Explain: `No kernel driver is bound to the device, its vendor's driver is not loaded,
and something refuses it: "blacklist <module>" in a modprobe.d file (modprobe
then does not load it for a device's alias, which is how udev loads drivers),
"install <module> /bin/false" or "/bin/true" (modprobe runs that instead of
loading it, even when asked by name), modprobe.blacklist=<module> on the
kernel command line (kmod reads it as a blacklist), or module_blacklist=
(the kernel itself refuses the module, kernel/module/main.c). kmod reads
/etc/modprobe.d, /run/modprobe.d, /usr/local/lib/modprobe.d,
/usr/lib/modprobe.d and /lib/modprobe.d; the evidence names the file and line.
The initramfs holds a copy of the configuration, so a change needs it
rebuilt.`,
	Remediation: "Remove the line the evidence names (or the command-line parameter), rebuild the initramfs (`update-initramfs -u` or `dracut -f`), then `modprobe <driver>` or reboot.",
}, {
	Code: CodeDriverNomodeset, Layer: report.LayerDriver,
	Title: "no driver is bound: nomodeset keeps the GPU driver from loading",
	Explain: `No kernel driver is bound to the device, and the kernel command line keeps
its driver from loading: with nomodeset only firmware framebuffer drivers may
run (drivers/gpu/drm/drm_nomodeset.c, drm_firmware_drivers_only()), and the
DRM drivers amdgpu, i915, xe, nouveau and radeon refuse to load, leaving the
GPU without a driver; <driver>.modeset=0 does the same for one driver.
amdgpu, i915, nouveau and radeon load despite nomodeset when given
<driver>.modeset=1. nomodeset is often left over from an installation on
a machine whose display did not work.`,
	Remediation: "Remove nomodeset (or <driver>.modeset=0) from the kernel command line in the boot loader's configuration and reboot.",
}, {
	Code: CodeDriverModuleUnsigned, Layer: report.LayerDriver,
	Title: "no driver is bound: the driver's module is unsigned and the kernel loads only signed modules",
	Explain: `No kernel driver is bound to the device, its vendor's driver is installed
but not loaded, and the kernel refuses unsigned modules: the lockdown LSM is
in integrity or confidentiality mode (/sys/kernel/security/lockdown, usually
because Secure Boot is on), or module.sig_enforce is Y, and the module file
carries no appended signature (the "~Module signature appended~" trailer of
include/linux/module_signature.h that scripts/sign-file writes). Typical of a
driver built by DKMS or a vendor installer on a Secure Boot machine without
an enrolled signing key. Compressed modules (.ko.xz, .ko.zst) cannot be
looked into here; a signed module whose key is not enrolled is refused too,
which the file cannot tell.`,
	Remediation: "Sign the module with a key the kernel trusts (enrol DKMS's MOK key with `mokutil --import` and reboot), or install the distribution's signed build of the driver; then `modprobe <driver>`.",
}, {
	Code: CodeDriverModuleNotLoaded, Layer: report.LayerDriver,
	Title: "no driver is bound: the vendor's driver is installed but not loaded",
	Explain: `No kernel driver is bound to the device; its vendor's driver is installed for
the running kernel, is not loaded, and nothing that was read keeps it from
loading (no blacklist, no install command, no command-line parameter, no
nomodeset, no signature requirement it fails). udev loads a driver by its
alias when the device appears; that did not happen, or the module was
unloaded since. Loading it by hand shows whether it binds.`,
	Remediation: "`modprobe <driver>`, then read `dmesg` for its messages about the device; check that the driver's package installed its module configuration so that it loads at boot.",
}, {
	Code: CodeDriverProbeFailed, Layer: report.LayerDriver,
	Title: "no driver is bound: the driver's probe of the device failed",
	Explain: `No kernel driver is bound to the device, although its vendor's driver is
loaded (or built in), and the kernel log records that the driver's probe of
this device failed: "probe with driver <driver> failed with error -N" (or,
before Linux 5.13, "<driver>: probe of <BDF> failed with error -N"), from
drivers/base/dd.c. The driver's own messages before that line say why:
missing firmware (-2, ENOENT), a device or configuration it refuses (-19,
-22), memory it could not map. The kernel log is read from the files the
root keeps (/var/log/dmesg, kern.log, messages, syslog); a line may come from
an earlier boot.`,
	Remediation: "Read the driver's messages before the probe error (`dmesg | grep -i <driver>`), fix what they name (install the firmware, change the setting), then bind the device again (`echo <BDF> > /sys/bus/pci/drivers/<driver>/bind`) or reload the module.",
}, {
	Code: CodeDriverMeantForVFIO, Layer: report.LayerDriver,
	Title: "no driver is bound: the host means the device for VFIO, and no VFIO driver has bound it",
	Explain: `No kernel driver is bound to the device, and the host itself says it is meant
for VFIO passthrough: its driver_override names a VFIO driver, or vfio-pci's
ids (vfio-pci.ids= on the kernel command line, "options vfio-pci ids=" in
modprobe.d) name its vendor:device. Its vendor's native driver is not meant
to have it, so neither that driver's state nor its device nodes are judged;
layer 7 (IOMMU / VFIO) says why vfio-pci has not bound it (VFIO_DEVICE_NOT_BOUND,
which this finding follows from): the module not loaded, no IOMMU group with
the IOMMU off, no probe since the override was set.`,
	Remediation: "If passthrough is meant, fix what layer 7 names (`accel-doctor iommu`); to use the device natively instead, clear its driver_override and remove its id from vfio-pci's ids, then `echo <BDF> > /sys/bus/pci/drivers_probe`.",
}, {
	Code: CodeDriverNotClaimed, Layer: report.LayerDriver,
	Title: "no driver is bound: the driver is loaded but has not claimed the device",
	Explain: `No kernel driver is bound to the device, although its vendor's driver is
loaded (or built in), and no probe error for the device was found in the
kernel log files the root keeps. The device's driver_override may name
another driver (then only that one may bind it, drivers/pci/pci-driver.c),
the driver may have been unbound from it by hand, or its probe failed in a
way the files read here do not record (dmesg on the host shows it).`,
	Remediation: "Bind it by hand (`echo <BDF> > /sys/bus/pci/drivers/<driver>/bind`) and read `dmesg` for why it fails; clear a driver_override that names another driver.",
}, {
	Code: CodeDriverUnknown, Layer: report.LayerDriver,
	Title: "which driver is bound could not be determined",
	Explain: `No source could say whether a driver drives this PCI function. The sysfs
"driver" link is unusable (it loops, or leads to something that is not a
driver's directory), or the tree is a capture that kept no driver links at
all (none of its PCI functions has one), and neither DRIVER= in the device's
uevent, nor /proc/driver/nvidia/gpus/<BDF>, nor a DRM card under the device
tells instead. Nothing is concluded: the device is not reported as unbound,
and the checks that depend on its driver (its module, its device nodes) say
NOT_RUN.`,
	Remediation: "Read the link by hand (`ls -l /sys/bus/pci/devices/<BDF>/driver`, `lspci -k -s <BDF>`) on the host; for a capture, recapture it with `accel-doctor snapshot`, which keeps the driver links.",
}, {
	Code: CodeDriverNouveau, Layer: report.LayerDriver,
	Title: "nouveau is bound to an NVIDIA GPU",
	Explain: `The open-source nouveau driver has claimed an NVIDIA GPU. CUDA, NVML and the
NVIDIA container stack work only with NVIDIA's own kernel module (nvidia.ko),
and the two cannot drive the same device: while nouveau holds it, nvidia.ko
cannot bind and /dev/nvidia* nodes for this GPU do not exist.`,
	Remediation: "Blacklist nouveau (`blacklist nouveau` and `options nouveau modeset=0` in /etc/modprobe.d/), rebuild the initramfs (`update-initramfs -u` or `dracut -f`), reboot, and load nvidia.ko; the NVIDIA driver installer and GPU operator do this for you.",
}, {
	Code: CodeDriverVFIOBound, Layer: report.LayerDriver,
	Title: "the accelerator is bound to a VFIO (passthrough) driver",
	Explain: `The device is bound to vfio-pci (or pci-stub, or a vendor's vfio variant
driver). That is how a device is prepared for passthrough to a virtual
machine (KubeVirt, Kata, QEMU) or a user-space driver (DPDK): the host's
native driver does not drive it, so /dev/nvidia*, /dev/dri/* and similar
nodes do not exist for it and a container that expects the native stack
cannot use it. This is a WARN, not a FAIL, because it is often intended;
it is the cause when a container was meant to use the device natively.`,
	Remediation: "If the device should serve containers natively, unbind it from vfio-pci and bind the native driver (e.g. `echo <BDF> > /sys/bus/pci/drivers/vfio-pci/unbind; echo > /sys/bus/pci/devices/<BDF>/driver_override; echo <BDF> > /sys/bus/pci/drivers_probe`), and remove the vfio-pci.ids= or driver_override configuration that claimed it. If passthrough is intended, ignore this and check layer 7 (IOMMU / VFIO).",
}, {
	Code: CodeDriverModuleLoaded, Layer: report.LayerDriver,
	Title: "the driver's kernel module is loaded",
	Explain: `/sys/module/<module> exists with initstate "live": the loadable module that
provides the bound driver finished initialising. Its version attribute, when
the module declares one (nvidia does; in-tree amdgpu, i915 and xe do not), is
shown as evidence.`,
}, {
	Code: CodeDriverModuleBuiltin, Layer: report.LayerDriver,
	Title: "the driver is built into the kernel",
	Explain: `/sys/module/<module> exists without an initstate attribute: the driver is
compiled into the kernel image rather than loaded as a module
(kernel/params.c, drivers/base/module.c). It cannot be missing or half
loaded, and it carries the running kernel's version.`,
}, {
	Code: CodeDriverModuleNotLive, Layer: report.LayerDriver,
	Title: "the driver's module is still loading or being unloaded",
	Explain: `The module's initstate is "coming" (its init function is still running) or
"going" (it is being removed). Until it is "live" the device may have no
nodes, or lose them. A module stuck in either state usually means its init
or exit path hangs on the hardware; dmesg shows where.`,
	Remediation: "Wait a few seconds and check again; if the state does not change, read `dmesg` for the driver's messages, and reboot the node if the module cannot finish loading or unloading.",
}, {
	Code: CodeDriverModuleUnknown, Layer: report.LayerDriver,
	Title: "the driver's module could not be found",
	Explain: `A driver is bound, but /sys/module has no entry for its module, or the entry
could not be read. The kernel creates /sys/module/<name> for every PCI
driver, loaded or built in (drivers/base/module.c), so this happens when the
root being read is an incomplete capture or /sys is not the host's. The
module's state and version could not be checked.`,
	Remediation: "Run accel-doctor on the host (or with --root pointing at a full host mount including /sys), or capture a snapshot with `accel-doctor snapshot` on the host.",
}, {
	Code: CodeDriverLibraryMatch, Layer: report.LayerDriver,
	Title: "the NVIDIA user-space library matches the kernel module",
	Explain: `The version in /proc/driver/nvidia/version (the loaded kernel module) equals
the version in the real file name of the library (libcuda.so.1 ->
libcuda.so.<version>, libnvidia-ml.so.1 -> libnvidia-ml.so.<version>) that
the root's dynamic loader cache resolves. NVIDIA's user-space driver and
kernel module must be the same release.`,
}, {
	Code: CodeDriverLibraryMismatch, Layer: report.LayerDriver,
	Title: "Driver/library version mismatch",
	Explain: `The NVIDIA kernel module that is loaded and the user-space driver library on
the root are different releases. NVIDIA's user-space driver (libcuda,
libnvidia-ml) talks to the kernel module through a private interface that
changes with every release, so a mismatch makes nvidia-smi print "Failed to
initialize NVML: Driver/library version mismatch" and CUDA return
CUDA_ERROR_SYSTEM_DRIVER_MISMATCH or "no CUDA-capable device". The usual
cause is a driver package upgrade without a reboot or module reload: the new
libraries are installed, the old module is still in the kernel.`,
	Remediation: "Reload the kernel module to the installed version (stop every GPU user, `rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia`) or reboot the node; if the libraries are the stale side, reinstall the driver package matching the module. Containers using the host's libraries (CDI or nvidia-container-toolkit) inherit the fix.",
}, {
	Code: CodeDriverLibraryUnknown, Layer: report.LayerDriver,
	Title: "the NVIDIA user-space library version could not be compared",
	Explain: `The library was not found on the root (neither in /etc/ld.so.cache nor in
the usual library directories), or its real file name carries no driver
version (libcuda.so.1 as a plain file; Jetson's libcuda.so.1.1). There is
nothing to compare with the kernel module. This is normal on a host without
the user-space driver installed: containers may bring their own via CDI
specs or the NVIDIA container toolkit, which mount the host's libraries, so
the check belongs to the container then.`,
	Remediation: "If the host should have the user-space driver, install the driver package matching the kernel module (the same version as in /proc/driver/nvidia/version) and run `ldconfig`; if only containers need it, the runtime must inject it (CDI specs or the NVIDIA container toolkit mount the host's libraries into the container).",
}, {
	Code: CodeDriverNVIDIAProc, Layer: report.LayerDriver,
	Title: "/proc/driver/nvidia/version is missing while nvidia is bound",
	Explain: `A GPU is bound to nvidia, but /proc/driver/nvidia/version cannot be read.
The NVIDIA module creates it when it loads (nv-procfs.c), and NVIDIA's own
tools read /proc/driver/nvidia/ as well. On a live host this is a FAIL: the
procfs this process sees is not consistent with sysfs (a /proc masked or
replaced by a container runtime, a chroot with its own /proc), and the
NVIDIA stack in that view fails the same way. On a --root tree or snapshot
it is NOT_RUN: the capture may simply not hold the file, and the module
version cannot be compared with the libraries.`,
	Remediation: "Run accel-doctor where the host's /proc is visible (on the host, or in a pod with hostPID and /proc mounted); check that no runtime masks /proc/driver; on a snapshot, recapture it with `accel-doctor snapshot` on the host.",
}}

func driverChecks() []Check {
	return []Check{{
		ID: "driver.bound", Layer: report.LayerDriver,
		Title: "a suitable kernel driver is bound to each accelerator",
		Codes: append([]string{CodeDriverBound, CodeDriverUnknown, CodeDriverNouveau, CodeDriverVFIOBound}, noDriverCodes...),
		Run:   checkDriverBound,
	}, {
		ID: "driver.module", Layer: report.LayerDriver,
		Title: "the bound driver's kernel module is loaded and live",
		Codes: []string{CodeDriverModuleLoaded, CodeDriverModuleBuiltin, CodeDriverModuleNotLive, CodeDriverModuleUnknown},
		Run:   checkDriverModule,
	}, {
		ID: "driver.nvidia-libs", Layer: report.LayerDriver,
		Title: "NVIDIA kernel module and user-space libraries are the same version",
		Codes: []string{CodeDriverLibraryMatch, CodeDriverLibraryMismatch, CodeDriverLibraryUnknown, CodeDriverNVIDIAProc},
		Run:   checkNVIDIALibs,
	}}
}

// NVIDIAVersion is the loaded NVIDIA kernel module's version, read once.
func (e *Env) NVIDIAVersion() (driver.NVIDIAVersion, error) {
	return memo(e, "driver.nvidia-version", func() (driver.NVIDIAVersion, error) {
		return driver.ReadNVIDIAVersion(e.Root)
	})
}

// DriverModule is the kernel module behind a PCI driver name, read once
// per name.
func (e *Env) DriverModule(drv string) (driver.Module, error) {
	return memo(e, "driver.module:"+drv, func() (driver.Module, error) {
		return driver.ReadDriverModule(e.Root, drv)
	})
}

// NVIDIALibraries is the search for libcuda and libnvidia-ml on the root.
func (e *Env) NVIDIALibraries() driver.LibrarySearch {
	v, _ := memo(e, "driver.nvidia-libs", func() (driver.LibrarySearch, error) {
		return driver.FindLibraries(e.Root, driver.SonameCUDA, driver.SonameNVML), nil
	})
	return v
}

// isPassthroughDriver: vfio-pci, the vendor vfio variant drivers
// (mlx5_vfio_pci, nvgrace_gpu_vfio_pci, ...), and pci-stub only reserve a
// device for a VM or user-space driver.
func isPassthroughDriver(drv string) bool {
	return drv == "pci-stub" || drv == "vfio-pci" || strings.HasSuffix(drv, "vfio_pci") || strings.HasSuffix(drv, "vfio-pci")
}

// knownDriver is what accel-doctor knows of one accelerator driver.
// knownDrivers is the one table of vendors' kernel drivers in this
// package: summaries name a driver's family from it, and a device no
// driver is bound to is judged against its vendor's driver from it (which
// driver, which nodes that driver would create, whether nomodeset stops
// it, how it gets onto a host).
type knownDriver struct {
	Name   string // the PCI driver's name, also its module's
	Family string
	Vendor uint16 // the PCI vendor whose devices it drives
	// Classes are the PCI base classes of the vendor's devices it drives;
	// empty: any.
	Classes []uint8
	// Native: the vendor's own driver, the one a device of that vendor
	// and class is meant to have when none is bound (nvidia, not
	// nouveau, for CUDA; amdgpu, not radeon, for ROCm).
	Native bool
	// KMS: a DRM driver that refuses to load when the kernel runs with
	// nomodeset (drm_firmware_drivers_only(),
	// drivers/gpu/drm/drm_nomodeset.c; amdgpu_init, i915_check_nomodeset,
	// xe_check_nomodeset, nouveau_drm_init, radeon_module_init).
	// ModesetParam: its <driver>.modeset parameter overrides nomodeset
	// when 1 and refuses on its own when 0 (xe has none).
	KMS, ModesetParam bool
	// Nodes are the device-node kinds (devnode.Kind*) it creates for a
	// device it binds.
	Nodes []string
	// Install says where the driver comes from, for a fix ("<release>"
	// is the running kernel's).
	Install string
}

// install is the row's Install for a kernel release.
func (k *knownDriver) install(rel string) string {
	if rel == "" {
		return k.Install
	}
	return strings.ReplaceAll(k.Install, "<release>", rel)
}

var knownDrivers = []knownDriver{{
	Name: "nvidia", Family: "NVIDIA kernel driver", Vendor: vendorNVIDIA, Classes: []uint8{0x03}, Native: true,
	Nodes:   []string{devnode.KindNVIDIAGPU, devnode.KindNVIDIACtl, devnode.KindNVIDIAUVM},
	Install: "the NVIDIA driver (the distribution's nvidia-driver or DKMS package, NVIDIA's CUDA repository, or the GPU operator's driver container)",
}, {
	Name: "amdgpu", Family: "AMD GPU driver (ROCm/Mesa)", Vendor: vendorAMD, Classes: []uint8{0x03, 0x12}, Native: true,
	KMS: true, ModesetParam: true,
	Nodes:   []string{devnode.KindDRMRender, devnode.KindKFD},
	Install: "amdgpu (it ships with the kernel: on Ubuntu in linux-modules-extra-<release>; for ROCm, AMD's amdgpu-dkms package)",
}, {
	Name: "i915", Family: "Intel GPU driver (i915)", Vendor: vendorIntel, Classes: []uint8{0x03}, Native: true,
	KMS: true, ModesetParam: true,
	Nodes:   []string{devnode.KindDRMRender},
	Install: "i915 (it ships with the kernel: on Ubuntu in linux-modules-extra-<release>; Intel's intel-i915-dkms for data-center GPUs)",
}, {
	Name: "xe", Family: "Intel Xe GPU driver", Vendor: vendorIntel, Classes: []uint8{0x03}, Native: true,
	KMS:     true,
	Nodes:   []string{devnode.KindDRMRender},
	Install: "xe (in the kernel since Linux 6.8: on Ubuntu in linux-modules-extra-<release>)",
}, {
	Name: "habanalabs", Family: "Intel Gaudi driver", Vendor: vendorHabana, Native: true,
	Nodes:   []string{devnode.KindAccel},
	Install: "habanalabs (Intel Gaudi's habanalabs-dkms package, or the kernel's own drivers/accel/habanalabs)",
}, {
	Name: "intel_vpu", Family: "Intel NPU driver", Vendor: vendorIntel, Classes: []uint8{0x12}, Native: true,
	Nodes:   []string{devnode.KindAccel},
	Install: "intel_vpu (in the kernel since Linux 6.3, drivers/accel/ivpu, with its firmware from linux-firmware)",
}, {
	Name: "ve_drv", Family: "NEC SX-Aurora VE driver", Vendor: vendorNEC, Native: true,
	Install: "ve_drv (NEC's ve_drv-kmod package, part of VEOS)",
}, {
	Name: "nouveau", Family: "nouveau (open-source NVIDIA display driver)", Vendor: vendorNVIDIA, Classes: []uint8{0x03},
	KMS: true, ModesetParam: true,
	Nodes: []string{devnode.KindDRMRender},
}, {
	Name: "radeon", Family: "radeon (AMD's driver for GPUs before GCN)", Vendor: vendorAMD, Classes: []uint8{0x03},
	KMS: true, ModesetParam: true,
	Nodes: []string{devnode.KindDRMRender},
}}

// PCI vendor ids of knownDrivers (pci.ids).
const (
	vendorAMD    = 0x1002
	vendorIntel  = 0x8086
	vendorHabana = 0x1da3
	vendorNEC    = 0x1bcf
)

// lookupDriver finds a driver's row.
func lookupDriver(name string) (*knownDriver, bool) {
	for i := range knownDrivers {
		if knownDrivers[i].Name == driver.NormalizeModule(name) || knownDrivers[i].Name == name {
			return &knownDrivers[i], true
		}
	}
	return nil, false
}

// drives reports whether the row is for a device of this vendor and
// class (a class that could not be read matches any).
func (k *knownDriver) drives(d *pci.Device) bool {
	if !d.Has(pci.HasVendor) || d.Vendor != k.Vendor {
		return false
	}
	if len(k.Classes) == 0 || !d.Has(pci.HasClass) {
		return true
	}
	return slices.Contains(k.Classes, uint8(d.Class>>16))
}

// driverFamily names the drivers accel-doctor knows, for summaries.
func driverFamily(drv string) string {
	if k, ok := lookupDriver(drv); ok {
		return k.Family
	}
	return "driver " + drv
}

// Binding is which driver drives a PCI function, from every source the
// root gives (driver.FindBinding), worked out once per device.
func (e *Env) Binding(d *pci.Device) driver.Binding {
	b, _ := memo(e, "driver.binding:"+d.Address.String(), func() (driver.Binding, error) {
		f := driver.Function{Address: d.Address.String(), Link: d.Driver}
		if d.Path != d.BusPath { // resolved
			f.SysfsPath = d.Path
		}
		if ae := d.AttrErr("driver"); ae != nil {
			f.LinkErr = ae
		}
		if inv, err := e.PCI(); err == nil {
			f.LinksInTree = inv.DriverLinks()
		}
		return driver.FindBinding(e.Root, f), nil
	})
	return b
}

// bindingEvidence is the source that decided, and the notes of the
// others.
func bindingEvidence(b driver.Binding) []report.Evidence {
	v := b.Driver
	switch {
	case b.State == driver.Unbound:
		v = "absent"
	case b.State == driver.BindUnknown:
		v = "not known: " + b.Why
	case v == "":
		v = "a driver is bound; its name is not in this source"
	}
	if b.Via != "" && b.Via != driver.ViaLink {
		v += " (" + b.Via + ")"
	}
	ev := []report.Evidence{Ev(b.Source, v)}
	for _, n := range b.Notes {
		ev = append(ev, Ev("", n))
	}
	return ev
}

// boundSummary says what is bound, and from where when it is not the
// driver link.
func boundSummary(b driver.Binding) string {
	s := "bound to " + driverFamily(b.Driver)
	if b.Driver == "" {
		s = "a driver is bound (its name is not in the capture)"
	}
	if b.Via != driver.ViaLink {
		s += ", read from " + b.Via
	}
	return s
}

func checkDriverBound(e *Env, out *Out) {
	for _, d := range e.Accelerators() {
		bdf := d.Address.String()
		b := e.Binding(d)
		ev := append(bindingEvidence(b), Ev(d.Path, fmt.Sprintf("vendor:device %s, class %s", d.IDString(), classString(d))))
		switch {
		case b.State == driver.BindUnknown:
			out.NotRun(CodeDriverUnknown, bdf, "which driver is bound is not known", e.bindingWhy(b, d.Path), ev...)
		case b.State == driver.Unbound:
			nd := e.noDriverCause(d)
			f := out.Add(nd.code, report.Fail, bdf, nd.summary, append(ev, nd.ev...)...)
			f.Remediation = nd.fix
			if nd.follows != nil {
				f.Follows(nd.follows.Code, nd.follows.Subject)
			}
		case b.Driver == "" && d.Vendor == vendorNVIDIA:
			out.NotRun(CodeDriverUnknown, bdf, "a driver is bound, but not which one",
				e.unnamedDriverWhy("only "+b.Via+" shows the binding; whether it is nvidia or nouveau cannot be told", bdf, d.Path), ev...)
		case b.Driver == "nouveau" && d.Vendor == vendorNVIDIA:
			out.Add(CodeDriverNouveau, report.Fail, bdf, "nouveau is bound to this NVIDIA GPU; CUDA needs the nvidia driver", ev...)
		case isPassthroughDriver(b.Driver):
			out.Add(CodeDriverVFIOBound, report.Warn, bdf,
				fmt.Sprintf("bound to %s for passthrough; containers using the native stack cannot use it (fine if a VM or user-space driver is meant to have it)", b.Driver),
				ev...)
		default:
			out.Add(CodeDriverBound, report.Pass, bdf, boundSummary(b), ev...)
		}
	}
}

// classString is the class for evidence, or what was wrong with it.
func classString(d *pci.Device) string {
	if d.Has(pci.HasClass) {
		return fmt.Sprintf("%06x", d.Class)
	}
	return d.AttrState("class")
}

func checkDriverModule(e *Env, out *Out) {
	// A module that is not found has one why, however many devices its
	// driver binds (finding it walks the capture's tree).
	missing := map[string]report.Why{}
	for _, d := range e.Accelerators() {
		b := e.Binding(d)
		bdf := d.Address.String()
		switch {
		case b.State != driver.Bound:
			continue // driver.bound has said it
		case b.Driver == "":
			out.NotRun(CodeDriverModuleUnknown, bdf, "module of the bound driver not checked",
				e.unnamedDriverWhy("the driver's name is not known: only "+b.Via+" shows the binding", bdf, d.Path), bindingEvidence(b)...)
			continue
		}
		m, err := e.DriverModule(b.Driver)
		if !m.Present {
			why, ok := missing[b.Driver]
			if !ok {
				why = moduleMissingWhy(e, m, err)
				missing[b.Driver] = why
			}
			out.NotRun(CodeDriverModuleUnknown, bdf, fmt.Sprintf("module of driver %s not found", b.Driver),
				why, Ev("/sys/module/"+m.Name, "absent"))
			continue
		}
		judgeModule(e, out, bdf, b.Driver, m, err)
	}
}

// bindingWhy is why no source told which driver is bound: a capture
// without the driver links, a link that cannot be followed.
func (e *Env) bindingWhy(b driver.Binding, dev string) report.Why {
	if b.Err == nil {
		return report.Unusable(b.Why, dev).FromCapture(e.snapshot())
	}
	return e.errWhy(b.Why, b.Err, b.Source, "")
}

// unnamedDriverWhy is why a bound driver has no name: only a source
// other than the driver link shows the binding (a capture without the
// links, a sysfs that is not the host's).
func (e *Env) unnamedDriverWhy(reason, bdf, dev string) report.Why {
	if !e.Root.IsLive() {
		return report.Capture(reason+" (the capture holds no driver link)", path.Join(dev, "driver"))
	}
	return report.Explain(reason, "Read the bound driver on the host: `lspci -k -s "+bdf+"` (or `ls -l "+dev+"/driver`).")
}

// moduleMissingWhy is moduleMissing's why: what the capture or the pod
// lacks, a read error, or a sysfs that is not the host's.
func moduleMissingWhy(e *Env, m driver.Module, err error) report.Why {
	reason := moduleMissing(e, m, err)
	p := "/sys/module/" + m.Name
	if _, ok := captureGap(e.Root, p); ok {
		return e.missing(reason, p)
	}
	if err != nil && m.Missing == "" {
		return e.errWhy(reason, err, "", "")
	}
	return report.Explain(reason, "Run accel-doctor with the host's own /sys and /proc (on the host, or in a pod with the host's / at --root): a bound driver's module is in /sys/module or /proc/modules of the kernel that runs it.")
}

// moduleMissing says why a module was not found, and whether the root
// could have shown it.
func moduleMissing(e *Env, m driver.Module, err error) string {
	if err != nil && m.Missing == "" {
		return err.Error()
	}
	why := m.Missing
	if gap, ok := captureGap(e.Root, "/sys/module/"+m.Name); ok {
		why = gap + "; " + why
	} else {
		why += ": an incomplete capture, or /sys is not the host's"
	}
	if err != nil {
		why += " (" + err.Error() + ")"
	}
	return why
}

func judgeModule(e *Env, out *Out, bdf, drv string, m driver.Module, err error) {
	dir := m.Source
	ev := []report.Evidence{}
	if m.Source == driver.ProcModulesPath {
		ev = append(ev, Ev(driver.ProcModulesPath, fmt.Sprintf("%s listed, state %s (/sys/module/%s absent)", m.Name, optString(m.InitState, "?"), m.Name)))
	} else {
		ev = append(ev, Ev(dir+"/version", optString(m.Version, "no version attribute")))
		if m.InitState != nil {
			ev = append(ev, Ev(dir+"/initstate", *m.InitState))
		}
	}
	if err != nil {
		ev = append(ev, Ev("", "read error: "+err.Error()))
	}
	ver := ""
	if m.Version != nil {
		ver = " version " + *m.Version
	}
	switch {
	case m.BuiltIn:
		out.Add(CodeDriverModuleBuiltin, report.Pass, bdf, fmt.Sprintf("%s is built into the kernel%s", m.Name, ver), ev...)
	case m.InitState != nil && *m.InitState != "live":
		out.Add(CodeDriverModuleNotLive, report.Warn, bdf, fmt.Sprintf("module %s is %q, not live", m.Name, *m.InitState), ev...)
	case m.InitState == nil:
		out.NotRun(CodeDriverModuleUnknown, bdf, fmt.Sprintf("state of module %s unknown", m.Name),
			e.errWhy("its initstate could not be read: "+fmt.Sprint(err), err, "/sys/module/"+m.Name+"/initstate", ""), ev...)
	default:
		out.Add(CodeDriverModuleLoaded, report.Pass, bdf, fmt.Sprintf("module %s (%s) loaded%s", m.Name, driverFamily(drv), ver), ev...)
	}
}

func optString(s *string, absent string) string {
	if s == nil {
		return absent
	}
	return *s
}

func checkNVIDIALibs(e *Env, out *Out) {
	var gpus []string
	for _, d := range e.Accelerators() {
		if e.Binding(d).Driver == "nvidia" {
			gpus = append(gpus, d.Address.String())
		}
	}
	if len(gpus) == 0 {
		return // nothing bound to nvidia: no kernel module version to compare
	}
	bound := Ev("", "bound to nvidia: "+strings.Join(gpus, ", "))
	kv, err := e.NVIDIAVersion()
	if err != nil {
		// Only a clear absence on the live host is conclusive; a tree may
		// just not hold the file, and a garbled file is a parse problem.
		if e.Root.IsLive() && errors.Is(err, fs.ErrNotExist) {
			out.Add(CodeDriverNVIDIAProc, report.Fail, "host",
				driver.NVIDIAVersionPath+" is missing although a GPU is bound to nvidia", Ev(driver.NVIDIAVersionPath, err.Error()), bound)
		} else {
			const prefix = "cannot read the module version to compare with the libraries: "
			why := e.errWhy(prefix+err.Error(), err, driver.NVIDIAVersionPath, "")
			if gap, ok := captureGap(e.Root, driver.NVIDIAVersionPath); ok {
				why = e.missing(prefix+gap, driver.NVIDIAVersionPath)
			} else if errors.Is(err, fs.ErrNotExist) && e.Root.Exists(driver.NVIDIAGPUsDir) {
				// nv-procfs.c creates version and gpus/ together.
				why = report.Capture(prefix+driver.NVIDIAVersionPath+" is absent although "+driver.NVIDIAGPUsDir+" is there: the capture kept only part of the NVIDIA procfs", driver.NVIDIAVersionPath)
			}
			out.NotRun(CodeDriverNVIDIAProc, "host", "NVIDIA kernel module version unknown", why, Ev(driver.NVIDIAVersionPath, err.Error()), bound)
		}
		return
	}
	kev := Ev(driver.NVIDIAVersionPath, fmt.Sprintf("%s (open module: %v, arch %s)", kv.Version, kv.Open, kv.Arch))
	libs := e.NVIDIALibraries()
	for _, so := range []string{driver.SonameCUDA, driver.SonameNVML} {
		lib, ok := libs.Found[so]
		if !ok {
			ev := []report.Evidence{kev}
			if libs.CacheErr != nil {
				ev = append(ev, Ev(driver.LDCachePath, libs.CacheErr.Error()))
			}
			for _, err := range libs.Errs {
				ev = append(ev, Ev("", err.Error()))
			}
			fix := "Nothing to do where containers get the driver's libraries through CDI or the NVIDIA container toolkit: `accel-doctor container ID` compares the ones a container has. On a host that runs CUDA itself, install the driver's user-space libraries of the module's release (" + kv.Version + ") and run `ldconfig`."
			if !e.Root.IsLive() {
				fix += " A capture may not have kept them: take it again on the host with `accel-doctor snapshot node.tar.gz`."
			}
			out.NotRun(CodeDriverLibraryUnknown, "host", so+" not found on this root",
				report.Explain("nothing to compare with the kernel module; containers may bring their own libraries via CDI or the NVIDIA container toolkit", fix), ev...)
			continue
		}
		lev := Ev(lib.Path, fmt.Sprintf("-> %s (found via %s)", lib.RealPath, lib.Source))
		switch {
		case !lib.VersionOK:
			out.NotRun(CodeDriverLibraryUnknown, "host", so+" carries no driver version in its file name",
				report.Explain("the real file "+lib.RealPath+" has no version suffix to compare",
					"Compare by hand: `nvidia-smi` prints the driver version the library reports, beside the kernel module's "+kv.Version+"; a library whose file name hides its version was installed outside the driver's packages."), kev, lev)
		case lib.Version != kv.Version:
			out.Add(CodeDriverLibraryMismatch, report.Fail, "host",
				fmt.Sprintf("Driver/library version mismatch: kernel module %s, %s %s", kv.Version, so, lib.Version), kev, lev)
		default:
			out.Add(CodeDriverLibraryMatch, report.Pass, "host", fmt.Sprintf("%s %s matches the kernel module", so, lib.Version), kev, lev)
		}
	}
}

// KernelModules is what the root says of the running kernel's modules
// (modules.alias, modules.dep, modprobe.d, the command line, lockdown),
// read once, and only when a device has no driver.
func (e *Env) KernelModules() *driver.KernelModules {
	k, _ := memo(e, "driver.kernel-modules", func() (*driver.KernelModules, error) {
		return driver.ReadKernelModules(e.Root), nil
	})
	return k
}

// kernelLog is one kernel log file, read once.
func (e *Env) kernelLog(p string) ([]byte, error) {
	return memo(e, "driver.kernel-log:"+p, func() ([]byte, error) {
		return driver.ReadKernelLog(e.Root, p)
	})
}

// noDriver is why no driver is bound to an accelerator: the vendor's
// driver expected for it, the one cause found (code, summary, evidence,
// fix), or, under CodeDriverNone, what could not be read.
type noDriver struct {
	drv     *knownDriver // nil: accel-doctor knows no driver for it, or none is meant
	code    string
	summary string
	ev      []report.Evidence
	fix     string
	// follows is the finding this one follows from (a device meant for
	// VFIO: layer 7's), nil when none.
	follows *report.Cause
}

// noDriverCause works out, once per device, why no driver is bound.
func (e *Env) noDriverCause(d *pci.Device) noDriver {
	nd, _ := memo(e, "driver.none:"+d.Address.String(), func() (noDriver, error) {
		return judgeNoDriver(e, d), nil
	})
	return nd
}

// cause is one thing found that keeps the driver off the device.
type cause struct {
	code, summary, fix string
	ev                 []report.Evidence
}

// aliasVerdict is what modules.alias says of the device and a driver.
type aliasVerdict int

const (
	aliasUnknown aliasVerdict = iota // not read, or only in part, or no modalias
	aliasMatches                     // an alias of the driver matches the device
	aliasNone                        // read whole: no alias of the driver matches
)

// judgeNoDriver finds the one cause: the vendor's driver for the device
// from the aliases that match its modalias (else from its vendor and
// class), then, in the order the kernel would meet them: the driver is
// loaded or built in but did not take the device (its probe failed, or it
// never claimed it); or it is not installed for the running kernel, does
// not list the device, is refused (module_blacklist=, an install command
// that does nothing, blacklist, modprobe.blacklist=), is stopped by
// nomodeset, or is unsigned where the kernel loads only signed modules;
// or it is simply not loaded. The first cause found is the finding;
// others found are noted ("also"). What could not be read is said, and
// with no cause found the finding is DRIVER_NONE naming it.
func judgeNoDriver(e *Env, d *pci.Device) noDriver {
	bdf := d.Address.String()
	k := e.KernelModules()
	nd := noDriver{code: CodeDriverNone}
	var unread []string
	note := func(r driver.Read, what string) {
		if r.Err != nil {
			unread = append(unread, what+": "+e.withGap(r.Err))
		}
	}
	ma, maSrc, maErr := e.modalias(d)
	var formed *modaliasFormed
	switch {
	case errors.As(maErr, &formed):
		nd.ev = append(nd.ev, Ev(maSrc, ma+", "+formed.Error()))
	case maErr != nil:
		unread = append(unread, "the device's modalias: "+e.withGap(maErr))
	default:
		nd.ev = append(nd.ev, Ev(maSrc, ma))
	}
	if meantForVFIO(e, d, &nd) {
		return nd
	}
	if k.Release != "" {
		nd.ev = append(nd.ev, Ev(k.ReleaseRead.Path, k.Release))
	} else {
		note(k.ReleaseRead, "the kernel release")
	}
	if k.Release != "" {
		note(k.AliasRead, "modules.alias")
	}

	drvs, matches := expectedDrivers(d, k, ma)
	if len(drvs) == 0 {
		nd.summary = fmt.Sprintf("no kernel driver is bound, and accel-doctor knows no driver for vendor %s class %s", vendorString(d), classString(d))
		nd.fix = "Install and load the vendor's kernel driver for this device (its documentation names it; `lspci -k -s " + bdf + "` shows the modules that match it), then read `dmesg` for its messages about " + bdf + "."
		return nd
	}
	drv := drvs[0]
	nd.drv = drv
	mod := driver.ModuleName(drv.Name)
	for _, o := range drvs[1:] {
		nd.ev = append(nd.ev, Ev("", "also a driver for it: "+o.Name))
	}

	m, merr := e.DriverModule(drv.Name)
	mf := k.File(e.Root, mod)
	builtin := mf.BuiltinLine > 0 || (m.Present && m.BuiltIn)
	loaded := m.Present && !m.BuiltIn
	switch {
	case mf.BuiltinLine > 0:
		nd.ev = append(nd.ev, Ev(k.BuiltinRead.Path, fmt.Sprintf("line %d: %s is built into the kernel", mf.BuiltinLine, mod)))
	case m.Present && m.BuiltIn:
		nd.ev = append(nd.ev, Ev(m.Source, "no initstate: built into the kernel"))
	case loaded:
		nd.ev = append(nd.ev, Ev(m.Source, mod+" loaded, initstate "+optString(m.InitState, "unknown")))
	case merr == nil && (strings.Contains(m.Missing, "does not list") || e.Root.Covers("/sys/module/"+mod)):
		nd.ev = append(nd.ev, Ev("/sys/module/"+mod, "absent: "+mod+" is not loaded"))
	default:
		why := m.Missing
		if merr != nil {
			why = merr.Error()
		} else if gap, ok := captureGap(e.Root, "/sys/module/"+mod); ok {
			why = gap
		}
		unread = append(unread, "whether "+mod+" is loaded: "+why)
	}

	av := aliasUnknown
	builtinAliasesKnown := k.BuiltinAliasRead.Err == nil || !builtin && errors.Is(k.BuiltinAliasRead.Err, fs.ErrNotExist)
	switch a, ok := matches[drv.Name]; {
	case ok:
		av = aliasMatches
		nd.ev = append(nd.ev, Ev(aliasPath(k, a), fmt.Sprintf("line %d: alias %s %s", a.Line, a.Pattern, a.Module)))
	case ma != "" && k.AliasRead.Err == nil && builtinAliasesKnown:
		// A built-in driver's aliases are only in modules.builtin.alias.
		av = aliasNone
		nd.ev = append(nd.ev, Ev(k.AliasRead.Path, "no alias of "+drv.Name+" matches "+ma))
	}

	var causes []cause
	if builtin || loaded {
		causes = e.boundFailed(d, drv, k, av, builtin, loaded, &unread)
	} else {
		var installed bool
		causes, installed = e.notLoaded(d, drv, k, av, mf, &unread)
		if len(causes) == 0 && installed && merr == nil && !m.Present && (strings.Contains(m.Missing, "does not list") || e.Root.Covers("/sys/module/"+mod)) {
			causes = append(causes, cause{
				code:    CodeDriverModuleNotLoaded,
				summary: fmt.Sprintf("no kernel driver is bound: %s is installed but not loaded, and nothing read keeps it from loading", drv.Name),
				fix:     fmt.Sprintf("`modprobe %s`, then read `dmesg` for its messages about %s; to have it load at boot, check that the driver's package installed its module configuration (udev loads it by its alias).", drv.Name, bdf),
			})
		}
	}
	if len(causes) == 0 {
		nd.summary = "no kernel driver is bound; why " + drv.Name + " is not bound was not determined"
		if len(unread) > 0 {
			nd.summary += " (" + unread[0] + ")"
		}
		for _, u := range unread {
			nd.ev = append(nd.ev, Ev("", "not determined: "+u))
		}
		nd.fix = fmt.Sprintf("Load %s (`modprobe %s`) and read `dmesg` for its messages about %s; make sure %s is installed and supports this device; with Secure Boot, its module must be signed with an enrolled key.",
			drv.Name, drv.Name, bdf, drv.install(k.Release))
		if !e.Root.IsLive() {
			nd.fix += " A capture may not have kept what was not read: take it again on the host with `accel-doctor snapshot node.tar.gz`."
		}
		return nd
	}
	c := causes[0]
	nd.code, nd.summary, nd.fix = c.code, c.summary, c.fix
	nd.ev = append(nd.ev, c.ev...)
	for _, o := range causes[1:] {
		for i, ev := range o.ev {
			if i == 0 {
				ev.Value = "also (" + o.code + "): " + ev.Value
			}
			nd.ev = append(nd.ev, ev)
		}
	}
	for _, u := range unread {
		nd.ev = append(nd.ev, Ev("", "not read: "+u))
	}
	return nd
}

// meantForVFIO: the host says the device is meant for VFIO (its
// driver_override names a VFIO driver, vfio-pci's ids name it; layer 7's
// reading, iommu.Binding.Configured): the vendor's driver is not meant to
// have it, and layer 7 says why vfio-pci has not.
func meantForVFIO(e *Env, d *pci.Device, nd *noDriver) bool {
	v := e.VFIO()
	if v == nil {
		return false
	}
	b := v.Binding(d.Address)
	if b == nil || !b.Configured() {
		return false
	}
	bdf := d.Address.String()
	var by []string
	if b.Override != "" {
		by = append(by, "driver_override names "+b.Override)
		nd.ev = append(nd.ev, Ev(b.OverridePath, b.Override))
	}
	for _, from := range b.IDsFrom {
		by = append(by, "vfio-pci's ids name "+b.ID+" ("+from+")")
	}
	for _, w := range b.Why {
		nd.ev = append(nd.ev, Ev("", w))
	}
	nd.code = CodeDriverMeantForVFIO
	nd.summary = "no kernel driver is bound: the host means it for VFIO (" + strings.Join(by, "; ") + "), and no VFIO driver has bound it"
	var undo []string
	if b.Override != "" {
		undo = append(undo, fmt.Sprintf("clear its driver_override (`echo > /sys/bus/pci/devices/%s/driver_override`)", bdf))
	}
	if len(b.IDsFrom) > 0 {
		undo = append(undo, fmt.Sprintf("remove %s from vfio-pci's ids (%s)", b.ID, strings.Join(b.IDsFrom, ", ")))
	}
	nd.fix = fmt.Sprintf("If passthrough is meant, layer 7 (`accel-doctor iommu`) says why vfio-pci has not bound it; to use it natively instead, %s, then `echo %s > /sys/bus/pci/drivers_probe`.", strings.Join(undo, " and "), bdf)
	nd.follows = &report.Cause{Code: codeVFIONotBound, Subject: bdf}
	return true
}

// modalias is the device's modalias: the attribute, or, where the capture
// lacks it, the one the kernel would show for the ids read.
func (e *Env) modalias(d *pci.Device) (ma, src string, err error) {
	src = path.Join(d.Path, "modalias")
	ma, err = driver.ReadModalias(e.Root, d.Path)
	if err == nil {
		return ma, src, nil
	}
	if d.Has(pci.HasVendor | pci.HasDevice | pci.HasSubsystem | pci.HasClass) {
		ma = driver.FormatModalias(pci.Modalias{Vendor: d.Vendor, Device: d.Device, SubsystemVendor: d.SubsystemVendor, SubsystemDevice: d.SubsystemDevice, Class: d.Class})
		return ma, src, &modaliasFormed{err}
	}
	return "", src, err
}

// modaliasFormed: the attribute could not be read, and the modalias was
// formed from the device's ids.
type modaliasFormed struct{ err error }

func (m *modaliasFormed) Error() string {
	return "formed from the device's ids (" + m.err.Error() + ")"
}

// expectedDrivers are the known drivers meant for d, best first: those
// whose alias matches its modalias (the vendor's own first), else, or
// when the only ones that match are not the vendor's own, its vendor's
// own drivers for its class. matches holds the first matching alias of
// each known driver.
func expectedDrivers(d *pci.Device, k *driver.KernelModules, ma string) (out []*knownDriver, matches map[string]driver.Alias) {
	matches = map[string]driver.Alias{}
	if ma != "" {
		for _, a := range k.Match(ma) {
			if kd, ok := lookupDriver(a.Module); ok {
				if _, seen := matches[kd.Name]; !seen {
					matches[kd.Name] = a
				}
			}
		}
	}
	add := func(kd *knownDriver) {
		if !slices.Contains(out, kd) {
			out = append(out, kd)
		}
	}
	for i := range knownDrivers {
		if kd := &knownDrivers[i]; kd.Native && kd.drives(d) {
			if _, ok := matches[kd.Name]; ok {
				add(kd)
			}
		}
	}
	for i := range knownDrivers {
		if kd := &knownDrivers[i]; kd.Native && kd.drives(d) {
			add(kd)
		}
	}
	if len(out) == 0 {
		for i := range knownDrivers {
			if kd := &knownDrivers[i]; kd.drives(d) {
				if _, ok := matches[kd.Name]; ok {
					add(kd)
				}
			}
		}
	}
	return out, matches
}

// aliasPath is the file an alias was read from.
func aliasPath(k *driver.KernelModules, a driver.Alias) string {
	for _, b := range k.BuiltinAliases {
		if b == a {
			return k.BuiltinAliasRead.Path
		}
	}
	return k.AliasRead.Path
}

func vendorString(d *pci.Device) string {
	if d.Has(pci.HasVendor) {
		return fmt.Sprintf("%04x", d.Vendor)
	}
	return "unknown"
}

// boundFailed: the driver is loaded or built in and the device is still
// unbound. In the order that decides: nomodeset keeps a built-in KMS
// driver from registering; the device's driver_override names another
// driver (the kernel then lets no other bind it, drivers/pci/pci-driver.c
// pci_match_device); the kernel log holds the driver's failed probe of
// it; the driver does not list the device; or it has not claimed it, for
// no reason the root shows.
func (e *Env) boundFailed(d *pci.Device, drv *knownDriver, k *driver.KernelModules, av aliasVerdict, builtin, loaded bool, unread *[]string) []cause {
	bdf := d.Address.String()
	var out []cause
	if builtin {
		if c, ok := modesetCause(drv, k, bdf); ok {
			out = append(out, c)
		}
	}
	state := "loaded"
	if builtin {
		state = "built into the kernel"
	}
	ovPath := path.Join(d.Path, "driver_override")
	switch ov, err := driver.ReadDriverOverride(e.Root, d.Path); {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		*unread = append(*unread, ovPath+": "+err.Error())
	case err == nil && ov != "" && ov != drv.Name:
		out = append(out, cause{
			code:    CodeDriverNotClaimed,
			summary: fmt.Sprintf("no kernel driver is bound: %s is %s but has not claimed %s: its driver_override names %s", drv.Name, state, bdf, ov),
			fix: fmt.Sprintf("Clear the override (`echo > /sys/bus/pci/devices/%s/driver_override`), then `echo %s > /sys/bus/pci/drivers_probe`; remove what sets it (a vfio-pci or driverctl configuration) so that it stays clear.",
				bdf, bdf),
			ev: []report.Evidence{Ev(ovPath, ov+": only "+ov+" may bind the device")},
		})
	}
	lines, logs := e.probeLines(bdf, drv.Name)
	var failed *driver.ProbeLine
	var lineEv []report.Evidence
	for i, l := range lines {
		if l.Error != "" {
			failed = &lines[i]
		}
		lineEv = append(lineEv, Ev(l.File, fmt.Sprintf("line %d: %s", l.Line, l.Text)))
	}
	var read []string
	for _, l := range logs {
		switch {
		case l.Err == nil:
			read = append(read, l.Path)
		case !errors.Is(l.Err, fs.ErrNotExist):
			*unread = append(*unread, "the kernel log "+l.Path+": "+l.Err.Error())
		}
	}
	if failed != nil {
		out = append(out, cause{
			code:    CodeDriverProbeFailed,
			summary: fmt.Sprintf("no kernel driver is bound: %s is %s, but its probe of %s failed with error %s (%s line %d)", drv.Name, state, bdf, failed.Error, failed.File, failed.Line),
			fix: fmt.Sprintf("Read %s's messages before that line (`dmesg | grep -i -e %s -e %s`): they say why the probe failed (error -2 is usually missing firmware under /lib/firmware, -19 or -22 a device or setting the driver refuses). Fix that, then bind it again: `echo %s > /sys/bus/pci/drivers/%s/bind`, or reload the module.",
				drv.Name, drv.Name, bdf, bdf, drv.Name),
			ev: lineEv,
		})
	}
	if av == aliasNone {
		out = append(out, cause{
			code:    CodeDriverDeviceUnsupported,
			summary: fmt.Sprintf("no kernel driver is bound: the %s that is %s does not list %s among the devices it drives (no alias of it matches the device)", drv.Name, state, d.IDString()),
			fix:     fmt.Sprintf("Install a release of %s that supports %s (%s) and load it; `modinfo %s | grep alias` lists the devices the installed one drives.", drv.Name, d.IDString(), drv.install(k.Release), drv.Name),
			ev:      []report.Evidence{Ev(k.AliasRead.Path, "no alias of "+drv.Name+" matches the device")},
		})
	}
	if len(out) > 0 {
		return out
	}
	switch {
	case len(lines) > 0: // the driver's own lines, no probe error
	case len(read) > 0:
		lineEv = append(lineEv, Ev("", "no probe error for "+bdf+" in "+strings.Join(read, ", ")))
	default:
		lineEv = append(lineEv, Ev("", "no kernel log under this root ("+strings.Join(driver.KernelLogPaths, ", ")+"): probe errors could not be looked for"))
	}
	return []cause{{
		code:    CodeDriverNotClaimed,
		summary: fmt.Sprintf("no kernel driver is bound: %s is %s but has not claimed %s", drv.Name, state, bdf),
		fix: fmt.Sprintf("Ask the kernel to bind it (`echo %s > /sys/bus/pci/drivers/%s/bind`) and read `dmesg | grep %s` for why it does not: the kernel log on the host shows probe errors the files read here may not hold.",
			bdf, drv.Name, bdf),
		ev: lineEv,
	}}
}

// probeLines looks for the driver's probe errors about bdf in every
// kernel log file the root has.
func (e *Env) probeLines(bdf, drv string) ([]driver.ProbeLine, []driver.Read) {
	var lines []driver.ProbeLine
	var reads []driver.Read
	for _, p := range driver.KernelLogPaths {
		b, err := e.kernelLog(p)
		reads = append(reads, driver.Read{Path: p, Err: err})
		if err == nil {
			lines = append(lines, driver.FindProbeLines(b, p, bdf, drv, 3)...)
		}
	}
	return lines, reads
}

// modesetCause: the command line keeps a KMS driver from loading:
// <driver>.modeset=0, or nomodeset without <driver>.modeset=1.
func modesetCause(drv *knownDriver, k *driver.KernelModules, bdf string) (cause, bool) {
	if !drv.KMS || k.CmdlineRead.Err != nil {
		return cause{}, false
	}
	ms, hasMS := k.Param(drv.Name + ".modeset")
	if drv.ModesetParam && hasMS && ms.Value == "0" {
		return cause{
			code:    CodeDriverNomodeset,
			summary: fmt.Sprintf("no kernel driver is bound: %s on the kernel command line keeps %s from loading", ms.Raw, drv.Name),
			fix:     fmt.Sprintf("Remove %s from the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then `update-grub` or `grub2-mkconfig -o /boot/grub2/grub.cfg`; or `grubby --update-kernel=ALL --remove-args=%s`) and reboot; %s then loads and binds %s.", ms.Raw, ms.Raw, drv.Name, bdf),
			ev:      []report.Evidence{Ev(driver.CmdlinePath, ms.Raw)},
		}, true
	}
	nm, ok := k.Param("nomodeset")
	if !ok || (drv.ModesetParam && hasMS && ms.Value == "1") {
		return cause{}, false
	}
	return cause{
		code:    CodeDriverNomodeset,
		summary: fmt.Sprintf("no kernel driver is bound: the kernel runs with nomodeset, under which %s does not load", drv.Name),
		fix:     fmt.Sprintf("Remove nomodeset from the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then `update-grub` or `grub2-mkconfig -o /boot/grub2/grub.cfg`; or `grubby --update-kernel=ALL --remove-args=nomodeset`) and reboot; %s then loads and binds %s.", drv.Name, bdf),
		ev:      []report.Evidence{Ev(driver.CmdlinePath, nm.Raw+": only firmware framebuffer drivers may run (drivers/gpu/drm/drm_nomodeset.c)")},
	}, true
}

// notLoaded: the driver is neither loaded nor built in: not installed
// for the running kernel, not listing the device, refused, stopped by
// nomodeset, or unsigned where only signed modules load. installed says
// whether its module file was found for the running kernel.
func (e *Env) notLoaded(d *pci.Device, drv *knownDriver, k *driver.KernelModules, av aliasVerdict, mf driver.ModuleFile, unread *[]string) (out []cause, installed bool) {
	bdf := d.Address.String()
	rel := k.Release
	install := fmt.Sprintf("Install %s for kernel %s (`uname -r`), then `modprobe %s`.", drv.install(rel), orUnknown(rel), drv.Name)
	switch {
	case av == aliasNone && mf.InDep && mf.Exists:
		out = append(out, cause{
			code:    CodeDriverDeviceUnsupported,
			summary: fmt.Sprintf("no kernel driver is bound: the installed %s does not list %s among the devices it drives (no alias of it matches)", drv.Name, d.IDString()),
			fix:     fmt.Sprintf("Install a release of %s that supports %s (%s), then `modprobe %s`; `modinfo %s | grep alias` lists the devices the installed one drives.", drv.Name, d.IDString(), drv.install(k.Release), drv.Name, drv.Name),
			ev:      []report.Evidence{Ev(k.DepRead.Path, fmt.Sprintf("line %d: %s", mf.Dep.Line, mf.Dep.Path))},
		})
		installed = true
	case av == aliasNone && k.DepRead.Err == nil && !mf.InDep:
		out = append(out, cause{
			code:    CodeDriverModuleNotInstalled,
			summary: fmt.Sprintf("no kernel driver is bound: %s is not installed for kernel %s", drv.Name, rel),
			fix:     install,
			ev:      []report.Evidence{Ev(k.DepRead.Path, "no line for "+drv.Name)},
		})
	case av == aliasMatches && k.DepRead.Err == nil && !mf.InDep && mf.BuiltinLine == 0:
		out = append(out, cause{
			code:    CodeDriverModuleNotInstalled,
			summary: fmt.Sprintf("no kernel driver is bound: modules.alias names %s, but modules.dep has no file for it (kernel %s)", drv.Name, rel),
			fix:     install + " If the module is there, `depmod -a " + rel + "` rebuilds modules.dep.",
			ev:      []report.Evidence{Ev(k.DepRead.Path, "no line for "+drv.Name)},
		})
	case mf.InDep && !mf.Exists && mf.StatErr == nil:
		out = append(out, cause{
			code:    CodeDriverModuleNotInstalled,
			summary: fmt.Sprintf("no kernel driver is bound: modules.dep names %s for %s, and the file is absent", mf.Dep.Path, drv.Name),
			fix:     install + " (its package was removed or its DKMS build for this kernel failed: `dkms status`).",
			ev:      []report.Evidence{Ev(k.DepRead.Path, fmt.Sprintf("line %d: %s", mf.Dep.Line, mf.Dep.Path)), Ev(mf.Path, "absent")},
		})
	case mf.InDep && mf.Exists:
		installed = true
	case mf.InDep:
		*unread = append(*unread, "whether "+mf.Path+" is installed: "+mf.StatErr.Error())
	default:
		if k.DepRead.Err != nil && !errors.Is(k.DepRead.Err, driver.ErrNoRelease) {
			*unread = append(*unread, "modules.dep: "+e.withGap(k.DepRead.Err))
		}
	}
	for _, r := range k.Refusals(driver.ModuleName(drv.Name)) {
		where, text := r.Where(), r.Text()
		c := cause{code: CodeDriverModuleBlacklisted, ev: []report.Evidence{Ev(refusalPath(r), refusalValue(r))}}
		switch {
		case r.Rule != nil && r.Rule.Kind == driver.RuleInstall:
			c.summary = fmt.Sprintf("no kernel driver is bound: modprobe runs `%s` instead of loading %s (%s)", r.Rule.Command, drv.Name, where)
			c.fix = fmt.Sprintf("Remove `%s` from %s, rebuild the initramfs (`update-initramfs -u` or `dracut -f`), then `modprobe %s` (or reboot).", text, where, drv.Name)
		case r.Rule != nil:
			c.summary = fmt.Sprintf("no kernel driver is bound: %s is blacklisted (%s: %s)", drv.Name, where, text)
			c.fix = fmt.Sprintf("Remove `%s` from %s, rebuild the initramfs (`update-initramfs -u` or `dracut -f`), then `modprobe %s` (or reboot).", text, where, drv.Name)
		default:
			c.summary = fmt.Sprintf("no kernel driver is bound: %s on the kernel command line keeps %s from loading", text, drv.Name)
			c.fix = fmt.Sprintf("Remove %s from the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then `update-grub` or `grub2-mkconfig -o /boot/grub2/grub.cfg`; or `grubby --update-kernel=ALL --remove-args=%s`) and reboot.", text, text)
		}
		out = append(out, c)
	}
	for _, err := range k.ModprobeErrs {
		*unread = append(*unread, "modprobe configuration: "+err.Error())
	}
	note := func(r driver.Read, what string) {
		if r.Err != nil {
			*unread = append(*unread, what+": "+e.withGap(r.Err))
		}
	}
	note(k.CmdlineRead, "the kernel command line")
	if c, ok := modesetCause(drv, k, bdf); ok {
		out = append(out, c)
	}
	if installed && len(out) == 0 {
		if c, ok := e.unsignedCause(drv, k, mf, unread); ok {
			out = append(out, c)
		}
	}
	if installed && len(out) > 0 && out[0].code != CodeDriverDeviceUnsupported {
		// Where the module is installed, ahead of what keeps it out.
		out[0].ev = append([]report.Evidence{Ev(k.DepRead.Path, fmt.Sprintf("line %d: %s", mf.Dep.Line, mf.Dep.Path))}, out[0].ev...)
	}
	return out, installed
}

func refusalPath(r driver.Refusal) string {
	if r.Rule != nil {
		return r.Rule.File
	}
	return driver.CmdlinePath
}

func refusalValue(r driver.Refusal) string {
	if r.Rule != nil {
		return fmt.Sprintf("line %d: %s", r.Rule.Line, r.Rule.Text)
	}
	if r.Kernel {
		return r.Param.Raw + ": the kernel refuses to load it (kernel/module/main.c)"
	}
	return r.Param.Raw + ": modprobe treats it as blacklisted"
}

// unsignedCause: the kernel loads only signed modules and the installed
// module file carries no signature.
func (e *Env) unsignedCause(drv *knownDriver, k *driver.KernelModules, mf driver.ModuleFile, unread *[]string) (cause, bool) {
	req, known, src, why := k.Enforcement()
	if !req {
		if !known {
			*unread = append(*unread, "whether the kernel loads only signed modules: "+why)
		}
		return cause{}, false
	}
	signed, err := driver.ReadModuleSignature(e.Root, mf.Path)
	switch {
	case err != nil:
		*unread = append(*unread, fmt.Sprintf("whether %s is signed (%s requires it): %s", mf.Path, why, e.withGap(err)))
		return cause{}, false
	case signed:
		*unread = append(*unread, fmt.Sprintf("%s is signed, and %s; whether the kernel trusts its key is not readable here (`mokutil --list-enrolled`, `keyctl list %%:.platform`)", mf.Path, why))
		return cause{}, false
	}
	return cause{
		code:    CodeDriverModuleUnsigned,
		summary: fmt.Sprintf("no kernel driver is bound: %s (%s) carries no signature, and the kernel loads only signed modules (%s)", drv.Name, mf.Dep.Path, why),
		fix: fmt.Sprintf("Sign %s with a key the kernel trusts and load it: a DKMS build signs with its MOK key (`mokutil --import /var/lib/dkms/mok.pub`, reboot and enrol it in the MOK manager, then `dkms autoinstall`), or install a build of %s signed by the distribution; then `modprobe %s`.",
			mf.Path, drv.Name, drv.Name),
		ev: []report.Evidence{Ev(mf.Path, "no \"~Module signature appended~\" trailer (include/linux/module_signature.h)"), Ev(src, why)},
	}, true
}
