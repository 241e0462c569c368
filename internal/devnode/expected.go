package devnode

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Fixed device numbers. The NVIDIA module registers major 195 with minors
// 0-253 for GPUs, 254 for nvidia-modeset and 255 for nvidiactl
// (NV_MAJOR_DEVICE_NUMBER, NV_CONTROL_DEVICE_MINOR in
// open-gpu-kernel-modules kernel-open/common/inc/nv.h); VFIO's container
// node is misc 10:196 (VFIO_MINOR, include/linux/miscdevice.h).
const (
	NVIDIAMajor         = 195
	NVIDIAModesetMinor  = 254
	NVIDIACtlMinor      = 255
	MiscMajor           = 10
	VFIOContainerMinor  = 196
	procNVIDIAUVMName   = "nvidia-uvm"
	procNVIDIACapsName  = "nvidia-caps"
	procVFIOName        = "vfio"
	nvidiaCapsMIGDir    = "/proc/driver/nvidia/capabilities/mig"
	sysClassKFDDev      = "/sys/class/kfd/kfd/dev"
	sysClassMiscVFIODev = "/sys/class/misc/vfio/dev"
)

// Kinds of expected nodes.
const (
	KindNVIDIAGPU      = "nvidia-gpu"
	KindNVIDIACtl      = "nvidiactl"
	KindNVIDIAUVM      = "nvidia-uvm"
	KindNVIDIAUVMTools = "nvidia-uvm-tools"
	KindNVIDIAModeset  = "nvidia-modeset"
	KindNVIDIACap      = "nvidia-cap"
	KindDRMCard        = "drm-card"
	KindDRMRender      = "drm-render"
	KindKFD            = "kfd"
	KindAccel          = "accel"
	KindVideo          = "video4linux"
	KindVFIOContainer  = "vfio-container"
	KindVFIOGroup      = "vfio-group"
	KindVFIODevice     = "vfio-device"
)

// Device is what the expectations need to know about one accelerator.
// The pci package has it all; this package takes plain values so that it
// does not depend on how PCI devices are modelled.
type Device struct {
	Address string // "0000:17:00.0"
	Vendor  uint16
	Driver  string // bound driver, "" when none
	// Class is the PCI class code (0xCCSSPP); 0 when unknown.
	Class uint32
	// SysfsPath is the device's directory under /sys/devices; "" means
	// /sys/bus/pci/devices/<Address> is resolved.
	SysfsPath string
}

// ExpectedNode is a device node an accelerator needs.
type ExpectedNode struct {
	Path string // host path, "/dev/nvidia0"
	Kind string // one of the Kind constants
	Type hostfs.FileType
	// Major and Minor are the device number the node must have; valid only
	// when DevKnown. DevSource says where they come from ("/sys/.../dev",
	// "/proc/devices", "fixed by the driver"), or, when the number is not
	// known, what was read and why it gave none.
	Major, Minor uint32
	DevKnown     bool
	DevSource    string
	// MajorOnly is set when the major is known and the minor is not
	// (a driver that is not loaded yet, or a dynamic minor without sysfs).
	MajorOnly bool
	// Subjects are the PCI addresses that need the node; a shared node
	// (nvidiactl, nvidia-uvm, kfd, vfio) lists every one of them.
	Subjects []string
	Shared   bool
	Required bool
	Why      string // why the node is needed, and why it is or is not required
	// Unnamed: the node's name is not known, only its form (Path is
	// "/dev/dri/renderD<minor>"): the driver names a device's own node
	// when it binds it (DriverNode).
	Unnamed bool
}

// Dev is "MAJOR:MINOR" of the expected number, "" when unknown.
func (n ExpectedNode) Dev() string {
	if !n.DevKnown {
		return ""
	}
	return fmt.Sprintf("%d:%d", n.Major, n.Minor)
}

// DeviceError is a problem that kept some of a device's nodes from being
// known.
type DeviceError struct {
	Address string
	Err     error
}

func (e DeviceError) Error() string { return e.Address + ": " + e.Err.Error() }
func (e DeviceError) Unwrap() error { return e.Err }

// Expectation is every node the given accelerators need.
type Expectation struct {
	Nodes []ExpectedNode // sorted by path, each path once
	// Covered lists the addresses with at least one expected node.
	Covered map[string]bool
	Errors  []DeviceError
	// ProcDevices is the parsed /proc/devices used for dynamic majors;
	// ProcDevicesErr why it could not be read, or, wrapping
	// ErrSkippedLines, which lines of it did not parse (ProcDevices then
	// holds the others). Without a device nothing needs it: it is not
	// read, and ProcDevicesErr is ErrNoDevices.
	ProcDevices    ProcDevices
	ProcDevicesErr error
}

