package report

import (
	"fmt"
	"io"
	"strings"
)

// Topology is a host's PCIe tree as `topo` shows it: root complexes with
// their root ports, switches, bridges and endpoints, the NUMA nodes and
// the IOMMU groups. It is data; the renderers below (text, Markdown,
// Mermaid, DOT) and WriteJSONValue draw it.
type Topology struct {
	Source string `json:"source"`
	// Checked: the checks ran, so every function a check failed or
	// warned on is marked (TopoNode.Failing, Warning); false: nothing is
	// marked, whatever the host's state.
	Checked       bool        `json:"checked"`
	NUMANodes     []TopoNUMA  `json:"numa_nodes,omitempty"`
	RootComplexes []TopoNode  `json:"root_complexes"`
	Unplaced      []TopoNode  `json:"unplaced,omitempty"` // functions whose place in the tree is unknown
	IOMMUGroups   []TopoGroup `json:"iommu_groups,omitempty"`
	Notes         []string    `json:"notes,omitempty"`
}

// TopoNUMA is one NUMA node.
type TopoNUMA struct {
	ID   int    `json:"id"`
	CPUs string `json:"cpus,omitempty"`
}

// TopoGroup is one IOMMU group and its members' addresses.
type TopoGroup struct {
	ID      int      `json:"id"`
	Members []string `json:"members"`
}

// Node kinds (TopoNode.Kind).
const (
	TopoHostBridge       = "host_bridge"
	TopoRootPort         = "root_port"
	TopoSwitchUpstream   = "switch_upstream"
	TopoSwitchDownstream = "switch_downstream"
	TopoBridge           = "bridge"
	TopoEndpoint         = "endpoint"
)

// TopoNode is a host bridge or a PCI function.
type TopoNode struct {
	ID   string `json:"id"`   // pciDDDD:BB or the function's address
	Kind string `json:"kind"` // one of the Topo* kinds
	// KindFrom says how a bridge's kind was told: "config" (the PCI
	// Express port type) or "chain" (its place in the tree, when config
	// space beyond 64 bytes was not readable); KindNote why.
	KindFrom string `json:"kind_from,omitempty"`
	KindNote string `json:"kind_note,omitempty"`
	// Switch is the ID of the switch a port belongs to (its upstream
	// port's address).
	Switch      string     `json:"switch,omitempty"`
	IDs         string     `json:"ids,omitempty"`   // vvvv:dddd
	Class       string     `json:"class,omitempty"` // ccsspp
	Name        string     `json:"name,omitempty"`  // vendor and device names, else the class name
	Driver      string     `json:"driver,omitempty"`
	NUMANode    *int       `json:"numa_node,omitempty"`
	IOMMUGroup  *int       `json:"iommu_group,omitempty"`
	Link        string     `json:"link,omitempty"` // "16.0 GT/s x16", with " (max ...)" when it trained lower
	Accelerator string     `json:"accelerator,omitempty"`
	NIC         bool       `json:"nic,omitempty"`
	Interfaces  []string   `json:"interfaces,omitempty"`
	VF          bool       `json:"sriov_vf,omitempty"`
	Failing     bool       `json:"failing,omitempty"`
	Warning     bool       `json:"warning,omitempty"` // a check warned on it, none failed
	Children    []TopoNode `json:"children,omitempty"`
}

// AffinityMatrix is `topo --matrix`: the class of the path between every
// pair of accelerators and NICs, in nvidia-smi topo -m's vocabulary.
type AffinityMatrix struct {
	Source string `json:"source"`
	// Checked: as Topology's.
	Checked bool           `json:"checked"`
	Devices []MatrixDevice `json:"devices"`
	// Classes[i][j] is the path class from Devices[i] to Devices[j].
	Classes [][]string `json:"classes"`
	Legend  []string   `json:"legend"`
	Notes   []string   `json:"notes,omitempty"`
}

// MatrixDevice is a row and a column of the matrix.
type MatrixDevice struct {
	Label      string   `json:"label"` // GPU0, ACC0, NIC0, ...
	Address    string   `json:"address"`
	Kind       string   `json:"kind"` // gpu, accelerator, video, nic
	Name       string   `json:"name,omitempty"`
	Interfaces []string `json:"interfaces,omitempty"`
	// CPUAffinity is the device's local CPUs; NUMAAffinity its NUMA node
	// (absent when the kernel names none: nvidia-smi's N/A).
	CPUAffinity  string `json:"cpu_affinity,omitempty"`
	NUMAAffinity *int   `json:"numa_affinity,omitempty"`
	Failing      bool   `json:"failing,omitempty"`
	Warning      bool   `json:"warning,omitempty"`
}

