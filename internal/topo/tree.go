package topo

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// Role is what a node is in the PCIe tree.
type Role uint8

const (
	// RoleHostBridge is a root complex's host bridge, /sys/devices/pciDDDD:BB:
	// a pci_bus device, not a PCI function (drivers/pci/probe.c,
	// pci_register_host_bridge). Its functions sit on the root bus BB.
	RoleHostBridge Role = iota + 1
	// RoleRootPort is a PCIe root port (PCI_EXP_TYPE_ROOT_PORT).
	RoleRootPort
	// RoleSwitchUpstream is a switch's upstream port (PCI_EXP_TYPE_UPSTREAM).
	RoleSwitchUpstream
	// RoleSwitchDownstream is a switch's downstream port (PCI_EXP_TYPE_DOWNSTREAM).
	RoleSwitchDownstream
	// RoleBridge is any other bridge: PCIe-to-PCI (PCI_EXP_TYPE_PCI_BRIDGE),
	// PCI-to-PCIe, a conventional PCI-to-PCI bridge, CardBus.
	RoleBridge
	// RoleEndpoint is a function that is not a bridge.
	RoleEndpoint
)

// String names the role for people.
func (r Role) String() string {
	switch r {
	case RoleHostBridge:
		return "host bridge"
	case RoleRootPort:
		return "root port"
	case RoleSwitchUpstream:
		return "switch upstream port"
	case RoleSwitchDownstream:
		return "switch downstream port"
	case RoleBridge:
		return "bridge"
	case RoleEndpoint:
		return "endpoint"
	}
	return "unknown"
}

// Key names the role for machines (JSON): host_bridge, root_port,
// switch_upstream, switch_downstream, bridge, endpoint.
func (r Role) Key() string {
	switch r {
	case RoleHostBridge:
		return "host_bridge"
	case RoleRootPort:
		return "root_port"
	case RoleSwitchUpstream:
		return "switch_upstream"
	case RoleSwitchDownstream:
		return "switch_downstream"
	case RoleBridge:
		return "bridge"
	case RoleEndpoint:
		return "endpoint"
	}
	return "unknown"
}

// RoleSource says how a bridge's role was told.
type RoleSource uint8

const (
	// FromNone: host bridges and endpoints, whose role is not in question.
	FromNone RoleSource = iota
	// FromConfig: the Device/Port Type of the PCI Express capability, or
	// its absence (a conventional PCI bridge).
	FromConfig
	// FromChain: the bridge's place in the chain (roles.go), because the
	// config space could not be read that far.
	FromChain
)

// Key is "config", "chain" or "".
func (s RoleSource) Key() string {
	switch s {
	case FromConfig:
		return "config"
	case FromChain:
		return "chain"
	}
	return ""
}

// Node is a host bridge or a PCI function.
type Node struct {
	// ID is "pciDDDD:BB" for a host bridge and the address for a function.
	ID   string
	Role Role
	// RoleFrom says how a bridge's role was told; RoleNote why the chain
	// told it (the config space error) or what config space said that
	// the role does not follow.
	RoleFrom RoleSource
	RoleNote string
	roleWhy  string // RoleNote without the path, for the tree's notes
	// Path is the node's sysfs directory.
	Path string
	// Device is the function's inventory entry; nil for a host bridge
	// and for a function that a sysfs path names but
	// /sys/bus/pci/devices does not list.
	Device *pci.Device
	// Address is a function's address; Domain and Bus a host bridge's
	// (its root bus).
	Address pci.Address
	Domain  uint32
	Bus     uint8

	Parent   *Node
	Children []*Node // functions by address, then nested host bridges (VMD)

	// Switch is the switch a port belongs to; nil for other nodes.
	Switch *Switch
	// RootComplex is the root complex the node is under (for a host
	// bridge, its own or, nested, its outermost one); nil for a function
	// whose place is unknown.
	RootComplex *RootComplex
	// NUMA is the node's NUMA node: the function's numa_node when it
	// names one, else its root complex's; nil when neither is known.
	NUMA *int

	// Accelerator is pci.IsAccelerator's kind ("" when it is not one);
	// NIC marks network controllers (base class 0x02) and DPU network
	// functions; Interfaces are a NIC's net/ and infiniband/ names.
	Accelerator string
	NIC         bool
	Interfaces  []string
	// Failing marks a node a check failed on (Options.Failing);
	// Warning one a check warned on and none failed on (Options.Warning).
	Failing bool
	Warning bool
}