// ErrNoDevices is Expectation.ProcDevicesErr when no device was given,
// so that no node is expected and /proc/devices was not read.
var ErrNoDevices = errors.New("not read: no device needs a node")

// Expected works out the nodes each device needs from what the kernel
// publishes: sysfs "dev" attributes where they exist, the NVIDIA procfs,
// and /proc/devices for dynamic majors.
func Expected(root *hostfs.Root, devs []Device) *Expectation {
	x := &Expectation{Covered: map[string]bool{}}
	if len(devs) > 0 || root.Recording() { // a replay may be asked about devices
		x.ProcDevices, x.ProcDevicesErr = ReadProcDevices(root)
	} else {
		x.ProcDevicesErr = ErrNoDevices
	}
	byPath := map[string]*ExpectedNode{}
	// subjects is each node's Subjects as a set: a shared node
	// (nvidiactl, kfd, vfio) is added once per device.
	subjects := map[string]map[string]bool{}
	add := func(bdf string, n ExpectedNode) {
		x.Covered[bdf] = true
		if old, ok := byPath[n.Path]; ok {
			if !subjects[n.Path][bdf] {
				subjects[n.Path][bdf] = true
				old.Subjects = append(old.Subjects, bdf)
			}
			old.Required = old.Required || n.Required
			return
		}
		n.Type = hostfs.TypeChar
		n.Subjects = []string{bdf}
		byPath[n.Path] = &n
		subjects[n.Path] = map[string]bool{bdf: true}
	}
	fail := func(bdf string, err error) { x.Errors = append(x.Errors, DeviceError{Address: bdf, Err: err}) }
	// The class directories are listed, and their entries resolved, once
	// for all devices.
	accel := &classDir{class: "accel"}
	video := &classDir{class: "video4linux"}

	for _, d := range devs {
		sys := d.SysfsPath
		if sys == "" {
			p, err := root.Resolve(path.Join("/sys/bus/pci/devices", d.Address))
			if err != nil {
				fail(d.Address, err)
				continue
			}
			sys = p
		}
		if d.Driver == "nvidia" {
			x.nvidia(root, d, add, fail)
		}
		if d.Driver == "amdgpu" {
			x.kfd(root, d, add)
		}
		if d.Driver == "vfio-pci" {
			x.vfio(root, d, sys, add, fail)
		}
		drmNodes(root, d, sys, add, fail)
		classNodes(root, d, sys, accel, "/dev/accel", KindAccel,
			"the kernel's compute accelerator subsystem (drivers/accel) exposes this device through this node", add, fail)
		classNodes(root, d, sys, video, "/dev", KindVideo,
			"the driver registered this device with V4L2 (drivers/media/v4l2-core/v4l2-dev.c); video applications open this node", add, fail)
	}
	for _, n := range byPath {
		sort.Strings(n.Subjects)
		x.Nodes = append(x.Nodes, *n)
	}
	sort.Slice(x.Nodes, func(i, j int) bool { return x.Nodes[i].Path < x.Nodes[j].Path })
	return x
}

type addFn func(bdf string, n ExpectedNode)
type failFn func(bdf string, err error)

func (x *Expectation) nvidia(root *hostfs.Root, d Device, add addFn, fail failFn) {
	// nvidia.ko also drives NVSwitch functions (class 0x0680), which have
	// /dev/nvidia-nvswitch* nodes instead and no entry under
	// /proc/driver/nvidia/gpus; only display-class functions are GPUs.
	if d.Class != 0 && d.Class>>16 != 0x03 {
		return
	}
	nvidiaGPUNode(root, d, add, fail)
	add(d.Address, nvidiaCtlNode())
	add(d.Address, ExpectedNode{
		Path: "/dev/nvidia-modeset", Kind: KindNVIDIAModeset, Shared: true,
		Major: NVIDIAMajor, Minor: NVIDIAModesetMinor, DevKnown: true, DevSource: "fixed by the driver",
		Why: "used by display and Vulkan/GL (nvidia-modeset); compute does not need it",
	})
	x.nvidiaUVM(d, add)
	x.nvidiaCaps(root, d, add, fail)
}

