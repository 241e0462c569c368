package iommu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// VFIO readiness: is everything in place for a user-space driver (QEMU,
// DPDK, a KubeVirt virt-launcher) to open a device through VFIO? The
// modules, each device's binding and driver_override, the vfio-pci.ids
// that bind devices at load, the container and group nodes, iommufd and
// the per-device cdevs, and which process holds a group open. Facts with
// their evidence; the findings are made in internal/diagnose.

// Host paths of the VFIO and iommufd interfaces.
const (
	// VFIODevDir holds the container, one node per VFIO group and, with
	// CONFIG_VFIO_DEVICE_CDEV, devices/ (drivers/vfio/group.c,
	// vfio_devnode: "vfio/%s"; device_cdev.c: "vfio/devices/%s").
	VFIODevDir = "/dev/vfio"
	// VFIOContainerPath is the container: the misc device 10:196
	// (VFIO_MINOR, include/linux/miscdevice.h), which devtmpfs creates
	// 0666 (drivers/vfio/container.c: S_IRUGO | S_IWUGO, or iommufd's
	// compatibility device with CONFIG_IOMMUFD_VFIO_CONTAINER, also
	// 0666): an unprivileged QEMU or DPDK opens it, the group node is
	// what grants a device.
	VFIOContainerPath = "/dev/vfio/vfio"
	// IOMMUFDPath is iommufd's misc device (drivers/iommu/iommufd/main.c,
	// iommu_misc_dev: nodename "iommu", mode 0660).
	IOMMUFDPath = "/dev/iommu"
	// VFIODevicesDir holds the VFIO device cdevs, /dev/vfio/devices/vfioN,
	// which devtmpfs creates 0600 (vfio_device_devnode sets no mode).
	VFIODevicesDir = "/dev/vfio/devices"
	// VFIOClassDir has one entry per VFIO group the kernel created,
	// named after the IOMMU group ("12", or "noiommu-0" in no-IOMMU
	// mode), with its dev (drivers/vfio/group.c, vfio_create_group).
	VFIOClassDir = "/sys/class/vfio"
	// MiscClassDir has the misc devices' dev attributes: vfio (10:196)
	// and iommu (a dynamic minor).
	MiscClassDir = "/sys/class/misc"
	// ModuleDir is the kernel's module kset (kernel/params.c,
	// kernel/module/sysfs.c).
	ModuleDir = "/sys/module"
	// VFIOCDevAttr is the directory under a PCI function holding its
	// VFIO device cdev, vfio-dev/vfioN (drivers/vfio/vfio_main.c: the
	// "vfio-dev" class, device named "vfio%d", a child of the device).
	VFIOCDevAttr = "vfio-dev"
	// DriverOverrideAttr is the function's driver_override
	// (drivers/pci/pci-sysfs.c; Documentation/ABI/testing/sysfs-bus-pci).
	DriverOverrideAttr = "driver_override"
	// VFIOPCIDriverDir is vfio-pci's directory when the driver is
	// registered (loaded, or built in).
	VFIOPCIDriverDir = pci.DriversDir + "/vfio-pci"
)

// The modes devtmpfs gives the nodes (the kernel's defaults; udev rules
// and management layers change them).
const (
	ContainerMode = 0o666
	GroupMode     = 0o600
	DeviceMode    = 0o600
	IOMMUFDMode   = 0o660
)

// VFIOContainerDev is /dev/vfio/vfio's device number.
const VFIOContainerDev = "10:196"

// VFIOModules are the modules device assignment through vfio-pci needs,
// in load order: the VFIO core (groups, the container), the type1 IOMMU
// backend of the container (the core pulls it in: MODULE_SOFTDEP("post:
// vfio_iommu_type1 ...") in drivers/vfio/vfio_main.c), the PCI core and
// the vfio-pci driver; and iommufd, the newer interface (/dev/iommu, the
// device cdevs' IOMMU).
var VFIOModules = []string{"vfio", "vfio_iommu_type1", "vfio_pci_core", "vfio_pci", "iommufd"}

// ModuleState is what the host shows of a module.
type ModuleState uint8

const (
	ModuleUnknown   ModuleState = iota // could not be told: unreadable, or not captured
	ModuleAbsent                       // neither loaded nor built in
	ModuleLoaded                       // a loadable module, initstate "live"
	ModuleTransient                    // a loadable module being loaded or unloaded (initstate "coming", "going")
	ModuleBuiltIn                      // built into the kernel
)

func (s ModuleState) String() string {
	switch s {
	case ModuleAbsent:
		return "absent"
	case ModuleLoaded:
		return "loaded"
	case ModuleTransient:
		return "loading or unloading"
	case ModuleBuiltIn:
		return "built in"
	}
	return "unknown"
}

// Present reports whether the module's code is in the kernel now.
func (s ModuleState) Present() Tri {
	switch s {
	case ModuleLoaded, ModuleBuiltIn:
		return Yes
	case ModuleAbsent:
		return No
	}
	return Unknown
}

// Module is one kernel module as /sys/module shows it.
type Module struct {
	Name  string // as /sys/module names it: vfio_pci
	Path  string // /sys/module/NAME
	State ModuleState
	// InitState is initstate as read ("live", "coming", "going"); ""
	// when the module has none (built in) or it was not read.
	InitState string
	// Evidence says what decided State.
	Evidence string
	// Params are the readable parameters (/sys/module/NAME/parameters),
	// by name. A parameter declared with permission 0 has no file:
	// vfio_pci's ids is one (module_param_string(ids, ..., 0) in
	// drivers/vfio/pci/vfio_pci.c), so which ids vfio-pci took at load
	// cannot be read back; IDSources says where they come from.
	Params    map[string]string
	ParamErrs []error
	Err       error // the read that left State unknown
}

