package topo

import (
	"fmt"
)

// Class is the kind of path between two devices, in the vocabulary of
// `nvidia-smi topo -m` (the legend it prints under the matrix; nvidia-smi(1),
// "topo" section; the same levels are NVML's nvmlGpuTopologyLevel_t in
// nvml.h: NVML_TOPOLOGY_INTERNAL, _SINGLE, _MULTIPLE, _HOSTBRIDGE, _NODE,
// _SYSTEM). The legend's classes, and how each is computed here from the
// PCIe tree alone:
//
//   - X: the device itself.
//   - PIX: the path crosses at most one PCIe bridge. nvidia-smi counts a
//     switch as one bridge: its legend said "a single PCIe switch" for PIX
//     and "multiple PCIe switches" for PXB before it said "bridge", NVML
//     calls the level SINGLE ("a single PCIe switch"), and NCCL, which
//     consumes these classes, merges a switch's upstream and downstream
//     ports into one node before it counts (src/graph/xml.cc). Here: the
//     two devices meet below their host bridge, and the bridges on the
//     path form at most one unit, a unit being a switch (its upstream
//     port and downstream ports) or any other single bridge. Two
//     functions of one device below the same port are PIX.
//   - PXB: the path crosses several bridges (units) without crossing a
//     host bridge: cascaded switches, as in a DGX-2's PLX trees.
//   - PHB: the path crosses a PCIe host bridge: the devices are on the
//     same root complex below different root ports (or on its root bus).
//   - NODE: the devices are on different host bridges (root complexes)
//     within one NUMA node: the path crosses the interconnect between
//     host bridges inside the node.
//   - SYS: the devices are on different NUMA nodes: the path crosses the
//     SMP interconnect between them (QPI/UPI, Infinity Fabric).
//   - NV#: a bonded set of # NVLinks. NVLink is not in sysfs (the NVIDIA
//     driver reports it through NVML only), so it never appears here; two
//     NVLink-connected GPUs show their PCIe class.
//
// Older names are not used: nvidia-smi's SOC is SYS, NVML's
// NVML_TOPOLOGY_CPU is NVML_TOPOLOGY_NODE. ClassUnknown ("?") is this tool's: two devices on different
// root complexes of a host with several NUMA nodes where the node of one
// is not known (numa_node is -1 and no function of its root complex names
// one): NODE and SYS cannot be told apart, and neither is guessed.
type Class uint8

const (
	ClassUnknown Class = iota
	ClassSelf
	ClassPIX
	ClassPXB
	ClassPHB
	ClassNODE
	ClassSYS
)

func (c Class) String() string {
	switch c {
	case ClassSelf:
		return "X"
	case ClassPIX:
		return "PIX"
	case ClassPXB:
		return "PXB"
	case ClassPHB:
		return "PHB"
	case ClassNODE:
		return "NODE"
	case ClassSYS:
		return "SYS"
	}
	return "?"
}

// Legend is one line per class, in the order nvidia-smi prints its legend
// (worst first), in this tool's words.
func Legend() []string {
	return []string{
		"X    = the device itself",
		"SYS  = PCIe plus the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)",
		"NODE = PCIe plus the interconnect between PCIe host bridges within one NUMA node",
		"PHB  = PCIe plus a PCIe host bridge (the same root complex, different root ports)",
		"PXB  = several PCIe bridges or switches, without a PCIe host bridge",
		"PIX  = at most one PCIe bridge or switch",
		"?    = NODE or SYS: the NUMA node of one device is not known",
		"NV#  = NVLink: not shown; sysfs does not expose NVLink (nvidia-smi reads it through NVML)",
	}
}

// unit is the bridge a path crosses, counting a switch's ports as one.
func unit(n *Node) *Node {
	if n.Switch != nil && n.Switch.Upstream != nil {
		return n.Switch.Upstream
	}
	return n
}