// kindText is how the text and the diagrams name a node's kind.
func kindText(n *TopoNode) string {
	switch n.Kind {
	case TopoHostBridge:
		return "root complex"
	case TopoRootPort:
		return "root port"
	case TopoSwitchUpstream:
		return "switch upstream port"
	case TopoSwitchDownstream:
		if n.Switch == "" || n.Switch == n.ID {
			return "switch downstream port"
		}
		return "switch " + n.Switch + " downstream port"
	case TopoBridge:
		return "bridge"
	}
	if n.VF {
		return "virtual function"
	}
	return "endpoint"
}

// tags are the short marks of a node: FAIL or WARN, then accelerator
// or NIC.
func tags(n *TopoNode) []string {
	var t []string
	switch {
	case n.Failing:
		t = append(t, "FAIL")
	case n.Warning:
		t = append(t, "WARN")
	}
	switch {
	case n.NIC:
		t = append(t, "NIC")
	case n.Accelerator == "gpu":
		t = append(t, "GPU")
	case n.Accelerator == "video":
		t = append(t, "VIDEO")
	case n.Accelerator != "":
		t = append(t, "ACCEL")
	}
	return t
}

// markLegend says what the marks mean, in the words of a format
// ("[FAIL]", "red outline"), and where the findings are (the notes, for
// a format that has them); unchecked, that nothing is marked.
func markLegend(checked bool, fail, warn, where string) string {
	if !checked {
		return "not checked (--check=false): no function is marked, whatever its state"
	}
	return fail + ": a check failed on the function; " + warn + ": a check warned on it (" + where + ")"
}

// inNotes is where the findings behind the marks are in a format with notes.
const inNotes = "the notes say which"

// marked reports whether any node of t carries a FAIL or WARN mark.
func marked(t *Topology) bool {
	var walk func(n []TopoNode) bool
	walk = func(ns []TopoNode) bool {
		for i := range ns {
			if ns[i].Failing || ns[i].Warning || walk(ns[i].Children) {
				return true
			}
		}
		return false
	}
	return walk(t.RootComplexes) || walk(t.Unplaced)
}

// WriteTopologyText draws the tree as `lspci -tv` does, one function per
// line with its name, driver, link, NUMA node and IOMMU group.
func WriteTopologyText(w io.Writer, t *Topology) error {
	ew := &errWriter{w: w}
	ew.printf("PCIe topology of %s: %s\n", safeLine(t.Source), topoSummary(t))
	if len(t.NUMANodes) > 0 {
		var parts []string
		for _, n := range t.NUMANodes {
			s := fmt.Sprintf("%d", n.ID)
			if n.CPUs != "" {
				s += " (CPUs " + safeLine(n.CPUs) + ")"
			}
			parts = append(parts, s)
		}
		ew.printf("NUMA nodes: %s\n", strings.Join(parts, ", "))
	}
	chain := false
	var draw func(n *TopoNode, prefix string, last, top bool)
	draw = func(n *TopoNode, prefix string, last, top bool) {
		branch, next := "|-- ", "|   "
		if last {
			branch, next = "`-- ", "    "
		}
		if top {
			branch, next = "", ""
		}
		if n.KindFrom == "chain" {
			chain = true
		}
		ew.printf("%s%s%s\n", prefix, branch, nodeLine(n))
		for i := range n.Children {
			draw(&n.Children[i], prefix+next, i == len(n.Children)-1, false)
		}
	}
	for i := range t.RootComplexes {
		ew.printf("\n")
		draw(&t.RootComplexes[i], "", true, true)
	}
	if len(t.Unplaced) > 0 {
		ew.printf("\nnot placed (no host bridge in the sysfs path):\n")
		for i := range t.Unplaced {
			draw(&t.Unplaced[i], "", i == len(t.Unplaced)-1, false)
		}
	}
	var shared []string
	for _, g := range t.IOMMUGroups {
		if len(g.Members) > 1 {
			shared = append(shared, fmt.Sprintf("  group %d: %s", g.ID, strings.Join(g.Members, " ")))
		}
	}
	if len(shared) > 0 {
		ew.printf("\nIOMMU groups with more than one function:\n")
		for _, s := range shared {
			ew.printf("%s\n", safeLine(s))
		}
	}
	legend := !t.Checked || marked(t)
	if chain || legend || len(t.Notes) > 0 {
		ew.printf("\n")
	}
	if chain {
		ew.printf("* kind told by the bridge's place in the tree: its config space could not be read as far as the PCI Express capability\n")
	}
	if legend {
		ew.printf("%s\n", markLegend(t.Checked, "[FAIL]", "[WARN]", inNotes))
	}
	for _, n := range t.Notes {
		ew.printf("note: %s\n", safeLine(n))
	}
	return ew.err
}