// maxModuleParams bounds the parameters read of one module.
const maxModuleParams = 64

// ReadModule reads /sys/module/NAME. builtin is the set of modules
// modules.builtin lists (nil when it could not be read).
//
// A loadable module has initstate (kernel/module/sysfs.c, modinfo_attrs);
// a built-in one never does, and has a /sys/module entry only when it has
// parameters (kernel/params.c, param_sysfs_builtin), a version, or,
// since Linux 6.14, a driver registered under its name
// (drivers/base/module.c, module_add_driver). vfio_pci_core built in has
// none of them: only modules.builtin tells.
func ReadModule(root *hostfs.Root, name string, builtin map[string]bool) Module {
	m := Module{Name: name, Path: path.Join(ModuleDir, name)}
	_, err := root.Stat(m.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		switch {
		case builtin[name]:
			m.State, m.Evidence = ModuleBuiltIn, "listed in modules.builtin; built in without a /sys/module entry (no parameters, no driver)"
		case root.Covers(m.Path):
			m.State, m.Evidence = ModuleAbsent, "no "+m.Path+": not loaded, and not built in"
			if builtin == nil {
				m.Evidence += " (unless built in without parameters: modules.builtin was not readable)"
			}
		default:
			m.State, m.Evidence = ModuleUnknown, m.Path+" is not captured"
		}
		return m
	case err != nil:
		m.Err, m.Evidence = err, "stat "+m.Path+" failed"
		return m
	}
	ip := path.Join(m.Path, "initstate")
	s, err := root.ReadString(ip)
	switch {
	case err == nil:
		m.InitState = s
		if s == "live" {
			m.State, m.Evidence = ModuleLoaded, ip+": live"
		} else {
			m.State, m.Evidence = ModuleTransient, ip+": "+s
		}
	case errors.Is(err, fs.ErrNotExist) && root.Covers(ip):
		m.State, m.Evidence = ModuleBuiltIn, m.Path+" has no initstate, which every loadable module has: built in"
	case errors.Is(err, fs.ErrNotExist):
		m.State, m.Evidence = ModuleUnknown, ip+" is not captured"
	default:
		m.Err, m.Evidence = err, "read "+ip+" failed"
	}
	m.Params, m.ParamErrs = readParams(root, path.Join(m.Path, "parameters"))
	return m
}

func readParams(root *hostfs.Root, dir string) (map[string]string, []error) {
	names, err := root.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	out := map[string]string{}
	var errs []error
	for i, n := range names {
		if i >= maxModuleParams {
			errs = append(errs, fmt.Errorf("%s: more than %d parameters; the rest not read", dir, maxModuleParams))
			break
		}
		// A parameter may be 0200 (write-only) or 0400 (root only):
		// EACCES is a fact about it, not about the module.
		v, err := root.ReadString(path.Join(dir, n))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[n] = v
	}
	return out, errs
}

// ModulesBuiltinPath is where modules.builtin lies for a kernel release
// (kbuild: one "kernel/DIR/NAME.ko" line per module built in).
func ModulesBuiltinPath(release string) string {
	return "/lib/modules/" + release + "/modules.builtin"
}

// maxModulesBuiltin bounds modules.builtin (a few hundred KiB on
// distribution kernels).
const maxModulesBuiltin = 4 << 20

// ParseModulesBuiltin returns the module names modules.builtin lists, as
// /sys/module names them (the file name without .ko, - as _:
// scripts/Makefile.modinst and kmod's modname normalisation). Lines that
// are not a .ko path are skipped.
func ParseModulesBuiltin(b []byte) map[string]bool {
	out := map[string]bool{}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		base := path.Base(s)
		name, ok := strings.CutSuffix(base, ".ko")
		if !ok || name == "" || strings.ContainsAny(name, " \t/") {
			continue
		}
		out[strings.ReplaceAll(name, "-", "_")] = true
	}
	return out
}

// PCIID is one entry of vfio-pci's ids parameter:
// vendor:device[:subvendor[:subdevice[:class[:class_mask]]]] in hex
// (drivers/vfio/pci/vfio_pci.c, vfio_pci_fill_ids), each added as a
// dynamic id, the same list /sys/bus/pci/drivers/vfio-pci/new_id adds to.
type PCIID struct {
	Raw                  string
	Vendor, Device       uint32
	SubVendor, SubDevice uint32 // PCIAnyID when not given
	Class, ClassMask     uint32
}

// PCIAnyID is PCI_ANY_ID (include/linux/mod_devicetable.h).
const PCIAnyID = 0xffffffff

// Matches reports whether the id matches d as pci_match_one_device
// (drivers/pci/pci.h) does. A device whose ids were not read matches
// nothing.
func (id PCIID) Matches(d *pci.Device) bool {
	if d == nil || !d.Has(pci.HasVendor|pci.HasDevice) {
		return false
	}
	any := func(want, got uint32) bool { return want == PCIAnyID || want == got }
	if !any(id.Vendor, uint32(d.Vendor)) || !any(id.Device, uint32(d.Device)) {
		return false
	}
	if id.SubVendor != PCIAnyID || id.SubDevice != PCIAnyID {
		if !d.Has(pci.HasSubsystem) || !any(id.SubVendor, uint32(d.SubsystemVendor)) || !any(id.SubDevice, uint32(d.SubsystemDevice)) {
			return false
		}
	}
	if id.ClassMask != 0 && (!d.Has(pci.HasClass) || (id.Class^d.Class)&id.ClassMask != 0) {
		return false
	}
	return true
}

