package iommu

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// A group is viable for VFIO when no member is bound to a driver that
// uses the kernel's DMA API on it: since Linux 5.19 a driver that binds
// calls iommu_device_use_default_domain unless it declares
// driver_managed_dma (drivers/base/dd.c really_probe ->
// pci_dma_configure, drivers/pci/pci-driver.c), and VFIO's claim on the
// group (iommu_group_claim_dma_owner, drivers/iommu/iommu.c) fails with
// EPERM while any such driver holds a member (its owner_cnt is not zero;
// EBUSY is what that driver's probe gets once VFIO owns the group);
// older kernels checked the
// same list by name (vfio_dev_driver_allowed). The drivers that declare
// it are vfio-pci and its variant drivers (all built on vfio_pci_core),
// pci-stub (drivers/pci/pci-stub.c) and pcieport
// (drivers/pci/pcie/portdrv.c), and the non-PCI VFIO drivers.

// vfioPCIDrivers are the PCI drivers of drivers/vfio/pci (Linux 6.18) by
// the name they register, which is the module name with - as _ unless
// the driver sets another: vfio-pci (vfio_pci.c), and the variants
// mlx5/main.c, hisilicon/hisi_acc_vfio_pci.c, pds/pci_drv.c,
// nvgrace-gpu/main.c, virtio/main.c, qat/main.c, ism/main.c (KBUILD_MODNAME)
// and xe/main.c ("xe-vfio-pci").
var vfioPCIDrivers = map[string]bool{
	"vfio-pci": true, "mlx5_vfio_pci": true, "hisi_acc_vfio_pci": true, "pds_vfio_pci": true,
	"nvgrace_gpu_vfio_pci": true, "virtio_vfio_pci": true, "qat_vfio_pci": true, "ism_vfio_pci": true,
	"xe-vfio-pci": true,
}

// vfioOtherDrivers are the VFIO drivers of other buses
// (drivers/vfio/platform, fsl-mc, cdx), whose devices can share a group
// on Arm and embedded platforms.
var vfioOtherDrivers = map[string]bool{"vfio-platform": true, "vfio-amba": true, "vfio-fsl-mc": true, "vfio-cdx": true}

// IsVFIODriver reports whether drv is a VFIO driver: one of the kernel's,
// or a name of the variant-driver pattern (NAME_vfio_pci, NAME-vfio-pci)
// for variants the list above does not know yet.
func IsVFIODriver(drv string) bool {
	return vfioPCIDrivers[drv] || vfioOtherDrivers[drv] || strings.HasSuffix(drv, "_vfio_pci") || strings.HasSuffix(drv, "-vfio-pci")
}

// Role is what one member means for its group's viability.
type Role uint8

const (
	RoleVFIO     Role = iota + 1 // bound to a VFIO driver
	RoleStub                     // bound to pci-stub
	RoleNoDriver                 // no driver bound
	RoleBridge                   // a PCI bridge: never assigned, never in the way
	RoleBlocks                   // bound to a driver that uses the DMA API: the group is not viable
	RoleUnknown                  // its driver link could not be read
)

func (r Role) String() string {
	switch r {
	case RoleVFIO:
		return "VFIO driver"
	case RoleStub:
		return "pci-stub"
	case RoleNoDriver:
		return "no driver"
	case RoleBridge:
		return "bridge"
	case RoleBlocks:
		return "blocks"
	case RoleUnknown:
		return "unknown"
	}
	return "?"
}

// Member is one device of a group.
type Member struct {
	Name    string       // the devices/ entry: a PCI address, or a device name
	Address *pci.Address // nil for a non-PCI device
	Device  *pci.Device  // nil when not among the PCI functions read
	Driver  string
	// DriverErr is why the driver link could not be read.
	DriverErr   error
	Accelerator string // the pci.IsAccelerator kind; "" when not one
	Role        Role
	Why         string // the evidence in a sentence
}

// Verdict is a group's viability for VFIO.
type Verdict uint8

const (
	Viable Verdict = iota + 1
	NotViable
	ViabilityUnknown
)

func (v Verdict) String() string {
	switch v {
	case Viable:
		return "viable"
	case NotViable:
		return "not viable"
	case ViabilityUnknown:
		return "unknown"
	}
	return "?"
}

// Fix is what would make a group viable: the commands that rebind its
// blocking members to vfio-pci now, and what keeps them there across
// reboots.
type Fix struct {
	// Commands rebind each blocking member now (as root).
	Commands []string
	// Param is the vfio-pci.ids= kernel parameter binding every member
	// but bridges and VFs at boot (vendor:device of each; vfio-pci takes
	// every device with those ids, so check that none is wanted by the
	// host).
	Param string
	// Softdeps are /etc/modprobe.d lines (modprobe.d(5)) making vfio-pci
	// load before the modular drivers that would claim those ids first.
	Softdeps []string
	// BuiltIn names blocking drivers built into the kernel: vfio-pci.ids
	// cannot beat them, driver_override (Commands) can.
	BuiltIn []string
}