// topoSummary counts what the tree holds: "3 root complexes, 2 switches,
// 8 accelerators, 2 NICs, 3 failing, 1 warning".
func topoSummary(t *Topology) string {
	var rc, sw, acc, nic, fail, warn, fn int
	var walk func(n *TopoNode)
	walk = func(n *TopoNode) {
		switch {
		case n.Kind == TopoHostBridge:
			rc++
		default:
			fn++
		}
		if n.Kind == TopoSwitchUpstream {
			sw++
		}
		if n.NIC {
			nic++
		} else if n.Accelerator != "" {
			acc++
		}
		if n.Failing {
			fail++
		}
		if n.Warning {
			warn++
		}
		for i := range n.Children {
			walk(&n.Children[i])
		}
	}
	for i := range t.RootComplexes {
		walk(&t.RootComplexes[i])
	}
	for i := range t.Unplaced {
		walk(&t.Unplaced[i])
	}
	s := fmt.Sprintf("%d root complex(es), %d function(s), %d switch(es), %d accelerator(s), %d NIC(s)", rc, fn, sw, acc, nic)
	if fail > 0 {
		s += fmt.Sprintf(", %d failing", fail)
	}
	if warn > 0 {
		s += fmt.Sprintf(", %d warning", warn)
	}
	return s
}

// nodeLine is one line of the text tree.
func nodeLine(n *TopoNode) string {
	if n.Kind == TopoHostBridge {
		s := n.ID + "  root complex"
		if n.NUMANode != nil {
			s += fmt.Sprintf("  numa %d", *n.NUMANode)
		}
		if t := tags(n); len(t) > 0 {
			s = "[" + t[0] + "] " + s
		}
		return safeLine(s)
	}
	var b strings.Builder
	b.WriteString(n.ID)
	if t := tags(n); len(t) > 0 {
		b.WriteString("  [" + strings.Join(t, " ") + "]")
	}
	k := kindText(n)
	if n.KindFrom == "chain" {
		k += "*"
	}
	b.WriteString("  " + k)
	if d := displayName(n); d != "" {
		b.WriteString("  " + d)
	}
	for _, i := range n.Interfaces {
		b.WriteString("  " + i)
	}
	if n.Driver != "" {
		b.WriteString("  driver " + n.Driver)
	}
	if n.Link != "" {
		b.WriteString("  link " + n.Link)
	}
	numa := "-" // the kernel names none (-1), or it could not be read
	if n.NUMANode != nil {
		numa = fmt.Sprint(*n.NUMANode)
	}
	b.WriteString("  numa " + numa)
	if n.IOMMUGroup != nil {
		fmt.Fprintf(&b, "  group %d", *n.IOMMUGroup)
	}
	return safeLine(b.String())
}

// displayName is "Vendor Device [vvvv:dddd]", the class name when the
// names are unknown, the ids alone when nothing else is.
func displayName(n *TopoNode) string {
	name := n.Name
	if n.IDs != "" {
		if name != "" {
			name += " "
		}
		name += "[" + n.IDs + "]"
	}
	return name
}

// WriteTopologyMarkdown writes the tree as a Mermaid diagram in a fenced
// block (GitHub, GitLab and most wikis draw it), then the notes.
func WriteTopologyMarkdown(w io.Writer, t *Topology) error {
	ew := &errWriter{w: w}
	ew.printf("# PCIe topology\n\n- source: %s\n- %s\n- %s\n\n```mermaid\n", mdEscape(t.Source), topoSummary(t),
		mdEscape(markLegend(t.Checked, "red outline", "orange outline", inNotes)))
	if ew.err == nil {
		ew.err = WriteTopologyMermaid(w, t)
	}
	ew.printf("```\n")
	var shared []string
	for _, g := range t.IOMMUGroups {
		if len(g.Members) > 1 {
			shared = append(shared, fmt.Sprintf("- group %d: %s", g.ID, mdEscape(strings.Join(g.Members, " "))))
		}
	}
	if len(shared) > 0 {
		ew.printf("\n## IOMMU groups with more than one function\n\n%s\n", strings.Join(shared, "\n"))
	}
	if len(t.Notes) > 0 {
		ew.printf("\n## Notes\n\n")
		for _, n := range t.Notes {
			ew.printf("- %s\n", mdEscape(n))
		}
	}
	return ew.err
}