// ParsePCIIDs parses an ids value as vfio_pci_fill_ids does:
// comma-separated, empty entries skipped, each scanned with
// "%x:%x:%x:%x:%x:%x"; an entry with fewer than two fields is one the
// kernel rejects ("invalid id string"), returned as an error.
func ParsePCIIDs(s string) ([]PCIID, []error) {
	var out []PCIID
	var errs []error
	for i, e := range strings.Split(s, ",") {
		if i >= 1024 { // the parameter is a 1024-byte string
			errs = append(errs, errors.New("more entries than the 1024-byte parameter holds"))
			break
		}
		if e == "" {
			continue
		}
		id, err := parsePCIID(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, id)
	}
	return out, errs
}

func parsePCIID(e string) (PCIID, error) {
	id := PCIID{Raw: e, SubVendor: PCIAnyID, SubDevice: PCIAnyID}
	f := strings.Split(e, ":")
	// sscanf stops at the first field that does not scan; fields after
	// it are ignored, and fewer than two is the kernel's rejection.
	var v []uint32
	for _, x := range f {
		if len(v) == 6 {
			break
		}
		n, ok := scanHex(x)
		if !ok {
			break
		}
		v = append(v, n)
	}
	if len(v) < 2 {
		return id, fmt.Errorf("%q: vfio-pci rejects it (\"invalid id string\"): want vendor:device in hex", short(e))
	}
	id.Vendor, id.Device = v[0], v[1]
	dst := []*uint32{&id.SubVendor, &id.SubDevice, &id.Class, &id.ClassMask}
	for i, n := range v[2:] {
		*dst[i] = n
	}
	return id, nil
}

// scanHex reads a leading hex number as sscanf's %x does (an optional
// 0x, then hex digits, at most 32 bits kept), requiring at least one
// digit; trailing bytes end the number, as they end sscanf's field.
func scanHex(s string) (uint32, bool) {
	s = strings.TrimLeft(s, " \t\n")
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHex(s[2]) {
		s = s[2:]
	}
	var n uint64
	i := 0
	for ; i < len(s) && isHex(s[i]); i++ {
		d, _ := strconv.ParseUint(s[i:i+1], 16, 8)
		n = n<<4 | d
		n &= 0xffffffff // sscanf into an unsigned int keeps the low 32 bits
	}
	return uint32(n), i > 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// The modprobe.d directories, in modprobe.d(5)'s order: a file in an
// earlier one replaces the file of the same name in a later one.
var ModprobeDirs = []string{"/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"}

// ModprobeLine is one "options" or "softdep" command of a modprobe.d file
// that concerns vfio-pci.
type ModprobeLine struct {
	File string
	Line int
	// Command is "options" or "softdep".
	Command string
	// Module is the module the command is about (as written).
	Module string
	// Args are the command's arguments after the module: the options,
	// or the softdep's "pre: ..." and "post: ..." words.
	Args []string
}

func (l ModprobeLine) String() string {
	return fmt.Sprintf("%s:%d: %s %s %s", l.File, l.Line, l.Command, l.Module, strings.Join(l.Args, " "))
}

// maxModprobeLines bounds what one file may hold.
const maxModprobeLines = 1 << 14

// ParseModprobeConf returns the commands of a modprobe.d file that
// concern vfio-pci: "options vfio-pci|vfio_pci ...", and "softdep MOD
// pre: ... vfio-pci ..." (the line that loads vfio-pci before a driver
// that would claim a device first). It reads the file as kmod does
// (libkmod-config.c): '#' starts a comment at the start of a line, a
// backslash at the end of a line continues it, words are separated by
// white space, and - and _ are the same in module names. Other commands
// are skipped.
func ParseModprobeConf(file string, b []byte) []ModprobeLine {
	var out []ModprobeLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	var cont strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		if n > maxModprobeLines {
			break
		}
		line := sc.Text()
		if cont.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cont.WriteString(strings.TrimSuffix(line, "\\"))
			cont.WriteByte(' ')
			if cont.Len() > 1<<16 {
				cont.Reset()
			}
			continue
		}
		cont.WriteString(line)
		full := cont.String()
		cont.Reset()
		f := strings.Fields(full)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		mod := strings.ReplaceAll(f[1], "-", "_")
		switch f[0] {
		case "options":
			if mod == "vfio_pci" {
				out = append(out, ModprobeLine{File: file, Line: start, Command: "options", Module: f[1], Args: f[2:]})
			}
		case "softdep":
			for _, w := range f[2:] {
				if strings.ReplaceAll(w, "-", "_") == "vfio_pci" {
					out = append(out, ModprobeLine{File: file, Line: start, Command: "softdep", Module: f[1], Args: f[2:]})
					break
				}
			}
		}
	}
	return out
}

// IDSource is one place vfio-pci's ids come from.
type IDSource struct {
	// From is "/proc/cmdline" (vfio-pci.ids=: the built-in driver reads
	// it at boot, and modprobe passes it to the module, as kmod applies
	// MODULE.PARAM= of the kernel command line) or a modprobe.d file and
	// line (options vfio-pci ids=).
	From string
	Raw  string
	IDs  []PCIID
	Errs []error
}

