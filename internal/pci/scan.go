package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// DevicesDir lists every PCI function the kernel knows
// (drivers/pci/pci-driver.c registers the "pci" bus type).
const DevicesDir = "/sys/bus/pci/devices"

// NodeOnlinePath lists the host's online NUMA nodes
// (drivers/base/node.c); it is absent on kernels without CONFIG_NUMA.
const NodeOnlinePath = "/sys/devices/system/node/online"

// attrLimit bounds one sysfs attribute read. Attributes are at most one
// page (fs/sysfs/file.c, sysfs_emit); 64 KiB is the largest Linux page
// size. A hostile 1 GiB "vendor" file costs at most this much.
const attrLimit = 64 << 10

// scanWorkers bounds the goroutines reading devices in parallel.
const scanWorkers = 8

// Present records which mandatory-or-optional ids were read successfully.
type Present uint8

const (
	HasVendor    Present = 1 << iota // vendor
	HasDevice                        // device
	HasClass                         // class
	HasRevision                      // revision (absent before Linux 4.10)
	HasSubsystem                     // subsystem_vendor + subsystem_device, or modalias
)

// Link is the PCIe link state of a function. A nil field is an attribute
// the kernel does not expose (not a PCIe function, or a capture that
// omitted it); an unparsable one is nil too, with an error in the device.
type Link struct {
	CurrentSpeed *LinkSpeed
	MaxSpeed     *LinkSpeed
	CurrentWidth *int // lanes; 0 when the link is down
	MaxWidth     *int
	// Raw widths as read, for evidence ("" when absent).
	CurrentWidthRaw, MaxWidthRaw string
}

// Device is one PCI function.
type Device struct {
	Address Address
	BusPath string // /sys/bus/pci/devices/<BDF>
	Path    string // the resolved sysfs directory, /sys/devices/pci.../<BDF>; BusPath when it could not be resolved

	Present                          Present
	Vendor, Device                   uint16
	SubsystemVendor, SubsystemDevice uint16
	Class                            uint32 // 0xCCSSPP: base class, subclass, prog-if
	Revision                         uint8

	// Names from pci.ids; "" when the file or the entry is absent.
	VendorName, DeviceName, SubsystemName, ClassName string

	Driver     string // basename of the driver link; "" when no driver is bound
	NUMANode   *int   // numa_node as read: -1 is the kernel's NUMA_NO_NODE; nil when absent (no CONFIG_NUMA) or unreadable
	IOMMUGroup *int   // from the iommu_group link; nil when absent (no IOMMU)
	LocalCPUs  string // local_cpulist as read; "" when absent

	// SR-IOV (drivers/pci/iov.c): TotalVFs/NumVFs are present on a PF
	// with the capability; VFs lists its enabled virtual functions and
	// PhysFn is set on a VF.
	TotalVFs *int
	NumVFs   *int
	VFs      []Address
	PhysFn   *Address

	// Bridges is the chain of PCI functions above this one in the sysfs
	// device path, from the root port down to the immediate parent.
	Bridges []Address

	Link Link

	// Errors are the reads that failed or did not parse, each wrapped
	// with its host path. They never stop the scan.
	Errors []error
}

// Has reports whether the given ids were read.
func (d *Device) Has(p Present) bool { return d.Present&p == p }

// AttrPath is the host path of one of the device's sysfs attributes.
func (d *Device) AttrPath(name string) string { return path.Join(d.Path, name) }

// IDString is "vvvv:dddd", or "????:????" parts when unknown.
func (d *Device) IDString() string {
	v, dv := "????", "????"
	if d.Has(HasVendor) {
		v = fmt.Sprintf("%04x", d.Vendor)
	}
	if d.Has(HasDevice) {
		dv = fmt.Sprintf("%04x", d.Device)
	}
	return v + ":" + dv
}

// IsVF reports whether the function is an SR-IOV virtual function.
func (d *Device) IsVF() bool { return d.PhysFn != nil }

// Inventory is every PCI function of a host.
type Inventory struct {
	Devices []*Device // sorted by address
	// Errors are problems not tied to one device: an entry of
	// /sys/bus/pci/devices that is not an address, an unreadable or
	// malformed pci.ids.
	Errors []error
	// IDsPath is the pci.ids the names came from; "" when none was found.
	IDsPath string
}

// Lookup returns the device at a, or nil.
func (inv *Inventory) Lookup(a Address) *Device {
	i, ok := slices.BinarySearchFunc(inv.Devices, a, func(d *Device, a Address) int { return d.Address.Compare(a) })
	if !ok {
		return nil
	}
	return inv.Devices[i]
}