func nvidiaCtlNode() ExpectedNode {
	return ExpectedNode{
		Path: "/dev/nvidiactl", Kind: KindNVIDIACtl, Shared: true,
		Major: NVIDIAMajor, Minor: NVIDIACtlMinor, DevKnown: true, DevSource: "fixed by the driver",
		Required: true,
		Why:      "the control node every NVIDIA user-space library opens first; without it no GPU is usable",
	}
}

// nvidiaGPUNode expects /dev/nvidia<Device Minor>, the minor published in
// the GPU's procfs information file.
func nvidiaGPUNode(root *hostfs.Root, d Device, add addFn, fail failFn) {
	info, err := driver.ReadGPUInformation(root, d.Address)
	switch {
	case errors.Is(err, fs.ErrNotExist) && root.Exists(path.Join(driver.NVIDIAGPUsDir, d.Address)):
		// nv-procfs.c creates the file with the directory: a capture
		// that kept the directory without it kept only part of it.
		fail(d.Address, fmt.Errorf("minor of /dev/nvidiaN unknown: %w", &hostfs.NotCapturedError{Path: driver.GPUInformationPath(d.Address),
			Why: path.Join(driver.NVIDIAGPUsDir, d.Address) + " holds no information file (the capture kept only part of the NVIDIA procfs)"}))
	case err != nil:
		fail(d.Address, fmt.Errorf("minor of /dev/nvidiaN unknown: %w", err))
	case info.DeviceMinor == nil:
		fail(d.Address, fmt.Errorf("minor of /dev/nvidiaN unknown: %s has no Device Minor", driver.GPUInformationPath(d.Address)))
	default:
		m := *info.DeviceMinor
		add(d.Address, ExpectedNode{
			Path: fmt.Sprintf("/dev/nvidia%d", m), Kind: KindNVIDIAGPU,
			Major: NVIDIAMajor, Minor: m, DevKnown: true,
			DevSource: "Device Minor in " + driver.GPUInformationPath(d.Address) + ", major 195 fixed by the driver",
			Required:  true,
			Why:       "the GPU's own node: CUDA and NVML open /dev/nvidia<Device Minor> for every GPU they use",
		})
	}
}

// nvidiaUVM expects /dev/nvidia-uvm and nvidia-uvm-tools. nvidia-uvm
// allocates a dynamic major with minor 0 for the node and 1 for the tools
// node (NVIDIA_UVM_PRIMARY_MINOR_NUMBER, NVIDIA_UVM_TOOLS_MINOR_NUMBER in
// kernel-open/nvidia-uvm/uvm_common.h).
func (x *Expectation) nvidiaUVM(d Device, add addFn) {
	uvm, tools := x.uvmNodes()
	add(d.Address, uvm)
	add(d.Address, tools)
}

func (x *Expectation) uvmNodes() (uvm, tools ExpectedNode) {
	uvm = ExpectedNode{
		Path: "/dev/nvidia-uvm", Kind: KindNVIDIAUVM, Shared: true, Required: true,
		Why: "CUDA's unified memory driver (nvidia-uvm.ko): cuInit fails without it",
	}
	tools = ExpectedNode{
		Path: "/dev/nvidia-uvm-tools", Kind: KindNVIDIAUVMTools, Shared: true,
		Why: "used by profilers and debuggers (CUPTI, Nsight); plain CUDA does not need it",
	}
	if maj, ok := x.ProcDevices.CharMajor(procNVIDIAUVMName); ok {
		uvm.Major, uvm.Minor, uvm.DevKnown = maj, 0, true
		tools.Major, tools.Minor, tools.DevKnown = maj, 1, true
		uvm.DevSource = fmt.Sprintf("%q in %s, minor 0", procNVIDIAUVMName, ProcDevicesPath)
		tools.DevSource = fmt.Sprintf("%q in %s, minor 1", procNVIDIAUVMName, ProcDevicesPath)
	} else {
		uvm.DevSource = x.dynamicMajorMissing(procNVIDIAUVMName, "the nvidia-uvm module is not loaded")
		tools.DevSource = uvm.DevSource
	}
	return uvm, tools
}

// dynamicMajorMissing says why a dynamic major is not known: the name is
// not registered (meaning), or /proc/devices could not be read or only in
// part.
func (x *Expectation) dynamicMajorMissing(name, meaning string) string {
	switch {
	case x.ProcDevicesErr == nil:
		return fmt.Sprintf("no %q major in %s: %s", name, ProcDevicesPath, meaning)
	case errors.Is(x.ProcDevicesErr, ErrSkippedLines):
		return fmt.Sprintf("no %q major among the lines of %s that parse (%v)", name, ProcDevicesPath, x.ProcDevicesErr)
	}
	return ProcDevicesProblem(x.ProcDevicesErr)
}