// Node is what one device node of the VFIO interfaces looks like.
type Node struct {
	Path    string
	Present Tri // No only where the root could have shown it (hostfs Covers)
	// Node is the lstat of Path; a symlink's target is in Node.Target and
	// Resolved is the stat of what it points at.
	Node     hostfs.Node
	Resolved *hostfs.Node
	Err      error
	// SysfsDev is the device number the kernel registered (a sysfs dev
	// attribute) and SysfsPath where it was read; "" when unknown.
	SysfsDev, SysfsPath string
	// WantMode is the mode devtmpfs creates the node with.
	WantMode uint32
}

// Target is the node itself, or what a symlink at Path points at.
func (n Node) Target() (hostfs.Node, bool) {
	if n.Present != Yes {
		return hostfs.Node{}, false
	}
	if n.Node.Type == hostfs.TypeSymlink {
		if n.Resolved == nil {
			return hostfs.Node{}, false
		}
		return *n.Resolved, true
	}
	return n.Node, true
}

// DevMatches says whether the node is a character device with the number
// the kernel registered: Unknown when either is not known.
func (n Node) DevMatches() Tri {
	t, ok := n.Target()
	if !ok || n.SysfsDev == "" {
		return Unknown
	}
	if t.Type == hostfs.TypeChar && t.Dev() == n.SysfsDev {
		return Yes
	}
	return No
}

// String is the evidence line: "/dev/vfio/vfio: char 10:196 0666 0:0".
func (n Node) String() string {
	switch n.Present {
	case No:
		return n.Path + ": absent"
	case Unknown:
		if n.Err != nil {
			return n.Path + ": not known (" + n.Err.Error() + ")"
		}
		return n.Path + ": not captured"
	}
	s := n.Path + ": " + nodeString(n.Node)
	if n.Node.Type == hostfs.TypeSymlink {
		if n.Resolved != nil {
			s += " -> " + nodeString(*n.Resolved)
		} else if n.Err != nil {
			s += " (dangling: " + n.Err.Error() + ")"
		}
	}
	if n.SysfsDev != "" {
		s += fmt.Sprintf(" (the kernel registered %s, %s)", n.SysfsDev, n.SysfsPath)
	}
	return s
}

func nodeString(n hostfs.Node) string {
	switch n.Type {
	case hostfs.TypeChar, hostfs.TypeBlock:
		return fmt.Sprintf("%s %s %s %d:%d", n.Type, n.Dev(), n.ModeString(), n.UID, n.GID)
	case hostfs.TypeSymlink:
		return "symlink to " + n.Target
	}
	return fmt.Sprintf("%s %s %d:%d", n.Type, n.ModeString(), n.UID, n.GID)
}

// readNode lstats p, follows a symlink, and reads the sysfs dev the kernel
// registered for it (sysDev; "" for none).
func readNode(root *hostfs.Root, p, sysDev string, mode uint32) Node {
	n := Node{Path: p, WantMode: mode}
	st, err := root.Lstat(p)
	switch {
	case err == nil:
		n.Present, n.Node = Yes, st
		if st.Type == hostfs.TypeSymlink {
			if r, err := root.Stat(p); err == nil {
				n.Resolved = &r
			} else {
				n.Err = err
			}
		}
	case errors.Is(err, fs.ErrNotExist) && root.Covers(p):
		n.Present = No
	case errors.Is(err, fs.ErrNotExist):
		n.Present = Unknown
	default:
		n.Present, n.Err = Unknown, err
	}
	if sysDev != "" {
		if s, err := root.ReadString(sysDev); err == nil {
			if _, _, perr := hostfs.ParseMajorMinor(s); perr == nil {
				n.SysfsDev, n.SysfsPath = s, sysDev
			}
		}
	}
	return n
}

// GroupNode is the VFIO side of one IOMMU group: did VFIO create a group
// for it, and is its node in /dev/vfio.
type GroupNode struct {
	// Name is the VFIO group's name: the IOMMU group number, or
	// "noiommu-N" in the unsafe no-IOMMU mode.
	Name  string
	Group int // the IOMMU group number; -1 when Name is not one
	// Members are the group's functions bound to a VFIO driver.
	Members []pci.Address
	// Registered: /sys/class/vfio/NAME exists, so VFIO created the group
	// (a VFIO driver bound a member).
	Registered Tri
	Node       Node
}

// DeviceCDev is a function's VFIO device cdev (CONFIG_VFIO_DEVICE_CDEV,
// Linux 6.6): opened with an iommufd instead of a group and container.
type DeviceCDev struct {
	Name string // vfioN
	Node Node
}

// Binding is one PCI function that is, or is meant to be, handed to VFIO.
type Binding struct {
	Address pci.Address
	ID      string // vvvv:dddd
	Driver  string // the bound driver; "" for none
	// DriverErr: the driver link could not be read.
	DriverErr error
	// VFIO: Driver is a VFIO driver.
	VFIO bool
	// Override is driver_override ("" when unset: the kernel shows
	// "(null)"); OverrideErr says why it is not known (absent before
	// Linux 3.16 and in captures that dropped it, or unreadable).
	Override     string
	OverridePath string
	OverrideErr  error
	// IDsFrom are the IDSources whose ids match the function.
	IDsFrom []string
	// Asked: the caller named it.
	Asked bool
	Group *int
	// CDev is its VFIO device cdev, when it has one.
	CDev *DeviceCDev
	// Why are evidence sentences: what the binding means and, when it is
	// not on VFIO although meant to be, why as far as the host shows it.
	Why []string
}

// Intended reports whether something says the function is meant for
// VFIO: it is bound to a VFIO driver, its driver_override names one,
// vfio-pci's ids name it, or the caller asked about it.
func (b Binding) Intended() bool { return b.Configured() || b.Asked }