// IsFunction reports whether the node is a PCI function.
func (n *Node) IsFunction() bool { return n.Role != RoleHostBridge }

// IsBridgeRole reports whether the node's role is a bridge of any kind
// (root port, switch port, other bridge).
func (n *Node) IsBridgeRole() bool {
	switch n.Role {
	case RoleRootPort, RoleSwitchUpstream, RoleSwitchDownstream, RoleBridge:
		return true
	}
	return false
}

// Switch is a PCIe switch: an upstream port and the downstream ports
// below it (PCIe Base Specification, 1.3.3: a switch is a logical
// assembly of virtual PCI-to-PCI bridges, one upstream, one per
// downstream port).
type Switch struct {
	// ID is the upstream port's address, or the downstream port's when
	// the upstream port is not in the tree.
	ID         string
	Upstream   *Node // nil when not in the tree
	Downstream []*Node
}

// RootComplex is a top-level host bridge and what is below it.
type RootComplex struct {
	HostBridge *Node
	// NUMA is the NUMA node its functions name (numa_node >= 0); nil
	// when none names one, or when they disagree (NUMAConflict lists
	// the nodes named).
	NUMA         *int
	NUMAConflict []int
}

// NUMANode is one of the host's online NUMA nodes.
type NUMANode struct {
	ID      int
	CPUs    string // node<N>/cpulist, as a compact list; "" when unread
	CPUsErr error
}

// Group is an IOMMU group, from its members' iommu_group links.
type Group struct {
	ID      int
	Members []*Node
}

// Tree is a host's PCIe tree.
type Tree struct {
	// Roots are the root complexes' host bridges, by domain and bus,
	// then the functions whose place is unknown.
	Roots         []*Node
	RootComplexes []*RootComplex
	Switches      []*Switch
	// NUMANodes are the host's online nodes; NUMAKnown says the list was
	// read (it is absent without CONFIG_NUMA, or from a capture).
	NUMANodes []NUMANode
	NUMAKnown bool
	NUMAErr   error
	Groups    []Group
	// Notes are what the tree could not tell, for people: functions
	// whose place is unknown, roles told by the chain, NUMA conflicts.
	Notes []string

	byAddr map[pci.Address]*Node
}

// Options are Build's inputs beyond the inventory.
type Options struct {
	// Failing are the subjects of failed checks; those that are PCI
	// addresses (or host bridge IDs, pciDDDD:BB) mark their nodes.
	Failing []string
	// Warning are the subjects of checks that warned, marked the same
	// way where no check failed on them.
	Warning []string
	// LocalCPUs reads each function's local CPUs (Read): what
	// Node.LocalCPUs and the matrix's CPU affinity show.
	LocalCPUs bool
}

// Fields are what a tree shows of each function beyond its ids: the
// driver, NUMA node, IOMMU group, link, and whether it is an SR-IOV VF;
// and each bridge's config space, read beside the rest, for its role.
// Read scans only these (subsystem ids, revision and VF counts are not
// shown and not read), and the local CPUs when Options.LocalCPUs asks (the
// matrix shows them).
const Fields = pci.FieldLocality | pci.FieldDriver | pci.FieldIOMMUGroup | pci.FieldPhysFn | pci.FieldLink | pci.FieldNames | pci.FieldBridgeConfig