// ProcDevicesProblem says why /proc/devices could not be used. Every Linux
// host has the file (fs/proc/devices.c), so a root without it is a capture
// or a mount that lacks it, never a host without majors.
func ProcDevicesProblem(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "no " + ProcDevicesPath + " under this root: every Linux host has one, so the capture (or the mount of /proc) lacks it"
	}
	return ProcDevicesPath + " could not be read: " + err.Error()
}

// nvidiaCaps expects the MIG capability nodes, which exist only when the
// driver registered the nvidia-caps major; their minors are published in
// procfs (DeviceFileMinor in
// /proc/driver/nvidia/capabilities/mig/{config,monitor}).
func (x *Expectation) nvidiaCaps(root *hostfs.Root, d Device, add addFn, fail failFn) {
	maj, ok := x.ProcDevices.CharMajor(procNVIDIACapsName)
	if !ok {
		return
	}
	for _, c := range []string{"config", "monitor"} {
		p := path.Join(nvidiaCapsMIGDir, c)
		b, err := root.ReadFile(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				fail(d.Address, err)
			}
			continue
		}
		minor, err := ParseCapMinor(b)
		if err != nil {
			fail(d.Address, fmt.Errorf("%s: %w", p, err))
			continue
		}
		add(d.Address, ExpectedNode{
			Path: fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", minor), Kind: KindNVIDIACap, Shared: true,
			Major: maj, Minor: minor, DevKnown: true,
			DevSource: fmt.Sprintf("%q in %s, DeviceFileMinor in %s", procNVIDIACapsName, ProcDevicesPath, p),
			Why:       "MIG " + c + " capability; only MIG management and monitoring need it",
		})
	}
}

// ParseCapMinor reads "DeviceFileMinor: N" from an NVIDIA capability file.
func ParseCapMinor(b []byte) (uint32, error) {
	for l := range bytes.Lines(b) { // no line-length limit, unlike bufio.Scanner
		k, v, ok := strings.Cut(string(l), ":")
		if ok && strings.TrimSpace(k) == "DeviceFileMinor" {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil || n >= 1<<20 {
				return 0, fmt.Errorf("DeviceFileMinor %s is not a minor", quote(strings.TrimSpace(v)))
			}
			return uint32(n), nil
		}
	}
	return 0, errors.New("no DeviceFileMinor line")
}

func (x *Expectation) kfd(root *hostfs.Root, d Device, add addFn) {
	add(d.Address, kfdNode(root))
}

func kfdNode(root *hostfs.Root) ExpectedNode {
	n := ExpectedNode{
		Path: "/dev/kfd", Kind: KindKFD, Shared: true, Required: true,
		Why: "ROCm's compute interface (amdkfd): HIP and OpenCL on ROCm open /dev/kfd besides the render node",
	}
	if maj, min, src, ok := sysfsDev(root, sysClassKFDDev); ok {
		n.Major, n.Minor, n.DevKnown, n.DevSource = maj, min, true, src
	} else {
		n.DevSource = src
	}
	return n
}

// DriverNode is the node of a kind that a driver creates for a device it
// binds, for a device no driver is bound to: what the device would need.
// A shared node has its path and, where it is fixed or the driver
// registered its major, its number (/dev/nvidiactl, /dev/nvidia-uvm,
// /dev/kfd); a device's own node (/dev/nvidia<minor>, a DRM render node,
// an accel node) is Unnamed, because the driver names it when it binds the
// device (nvidia.ko publishes the minor in its procfs, the DRM and accel
// cores register the node under the device, drivers/gpu/drm/drm_sysfs.c).
// ok is false for a kind with no such node.
func (x *Expectation) DriverNode(root *hostfs.Root, kind string) (ExpectedNode, bool) {
	switch kind {
	case KindNVIDIACtl:
		return nvidiaCtlNode(), true
	case KindNVIDIAUVM:
		uvm, _ := x.uvmNodes()
		return uvm, true
	case KindKFD:
		return kfdNode(root), true
	case KindNVIDIAGPU:
		return ExpectedNode{
			Path: "/dev/nvidia<minor>", Kind: kind, Unnamed: true, Required: true, Major: NVIDIAMajor, MajorOnly: true,
			DevSource: "major 195 fixed by the driver; nvidia.ko gives the minor in " + driver.GPUInformationPath("<BDF>") + " when it drives the GPU",
			Why:       "the GPU's own node: CUDA and NVML open /dev/nvidia<Device Minor> for every GPU they use",
		}, true
	case KindDRMRender:
		return ExpectedNode{
			Path: "/dev/dri/renderD<minor>", Kind: kind, Unnamed: true, Required: true,
			DevSource: "the DRM core registers it under the device's drm/ directory when its driver binds it",
			Why:       "the render node: compute and media on Mesa, ROCm, oneAPI and VA-API open it",
		}, true
	case KindAccel:
		return ExpectedNode{
			Path: "/dev/accel/accel<minor>", Kind: kind, Unnamed: true, Required: true,
			DevSource: "the accel core registers it under /sys/class/accel when the device's driver binds it",
			Why:       "the kernel's compute accelerator subsystem (drivers/accel) exposes the device through this node",
		}, true
	}
	return ExpectedNode{}, false
}