// Scan reads every PCI function under /sys/bus/pci/devices. It fails only
// when that directory cannot be listed; every other problem is recorded in
// the device it concerns (Device.Errors) or in Inventory.Errors.
func Scan(root *hostfs.Root) (*Inventory, error) {
	names, err := root.ReadDir(DevicesDir)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{}
	type job struct {
		a    Address
		name string
	}
	var jobs []job
	for _, n := range names {
		a, err := ParseAddress(n)
		if err != nil {
			inv.Errors = append(inv.Errors, fmt.Errorf("%s: %w", path.Join(DevicesDir, n), err))
			continue
		}
		jobs = append(jobs, job{a, n})
	}
	// sysfs reads are syscall-bound (open, fstat, read, close per
	// attribute, about 15 attributes per function): a few workers cut the
	// wall time of a 100-function server several times over.
	inv.Devices = make([]*Device, len(jobs))
	workers := min(scanWorkers, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				inv.Devices[i] = scanDevice(root, jobs[i].a, path.Join(DevicesDir, jobs[i].name))
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	sort.Slice(inv.Devices, func(i, j int) bool { return inv.Devices[i].Address.Compare(inv.Devices[j].Address) < 0 })

	// Keep only the names this host needs (see BenchmarkParseIDs).
	vendors := map[uint16]bool{}
	devices := map[uint32]bool{}
	for _, d := range inv.Devices {
		if d.Has(HasVendor) {
			vendors[d.Vendor] = true
			devices[uint32(d.Vendor)<<16|uint32(d.Device)] = true
		}
	}
	ids, p, err := LoadIDs(root, Filter{
		Vendor: func(v uint16) bool { return vendors[v] },
		Device: func(v, dev uint16) bool { return devices[uint32(v)<<16|uint32(dev)] },
	})
	inv.IDsPath = p
	if err != nil {
		inv.Errors = append(inv.Errors, err)
	}
	if ids != nil {
		for _, d := range inv.Devices {
			nameDevice(ids, d)
		}
	}
	return inv, nil
}

func nameDevice(ids *IDs, d *Device) {
	if d.Has(HasVendor) {
		d.VendorName, _ = ids.VendorName(d.Vendor)
		if d.Has(HasDevice) {
			d.DeviceName, _ = ids.DeviceName(d.Vendor, d.Device)
			if d.Has(HasSubsystem) {
				d.SubsystemName, _ = ids.SubsystemName(d.Vendor, d.Device, d.SubsystemVendor, d.SubsystemDevice)
			}
		}
	}
	if d.Has(HasClass) {
		d.ClassName, _ = ids.ClassName(d.Class)
	}
}

// scanDevice reads one function. Reads go to the resolved directory so
// that evidence names the device's real place in the tree.
func scanDevice(root *hostfs.Root, a Address, busPath string) *Device {
	d := &Device{Address: a, BusPath: busPath, Path: busPath}
	fail := func(err error) { d.Errors = append(d.Errors, err) }

	real, err := root.Resolve(busPath)
	if err != nil {
		// A loop or a dangling link: nothing below it can be read.
		fail(fmt.Errorf("resolve %s: %w", busPath, err))
		return d
	}
	d.Path = real
	d.Bridges = bridgeChain(real, a)

	// List the directory once: an attribute not listed is absent, which
	// spares a failed open per absent attribute. When the listing fails,
	// every attribute is tried.
	names, lerr := root.ReadDir(real)
	if lerr != nil {
		fail(lerr)
	}
	listed := make(map[string]bool, len(names))
	for _, n := range names {
		listed[n] = true
	}
	has := func(n string) bool { return lerr != nil || listed[n] }

	// read returns the trimmed attribute; ok is false when it is absent
	// (and, if required, an error was recorded) or unreadable (recorded).
	read := func(name string, required bool) (string, bool) {
		p := d.AttrPath(name)
		if !has(name) {
			if required {
				fail(&fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist})
			}
			return "", false
		}
		b, err := root.ReadFileLimit(p, attrLimit)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && !required {
				return "", false
			}
			fail(err)
			return "", false
		}
		return strings.TrimSpace(string(b)), true
	}
	parseErr := func(name string, err error) { fail(fmt.Errorf("parse %s: %w", d.AttrPath(name), err)) }
	// hexAttr reads a hex attribute.
	hexAttr := func(name string, bits int, required bool) (uint64, bool) {
		s, ok := read(name, required)
		if !ok {
			return 0, false
		}
		v, err := parseHex(s, bits)
		if err != nil {
			parseErr(name, err)
			return 0, false
		}
		return v, true
	}
	hex := func(name string, bits int, required bool, flag Present) uint64 {
		v, ok := hexAttr(name, bits, required)
		if ok {
			d.Present |= flag
		}
		return v
	}
	dec := func(name string, lo, hi int) *int {
		s, ok := read(name, false)
		if !ok {
			return nil
		}
		v, err := parseDec(s, lo, hi)
		if err != nil {
			parseErr(name, err)
			return nil
		}
		return &v
	}

	d.Vendor = uint16(hex("vendor", 16, true, HasVendor))
	d.Device = uint16(hex("device", 16, true, HasDevice))
	d.Class = uint32(hex("class", 24, true, HasClass))
	// revision appeared in Linux 4.10: optional.
	d.Revision = uint8(hex("revision", 8, false, HasRevision))

	// Subsystem ids: both attributes, else the modalias.
	if has("subsystem_vendor") || has("subsystem_device") {
		sv, okv := hexAttr("subsystem_vendor", 16, true)
		sd, okd := hexAttr("subsystem_device", 16, true)
		if okv && okd {
			d.SubsystemVendor, d.SubsystemDevice = uint16(sv), uint16(sd)
			d.Present |= HasSubsystem
		}
	} else if s, ok := read("modalias", false); ok {
		m, err := ParseModalias(s)
		if err != nil {
			parseErr("modalias", err)
		} else {
			d.SubsystemVendor, d.SubsystemDevice = m.SubsystemVendor, m.SubsystemDevice
			d.Present |= HasSubsystem
		}
	}

	// numa_node: dev_to_node(), -1 for NUMA_NO_NODE (drivers/pci/pci-sysfs.c).
	d.NUMANode = dec("numa_node", -1, 1<<16)
	if s, ok := read("local_cpulist", false); ok {
		d.LocalCPUs = s
	}

	link := func(name string) string {
		if !has(name) {
			return ""
		}
		return linkBase(root, d, name, fail)
	}
	d.Driver = link("driver")
	if g := link("iommu_group"); g != "" {
		if v, err := parseDec(g, 0, 1<<30); err != nil {
			parseErr("iommu_group", err)
		} else {
			d.IOMMUGroup = &v
		}
	}

	d.TotalVFs = dec("sriov_totalvfs", 0, 1<<16)
	d.NumVFs = dec("sriov_numvfs", 0, 1<<16)
	if pf := link("physfn"); pf != "" {
		if pa, err := ParseAddress(pf); err != nil {
			parseErr("physfn", err)
		} else {
			d.PhysFn = &pa
		}
	}
	type vf struct {
		n int
		a Address
	}
	var vfs []vf
	for _, n := range names {
		num, ok := strings.CutPrefix(n, "virtfn")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 {
			continue // not a virtfnN link
		}
		t := linkBase(root, d, n, fail)
		if t == "" {
			continue
		}
		va, err := ParseAddress(t)
		if err != nil {
			parseErr(n, err)
			continue
		}
		vfs = append(vfs, vf{i, va})
	}
	sort.Slice(vfs, func(i, j int) bool { return vfs[i].n < vfs[j].n })
	for _, v := range vfs {
		d.VFs = append(d.VFs, v.a)
	}

	speed := func(name string) *LinkSpeed {
		s, ok := read(name, false)
		if !ok {
			return nil
		}
		ls, err := ParseLinkSpeed(s)
		if err != nil {
			parseErr(name, err)
			return nil
		}
		return &ls
	}
	d.Link.CurrentSpeed = speed("current_link_speed")
	d.Link.MaxSpeed = speed("max_link_speed")
	// Widths are the Negotiated/Maximum Link Width fields, 6 bits
	// (include/uapi/linux/pci_regs.h PCI_EXP_LNKSTA_NLW, PCI_EXP_LNKCAP_MLW).
	width := func(name string, raw *string) *int {
		s, ok := read(name, false)
		if !ok {
			return nil
		}
		*raw = s
		v, err := parseDec(s, 0, 255)
		if err != nil {
			parseErr(name, err)
			return nil
		}
		return &v
	}
	d.Link.CurrentWidth = width("current_link_width", &d.Link.CurrentWidthRaw)
	d.Link.MaxWidth = width("max_link_width", &d.Link.MaxWidthRaw)
	return d
}