// GroupViability is the viability of one group that holds an accelerator.
type GroupViability struct {
	Group   int
	Path    string
	Type    string // default domain type
	Members []Member
	// Accelerators are the members pci.IsAccelerator classifies as one.
	Accelerators []pci.Address
	Verdict      Verdict
	// Intended: a member is bound to a VFIO driver, so someone means to
	// assign this group.
	Intended bool
	Blocking []Member // RoleBlocks members
	Unknown  []Member // RoleUnknown members
	Fix      *Fix     // nil when viable
	// Shared: the group holds endpoints beyond one accelerator's own
	// functions (bridges excluded).
	Shared bool
	// Isolation is the ACS picture of each accelerator: why the group is
	// shared, or, when it is not, a port that does not isolate it all the
	// same (Unisolated).
	Isolation []Isolation
	// Notes are inconsistencies seen on the way (a member whose
	// iommu_group link names another group).
	Notes []string
	// DevicesErr is why the group's members could not be listed.
	DevicesErr error
}

// Viabilities judges every group that holds an accelerator. inv is the
// host's PCI inventory (pci.Scan of the same root); cr reads config
// spaces for the ACS explanation.
func Viabilities(root *hostfs.Root, st *State, inv *pci.Inventory, cr *ConfigReader) []GroupViability {
	var out []GroupViability
	for _, g := range st.Groups {
		gv := groupViability(root, g, inv)
		if len(gv.Accelerators) == 0 {
			continue
		}
		for _, a := range gv.Accelerators {
			gv.Isolation = append(gv.Isolation, Isolate(inv.Lookup(a), inv, cr))
		}
		out = append(out, gv)
	}
	return out
}

// Unisolated returns the isolations of the group's accelerators whose
// path holds a port that does not isolate them although the group is not
// shared: the group promises more isolation than the hardware gives.
// pci_device_group (drivers/iommu/iommu.c) judges a switch downstream
// port by the path above it, not by its own ACS, so devices below two
// downstream ports without ACS get separate groups although they reach
// each other peer to peer; the 2025 series "Fix incorrect iommu_groups
// with PCIe ACS" changes that. A breaker that is the device itself (a
// multifunction device sharing the group with its own functions) does
// not count.
func (gv GroupViability) Unisolated() []Isolation {
	if gv.Shared {
		return nil
	}
	var out []Isolation
	for _, iso := range gv.Isolation {
		if b := iso.Breaker; b != nil && b.Address != iso.Device {
			out = append(out, iso)
		}
	}
	return out
}

func groupViability(root *hostfs.Root, g Group, inv *pci.Inventory) GroupViability {
	gv := GroupViability{Group: g.ID, Path: g.Path, Type: g.Type}
	for _, name := range g.Devices {
		m := member(root, g, name, inv)
		if d := m.Device; d != nil && d.IOMMUGroup != nil && *d.IOMMUGroup != g.ID {
			gv.Notes = append(gv.Notes, fmt.Sprintf("%s is listed in group %d, its iommu_group link names group %d", name, g.ID, *d.IOMMUGroup))
		}
		if m.Accelerator != "" {
			gv.Accelerators = append(gv.Accelerators, *m.Address)
		}
		switch m.Role {
		case RoleVFIO:
			gv.Intended = true
		case RoleBlocks:
			gv.Blocking = append(gv.Blocking, m)
		case RoleUnknown:
			gv.Unknown = append(gv.Unknown, m)
		}
		gv.Members = append(gv.Members, m)
	}
	switch {
	case len(gv.Blocking) > 0:
		gv.Verdict = NotViable
		gv.Fix = fixFor(root, gv.Members)
	case len(gv.Unknown) > 0 || g.DevicesErr != nil:
		gv.Verdict = ViabilityUnknown
	default:
		gv.Verdict = Viable
	}
	if g.DevicesErr != nil {
		gv.DevicesErr = g.DevicesErr
		gv.Notes = append(gv.Notes, "the members could not be listed: "+g.DevicesErr.Error())
	}
	gv.Shared = shared(gv)
	return gv
}

// shared reports whether the group holds endpoints beyond the functions
// of one accelerator's device (same bus and slot).
func shared(gv GroupViability) bool {
	if len(gv.Accelerators) == 0 {
		return false
	}
	a := gv.Accelerators[0]
	for _, m := range gv.Members {
		if m.Role == RoleBridge {
			continue
		}
		if m.Address == nil {
			return true
		}
		if x := *m.Address; x.Domain != a.Domain || x.Bus != a.Bus || x.Dev != a.Dev {
			return true
		}
	}
	return false
}