// Read scans the PCI inventory of root (the Fields of each function) and
// builds its tree.
func Read(root *hostfs.Root, o Options) (*Tree, *pci.Inventory, error) {
	f := Fields
	if o.LocalCPUs {
		f |= pci.FieldLocalCPUs
	}
	inv, err := pci.ScanFields(root, f&^pci.FieldNames)
	if err != nil {
		return nil, nil, err
	}
	// The names are the drawing's, not the tree's (Build reads no name and
	// no field LoadNames writes): pci.ids is read beside the building.
	named := make(chan struct{})
	go func() {
		defer close(named)
		inv.LoadNames(root)
	}()
	t := Build(root, inv, o)
	<-named
	return t, inv, nil
}

// Lookup returns the node of the function at a, or nil.
func (t *Tree) Lookup(a pci.Address) *Node { return t.byAddr[a] }

// Walk calls fn for every node, depth first, parents before children.
func (t *Tree) Walk(fn func(n *Node, depth int)) {
	var walk func(n *Node, depth int)
	walk = func(n *Node, depth int) {
		fn(n, depth)
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	for _, r := range t.Roots {
		walk(r, 0)
	}
}

// Accelerators returns the accelerators that are not NICs and then the
// NICs, each in address order: the devices of the matrix.
func (t *Tree) Accelerators() (accel, nics []*Node) {
	t.Walk(func(n *Node, _ int) {
		switch {
		case n.NIC:
			nics = append(nics, n)
		case n.Accelerator != "":
			accel = append(accel, n)
		}
	})
	byAddr := func(s []*Node) {
		sort.Slice(s, func(i, j int) bool { return s[i].Address.Compare(s[j].Address) < 0 })
	}
	byAddr(accel)
	byAddr(nics)
	return accel, nics
}

// builder holds the state of one Build.
type builder struct {
	root  *hostfs.Root
	t     *Tree
	hosts map[string]*Node // by sysfs path: a nested host bridge's name is unique only with its parent
	// conflicts are functions two paths place differently.
	conflicts []string
	hidden    int // functions named in paths, not listed
	// capture: the root's sysfs is not a running kernel's (a snapshot, a
	// fixture tree, a corpus capture), so what it lacks is how it was
	// taken; nil until a header-only config space asks (headerOnly).
	capture *bool
}

// Build arranges inv's functions into a tree. root is used for the
// bridges' config space, the NUMA nodes and the NICs' names; with a nil
// root every bridge's role is told by the chain and there are no NUMA
// nodes (tests build trees from other tools' topologies this way).
func Build(root *hostfs.Root, inv *pci.Inventory, o Options) *Tree {
	b := &builder{root: root, t: &Tree{byAddr: map[pci.Address]*Node{}}, hosts: map[string]*Node{}}
	var orphans []*Node
	for _, d := range inv.Devices {
		if n := b.place(d); n != nil {
			orphans = append(orphans, n)
		}
	}
	t := b.t
	for _, n := range b.hosts {
		if n.Parent == nil {
			t.Roots = append(t.Roots, n)
		}
	}
	sortHosts(t.Roots)
	for _, n := range t.byAddr {
		sortChildren(n)
	}
	for _, n := range b.hosts {
		sortChildren(n)
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].Address.Compare(orphans[j].Address) < 0 })
	for _, n := range orphans {
		t.Notes = append(t.Notes, fmt.Sprintf("%s: no host bridge in its sysfs path (%s): its place in the tree is unknown", n.ID, n.Path))
	}
	t.Roots = append(t.Roots, orphans...)
	for _, n := range t.byAddr {
		if n.Device == nil {
			b.hidden++
		}
	}
	if b.hidden > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d function(s) named in sysfs paths are not listed in %s: shown without ids", b.hidden, pci.DevicesDir))
	}
	t.Notes = append(t.Notes, b.conflicts...)

	for _, r := range t.Roots {
		b.assignRoles(r)
	}
	b.switches()
	b.rootComplexes()
	b.numaNodes()
	b.groups()
	b.mark(o)
	b.chainNote()
	return t
}

