package cli

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
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
		check    bool
	)
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "The PCIe tree, NUMA nodes and IOMMU groups; --matrix: device affinity (read-only)",
		Long: `topo draws the host's PCIe tree (or --root's, or --snapshot's): root complexes,
root ports, switches (an upstream port and its downstream ports), bridges and
endpoints, each with its name, driver, link, NUMA node and IOMMU group;
accelerators and NICs are marked. -o mermaid and -o dot draw it as a diagram
(NUMA nodes and IOMMU groups as boxes); -o markdown embeds the Mermaid diagram.

The functions that check's layers 1-3 (PCI, driver, device nodes) fail or
warn on are marked: [FAIL] and [WARN] in text, a red or an orange outline in
the diagrams; the notes name each finding and give those layers' verdict
(accel-doctor check --layer pci,driver,devnode shows the evidence). Those
checks only read, as check does; --check=false draws the tree alone, without
them.

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
			var (
				tree *topo.Tree
				inv  *pci.Inventory
				chk  *TopoChecks
			)
			if check {
				tree, inv, chk, err = checkedTopo(root, topo.Options{LocalCPUs: matrix}, source)
			} else {
				tree, inv, err = topo.Read(root, topo.Options{LocalCPUs: matrix})
			}
			if err != nil {
				return err
			}
			// One write for the whole drawing, not one per line.
			w := bufio.NewWriterSize(g.stdout, 64<<10)
			if err := writeTopo(w, g.output, matrix, tree, inv, source, chk); err != nil {
				return err
			}
			return w.Flush()
		},
	}
	g.addRootFlag(cmd)
	Flag(cmd.Flags(), "snapshot", "").String(&snapshot, "")
	cmd.Flags().BoolVar(&matrix, "matrix", false, "print the accelerator and NIC affinity matrix (nvidia-smi topo -m's classes)")
	cmd.Flags().BoolVar(&check, "check", true, "mark the functions check's layers 1-3 fail or warn on (read-only); --check=false: the tree alone")
	g.addOutputFlag(cmd, topoFormats...)
	return cmd
}

// topoLayers are the layers whose checks topo runs: those that judge a
// device itself, from the files topo reads and a few beside them (the
// driver's, /dev). The cgroup layer judges a process, layers 6 and 7 the
// node's Kubernetes state and the IOMMU: check's.
var topoLayers = []report.Layer{report.LayerPCI, report.LayerDriver, report.LayerDevNode}

// TopoChecks is what topo's checks came to: the verdict of their layers
// and every FAIL and WARN, for the notes (the tree carries the marks).
type TopoChecks struct {
	notes []string
}

// checkedTopo runs the checks of topoLayers over root, as check would,
// and builds the tree from the same PCI scan with the functions they
// failed or warned on marked. One scan serves both: the checks' whole
// inventory holds every field the tree shows, and it reads the bridges'
// config space beside the rest, as topo.Read's scan does. The tree is
// built while the checks run (neither writes the inventory) and marked
// when they end.
func checkedTopo(root *hostfs.Root, o topo.Options, source string) (*topo.Tree, *pci.Inventory, *TopoChecks, error) {
	env := diagnose.NewEnv(root, diagnose.Options{Layers: topoLayers, PCIFields: pci.FieldBridgeConfig})
	inv, err := env.PCI()
	if err != nil {
		return nil, nil, nil, err
	}
	built := make(chan *topo.Tree)
	go func() { built <- topo.Build(root, inv, o) }()
	rep := diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Tool: "accel-doctor " + Version, Command: "topo", Source: source})
	if inv.Fields&pci.FieldNames == 0 {
		// check names no function on a bus without accelerators; the
		// tree names every one. Build reads no name: this runs beside it.
		inv.LoadNames(root)
	}
	failing, warning := markedSubjects(rep)
	tree := <-built
	tree.Mark(failing, warning)
	chk := &TopoChecks{notes: []string{fmt.Sprintf("verdict of layers %s (accel-doctor check --layer pci,driver,devnode): %s: %s",
		layerList(topoLayers), rep.Verdict.Status, rep.Verdict.Summary)}}
	for _, f := range rep.Findings {
		if f.Status == report.Fail || f.Status == report.Warn {
			chk.notes = append(chk.notes, fmt.Sprintf("%s %s %s: %s", f.Status, f.Code, f.Subject, f.Summary))
		}
	}
	return tree, inv, chk, nil
}

// markedSubjects are the functions the report's FAILs and WARNs are
// about: a finding's subject when it is a PCI address, or the device
// whose own node it is (report.Report.Owners); a finding about the host,
// or about a node several devices share, marks none.
func markedSubjects(rep *report.Report) (failing, warning []string) {
	owner := rep.Owners()
	for _, f := range rep.Findings {
		id, ok := owner[f.Subject]
		if !ok {
			if _, err := pci.ParseAddress(f.Subject); err != nil {
				continue
			}
			id = f.Subject
		}
		switch f.Status {
		case report.Fail:
			failing = append(failing, id)
		case report.Warn:
			warning = append(warning, id)
		}
	}
	return failing, warning
}

// layerList is "1-3" for consecutive layers, else "1,3".
func layerList(ls []report.Layer) string {
	var s []string
	for _, l := range ls {
		s = append(s, fmt.Sprint(int(l)))
	}
	if n := len(ls); n > 2 && int(ls[n-1])-int(ls[0]) == n-1 {
		return s[0] + "-" + s[n-1]
	}
	return strings.Join(s, ",")
}

func writeTopo(w io.Writer, format string, matrix bool, tree *topo.Tree, inv *pci.Inventory, source string, chk *TopoChecks) error {
	if matrix {
		m := MatrixReport(tree, source, chk)
		switch format {
		case "json":
			return report.WriteJSONValue(w, m)
		case "markdown":
			return report.WriteMatrixMarkdown(w, m)
		}
		return report.WriteMatrixText(w, m)
	}
	t := TopologyReport(tree, inv, source, chk)
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
// inv's errors that are not tied to one function become notes, and so
// do the checks' findings; chk is nil when no check ran (nothing is
// marked).
func TopologyReport(tree *topo.Tree, inv *pci.Inventory, source string, chk *TopoChecks) *report.Topology {
	t := &report.Topology{Source: source, Checked: chk != nil, RootComplexes: []report.TopoNode{}}
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
	if chk != nil {
		t.Notes = append(t.Notes, chk.notes...)
	}
	return t
}

func topoNode(n *topo.Node) report.TopoNode {
	tn := report.TopoNode{ID: n.ID, Kind: n.Role.Key(), KindFrom: n.RoleFrom.Key(), Accelerator: n.Accelerator,
		NIC: n.NIC, Interfaces: n.Interfaces, Failing: n.Failing, Warning: n.Warning, NUMANode: n.NUMA}
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

// MatrixReport is the report model of a tree's affinity matrix; chk as
// TopologyReport's.
func MatrixReport(tree *topo.Tree, source string, chk *TopoChecks) *report.AffinityMatrix {
	m := tree.Matrix()
	out := &report.AffinityMatrix{Source: source, Checked: chk != nil, Devices: []report.MatrixDevice{}, Classes: [][]string{}, Legend: topo.Legend()}
	unknown := false
	for i, n := range m.Devices {
		kind := n.Accelerator
		if n.NIC {
			kind = pci.KindNIC
		}
		d := report.MatrixDevice{Label: m.Labels[i], Address: n.ID, Kind: kind, Interfaces: n.Interfaces,
			CPUAffinity: n.LocalCPUs(), Failing: n.Failing, Warning: n.Warning}
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
	if chk != nil {
		out.Notes = append(out.Notes, chk.notes...)
	}
	return out
}