// NodesOfForm lists the nodes present of an unnamed kind's form
// (/dev/nvidia0..., /dev/dri/renderD128..., /dev/accel/accel0...), for
// saying which exist though no device of theirs was found.
func NodesOfForm(root *hostfs.Root, kind string) ([]string, error) {
	dir, prefix := "", ""
	switch kind {
	case KindNVIDIAGPU:
		dir, prefix = "/dev", "nvidia"
	case KindDRMRender:
		dir, prefix = "/dev/dri", "renderD"
	case KindAccel:
		dir, prefix = "/dev/accel", "accel"
	default:
		return nil, nil
	}
	names, err := root.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, prefix); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			out = append(out, path.Join(dir, n))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (x *Expectation) vfio(root *hostfs.Root, d Device, sys string, add addFn, fail failFn) {
	c := ExpectedNode{
		Path: "/dev/vfio/vfio", Kind: KindVFIOContainer, Shared: true, Required: true,
		Major: MiscMajor, Minor: VFIOContainerMinor, DevKnown: true, DevSource: "the fixed misc minor of VFIO",
		Why: "the VFIO container node every VFIO user (QEMU, DPDK, KubeVirt) opens first",
	}
	if maj, min, src, ok := sysfsDev(root, sysClassMiscVFIODev); ok {
		c.Major, c.Minor, c.DevSource = maj, min, src
	}
	add(d.Address, c)
	t, err := root.Readlink(path.Join(sys, "iommu_group"))
	if err != nil {
		fail(d.Address, fmt.Errorf("VFIO group node unknown: %w", err))
	} else {
		group := path.Base(t)
		name := group
		// Without an IOMMU, vfio's unsafe no-IOMMU mode names the group
		// "noiommu-N" (drivers/vfio/group.c).
		if root.Exists(path.Join("/sys/class/vfio", "noiommu-"+group)) {
			name = "noiommu-" + group
		}
		g := ExpectedNode{
			Path: path.Join("/dev/vfio", name), Kind: KindVFIOGroup, Shared: true, Required: true,
			Why: "the device's IOMMU group node: a VFIO user opens /dev/vfio/<group> to reach the device",
		}
		if maj, min, src, ok := sysfsDev(root, path.Join("/sys/class/vfio", name, "dev")); ok {
			g.Major, g.Minor, g.DevKnown, g.DevSource = maj, min, true, src
		} else if maj, ok := x.ProcDevices.CharMajor(procVFIOName); ok {
			g.Major, g.MajorOnly = maj, true
			g.DevSource = fmt.Sprintf("%q in %s (minor not published: %s)", procVFIOName, ProcDevicesPath, src)
		} else {
			g.DevSource = src
		}
		add(d.Address, g)
	}
	// The per-device cdev of VFIO over iommufd (Linux 6.6+,
	// drivers/vfio/device_cdev.c): <device>/vfio-dev/vfioN.
	names, err := root.ReadDir(path.Join(sys, "vfio-dev"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fail(d.Address, err)
		}
		return
	}
	for _, nm := range names {
		if !strings.HasPrefix(nm, "vfio") {
			continue
		}
		n := ExpectedNode{
			Path: path.Join("/dev/vfio/devices", nm), Kind: KindVFIODevice,
			Why: "the device's VFIO cdev for iommufd users; the group node serves the legacy interface",
		}
		if maj, min, src, ok := sysfsDev(root, path.Join(sys, "vfio-dev", nm, "dev")); ok {
			n.Major, n.Minor, n.DevKnown, n.DevSource = maj, min, true, src
		} else {
			n.DevSource = src
		}
		add(d.Address, n)
	}
}