// parseHostBridge parses "pciDDDD:BB" (domain of 4 to 8 hex digits, as
// pci_register_host_bridge names it with "pci%04x:%02x").
func parseHostBridge(s string) (domain uint32, bus uint8, ok bool) {
	rest, ok := strings.CutPrefix(s, "pci")
	if !ok {
		return 0, 0, false
	}
	dom, b, ok := strings.Cut(rest, ":")
	if !ok || len(dom) < 4 || len(dom) > 8 || len(b) != 2 {
		return 0, 0, false
	}
	d, err1 := strconv.ParseUint(dom, 16, 32)
	v, err2 := strconv.ParseUint(b, 16, 8)
	if err1 != nil || err2 != nil || strings.ContainsAny(dom+b, "+-xX") {
		return 0, 0, false
	}
	return uint32(d), uint8(v), true
}

// place puts d in the tree along its sysfs path, creating the host
// bridges and bridges the path names. It returns d's node when the path
// holds no host bridge (the device could not be resolved, or a capture
// moved it): an orphan.
func (b *builder) place(d *pci.Device) *Node {
	p := path.Clean(d.Path)
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var parent *Node
	prefix := ""
	if strings.HasPrefix(p, "/sys/devices/") {
		for i, part := range parts {
			prefix += "/" + part
			last := i == len(parts)-1
			if dom, bus, ok := parseHostBridge(part); ok && !last {
				parent = b.hostBridge(prefix, part, dom, bus, parent)
				continue
			}
			if parent == nil {
				continue // before the first host bridge: ACPI, platform or VMBus devices
			}
			if last {
				b.function(d.Address, d, prefix, parent)
				return nil
			}
			if a, ok := pci.AddressOf(part); ok {
				parent = b.function(a, nil, prefix, parent)
			}
		}
	}
	// No host bridge on the way: keep the function, placeless.
	n := b.function(d.Address, d, d.Path, nil)
	if n.Parent == nil {
		return n
	}
	return nil
}

func (b *builder) hostBridge(p, name string, dom uint32, bus uint8, parent *Node) *Node {
	if n, ok := b.hosts[p]; ok {
		return n
	}
	n := &Node{ID: name, Role: RoleHostBridge, Path: p, Domain: dom, Bus: bus, Parent: parent}
	if parent != nil {
		parent.Children = append(parent.Children, n)
	}
	b.hosts[p] = n
	return n
}

// function returns the node of the function at a, creating it under
// parent. d is nil for a bridge a path names before its own entry is
// placed (or that is not listed at all).
func (b *builder) function(a pci.Address, d *pci.Device, p string, parent *Node) *Node {
	n, ok := b.t.byAddr[a]
	if !ok {
		n = &Node{ID: a.String(), Address: a, Path: p, Parent: parent}
		if parent != nil {
			parent.Children = append(parent.Children, n)
		}
		b.t.byAddr[a] = n
	} else if n.Parent != parent && parent != nil && d != nil {
		was := "nowhere"
		if n.Parent != nil {
			was = n.Parent.ID
		}
		b.conflicts = append(b.conflicts, fmt.Sprintf("%s: sysfs paths place it under %s and under %s: kept under %s", n.ID, was, parent.ID, was))
	}
	if d != nil {
		n.Device = d
		if n.Path != p && parent == nil {
			n.Path = p
		}
	}
	return n
}

func sortHosts(s []*Node) {
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Domain != s[j].Domain {
			return s[i].Domain < s[j].Domain
		}
		return s[i].Bus < s[j].Bus
	})
}

// sortChildren orders functions by address, then nested host bridges.
func sortChildren(n *Node) {
	sort.SliceStable(n.Children, func(i, j int) bool {
		a, c := n.Children[i], n.Children[j]
		if a.IsFunction() != c.IsFunction() {
			return a.IsFunction()
		}
		if !a.IsFunction() {
			if a.Domain != c.Domain {
				return a.Domain < c.Domain
			}
			return a.Bus < c.Bus
		}
		return a.Address.Compare(c.Address) < 0
	})
}