func member(root *hostfs.Root, g Group, name string, inv *pci.Inventory) Member {
	m := Member{Name: name}
	if a, err := pci.ParseAddress(name); err == nil {
		m.Address = &a
		m.Device = inv.Lookup(a)
	}
	if d := m.Device; d != nil {
		m.Driver = d.Driver
		if ae := d.AttrErr("driver"); ae != nil {
			m.DriverErr = ae
		}
		if k, ok := pci.IsAccelerator(d); ok {
			m.Accelerator = k
		}
	} else {
		// A non-PCI member, or a PCI one the inventory lacks: its driver
		// link, through the group's devices/ link.
		p := path.Join(g.Path, "devices", name, "driver")
		t, err := root.Readlink(p)
		switch {
		case err == nil:
			m.Driver = path.Base(t)
		case !errors.Is(err, fs.ErrNotExist):
			m.DriverErr = err
		}
	}
	bridge := m.Device != nil && m.Device.Has(pci.HasClass) && m.Device.Class>>8 == 0x0604
	switch {
	case m.DriverErr != nil:
		m.Role, m.Why = RoleUnknown, "its driver link could not be read: "+m.DriverErr.Error()
	case bridge:
		m.Role = RoleBridge
		m.Why = "a PCI bridge: VFIO never assigns bridges, and they are no obstacle"
		if m.Driver != "" && m.Driver != "pcieport" {
			m.Why += fmt.Sprintf(" (bound to %s; since Linux 5.19 a driver without driver_managed_dma, which pcieport has, keeps VFIO from claiming the group)", m.Driver)
		}
	case m.Driver == "":
		m.Role, m.Why = RoleNoDriver, "no driver bound"
	case IsVFIODriver(m.Driver):
		m.Role, m.Why = RoleVFIO, "bound to "+m.Driver+", a VFIO driver"
	case m.Driver == "pci-stub":
		m.Role, m.Why = RoleStub, "bound to pci-stub, which keeps other drivers off and does no DMA"
	default:
		m.Role = RoleBlocks
		m.Why = fmt.Sprintf("bound to %s, which uses the kernel's DMA API on it: VFIO cannot claim the group while it is bound (VFIO_GROUP_SET_CONTAINER gives EPERM)", m.Driver)
	}
	return m
}

// fixFor is the rebinding of every blocking member, and the persistent
// form for all members not yet on a VFIO driver.
func fixFor(root *hostfs.Root, members []Member) *Fix {
	f := &Fix{}
	ids := map[string]bool{}
	softdep := map[string]bool{}
	builtIn := map[string]bool{}
	f.Commands = append(f.Commands, "modprobe vfio-pci")
	for _, m := range members {
		if m.Role == RoleBridge {
			continue
		}
		// The parameter binds the whole group at boot, the members
		// already on vfio-pci too (their binding may be this boot's
		// driver_override). A VF takes no id: vfio-pci would claim the
		// PF's other VFs too, and VFs come after the PF's driver anyway.
		if d := m.Device; d != nil && d.Has(pci.HasVendor|pci.HasDevice) && !d.IsVF() {
			ids[fmt.Sprintf("%04x:%04x", d.Vendor, d.Device)] = true
		}
		if m.Role != RoleBlocks {
			continue
		}
		if m.Address != nil {
			bdf := m.Address.String()
			f.Commands = append(f.Commands,
				fmt.Sprintf("echo vfio-pci > /sys/bus/pci/devices/%s/driver_override", bdf),
				fmt.Sprintf("echo %s > /sys/bus/pci/devices/%s/driver/unbind", bdf, bdf),
				fmt.Sprintf("echo %s > /sys/bus/pci/drivers_probe", bdf))
		}
		// A PCI driver's directory links to its module
		// (drivers/base/module.c, module_add_driver), and softdep names
		// that module. Built-in drivers get the link too when their
		// module has parameters, and since 6.14 always; only a loadable
		// module has /sys/module/NAME/initstate (kernel/module/sysfs.c).
		// A capture that kept neither says nothing.
		t, err := root.Readlink(path.Join(pci.DriversDir, m.Driver, "module"))
		mod := m.Driver
		if err == nil {
			mod = path.Base(t)
		}
		switch {
		case root.Exists(path.Join("/sys/module", mod, "initstate")):
			softdep[mod] = true
		case root.Exists(path.Join(pci.DriversDir, m.Driver)) && root.Exists("/sys/module"):
			builtIn[m.Driver] = true
		}
	}
	f.Param = "vfio-pci.ids=" + strings.Join(sortedKeys(ids), ",")
	for _, d := range sortedKeys(softdep) {
		f.Softdeps = append(f.Softdeps, fmt.Sprintf("softdep %s pre: vfio-pci", d))
	}
	// BuiltIn and Softdeps stay nil when empty.
	if len(builtIn) > 0 {
		f.BuiltIn = sortedKeys(builtIn)
	}
	return f
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