// Configured reports whether the host itself says the function is meant
// for VFIO: bound to a VFIO driver, a driver_override or vfio-pci's ids
// naming it (asking about it does not count).
func (b Binding) Configured() bool {
	return b.VFIO || IsVFIODriver(b.Override) || len(b.IDsFrom) > 0
}

// VFIO is the host's readiness for VFIO device assignment.
type VFIO struct {
	Modules []Module
	// BuiltinErr is why modules.builtin could not be read (nil when it
	// was); Release is the kernel release it was looked up for.
	Release    string
	BuiltinErr error
	// Driver is vfio-pci's driver directory: Yes when the driver is
	// registered (the module loaded or built in).
	Driver    Tri
	DriverErr error
	IDs       []IDSource
	// Softdeps are modprobe.d "softdep MOD pre: vfio-pci" lines (the
	// persistent fix for a driver that would claim a device first).
	Softdeps []ModprobeLine
	// ModprobeErrs are modprobe.d files that could not be read.
	ModprobeErrs []error
	// DynamicIDs says what cannot be read: new_id and remove_id are
	// write-only (drivers/pci/pci-driver.c), the kernel lists no dynamic
	// id, and vfio_pci's ids parameter has no sysfs file.
	DynamicIDs string
	Container  Node // /dev/vfio/vfio
	IOMMUFD    Node // /dev/iommu
	// NoIOMMU is vfio's enable_unsafe_noiommu_mode parameter: Yes when
	// VFIO hands out devices without an IOMMU (no isolation).
	NoIOMMU  Tri
	Groups   []GroupNode
	Bindings []Binding
}

// ReadVFIO reads the host's VFIO readiness. st is the IOMMU state (Read)
// and inv the PCI inventory of the same root; asked are functions the
// caller means to hand to VFIO (--device), judged like those the host
// itself marks.
func ReadVFIO(root *hostfs.Root, st *State, inv *pci.Inventory, asked ...pci.Address) *VFIO {
	if st == nil {
		st = &State{}
	}
	v := &VFIO{
		DynamicIDs: "ids added through /sys/bus/pci/drivers/vfio-pci/new_id (and vfio-pci's ids, which go to the same list) cannot be read back: new_id and remove_id are write-only and vfio_pci's ids parameter has no sysfs file; what can be read is where ids come from (vfio-pci.ids= on /proc/cmdline, options vfio-pci ids= in modprobe.d) and each device's driver and driver_override",
	}
	v.Release = st.Kernel.Release
	if v.Release == "" {
		v.Release, _ = root.ReadString(OSReleasePath)
	}
	var builtin map[string]bool
	if validRelease(v.Release) {
		b, err := root.ReadFileLimit(ModulesBuiltinPath(v.Release), maxModulesBuiltin)
		if err == nil {
			builtin = ParseModulesBuiltin(b)
		} else {
			v.BuiltinErr = err
		}
	} else {
		v.BuiltinErr = errors.New("the kernel release is not known")
	}
	for _, name := range VFIOModules {
		v.Modules = append(v.Modules, ReadModule(root, name, builtin))
	}
	if m := v.Module("vfio"); m != nil {
		v.NoIOMMU = Unknown
		if p, ok := m.Params["enable_unsafe_noiommu_mode"]; ok {
			if b, ok := boolParam(p); ok && b {
				v.NoIOMMU = Yes
			} else if ok {
				v.NoIOMMU = No
			}
		}
	}

	switch _, err := root.Stat(VFIOPCIDriverDir); {
	case err == nil:
		v.Driver = Yes
	case errors.Is(err, fs.ErrNotExist) && root.Covers(VFIOPCIDriverDir):
		v.Driver = No
	case errors.Is(err, fs.ErrNotExist):
	default:
		v.DriverErr = err
	}

	v.readIDSources(root, st)
	v.Container = readNode(root, VFIOContainerPath, path.Join(MiscClassDir, "vfio", "dev"), ContainerMode)
	v.IOMMUFD = readNode(root, IOMMUFDPath, path.Join(MiscClassDir, "iommu", "dev"), IOMMUFDMode)
	if inv != nil {
		v.readBindings(root, st, inv, asked)
	}
	v.readGroups(root, st)
	return v
}

// Module returns the module named name, or nil.
func (v *VFIO) Module(name string) *Module {
	for i := range v.Modules {
		if v.Modules[i].Name == name {
			return &v.Modules[i]
		}
	}
	return nil
}

// Binding returns the binding of a, or nil.
func (v *VFIO) Binding(a pci.Address) *Binding {
	for i := range v.Bindings {
		if v.Bindings[i].Address == a {
			return &v.Bindings[i]
		}
	}
	return nil
}

// GroupNode returns the group named name ("12"), or nil.
func (v *VFIO) GroupNode(name string) *GroupNode {
	for i := range v.Groups {
		if v.Groups[i].Name == name {
			return &v.Groups[i]
		}
	}
	return nil
}

// maxModprobeFiles bounds the files read per modprobe.d directory.
const maxModprobeFiles = 256