// switches groups each upstream port with the downstream ports below it.
// A downstream port whose parent is not an upstream port (the upstream
// port is not in the tree) is a switch of its own.
func (b *builder) switches() {
	b.t.Walk(func(n *Node, _ int) {
		switch n.Role {
		case RoleSwitchUpstream:
			sw := &Switch{ID: n.ID, Upstream: n}
			n.Switch = sw
			for _, c := range n.Children {
				if c.Role == RoleSwitchDownstream {
					c.Switch = sw
					sw.Downstream = append(sw.Downstream, c)
				}
			}
			b.t.Switches = append(b.t.Switches, sw)
		case RoleSwitchDownstream:
			if n.Parent == nil || n.Parent.Role != RoleSwitchUpstream {
				sw := &Switch{ID: n.ID, Downstream: []*Node{n}}
				n.Switch = sw
				b.t.Switches = append(b.t.Switches, sw)
			}
		}
	})
}

// rootComplexes gives each top-level host bridge its root complex and
// NUMA node, and every node its NUMA node. The kernel gives each function
// its bus's node (drivers/pci/probe.c, pci_device_add:
// set_dev_node(&dev->dev, pcibus_to_node(bus))), so the functions of one
// root complex agree unless firmware gave no proximity (-1, NUMA_NO_NODE)
// or a user wrote numa_node (pci-sysfs.c, numa_node_store, which taints
// the kernel).
func (b *builder) rootComplexes() {
	t := b.t
	for _, r := range t.Roots {
		if r.Role != RoleHostBridge {
			continue
		}
		rc := &RootComplex{HostBridge: r}
		t.RootComplexes = append(t.RootComplexes, rc)
		seen := map[int]bool{}
		var named []int
		var walk func(n *Node)
		walk = func(n *Node) {
			n.RootComplex = rc
			if n.Device != nil && n.Device.NUMANode != nil && *n.Device.NUMANode >= 0 && !seen[*n.Device.NUMANode] {
				seen[*n.Device.NUMANode] = true
				named = append(named, *n.Device.NUMANode)
			}
			for _, c := range n.Children {
				walk(c)
			}
		}
		walk(r)
		switch len(named) {
		case 0:
		case 1:
			rc.NUMA = &named[0]
		default:
			sort.Ints(named)
			rc.NUMAConflict = named
			t.Notes = append(t.Notes, fmt.Sprintf("%s: its functions name NUMA nodes %s: the root complex's node is unknown",
				r.ID, FormatList(named)))
		}
	}
	t.Walk(func(n *Node, _ int) {
		if d := n.Device; d != nil && d.NUMANode != nil && *d.NUMANode >= 0 {
			v := *d.NUMANode
			n.NUMA = &v
		} else if n.RootComplex != nil {
			n.NUMA = n.RootComplex.NUMA
		}
	})
}

func (b *builder) numaNodes() {
	if b.root == nil {
		return
	}
	nodes, ok, err := pci.NUMANodes(b.root)
	b.t.NUMAKnown, b.t.NUMAErr = ok, err
	for _, id := range nodes {
		nn := NUMANode{ID: id}
		cpus, err := pci.NodeCPUs(b.root, id)
		if err != nil {
			nn.CPUsErr = err
		} else {
			nn.CPUs = FormatList(cpus)
		}
		b.t.NUMANodes = append(b.t.NUMANodes, nn)
	}
}

