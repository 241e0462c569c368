package diagnose

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

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
)

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
	Title: "no kernel driver is bound to the accelerator",
	Explain: `The PCI function has no "driver" link in sysfs
(/sys/bus/pci/devices/<BDF>/driver): no kernel driver has claimed it, so no
device node exists for it and nothing in user space, inside or outside a
container, can use it. Usual causes: the driver package is not installed or
its module is not loaded (it failed to build for the running kernel, Secure
Boot refused an unsigned module), the module is blacklisted, the device ID is
too new for the installed driver, or the driver's probe failed (see dmesg).`,
	Remediation: "Load the driver (`modprobe nvidia`, `modprobe amdgpu`, ...) and read `dmesg` for probe errors; check that the driver package supports this device ID and was built for `uname -r`; with Secure Boot, sign the module or enrol its key.",
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
		Codes: []string{CodeDriverBound, CodeDriverNone, CodeDriverUnknown, CodeDriverNouveau, CodeDriverVFIOBound},
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

// driverFamily names the drivers accel-doctor knows, for summaries.
func driverFamily(drv string) string {
	switch drv {
	case "nvidia":
		return "NVIDIA kernel driver"
	case "amdgpu":
		return "AMD GPU driver (ROCm/Mesa)"
	case "i915":
		return "Intel GPU driver (i915)"
	case "xe":
		return "Intel Xe GPU driver"
	case "habanalabs":
		return "Intel Gaudi driver"
	case "intel_vpu":
		return "Intel NPU driver"
	case "nouveau":
		return "nouveau (open-source NVIDIA display driver)"
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
			out.Add(CodeDriverNone, report.Fail, bdf, "no kernel driver is bound", ev...)
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
