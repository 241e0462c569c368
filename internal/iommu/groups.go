package iommu

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// Tri is a fact that may not be known.
type Tri uint8

const (
	Unknown Tri = iota
	Yes
	No
)

func (t Tri) String() string {
	switch t {
	case Yes:
		return "yes"
	case No:
		return "no"
	}
	return "unknown"
}

// Sysfs paths of the IOMMU core (drivers/iommu/iommu.c, iommu-sysfs.c).
const (
	// GroupsDir holds one directory per IOMMU group; the kset exists
	// whenever the kernel has CONFIG_IOMMU_API (iommu_init), and a group
	// appears for each set of devices an IOMMU driver probed.
	GroupsDir = "/sys/kernel/iommu_groups"
	// ClassDir holds one entry per IOMMU unit a driver registered
	// (iommu_device_sysfs_add): dmarN (Intel), ivhdN (AMD), smmu3.0x...
	// (Arm), each with devices/ links to the devices it translates.
	ClassDir = "/sys/class/iommu"
)

// Default domain types as a group's `type` attribute prints them
// (drivers/iommu/iommu.c, iommu_group_show_type;
// Documentation/ABI/testing/sysfs-kernel-iommu_groups).
const (
	TypeDMA       = "DMA"       // translated, strict TLB invalidation
	TypeDMAFQ     = "DMA-FQ"    // translated, lazy invalidation through a flush queue
	TypeIdentity  = "identity"  // passthrough: DMA addresses are physical addresses
	TypeBlocked   = "blocked"   // all DMA blocked
	TypeUnmanaged = "unmanaged" // a domain a user (not the DMA API) manages
)

// Group is one IOMMU group.
type Group struct {
	ID   int
	Path string
	// Type is the default domain type as read ("DMA", "DMA-FQ",
	// "identity", "blocked", "unmanaged", "unknown"); "" when the
	// attribute is absent (kernels before 5.11) or unreadable (TypeErr).
	Type    string
	TypeErr error
	// Devices are the entries of devices/: PCI addresses for PCI
	// devices, device names otherwise, sorted.
	Devices    []string
	DevicesErr error
}

// Unit is one IOMMU hardware unit the kernel registered.
type Unit struct {
	Name string // dmar0, ivhd0, smmu3.0x0000000009050000
	Path string
	// Kind is the driver's attribute group, when present: "intel-iommu"
	// (Intel VT-d) or "amd-iommu" (AMD-Vi); "" otherwise.
	Kind       string
	Devices    int
	DevicesErr error
}

// maxGroups bounds the groups read: a host has at most one per function,
// and hostfs caps a listing at 65536 entries.
const maxGroups = 1 << 16