func (v *VFIO) readIDSources(root *hostfs.Root, st *State) {
	if st.Cmdline.VFIOIDs != "" {
		ids, errs := ParsePCIIDs(st.Cmdline.VFIOIDs)
		v.IDs = append(v.IDs, IDSource{From: CmdlinePath, Raw: st.Cmdline.VFIOIDs, IDs: ids, Errs: errs})
	}
	seen := map[string]bool{}
	for _, dir := range ModprobeDirs {
		names, err := root.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				v.ModprobeErrs = append(v.ModprobeErrs, err)
			}
			continue
		}
		for i, n := range names {
			if i >= maxModprobeFiles {
				v.ModprobeErrs = append(v.ModprobeErrs, fmt.Errorf("%s: more than %d files; the rest not read", dir, maxModprobeFiles))
				break
			}
			// modprobe.d(5): only *.conf files, and a name in an earlier
			// directory hides the same name in a later one.
			if !strings.HasSuffix(n, ".conf") || seen[n] {
				continue
			}
			seen[n] = true
			p := path.Join(dir, n)
			b, err := root.ReadFileLimit(p, 1<<20)
			if err != nil {
				v.ModprobeErrs = append(v.ModprobeErrs, err)
				continue
			}
			for _, l := range ParseModprobeConf(p, b) {
				if l.Command == "softdep" {
					v.Softdeps = append(v.Softdeps, l)
					continue
				}
				for _, a := range l.Args {
					if raw, ok := strings.CutPrefix(a, "ids="); ok {
						// kmod strips the quotes modprobe.d allows around a value.
						raw = strings.Trim(raw, `"`)
						ids, errs := ParsePCIIDs(raw)
						v.IDs = append(v.IDs, IDSource{From: fmt.Sprintf("%s:%d", l.File, l.Line), Raw: raw, IDs: ids, Errs: errs})
					}
				}
			}
		}
	}
}

func (v *VFIO) readBindings(root *hostfs.Root, st *State, inv *pci.Inventory, asked []pci.Address) {
	want := map[pci.Address]bool{}
	for _, a := range asked {
		want[a] = true
	}
	for _, d := range inv.Devices {
		b := Binding{Address: d.Address, ID: d.IDString(), Driver: d.Driver, Asked: want[d.Address], Group: d.IOMMUGroup}
		if ae := d.AttrErr("driver"); ae != nil {
			b.DriverErr = ae
		}
		b.VFIO = IsVFIODriver(d.Driver)
		b.OverridePath = d.AttrPath(DriverOverrideAttr)
		switch s, err := root.ReadString(b.OverridePath); {
		case err == nil:
			if s != "(null)" { // driver_override_show prints a NULL override so
				b.Override = s
			}
		default:
			b.OverrideErr = err
		}
		for _, src := range v.IDs {
			for _, id := range src.IDs {
				if id.Matches(d) {
					b.IDsFrom = append(b.IDsFrom, src.From)
					break
				}
			}
		}
		bridge := d.Has(pci.HasClass) && d.Class>>8 == 0x0604
		if !b.Intended() || bridge && !b.Asked && !b.VFIO {
			continue
		}
		b.CDev = readCDev(root, d)
		b.Why = v.why(b, d, st)
		v.Bindings = append(v.Bindings, b)
	}
}

// readCDev reads d's vfio-dev/vfioN, when it has one.
func readCDev(root *hostfs.Root, d *pci.Device) *DeviceCDev {
	dir := d.AttrPath(VFIOCDevAttr)
	names, err := root.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "vfio") {
			continue
		}
		c := &DeviceCDev{Name: n}
		c.Node = readNode(root, path.Join(VFIODevicesDir, n), path.Join(dir, n, "dev"), DeviceMode)
		return c
	}
	return nil
}

// why explains a binding.
func (v *VFIO) why(b Binding, d *pci.Device, st *State) []string {
	var out []string
	if b.DriverErr != nil {
		return append(out, "its driver link could not be read: "+b.DriverErr.Error())
	}
	override := b.Override
	if b.OverrideErr != nil && !errors.Is(b.OverrideErr, fs.ErrNotExist) {
		out = append(out, "driver_override could not be read: "+b.OverrideErr.Error())
	}
	switch {
	case b.VFIO && override != "" && !IsVFIODriver(override):
		out = append(out, fmt.Sprintf("bound to %s, but driver_override is %s: the next probe (a rebind, a reboot) gives it to %s", b.Driver, override, override))
	case b.VFIO && IsVFIODriver(override):
		out = append(out, fmt.Sprintf("bound to %s, with driver_override %s (it stays on %s across unbinds until the override is cleared)", b.Driver, override, override))
	case b.VFIO:
		out = append(out, "bound to "+b.Driver+", a VFIO driver")
		if len(b.IDsFrom) > 0 {
			out = append(out, fmt.Sprintf("vfio-pci's ids name its id %s (%s)", b.ID, strings.Join(b.IDsFrom, ", ")))
		} else if override == "" && b.OverrideErr == nil {
			out = append(out, "neither driver_override nor a vfio-pci.ids source names it: it was bound by hand (new_id or bind), which a reboot or a rebind does not repeat")
		}
	case override != "" && !IsVFIODriver(override):
		out = append(out, fmt.Sprintf("driver_override is %s: only that driver may bind it, so vfio-pci.ids cannot take it", override))
	case IsVFIODriver(override) && b.Driver != "":
		out = append(out, fmt.Sprintf("driver_override is %s but %s is bound: an override applies at the next probe, it does not unbind the current driver", override, b.Driver))
	case IsVFIODriver(override):
		out = append(out, fmt.Sprintf("driver_override is %s and no driver is bound", override))
		out = append(out, v.unboundWhy(d, st)...)
	case len(b.IDsFrom) > 0 && b.Driver != "":
		out = append(out, fmt.Sprintf("its id %s is in vfio-pci's ids (%s) but %s is bound: that driver probed it first, or the ids were added after it bound (vfio-pci takes only devices without a driver)",
			b.ID, strings.Join(b.IDsFrom, ", "), b.Driver))
	case len(b.IDsFrom) > 0:
		out = append(out, fmt.Sprintf("its id %s is in vfio-pci's ids (%s) and no driver is bound", b.ID, strings.Join(b.IDsFrom, ", ")))
		out = append(out, v.unboundWhy(d, st)...)
	case b.Driver != "":
		out = append(out, "bound to "+b.Driver+", not to a VFIO driver")
	default:
		out = append(out, "no driver is bound")
	}
	return out
}