// WriteMatrixText prints the matrix as nvidia-smi topo -m does: a row per
// device, its CPU and NUMA affinity, the legend, and the devices' names.
func WriteMatrixText(w io.Writer, m *AffinityMatrix) error {
	tb := &Table{Title: []string{"affinity matrix of " + m.Source}}
	if len(m.Devices) == 0 {
		tb.Notes = append(tb.Notes, "no accelerator and no NIC: nothing to compare")
		tb.Notes = append(tb.Notes, m.Notes...)
		return WriteTableText(w, tb)
	}
	tb.Title = append(tb.Title, "")
	tb.Header = append(tb.Header, "")
	for _, d := range m.Devices {
		tb.Header = append(tb.Header, d.Label)
	}
	tb.Header = append(tb.Header, "CPU Affinity", "NUMA Affinity")
	for i, d := range m.Devices {
		row := []string{d.Label}
		row = append(row, m.Classes[i]...)
		numa := "N/A"
		if d.NUMAAffinity != nil {
			numa = fmt.Sprint(*d.NUMAAffinity)
		}
		cpus := d.CPUAffinity
		if cpus == "" {
			cpus = "N/A"
		}
		row = append(row, cpus, numa)
		tb.Rows = append(tb.Rows, row)
	}
	tb.Notes = append(tb.Notes, "", "Legend:", "")
	for _, l := range m.Legend {
		tb.Notes = append(tb.Notes, "  "+l)
	}
	tb.Notes = append(tb.Notes, "", "Devices:", "")
	for _, d := range m.Devices {
		tb.Notes = append(tb.Notes, "  "+deviceLegend(d))
	}
	if l, ok := matrixMarkLegend(m); ok {
		tb.Notes = append(tb.Notes, "", "  "+l)
	}
	if len(m.Notes) > 0 {
		tb.Notes = append(tb.Notes, "")
		for _, n := range m.Notes {
			tb.Notes = append(tb.Notes, "note: "+n)
		}
	}
	return WriteTableText(w, tb)
}

func deviceLegend(d MatrixDevice) string {
	s := d.Label + ": " + d.Address
	if len(d.Interfaces) > 0 {
		s += " " + strings.Join(d.Interfaces, " ")
	}
	if d.Name != "" {
		s += " " + d.Name
	}
	switch {
	case d.Failing:
		s += " [FAIL]"
	case d.Warning:
		s += " [WARN]"
	}
	return s
}

// matrixMarkLegend is the matrix's markLegend, where it has something to
// say: unchecked, or a device marked.
func matrixMarkLegend(m *AffinityMatrix) (string, bool) {
	for _, d := range m.Devices {
		if d.Failing || d.Warning {
			return strings.ReplaceAll(markLegend(true, "[FAIL]", "[WARN]", inNotes), "function", "device"), true
		}
	}
	if !m.Checked {
		return strings.ReplaceAll(markLegend(false, "", "", ""), "function", "device"), true
	}
	return "", false
}

// WriteMatrixMarkdown writes the matrix as a Markdown table with the
// legend below.
func WriteMatrixMarkdown(w io.Writer, m *AffinityMatrix) error {
	ew := &errWriter{w: w}
	ew.printf("# Affinity matrix\n\n- source: %s\n\n", mdEscape(m.Source))
	if len(m.Devices) == 0 {
		ew.printf("No accelerator and no NIC: nothing to compare.\n")
	} else {
		ew.printf("| |")
		for _, d := range m.Devices {
			ew.printf(" %s |", mdEscape(d.Label))
		}
		ew.printf(" CPU Affinity | NUMA Affinity |\n|%s\n", strings.Repeat("---|", len(m.Devices)+3))
		for i, d := range m.Devices {
			ew.printf("| **%s** |", mdEscape(d.Label))
			for _, c := range m.Classes[i] {
				ew.printf(" %s |", mdEscape(c))
			}
			numa := "N/A"
			if d.NUMAAffinity != nil {
				numa = fmt.Sprint(*d.NUMAAffinity)
			}
			cpus := d.CPUAffinity
			if cpus == "" {
				cpus = "N/A"
			}
			ew.printf(" %s | %s |\n", mdEscape(cpus), numa)
		}
		ew.printf("\n## Legend\n\n")
		for _, l := range m.Legend {
			ew.printf("- `%s`\n", mdCode(l))
		}
		ew.printf("\n## Devices\n\n")
		for _, d := range m.Devices {
			ew.printf("- %s\n", mdEscape(deviceLegend(d)))
		}
		if l, ok := matrixMarkLegend(m); ok {
			ew.printf("\n%s\n", mdEscape(l))
		}
	}
	if len(m.Notes) > 0 {
		ew.printf("\n## Notes\n\n")
		for _, n := range m.Notes {
			ew.printf("- %s\n", mdEscape(n))
		}
	}
	return ew.err
}
