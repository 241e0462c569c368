package cli

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/topo"
)

// topoFormats are the formats of `topo`: the tree also draws as a
// Mermaid flowchart and a Graphviz digraph; markdown embeds the Mermaid
// diagram.
var topoFormats = []string{"text", "json", "markdown", "mermaid", "dot"}

func newTopoCmd(g *globals) *cobra.Command {
	var (
		snapshot string
		matrix   bool
	)
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "The PCIe tree, NUMA nodes and IOMMU groups; --matrix: device affinity (read-only)",
		Long: `topo draws the host's PCIe tree (or --root's, or --snapshot's): root complexes,
root ports, switches (an upstream port and its downstream ports), bridges and
endpoints, each with its name, driver, link, NUMA node and IOMMU group;
accelerators and NICs are marked. -o mermaid and -o dot draw it as a diagram
(NUMA nodes and IOMMU groups as boxes); -o markdown embeds the Mermaid diagram.

--matrix prints the affinity of every accelerator and NIC to every other in
nvidia-smi topo -m's vocabulary (X, PIX, PXB, PHB, NODE, SYS), with each
device's CPU and NUMA affinity, computed from sysfs alone for any vendor, so
that GPUDirect RDMA placement can be checked without the vendor's tools.
NVLink is not in sysfs and is not shown. --matrix takes -o text, json or
markdown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if matrix && (g.output == "mermaid" || g.output == "dot") {
				return usageErr("--matrix prints text, json or markdown; -o %s draws the tree (drop --matrix)", g.output)
			}
			root, source, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			tree, inv, err := topo.Read(root, topo.Options{LocalCPUs: matrix})
			if err != nil {
				return err
			}
			// One write for the whole drawing, not one per line.
			w := bufio.NewWriterSize(g.stdout, 64<<10)
			if err := writeTopo(w, g.output, matrix, tree, inv, source); err != nil {
				return err
			}
			return w.Flush()
		},
	}
	g.addRootFlag(cmd)
	Flag(cmd.Flags(), "snapshot", "").String(&snapshot, "")
	cmd.Flags().BoolVar(&matrix, "matrix", false, "print the accelerator and NIC affinity matrix (nvidia-smi topo -m's classes)")
	g.addOutputFlag(cmd, topoFormats...)
	return cmd
}

func writeTopo(w io.Writer, format string, matrix bool, tree *topo.Tree, inv *pci.Inventory, source string) error {
	if matrix {
		m := MatrixReport(tree, source)
		switch format {
		case "json":
			return report.WriteJSONValue(w, m)
		case "markdown":
			return report.WriteMatrixMarkdown(w, m)
		}
		return report.WriteMatrixText(w, m)
	}
	t := TopologyReport(tree, inv, source)
	switch format {
	case "json":
		return report.WriteJSONValue(w, t)
	case "markdown":
		return report.WriteTopologyMarkdown(w, t)
	case "mermaid":
		return report.WriteTopologyMermaid(w, t)
	case "dot":
		return report.WriteTopologyDOT(w, t)
	}
	return report.WriteTopologyText(w, t)
}

// TopologyReport is the report model of a tree: what the renderers draw.
// inv's errors that are not tied to one function become notes.
func TopologyReport(tree *topo.Tree, inv *pci.Inventory, source string) *report.Topology {
	t := &report.Topology{Source: source, RootComplexes: []report.TopoNode{}}
	for _, n := range tree.NUMANodes {
		t.NUMANodes = append(t.NUMANodes, report.TopoNUMA{ID: n.ID, CPUs: n.CPUs})
	}
	for _, r := range tree.Roots {
		if r.Role == topo.RoleHostBridge {
			t.RootComplexes = append(t.RootComplexes, topoNode(r))
		} else {
			t.Unplaced = append(t.Unplaced, topoNode(r))
		}
	}
	for _, g := range tree.Groups {
		tg := report.TopoGroup{ID: g.ID}
		for _, m := range g.Members {
			tg.Members = append(tg.Members, m.ID)
		}
		t.IOMMUGroups = append(t.IOMMUGroups, tg)
	}
	t.Notes = append(t.Notes, tree.Notes...)
	if tree.NUMAErr != nil {
		t.Notes = append(t.Notes, "NUMA nodes: "+tree.NUMAErr.Error())
	}
	if inv != nil {
		for _, e := range inv.Errors {
			t.Notes = append(t.Notes, e.Error())
		}
	}
	return t
}

func topoNode(n *topo.Node) report.TopoNode {
	tn := report.TopoNode{ID: n.ID, Kind: n.Role.Key(), KindFrom: n.RoleFrom.Key(), Accelerator: n.Accelerator,
		NIC: n.NIC, Interfaces: n.Interfaces, Failing: n.Failing, NUMANode: n.NUMA}
	if n.RoleFrom == topo.FromChain {
		tn.KindNote = n.RoleNote
	}
	if n.Switch != nil {
		tn.Switch = n.Switch.ID
	}
	if n.Role == topo.RoleHostBridge && n.RootComplex != nil && n.RootComplex.HostBridge == n {
		tn.NUMANode = n.RootComplex.NUMA
	}
	if d := n.Device; d != nil {
		r := rowOf(d)
		if d.Has(pci.HasVendor) || d.Has(pci.HasDevice) {
			tn.IDs = r.cell(r.Vendor, "vendor") + ":" + r.cell(r.Device, "device")
		}
		tn.Class = r.Class
		tn.Name = strings.TrimSpace(d.VendorName + " " + d.DeviceName)
		if tn.Name == "" {
			tn.Name = d.ClassName
		}
		tn.Driver = d.Driver
		tn.IOMMUGroup = d.IOMMUGroup
		tn.Link = r.LinkCurrent
		if r.LinkMax != "" && r.LinkMax != r.LinkCurrent {
			tn.Link += " (max " + r.LinkMax + ")"
		}
		tn.Link = strings.TrimSpace(tn.Link)
		tn.VF = d.IsVF()
		// The function's own numa_node, as the kernel gives it (-1 and
		// absent are not shown as a node).
		tn.NUMANode = nil
		if d.NUMANode != nil && *d.NUMANode >= 0 {
			v := *d.NUMANode
			tn.NUMANode = &v
		}
	}
	for _, c := range n.Children {
		tn.Children = append(tn.Children, topoNode(c))
	}
	return tn
}

// MatrixReport is the report model of a tree's affinity matrix.
func MatrixReport(tree *topo.Tree, source string) *report.AffinityMatrix {
	m := tree.Matrix()
	out := &report.AffinityMatrix{Source: source, Devices: []report.MatrixDevice{}, Classes: [][]string{}, Legend: topo.Legend()}
	unknown := false
	for i, n := range m.Devices {
		kind := n.Accelerator
		if n.NIC {
			kind = pci.KindNIC
		}
		d := report.MatrixDevice{Label: m.Labels[i], Address: n.ID, Kind: kind, Interfaces: n.Interfaces,
			CPUAffinity: n.LocalCPUs(), Failing: n.Failing}
		if n.Device != nil {
			// The kernel's numa_node, as nvidia-smi shows it: N/A for -1.
			if p := n.Device.NUMANode; p != nil && *p >= 0 {
				v := *p
				d.NUMAAffinity = &v
			}
			d.Name = strings.TrimSpace(n.Device.VendorName + " " + n.Device.DeviceName)
			if d.Name == "" {
				d.Name = n.Device.ClassName
			}
		}
		out.Devices = append(out.Devices, d)
		row := make([]string, len(m.Classes[i]))
		for j, c := range m.Classes[i] {
			row[j] = c.String()
			unknown = unknown || c == topo.ClassUnknown
		}
		out.Classes = append(out.Classes, row)
	}
	if len(m.LeftOut) > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("%d SR-IOV virtual function(s) left out: each sits below its physical function's bridge, with its classes", len(m.LeftOut)))
	}
	if unknown {
		out.Notes = append(out.Notes, "?: the devices are on different root complexes and the NUMA node of one is not known (numa_node is -1 and no function of its root complex names one): NODE and SYS cannot be told apart")
	}
	out.Notes = append(out.Notes, "NVLink is not shown: sysfs does not expose it (nvidia-smi topo -m reads NV# through NVML)")
	out.Notes = append(out.Notes, tree.Notes...)
	return out
}