// unboundWhy says why a function meant for vfio-pci has no driver.
func (v *VFIO) unboundWhy(d *pci.Device, st *State) []string {
	switch v.Driver {
	case No:
		return []string{"vfio-pci is not registered (no " + VFIOPCIDriverDir + "): the module is not loaded"}
	case Yes:
		if d.IOMMUGroup == nil && v.NoIOMMU != Yes {
			s := "vfio-pci is registered but the device has no IOMMU group: vfio-pci's probe fails with EINVAL (drivers/vfio/group.c, vfio_group_find_or_alloc) unless the unsafe no-IOMMU mode is on"
			if st.On == No {
				s += "; the IOMMU is off"
			}
			return []string{s}
		}
		return []string{"vfio-pci is registered: no probe has run since the override or the ids were set (/sys/bus/pci/drivers_probe), or vfio-pci's probe failed (the kernel log says)"}
	}
	return nil
}

// readGroups reads the VFIO group of every IOMMU group with a member on a
// VFIO driver, and every group /sys/class/vfio lists.
func (v *VFIO) readGroups(root *hostfs.Root, st *State) {
	members := map[string][]pci.Address{}
	for _, b := range v.Bindings {
		if b.VFIO && b.Group != nil {
			n := strconv.Itoa(*b.Group)
			members[n] = append(members[n], b.Address)
		}
	}
	// Non-PCI members on VFIO drivers (vfio-platform), through the
	// groups' devices/ links.
	for _, g := range st.Groups {
		for _, name := range g.Devices {
			if _, err := pci.ParseAddress(name); err == nil {
				continue
			}
			if t, err := root.Readlink(path.Join(g.Path, "devices", name, "driver")); err == nil && IsVFIODriver(path.Base(t)) {
				if n := strconv.Itoa(g.ID); members[n] == nil {
					members[n] = []pci.Address{} // a group VFIO holds, with no PCI member
				}
			}
		}
	}
	registered := map[string]bool{}
	names, err := root.ReadDir(VFIOClassDir)
	classKnown := err == nil || errors.Is(err, fs.ErrNotExist) && root.Covers(VFIOClassDir)
	for _, n := range names {
		registered[n] = true
		if _, ok := members[n]; !ok {
			members[n] = nil
		}
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return groupLess(keys[i], keys[j]) })
	for _, k := range keys {
		g := GroupNode{Name: k, Group: -1, Members: members[k]}
		if id, err := strconv.Atoi(k); err == nil {
			g.Group = id
		}
		switch {
		case registered[k]:
			g.Registered = Yes
		case classKnown:
			g.Registered = No
		}
		g.Node = readNode(root, path.Join(VFIODevDir, k), path.Join(VFIOClassDir, k, "dev"), GroupMode)
		v.Groups = append(v.Groups, g)
	}
}

// groupLess orders group names numerically, "noiommu-N" after numbers.
func groupLess(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return x < y
	case errA == nil:
		return true
	case errB == nil:
		return false
	}
	return a < b
}

// Holder is one open file of a process that is a VFIO or iommufd node.
type Holder struct {
	PID  int
	Comm string // /proc/PID/comm; "" when unreadable
	FD   int
	// Target is the path the fd link names: as the process opened it,
	// in its own mount namespace (a container's /dev/vfio/12 reads
	// "/dev/vfio/12"), without the kernel's " (deleted)".
	Target string
	// Matched is the target path it matched.
	Matched string
}

func (h Holder) String() string {
	c := ""
	if h.Comm != "" {
		c = " (" + h.Comm + ")"
	}
	return fmt.Sprintf("PID %d%s holds %s open (/proc/%d/fd/%d)", h.PID, c, h.Target, h.PID, h.FD)
}

// HolderScan is the result of looking for processes that hold VFIO nodes
// open.
type HolderScan struct {
	Targets []string
	Holders []Holder
	// Processes counts the processes whose fd tables were read.
	Processes int
	// Denied counts processes whose fd tables could not be read
	// (EACCES/EPERM: reading another user's fds needs ptrace read
	// access, fs/proc/fd.c proc_fd_access_allowed); DeniedPIDs lists the
	// first of them and DeniedErr the first error. A holder among them
	// cannot be seen: for them the scan is NOT_RUN.
	Denied     int
	DeniedPIDs []int
	DeniedErr  error
	// Gone counts processes that exited during the scan.
	Gone int
	// NotCaptured: the root's /proc is not a live procfs and holds no fd
	// tables (a snapshot or a tree that did not capture them).
	NotCaptured bool
	// Truncated: the scan stopped after maxFDLinks links.
	Truncated bool
	// Err is why /proc could not be listed at all.
	Err error
}

// Complete reports whether every process's fds were read.
func (s HolderScan) Complete() bool {
	return s.Err == nil && !s.NotCaptured && !s.Truncated && s.Denied == 0
}

// HeldBy returns the holders of target.
func (s HolderScan) HeldBy(target string) []Holder {
	var out []Holder
	for _, h := range s.Holders {
		if h.Matched == target {
			out = append(out, h)
		}
	}
	return out
}