func (b *builder) groups() {
	byID := map[int]*Group{}
	b.t.Walk(func(n *Node, _ int) {
		if n.Device == nil || n.Device.IOMMUGroup == nil {
			return
		}
		id := *n.Device.IOMMUGroup
		g, ok := byID[id]
		if !ok {
			g = &Group{ID: id}
			byID[id] = g
		}
		g.Members = append(g.Members, n)
	})
	for _, g := range byID {
		sort.Slice(g.Members, func(i, j int) bool { return g.Members[i].Address.Compare(g.Members[j].Address) < 0 })
		b.t.Groups = append(b.t.Groups, *g)
	}
	sort.Slice(b.t.Groups, func(i, j int) bool { return b.t.Groups[i].ID < b.t.Groups[j].ID })
}

// classNetwork is the network controller base class (PCI Code and ID
// Assignment Specification: 0x0200 Ethernet, 0x0207 InfiniBand, ...).
const classNetwork = 0x02

// mark sets the accelerator, NIC and failing marks, and reads the NICs'
// interface names.
func (b *builder) mark(o Options) {
	b.t.Mark(o.Failing, o.Warning)
	b.t.Walk(func(n *Node, _ int) {
		d := n.Device
		if d == nil || n.Role != RoleEndpoint {
			return
		}
		kind, ok := pci.IsAccelerator(d)
		if ok {
			n.Accelerator = kind
		}
		n.NIC = kind == pci.KindNIC || d.Has(pci.HasClass) && d.Class>>16 == classNetwork
		if n.NIC && b.root != nil {
			n.Interfaces = b.interfaces(d)
		}
	})
}

// Mark marks the nodes that failing and warning name (as Options.Failing
// and Warning do), and unmarks every other: for a caller whose checks end
// after the tree is built.
func (t *Tree) Mark(failing, warning []string) {
	f, w := subjects(failing), subjects(warning)
	t.Walk(func(n *Node, _ int) {
		n.Failing = f[n.ID]
		n.Warning = w[n.ID] && !n.Failing
	})
}

// subjects is the set of node IDs that s names: addresses in the
// kernel's form, host bridge IDs as they are.
func subjects(s []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range s {
		if a, err := pci.ParseAddress(v); err == nil {
			out[a.String()] = true
		} else {
			out[v] = true
		}
	}
	return out
}

// interfaces lists a network function's net/ (netdev names,
// net/core/net-sysfs.c) and infiniband/ (RDMA device names,
// drivers/infiniband/core/device.c) entries.
func (b *builder) interfaces(d *pci.Device) []string {
	var out []string
	for _, sub := range []string{"infiniband", "net"} {
		names, err := b.root.ReadDir(path.Join(d.Path, sub))
		if err != nil {
			continue // absent: no such interface, or a capture without it
		}
		sort.Strings(names)
		out = append(out, names...)
	}
	return out
}

// chainNote summarises the bridges whose role the chain told.
func (b *builder) chainNote() {
	reasons := map[string]int{}
	var order []string
	b.t.Walk(func(n *Node, _ int) {
		if n.RoleFrom != FromChain {
			return
		}
		if reasons[n.roleWhy] == 0 {
			order = append(order, n.roleWhy)
		}
		reasons[n.roleWhy]++
	})
	for _, r := range order {
		b.t.Notes = append(b.t.Notes, fmt.Sprintf("%d bridge role(s) told by their place in the chain: %s", reasons[r], r))
	}
}

// FormatList writes CPU or node numbers as the kernel's cpulist format
// does ("0-7,16-23"; lib/vsprintf.c, bitmap_list_string), sorting them.
func FormatList(v []int) string {
	s := append([]int(nil), v...)
	sort.Ints(s)
	var sb strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] <= s[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		if s[j] == s[i] {
			sb.WriteString(strconv.Itoa(s[i]))
		} else {
			sb.WriteString(strconv.Itoa(s[i]) + "-" + strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return sb.String()
}

// LocalCPUs is the function's local CPUs as a compact list; "" when
// neither local_cpulist nor local_cpus was read or parsed.
func (n *Node) LocalCPUs() string {
	if n.Device == nil {
		return ""
	}
	cpus, ok, _ := n.Device.LocalCPUList()
	if !ok {
		return ""
	}
	return FormatList(cpus)
}