// drmNodes expects /dev/dri/<name> for each card*/renderD* the DRM core
// registered under the device (drivers/gpu/drm/drm_sysfs.c).
func drmNodes(root *hostfs.Root, d Device, sys string, add addFn, fail failFn) {
	names, err := root.ReadDir(path.Join(sys, "drm"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fail(d.Address, err)
		}
		return
	}
	hasRender := false
	for _, nm := range names {
		if strings.HasPrefix(nm, "renderD") {
			hasRender = true
		}
	}
	for _, nm := range names {
		var n ExpectedNode
		switch {
		case strings.HasPrefix(nm, "renderD"):
			n = ExpectedNode{Kind: KindDRMRender, Required: d.Driver != "nvidia",
				Why: "the render node: compute and media on Mesa, ROCm, oneAPI and VA-API open it"}
			if d.Driver == "nvidia" {
				n.Why = "nvidia-drm's render node serves graphics (GBM/EGL); CUDA uses /dev/nvidia*"
			}
		case strings.HasPrefix(nm, "card") && !strings.Contains(nm, "-"):
			// card0-DP-1 and the like are connectors, not nodes.
			n = ExpectedNode{Kind: KindDRMCard, Required: !hasRender && d.Driver != "nvidia",
				Why: "the primary node: modesetting and display; compute uses the render node"}
			if n.Required {
				n.Why = "the primary node, and the device's only DRM node (no render node registered)"
			}
		default:
			continue
		}
		n.Path = path.Join("/dev/dri", nm)
		if maj, min, src, ok := sysfsDev(root, path.Join(sys, "drm", nm, "dev")); ok {
			n.Major, n.Minor, n.DevKnown, n.DevSource = maj, min, true, src
		} else {
			n.DevSource = src
		}
		add(d.Address, n)
	}
}

// classDir is a /sys/class/<class> directory read once: its listing (or
// why it could not be listed), and each entry's resolved "device" link
// indexed by that path and every directory above it, so that a device
// finds the entries that belong to it (or to a child of it) in a lookup.
type classDir struct {
	class   string
	read    bool
	err     error
	byAbove map[string][]string // resolved device path or an ancestor -> entry names, in listing order
}

func (c *classDir) load(root *hostfs.Root) {
	if c.read {
		return
	}
	c.read = true
	dir := path.Join("/sys/class", c.class)
	names, err := root.ReadDir(dir)
	if err != nil {
		c.err = err
		return
	}
	c.byAbove = map[string][]string{}
	for _, nm := range names {
		dev, err := root.Resolve(path.Join(dir, nm, "device"))
		if err != nil {
			continue // virtual class devices have no device link
		}
		// The device itself and every directory above it but "/" (a
		// device at "/" owns what resolves to "/" only).
		c.byAbove[dev] = append(c.byAbove[dev], nm)
		for p := path.Dir(dev); p != "/" && p != "." && p != dev; p = path.Dir(p) {
			c.byAbove[p] = append(c.byAbove[p], nm)
		}
	}
}

// classNodes expects /dev/<...>/<name> for each entry of /sys/class/<class>
// whose "device" link resolves to the PCI device (or a child of it).
func classNodes(root *hostfs.Root, d Device, sys string, c *classDir, devDir, kind, why string, add addFn, fail failFn) {
	c.load(root)
	if c.err != nil {
		if !errors.Is(c.err, fs.ErrNotExist) {
			fail(d.Address, c.err)
		}
		return
	}
	dir := path.Join("/sys/class", c.class)
	for _, nm := range c.byAbove[sys] {
		n := ExpectedNode{Path: path.Join(devDir, nm), Kind: kind, Required: true, Why: why}
		if maj, min, src, ok := sysfsDev(root, path.Join(dir, nm, "dev")); ok {
			n.Major, n.Minor, n.DevKnown, n.DevSource = maj, min, true, src
		} else {
			n.DevSource = src
		}
		add(d.Address, n)
	}
}

// sysfsDev reads a sysfs "dev" attribute (drivers/base/core.c, dev_show:
// "MAJOR:MINOR"). src names the file, or, when !ok, what was read and why
// it gave no number.
func sysfsDev(root *hostfs.Root, p string) (major, minor uint32, src string, ok bool) {
	s, err := root.ReadString(p)
	if err != nil {
		return 0, 0, err.Error(), false
	}
	maj, min, err := hostfs.ParseMajorMinor(s)
	if err != nil {
		return 0, 0, fmt.Sprintf("%s: %v", p, err), false
	}
	return maj, min, p, true
}