// Bounds of the fd scan: hostfs lists at most 65536 entries a directory;
// a host with a million open files is scanned no further.
const (
	maxDeniedPIDs = 32
	maxFDLinks    = 1 << 20
)

// FindHolders scans /proc/*/fd for open files whose link names one of
// targets (host-absolute paths such as /dev/vfio/12). It reads links
// only: nothing is opened, nothing is followed. A link matches a target
// when its text is the target or ends in it at a path boundary (a
// process whose root is not ours may show a longer path), with the
// kernel's " (deleted)" suffix removed.
func FindHolders(root *hostfs.Root, targets []string) HolderScan {
	s := HolderScan{Targets: targets}
	if len(targets) == 0 {
		return s
	}
	live := root.LiveProc()
	names, err := root.ReadDir("/proc")
	if err != nil {
		s.Err = err
		return s
	}
	budget := maxFDLinks
	anyFD := false
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 || strconv.Itoa(pid) != n {
			continue
		}
		hs, truncated, err := readFDs(root, pid, targets, &budget)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH):
			if live {
				s.Gone++
			}
			continue
		default: // EACCES, EPERM: another user's fds need ptrace read access
			s.Denied++
			if len(s.DeniedPIDs) < maxDeniedPIDs {
				s.DeniedPIDs = append(s.DeniedPIDs, pid)
			}
			if s.DeniedErr == nil {
				s.DeniedErr = err
			}
			continue
		}
		anyFD = true
		s.Processes++
		s.Holders = append(s.Holders, hs...)
		if truncated {
			s.Truncated = true
			break
		}
	}
	if !live && !anyFD {
		s.NotCaptured = true
	}
	sort.Slice(s.Holders, func(i, j int) bool {
		a, b := s.Holders[i], s.Holders[j]
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.FD < b.FD
	})
	return s
}

// readFDs reads the fd links of one process and returns those naming a
// target. budget bounds the readlinks across calls; truncated says it ran
// out. The error is the listing's.
func readFDs(root *hostfs.Root, pid int, targets []string, budget *int) (hs []Holder, truncated bool, err error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := root.ReadDir(dir)
	if err != nil {
		return nil, false, err
	}
	comm := ""
	for _, f := range fds {
		fd, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if *budget <= 0 {
			return hs, true, nil
		}
		*budget--
		lp := dir + "/" + f
		t, err := root.Readlink(lp)
		if err != nil {
			continue // closed between the listing and the readlink
		}
		t, m := matchTarget(lp, t, targets)
		if m == "" {
			continue
		}
		if comm == "" {
			comm, _ = root.ReadString(fmt.Sprintf("/proc/%d/comm", pid))
		}
		hs = append(hs, Holder{PID: pid, Comm: comm, FD: fd, Target: t, Matched: m})
	}
	return hs, false, nil
}

// matchTarget returns the path link text t names (its " (deleted)"
// suffix removed; a relative link, which only a tree standing in for a
// host has, joined with the link's directory) and the target it matches,
// or "".
func matchTarget(linkPath, t string, targets []string) (string, string) {
	t = strings.TrimSuffix(t, " (deleted)")
	if !strings.HasPrefix(t, "/") {
		// Not a path ("socket:[123]", "anon_inode:[vfio-device]"), or a
		// relative link of a tree.
		if strings.Contains(t, ":") || t == "" {
			return t, ""
		}
		t = path.Join(path.Dir(linkPath), t)
	}
	for _, want := range targets {
		if t == want || strings.HasSuffix(t, want) && strings.HasPrefix(want, "/") {
			return t, want
		}
	}
	return t, ""
}

// GroupTargets are the nodes FindHolders should look for to explain a
// busy group: the group node, its members' device cdevs, the container
// and iommufd.
func (v *VFIO) GroupTargets() []string {
	var out []string
	for _, g := range v.Groups {
		out = append(out, path.Join(VFIODevDir, g.Name))
	}
	for _, b := range v.Bindings {
		if b.CDev != nil {
			out = append(out, path.Join(VFIODevicesDir, b.CDev.Name))
		}
	}
	return append(out, VFIOContainerPath, IOMMUFDPath)
}

// GroupBusy explains what another process sees while holders keep a
// group: open(2) of /dev/vfio/N fails with EBUSY while any file has it
// open (drivers/vfio/group.c, vfio_group_fops_open: one open file per
// group), or while one of its devices is open through its cdev
// (cdev_device_open_cnt); and the reverse, a cdev's open fails with EBUSY
// while the group node is open (vfio_device_block_group).
// VFIO_GROUP_SET_CONTAINER fails with EPERM when the group's DMA is
// already owned (iommu_group_claim_dma_owner, drivers/iommu/iommu.c: a
// host driver using the DMA API on a member, or another user such as an
// iommufd bind of one of its devices), and with EINVAL when the same file
// already set a container or an iommufd.
func GroupBusy(group string, holders []Holder) string {
	if len(holders) == 0 {
		return ""
	}
	var who []string
	for _, h := range holders {
		who = append(who, h.String())
	}
	return fmt.Sprintf("%s: a second open(2) of /dev/vfio/%s fails with EBUSY while it is held (drivers/vfio/group.c, vfio_group_fops_open allows one open file per group; a device's cdev is refused likewise, vfio_device_block_group); "+
		"VFIO_GROUP_SET_CONTAINER fails with EPERM when the group's DMA is already claimed (iommu_group_claim_dma_owner, drivers/iommu/iommu.c)",
		strings.Join(who, "; "), group)
}