// ReadGroups lists GroupsDir and reads every group's type and members.
// The error is that of the listing; per-group problems are in the
// groups.
func ReadGroups(root *hostfs.Root) ([]Group, error) {
	names, err := root.ReadDir(GroupsDir)
	if err != nil {
		return nil, err
	}
	var out []Group
	for _, n := range names {
		id, err := strconv.Atoi(n)
		if err != nil || id < 0 || strconv.Itoa(id) != n {
			continue // not a group: the kset holds nothing else, but a capture might
		}
		g := Group{ID: id, Path: path.Join(GroupsDir, n)}
		switch t, err := root.ReadString(path.Join(g.Path, "type")); {
		case err == nil:
			g.Type = t
		case errors.Is(err, fs.ErrNotExist):
		default:
			g.TypeErr = err
		}
		g.Devices, g.DevicesErr = root.ReadDir(path.Join(g.Path, "devices"))
		out = append(out, g)
		if len(out) >= maxGroups {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ReadUnits lists ClassDir.
func ReadUnits(root *hostfs.Root) ([]Unit, error) {
	names, err := root.ReadDir(ClassDir)
	if err != nil {
		return nil, err
	}
	var out []Unit
	for _, n := range names {
		u := Unit{Name: n, Path: path.Join(ClassDir, n)}
		for _, k := range []string{"intel-iommu", "amd-iommu"} {
			if root.Exists(path.Join(u.Path, k)) {
				u.Kind = k
			}
		}
		devs, err := root.ReadDir(path.Join(u.Path, "devices"))
		u.Devices, u.DevicesErr = len(devs), err
		out = append(out, u)
	}
	return out, nil
}

// State is what the host says about its IOMMU.
type State struct {
	Firmware Firmware
	Units    []Unit
	UnitsErr error // listing ClassDir; absent on kernels without IOMMU support
	Groups   []Group
	// GroupsErr is the error listing GroupsDir.
	GroupsErr error
	Cmdline   Cmdline
	// Kernel is read only where the explanation uses it: when DMA
	// remapping is off (the kernel's defaults may say why), or when a
	// snapshot is being recorded (so that a replay has it). Otherwise
	// it holds the Release and Err is ErrKernelConfigNotRead.
	Kernel KernelConfig
	// GroupsFromLinks: GroupsDir is not in the tree, and Groups were
	// rebuilt from the functions' iommu_group links, which the kernel
	// creates when it adds a device to a group
	// (drivers/iommu/iommu.c, iommu_group_add_device). Their types are
	// unknown.
	GroupsFromLinks bool
	// Live: the root is the running host, where GroupsDir exists
	// whenever the kernel has IOMMU support; a copied tree may have
	// dropped it empty.
	Live bool

	// On says whether DMA remapping is active: Yes when the kernel
	// created IOMMU groups, No when it created none on a host that
	// shows its groups directory (or lacks it: a kernel without
	// CONFIG_IOMMU_API), Unknown when that could not be read.
	On Tri
	// Vendor is the IOMMU the firmware describes: "Intel VT-d" (DMAR),
	// "AMD-Vi" (IVRS), "Arm SMMU" (IORT with SMMU nodes),
	// "virtio-iommu" (VIOT), "" when none.
	Vendor string
	// Reasons explain On: what was read, what it means, and what could
	// not be told. They are evidence sentences, not findings.
	Reasons []string
	// UnknownWhy is, when On is Unknown, the reason that made it so.
	UnknownWhy string
}

// Group returns the group with id, or nil.
func (s *State) Group(id int) *Group {
	i := sort.Search(len(s.Groups), func(i int) bool { return s.Groups[i].ID >= id })
	if i < len(s.Groups) && s.Groups[i].ID == id {
		return &s.Groups[i]
	}
	return nil
}

// Read reads everything the IOMMU verdict needs: the firmware tables,
// the IOMMU units and groups, the command line and, when the IOMMU is
// off, the kernel configuration; then explains whether the IOMMU is on.
// inv, the host's PCI inventory (pci.Scan of the same root; nil when
// there is none), stands in for GroupsDir in a capture that lacks it:
// the functions' iommu_group links name their groups.
func Read(root *hostfs.Root, inv *pci.Inventory) *State { return ReadWith(root, inv, ReadOptions{}) }

// ReadOptions say what Read may leave out.
type ReadOptions struct {
	// NoKernelWhenAbsent: when the firmware describes no IOMMU, the
	// kernel's configuration is not read to add whether this kernel could
	// drive one. The firmware's answer is the verdict's; the kernel's is a
	// second fact for someone about to enable one, which `accel-doctor
	// iommu` gives, and on a host without /boot/config-RELEASE it costs
	// the inflation of /proc/config.gz (0.5 ms of a 5 ms check on this
	// project's VM). check sets it unless asked about passthrough.
	NoKernelWhenAbsent bool
}

// ReadWith is Read with options.
func ReadWith(root *hostfs.Root, inv *pci.Inventory, o ReadOptions) *State {
	s := &State{
		Firmware: ReadFirmware(root),
		Cmdline:  ReadCmdline(root),
		Live:     root.IsLive(),
	}
	s.Units, s.UnitsErr = ReadUnits(root)
	s.Groups, s.GroupsErr = ReadGroups(root)
	if s.GroupsErr != nil && !s.Live && inv != nil {
		s.Groups = groupsFromLinks(inv)
		s.GroupsFromLinks = len(s.Groups) > 0
	}
	// The configuration is the one slow read here (/proc/config.gz
	// inflates to 100-300 KiB): only an IOMMU that is off is explained
	// by it, and explain reads it then (unless NoKernelWhenAbsent and the
	// firmware describes none); a snapshot records it whatever its
	// groups say, for a replay.
	s.Kernel = KernelConfig{Err: ErrKernelConfigNotRead}
	if rel, err := root.ReadString(OSReleasePath); err == nil && validRelease(rel) {
		s.Kernel.Release = rel // ReadVFIO's modules.builtin
	}
	read := false
	readKernel := func() {
		skip := o.NoKernelWhenAbsent && s.Firmware.Describes() == No && !root.Recording()
		if !read && !skip {
			s.Kernel, read = ReadKernelConfig(root), true
		}
	}
	if root.Recording() {
		readKernel()
	}
	s.explain(readKernel)
	return s
}

// groupsFromLinks rebuilds the groups from the functions' iommu_group
// links.
func groupsFromLinks(inv *pci.Inventory) []Group {
	byID := map[int]*Group{}
	var ids []int
	for _, d := range inv.Devices {
		if d.IOMMUGroup == nil {
			continue
		}
		id := *d.IOMMUGroup
		g, ok := byID[id]
		if !ok {
			g = &Group{ID: id, Path: path.Join(GroupsDir, strconv.Itoa(id))}
			byID[id] = g
			ids = append(ids, id)
		}
		g.Devices = append(g.Devices, d.Address.String())
	}
	sort.Ints(ids)
	out := make([]Group, 0, len(ids))
	for _, id := range ids {
		out = append(out, *byID[id])
	}
	return out
}

// domainTypes summarises the groups' default domain types ("12 DMA-FQ,
// 2 identity").
func (s *State) domainTypes() (summary string, identity int) {
	n := map[string]int{}
	for _, g := range s.Groups {
		t := g.Type
		if t == "" {
			t = "type not shown"
		}
		n[t]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	return strings.Join(parts, ", "), n[TypeIdentity]
}
