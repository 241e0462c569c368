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

	// Driver is the basename of the driver link; "" when there is none or
	// it is unusable (a loop, a link to a file: AttrErr("driver") says).
	Driver string
	// NUMANode is numa_node as read: -1 is the kernel's NUMA_NO_NODE; nil
	// when absent (no CONFIG_NUMA), unreadable or malformed, which
	// AttrErr("numa_node") tells apart.
	NUMANode   *int
	IOMMUGroup *int   // from the iommu_group link; nil when absent (no IOMMU)
	LocalCPUs  string // local_cpulist as read; "" when absent
	// LocalCPUMask is local_cpus as read (a hex mask), read only when
	// local_cpulist is absent (captures that keep only the mask); "" then
	// when absent too.
	LocalCPUMask string

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

	// Errors are the reads that failed or did not parse, each with its
	// host path: an *AttrError per attribute (AttrErr finds one), or the
	// error resolving or listing the device's directory. They never stop
	// the scan.
	Errors []error

	// ConfigRead is the config attribute a FieldBridgeConfig scan read,
	// which ReadConfig answers from; nil when the scan did not read it.
	ConfigRead *ConfigRead `json:"-"`
}

// ConfigRead is one read of a function's config attribute: its bytes, or
// the error.
type ConfigRead struct {
	Bytes []byte
	Err   error
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
	// Fields are what was read of each function (AllFields from Scan).
	Fields Fields
}

// DriverLinks reports whether any function has a driver link, usable or
// not. On a running host some always has: root ports bind pcieport
// (drivers/pci/pcie/portdrv.c) and a VM's devices virtio-pci. A tree in
// which none has one is a capture that kept no driver links, where a
// function without one says nothing about its binding.
func (inv *Inventory) DriverLinks() bool {
	for _, d := range inv.Devices {
		if d.Driver != "" || d.AttrErr("driver") != nil {
			return true
		}
	}
	return false
}

// Lookup returns the device at a, or nil.
func (inv *Inventory) Lookup(a Address) *Device {
	i, ok := slices.BinarySearchFunc(inv.Devices, a, func(d *Device, a Address) int { return d.Address.Compare(a) })
	if !ok {
		return nil
	}
	return inv.Devices[i]
}

// Fields selects what a scan reads of each function beyond its address,
// its resolved sysfs path, its bridge chain and its vendor, device and
// class ids, which every scan reads. A field left out is never read: its
// Device members stay zero (nil, "") with no error, as when the kernel
// does not expose it, so a caller asks only for what it shows.
type Fields uint16

const (
	FieldSubsystem  Fields = 1 << iota // subsystem ids (or the modalias) and SubsystemName
	FieldRevision                      // revision
	FieldLocality                      // numa_node
	FieldLocalCPUs                     // local_cpulist (or local_cpus)
	FieldDriver                        // the driver link
	FieldIOMMUGroup                    // the iommu_group link
	FieldPhysFn                        // a VF's physfn link (IsVF)
	FieldSRIOV                         // a PF's sriov_totalvfs, sriov_numvfs and virtfnN links
	FieldLink                          // current and maximum link speed and width
	FieldNames                         // the pci.ids names (Inventory.LoadNames)
	// FieldBridgeConfig reads a bridge's config space (IsBridgeClass)
	// during the scan, beside its other attributes, for ReadConfig to
	// answer from: topo reads every bridge's.
	FieldBridgeConfig

	// AllFields is the whole inventory: what Scan reads.
	AllFields = FieldSubsystem | FieldRevision | FieldLocality | FieldLocalCPUs | FieldDriver | FieldIOMMUGroup | FieldPhysFn | FieldSRIOV | FieldLink | FieldNames
)

// Scan reads every PCI function under /sys/bus/pci/devices, every field.
// It fails only when that directory cannot be listed; every other problem
// is recorded in the device it concerns (Device.Errors) or in
// Inventory.Errors.
func Scan(root *hostfs.Root) (*Inventory, error) { return ScanFields(root, AllFields) }