// Affinity classifies the path between a and b (see Class).
func (t *Tree) Affinity(a, b *Node) Class {
	if a == b {
		return ClassSelf
	}
	up := map[*Node]bool{}
	for n := a; n != nil; n = n.Parent {
		up[n] = true
	}
	var lca *Node
	for n := b; n != nil; n = n.Parent {
		if up[n] {
			lca = n
			break
		}
	}
	if lca == nil {
		return t.acrossRootComplexes(a, b)
	}
	// The nodes between a and b: a's ancestors below the meeting point,
	// b's, and the meeting point itself unless it is a or b.
	var between []*Node
	collect := func(from *Node) {
		for n := from.Parent; n != nil && n != lca && from != lca; n = n.Parent {
			between = append(between, n)
		}
	}
	collect(a)
	collect(b)
	if lca != a && lca != b {
		between = append(between, lca)
	}
	units := map[*Node]bool{}
	hostBridge := false
	for _, n := range between {
		switch {
		case n.Role == RoleHostBridge:
			hostBridge = true
		case n.IsBridgeRole():
			units[unit(n)] = true
		}
	}
	switch {
	case hostBridge:
		return ClassPHB
	case len(units) <= 1:
		return ClassPIX
	}
	return ClassPXB
}

// acrossRootComplexes classifies two devices with no common host bridge.
func (t *Tree) acrossRootComplexes(a, b *Node) Class {
	if a.RootComplex == nil || b.RootComplex == nil {
		return ClassUnknown // a function whose place is unknown
	}
	switch {
	case a.NUMA != nil && b.NUMA != nil:
		if *a.NUMA == *b.NUMA {
			return ClassNODE
		}
		return ClassSYS
	case t.NUMAKnown && len(t.NUMANodes) == 1:
		// One node online: every host bridge is on it, whatever numa_node
		// says (-1 when firmware gives no proximity, drivers/acpi/pci_root.c).
		return ClassNODE
	}
	return ClassUnknown
}

// Matrix is the affinity matrix of a host's accelerators and NICs.
//
// nvidia-smi prints two more columns per GPU, which the report adds from
// each device's node: CPU Affinity, the CPUs local to the device
// (Node.LocalCPUs: local_cpulist, which the kernel prints as
// cpumask_of_node(dev_to_node(dev)), every online CPU when the device has
// no node: drivers/pci/pci-sysfs.c, local_cpulist_show), and NUMA
// Affinity, the device's NUMA node (numa_node; N/A for -1, NUMA_NO_NODE).
type Matrix struct {
	// Devices are the accelerators (not NICs) and then the NICs, each in
	// address order; Labels name them as nvidia-smi does: GPU0..., NIC0...,
	// and ACC0... for other accelerators, VID0... for video engines.
	Devices []*Node
	Labels  []string
	// Classes[i][j] is the class of the path from Devices[i] to Devices[j].
	Classes [][]Class
	// LeftOut are the SR-IOV virtual functions not in the matrix: a VF
	// sits on its physical function's bus or one above it, below the same
	// bridge (drivers/pci/iov.c, pci_iov_virtfn_bus), so its classes are
	// its PF's.
	LeftOut []*Node
}

// Matrix computes the affinity matrix.
func (t *Tree) Matrix() *Matrix {
	accel, nics := t.Accelerators()
	m := &Matrix{}
	counts := map[string]int{}
	add := func(n *Node, prefix string) {
		if n.Device != nil && n.Device.IsVF() {
			m.LeftOut = append(m.LeftOut, n)
			return
		}
		m.Devices = append(m.Devices, n)
		m.Labels = append(m.Labels, fmt.Sprintf("%s%d", prefix, counts[prefix]))
		counts[prefix]++
	}
	for _, n := range accel {
		add(n, labelPrefix(n.Accelerator))
	}
	for _, n := range nics {
		add(n, "NIC")
	}
	m.Classes = make([][]Class, len(m.Devices))
	for i, a := range m.Devices {
		m.Classes[i] = make([]Class, len(m.Devices))
		for j, b := range m.Devices {
			m.Classes[i][j] = t.Affinity(a, b)
		}
	}
	return m
}

func labelPrefix(kind string) string {
	switch kind {
	case "gpu":
		return "GPU"
	case "video":
		return "VID"
	}
	return "ACC"
}