// linkBase returns the last path element of a symlink attribute, "" when
// the link is absent; other errors are recorded.
func linkBase(root *hostfs.Root, d *Device, name string, fail func(error)) string {
	t, err := root.Readlink(d.AttrPath(name))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fail(err)
		}
		return ""
	}
	b := path.Base(t)
	if b == "/" || b == "." || b == ".." {
		fail(fmt.Errorf("readlink %s: target %q names nothing", d.AttrPath(name), t))
		return ""
	}
	return b
}

// bridgeChain returns the PCI functions named in a resolved sysfs path
// above the device itself, top-down. /sys/devices/pci0000:17 is the host
// bridge (not a function); every "DDDD:BB:DD.F" component below it is
// one (drivers/pci/probe.c, pci_setup_device names each device with
// dev_set_name(&dev->dev, "%04x:%02x:%02x.%d", ...)).
func bridgeChain(real string, self Address) []Address {
	var out []Address
	parts := strings.Split(strings.Trim(real, "/"), "/")
	if len(parts) > 0 {
		parts = parts[:len(parts)-1] // the device itself
	}
	for _, p := range parts {
		if a, err := ParseAddress(p); err == nil && a != self {
			out = append(out, a)
		}
	}
	return out
}

// NUMANodes returns the host's online NUMA nodes. ok is false when the
// file is absent: a kernel without CONFIG_NUMA, or a capture without it.
func NUMANodes(root *hostfs.Root) (nodes []int, ok bool, err error) {
	s, err := root.ReadString(NodeOnlinePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	nodes, err = ParseList(s)
	if err != nil {
		return nil, false, fmt.Errorf("parse %s: %w", NodeOnlinePath, err)
	}
	return nodes, true, nil
}