// ScanFields is Scan reading only the fields f of each function (and the
// ids), for a command that shows less than the whole inventory: topo
// reads two thirds of the attributes check does.
func ScanFields(root *hostfs.Root, f Fields) (*Inventory, error) {
	names, err := root.ReadDir(DevicesDir)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Fields: f}
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
				inv.Devices[i] = scanDevice(root, jobs[i].a, path.Join(DevicesDir, jobs[i].name), f)
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	sort.Slice(inv.Devices, func(i, j int) bool { return inv.Devices[i].Address.Compare(inv.Devices[j].Address) < 0 })

	if f&FieldNames != 0 {
		inv.LoadNames(root)
	}
	return inv, nil
}

// LoadNames names the functions from pci.ids (VendorName, DeviceName,
// ClassName, and SubsystemName when the subsystem was read), recording
// the file in IDsPath and a failed read in Errors: what FieldNames does
// during the scan, for a caller that decides afterwards whether it shows
// any name (check on a host with no accelerator shows none).
func (inv *Inventory) LoadNames(root *hostfs.Root) {
	// Keep only the names this host needs (see BenchmarkParseIDs). The
	// sets are sorted slices: Device is asked of every device line of a
	// kept vendor's block (thousands for Intel), where a binary search of
	// a few ids is cheaper than a map.
	var seek []uint16
	var devices []uint32
	for _, d := range inv.Devices {
		if d.Has(HasVendor) {
			seek = append(seek, d.Vendor)
			devices = append(devices, uint32(d.Vendor)<<16|uint32(d.Device))
		}
	}
	slices.Sort(seek)
	seek = slices.Compact(seek)
	slices.Sort(devices)
	devices = slices.Compact(devices)
	names, p, err := LoadIDs(root, Filter{
		Vendor: func(v uint16) bool { _, ok := slices.BinarySearch(seek, v); return ok },
		Device: func(v, dev uint16) bool {
			_, ok := slices.BinarySearch(devices, uint32(v)<<16|uint32(dev))
			return ok
		},
		Seek: seek,
	})
	inv.IDsPath = p
	inv.Fields |= FieldNames
	if err != nil {
		inv.Errors = append(inv.Errors, err)
	}
	if names != nil {
		for _, d := range inv.Devices {
			nameDevice(names, d, inv.Fields)
		}
	}
}

func nameDevice(ids *IDs, d *Device, f Fields) {
	if d.Has(HasVendor) {
		d.VendorName, _ = ids.VendorName(d.Vendor)
		if d.Has(HasDevice) {
			d.DeviceName, _ = ids.DeviceName(d.Vendor, d.Device)
			if d.Has(HasSubsystem) && f&FieldSubsystem != 0 {
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
func scanDevice(root *hostfs.Root, a Address, busPath string, f Fields) *Device {
	d := &Device{Address: a, BusPath: busPath, Path: busPath}
	real, dir, dirErr, err := root.ResolveDir(busPath)
	if err != nil {
		// A loop or a dangling link: nothing below it can be read.
		d.Errors = append(d.Errors, fmt.Errorf("resolve %s: %w", busPath, err))
		return d
	}
	d.Path = real
	d.Bridges = bridgeChain(real, a)
	r := newDevReader(root, d, dir, dirErr)
	defer r.close()
	r.readIDs(f)
	if f&FieldBridgeConfig != 0 && d.Has(HasClass) && IsBridgeClass(d.Class) {
		r.readConfig()
	}
	if f&(FieldLocality|FieldLocalCPUs) != 0 {
		r.readLocality(f)
	}
	if f&FieldDriver != 0 {
		r.readDriver()
	}
	if f&FieldIOMMUGroup != 0 {
		r.readIOMMUGroup()
	}
	r.readSRIOV(f)
	if f&FieldLink != 0 {
		r.readLink()
	}
	return d
}

// devReader reads the attributes of one function's directory.
type devReader struct {
	root *hostfs.Root
	d    *Device
	// dir is the function's directory held open: each attribute is
	// looked up by its name in it (hostfs.Dir); nil when it could not be
	// listed, and then every attribute is read from the root and tried.
	dir *hostfs.Dir
	// names is the directory listing: an attribute not listed is absent,
	// which spares a failed open per absent attribute.
	names []string
}

// newDevReader reads d through dir, its directory as Root.ResolveDir
// opened it (nil, with the error dirErr, when it could not be listed).
func newDevReader(root *hostfs.Root, d *Device, dir *hostfs.Dir, dirErr error) *devReader {
	r := &devReader{root: root, d: d}
	if dirErr != nil {
		d.Errors = append(d.Errors, dirErr)
		return r
	}
	r.dir, r.names = dir, dir.Names()
	return r
}

func (r *devReader) close() {
	if r.dir != nil {
		r.dir.Close()
	}
}

// has reports whether name is listed (always true when the listing
// failed). The listing is sorted (hostfs.Root.ReadDir).
func (r *devReader) has(name string) bool {
	if r.dir == nil {
		return true
	}
	_, ok := slices.BinarySearch(r.names, name)
	return ok
}

// readFile reads the attribute name, through the open directory when
// there is one.
func (r *devReader) readFile(name string) ([]byte, error) {
	if r.dir == nil {
		return r.root.ReadFileLimit(r.d.AttrPath(name), attrLimit)
	}
	return r.dir.ReadAttr(name, attrLimit)
}

// statResolve is hostfs.Dir.StatResolve of the attribute name: Stat, and
// Resolve when it is a directory ("" when that fails).
func (r *devReader) statResolve(name string) (hostfs.Node, string, error) {
	if r.dir != nil {
		return r.dir.StatResolve(name)
	}
	p := r.d.AttrPath(name)
	st, err := r.root.Stat(p)
	if err != nil || st.Type != hostfs.TypeDir {
		return st, "", err
	}
	real, err := r.root.Resolve(p)
	if err != nil {
		real = ""
	}
	return st, real, nil
}

// readlink reads the symlink attribute name, likewise.
func (r *devReader) readlink(name string) (string, error) {
	if r.dir == nil {
		return r.root.Readlink(r.d.AttrPath(name))
	}
	return r.dir.Readlink(name)
}

func (r *devReader) fail(name string, p Problem, err error) {
	r.d.Errors = append(r.d.Errors, &AttrError{Attr: name, Path: r.d.AttrPath(name), Problem: p, Err: err})
}

// read returns the trimmed attribute; ok is false when it is absent (an
// error is recorded only if it is required) or unreadable (recorded).
func (r *devReader) read(name string, required bool) (string, bool) {
	if !r.has(name) {
		if required {
			r.fail(name, Absent, fs.ErrNotExist)
		}
		return "", false
	}
	b, err := r.readFile(name)
	switch {
	case err == nil:
		return strings.TrimSpace(string(b)), true
	case errors.Is(err, fs.ErrNotExist):
		if required {
			r.fail(name, Absent, err)
		}
	default:
		r.fail(name, Unreadable, err)
	}
	return "", false
}

// hex reads a hex attribute of at most bits bits.
func (r *devReader) hex(name string, bits int, required bool) (uint64, bool) {
	s, ok := r.read(name, required)
	if !ok {
		return 0, false
	}
	v, err := parseHex(s, bits)
	if err != nil {
		r.fail(name, Malformed, err)
		return 0, false
	}
	return v, true
}

// dec reads a decimal attribute within [lo, hi]; nil when absent or not
// usable (recorded).
func (r *devReader) dec(name string, lo, hi int) *int {
	s, ok := r.read(name, false)
	if !ok {
		return nil
	}
	v, err := parseDec(s, lo, hi)
	if err != nil {
		r.fail(name, Malformed, err)
		return nil
	}
	return &v
}

func (r *devReader) id(name string, bits int, required bool, flag Present) uint64 {
	v, ok := r.hex(name, bits, required)
	if ok {
		r.d.Present |= flag
	}
	return v
}

func (r *devReader) readIDs(f Fields) {
	d := r.d
	d.Vendor = uint16(r.id("vendor", 16, true, HasVendor))
	d.Device = uint16(r.id("device", 16, true, HasDevice))
	d.Class = uint32(r.id("class", 24, true, HasClass))
	if f&FieldRevision != 0 {
		// revision appeared in Linux 4.10: optional.
		d.Revision = uint8(r.id("revision", 8, false, HasRevision))
	}
	if f&FieldSubsystem == 0 {
		return
	}

	// Subsystem ids: both attributes, else the modalias.
	if r.has("subsystem_vendor") || r.has("subsystem_device") {
		sv, okv := r.hex("subsystem_vendor", 16, true)
		sd, okd := r.hex("subsystem_device", 16, true)
		if okv && okd {
			d.SubsystemVendor, d.SubsystemDevice = uint16(sv), uint16(sd)
			d.Present |= HasSubsystem
		}
		return
	}
	s, ok := r.read("modalias", false)
	if !ok {
		return
	}
	m, err := ParseModalias(s)
	if err != nil {
		r.fail("modalias", Malformed, err)
		return
	}
	d.SubsystemVendor, d.SubsystemDevice = m.SubsystemVendor, m.SubsystemDevice
	d.Present |= HasSubsystem
}

func (r *devReader) readLocality(f Fields) {
	// numa_node: dev_to_node(), -1 for NUMA_NO_NODE (drivers/pci/pci-sysfs.c).
	if f&FieldLocality != 0 {
		r.d.NUMANode = r.dec("numa_node", -1, 1<<16)
	}
	if f&FieldLocalCPUs == 0 {
		return
	}
	if s, ok := r.read("local_cpulist", false); ok {
		r.d.LocalCPUs = s
	} else if s, ok := r.read("local_cpus", false); ok {
		r.d.LocalCPUMask = s
	}
}

// LocalCPUList returns the device's local CPUs, from local_cpulist or
// local_cpus; ok is false when neither was read. Both print
// cpumask_of_node(dev_to_node(dev)) (drivers/pci/pci-sysfs.c,
// local_cpus_show/local_cpulist_show): the CPUs of the device's node, or
// every online CPU when it has none.
func (d *Device) LocalCPUList() (cpus []int, ok bool, err error) {
	switch {
	case d.LocalCPUs != "":
		cpus, err = ParseList(d.LocalCPUs)
	case d.LocalCPUMask != "":
		cpus, err = ParseMask(d.LocalCPUMask)
	default:
		return nil, false, nil
	}
	return cpus, err == nil, err
}

// NodeCPUs returns the CPUs of NUMA node n, from
// /sys/devices/system/node/node<n>/cpulist (drivers/base/node.c).
func NodeCPUs(root *hostfs.Root, n int) ([]int, error) {
	p := fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", n)
	s, err := root.ReadString(p)
	if err != nil {
		return nil, err
	}
	cpus, err := ParseList(s)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	return cpus, nil
}

// linkBase returns the last path element of a symlink attribute, "" when
// the link is absent or unusable (recorded).
func (r *devReader) linkBase(name string) string {
	if !r.has(name) {
		return ""
	}
	t, err := r.readlink(name)
	if err != nil {
		if st, lerr := r.root.Lstat(r.d.AttrPath(name)); lerr == nil && st.Type == hostfs.TypeDir {
			err = ErrLinkCopied
		}
		if !errors.Is(err, fs.ErrNotExist) {
			r.fail(name, Unreadable, err)
		}
		return ""
	}
	b := path.Base(t)
	if b == "/" || b == "." || b == ".." {
		r.fail(name, Malformed, fmt.Errorf("link target %q names nothing", t))
		return ""
	}
	return b
}

// DriversDir holds the PCI drivers; a function's driver link leads to one
// of its entries (drivers/base/bus.c, driver_sysfs_add links the device to
// its driver's kobject, /sys/bus/pci/drivers/<name>).
const DriversDir = "/sys/bus/pci/drivers"

// readDriver reads the driver link. A link that loops, or that leads
// anywhere but a directory in DriversDir, is not a driver: its basename
// would be a guess. A dangling link that names a driver (".../bus/pci/
// drivers/<name>") keeps its name: captures keep links without their
// targets, and some moved the device so that its relative link climbs
// past the root (prometheus/procfs' E810 points at /bus/pci/drivers/ice).
func (r *devReader) readDriver() {
	name := r.linkBase("driver")
	if name == "" {
		return
	}
	st, real, err := r.statResolve("driver")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t, _ := r.readlink("driver")
		if !path.IsAbs(t) {
			t = path.Join(r.d.Path, t)
		}
		if !strings.HasSuffix(path.Dir(path.Clean(t)), "/bus/pci/drivers") {
			r.fail("driver", Malformed, fmt.Errorf("the link dangles at %s, not at a driver in %s", t, DriversDir))
			return
		}
	case err != nil:
		r.fail("driver", Unreadable, err)
		return
	case st.Type != hostfs.TypeDir:
		r.fail("driver", Malformed, fmt.Errorf("the link leads to a %s, not a driver directory", st.Type))
		return
	default:
		if real != "" && path.Dir(real) != DriversDir {
			r.fail("driver", Malformed, fmt.Errorf("the link leads to %s, not to a driver in %s", real, DriversDir))
			return
		}
	}
	r.d.Driver = name
}

func (r *devReader) readIOMMUGroup() {
	g := r.linkBase("iommu_group")
	if g == "" {
		return
	}
	v, err := parseDec(g, 0, 1<<30)
	if err != nil {
		r.fail("iommu_group", Malformed, err)
		return
	}
	r.d.IOMMUGroup = &v
}

// IsBridgeClass reports whether a class code (0xCCSSPP) is a bridge's
// whose secondary side holds more functions (PCI Code and ID Assignment
// Specification, base class 0x06): PCI-to-PCI (every PCIe port is one),
// CardBus, and semi-transparent PCI-to-PCI.
func IsBridgeClass(class uint32) bool {
	switch class >> 8 {
	case 0x0604, 0x0607, 0x0609:
		return true
	}
	return false
}

// readConfig reads the config attribute for ReadConfig, as ReadConfig
// would through the root.
func (r *devReader) readConfig() {
	c := &ConfigRead{}
	if r.dir == nil {
		c.Bytes, c.Err = r.root.ReadFileLimit(r.d.AttrPath(ConfigAttr), ConfigExpSize)
	} else {
		// Not ReadAttr: config is a binary attribute, read by the
		// driver's method (pci_read_config in drivers/pci/pci-sysfs.c).
		c.Bytes, c.Err = r.dir.ReadFileLimit(ConfigAttr, ConfigExpSize)
	}
	r.d.ConfigRead = c
}

// readSRIOV reads the PF's VF counts and virtfnN links, and a VF's physfn
// link (drivers/pci/iov.c).
func (r *devReader) readSRIOV(f Fields) {
	d := r.d
	if f&FieldSRIOV != 0 {
		d.TotalVFs = r.dec("sriov_totalvfs", 0, 1<<16)
		d.NumVFs = r.dec("sriov_numvfs", 0, 1<<16)
	}
	if f&FieldPhysFn != 0 {
		if pf := r.linkBase("physfn"); pf != "" {
			if pa, err := ParseAddress(pf); err != nil {
				r.fail("physfn", Malformed, err)
			} else {
				d.PhysFn = &pa
			}
		}
	}
	if f&FieldSRIOV == 0 {
		return
	}
	type vf struct {
		n int
		a Address
	}
	var vfs []vf
	for _, n := range r.names {
		num, ok := strings.CutPrefix(n, "virtfn")
		i, err := strconv.Atoi(num)
		if !ok || err != nil || i < 0 {
			continue // not a virtfnN link
		}
		if va, ok := r.vfLink(n); ok {
			vfs = append(vfs, vf{i, va})
		}
	}
	sort.Slice(vfs, func(i, j int) bool { return vfs[i].n < vfs[j].n })
	for _, v := range vfs {
		d.VFs = append(d.VFs, v.a)
	}
}

func (r *devReader) vfLink(name string) (Address, bool) {
	t := r.linkBase(name)
	if t == "" {
		return Address{}, false
	}
	a, err := ParseAddress(t)
	if err != nil {
		r.fail(name, Malformed, err)
		return Address{}, false
	}
	return a, true
}

func (r *devReader) speed(name string) *LinkSpeed {
	s, ok := r.read(name, false)
	if !ok {
		return nil
	}
	ls, err := ParseLinkSpeed(s)
	if err != nil {
		r.fail(name, Malformed, err)
		return nil
	}
	return &ls
}

// width reads a link width: the Negotiated/Maximum Link Width fields, 6
// bits (include/uapi/linux/pci_regs.h PCI_EXP_LNKSTA_NLW,
// PCI_EXP_LNKCAP_MLW).
func (r *devReader) width(name string, raw *string) *int {
	s, ok := r.read(name, false)
	if !ok {
		return nil
	}
	*raw = s
	v, err := parseDec(s, 0, 255)
	if err != nil {
		r.fail(name, Malformed, err)
		return nil
	}
	return &v
}

func (r *devReader) readLink() {
	l := &r.d.Link
	l.CurrentSpeed = r.speed("current_link_speed")
	l.MaxSpeed = r.speed("max_link_speed")
	l.CurrentWidth = r.width("current_link_width", &l.CurrentWidthRaw)
	l.MaxWidth = r.width("max_link_width", &l.MaxWidthRaw)
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
		if a, ok := AddressOf(p); ok && a != self {
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
