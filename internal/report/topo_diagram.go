package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// The diagrams (Mermaid flowchart, Graphviz DOT) draw the same layout:
// one box per host bridge and function, an edge from each to the
// functions below it (thick inside a switch: upstream to downstream
// ports), a cluster per NUMA node holding its root complexes, and inside
// it a cluster per IOMMU group holding the group's functions.
// Accelerators, NICs and switch ports are coloured, and the functions a
// check failed or warned on are outlined (red, orange).
// A cluster can hold a box only once, so a group whose functions lie in
// different NUMA clusters (which no kernel makes: a group never spans
// root complexes) is drawn at the top level.

// diagramNode is a box: its node, its container and its parent.
type diagramNode struct {
	n      *TopoNode
	parent *TopoNode
	numa   *int // the NUMA cluster it is drawn in; nil: none
}

type diagramLayout struct {
	nodes  []diagramNode
	numa   []int                    // NUMA clusters, ascending
	cpus   map[int]string           // NUMA node -> CPUs
	groups map[int][]int            // group -> indexes into nodes
	where  map[int]*int             // group -> NUMA cluster (nil: top level)
	byNUMA map[int][]int            // NUMA cluster -> ungrouped node indexes
	top    []int                    // ungrouped nodes outside any NUMA cluster
	gByN   map[int][]int            // NUMA cluster -> groups in it
	gTop   []int                    // groups at the top level
	ids    map[*TopoNode]string     // diagram ids
	edges  [][2]*TopoNode           // parent -> child
	thick  map[[2]*TopoNode]bool    // edges inside a switch
	style  map[*TopoNode]nodeStyles // which styles a box takes
}

type nodeStyles struct{ accel, nic, port, host, failing, warning bool }

func layout(t *Topology) *diagramLayout {
	l := &diagramLayout{cpus: map[int]string{}, groups: map[int][]int{}, where: map[int]*int{},
		byNUMA: map[int][]int{}, gByN: map[int][]int{}, ids: map[*TopoNode]string{},
		thick: map[[2]*TopoNode]bool{}, style: map[*TopoNode]nodeStyles{}}
	for _, n := range t.NUMANodes {
		l.cpus[n.ID] = n.CPUs
	}
	var walk func(n, parent *TopoNode, numa *int)
	walk = func(n, parent *TopoNode, numa *int) {
		l.nodes = append(l.nodes, diagramNode{n: n, parent: parent, numa: numa})
		if parent != nil {
			e := [2]*TopoNode{parent, n}
			l.edges = append(l.edges, e)
			if parent.Kind == TopoSwitchUpstream && n.Kind == TopoSwitchDownstream {
				l.thick[e] = true
			}
		}
		for i := range n.Children {
			walk(&n.Children[i], n, numa)
		}
	}
	for i := range t.RootComplexes {
		rc := &t.RootComplexes[i]
		walk(rc, nil, rc.NUMANode)
	}
	for i := range t.Unplaced {
		walk(&t.Unplaced[i], nil, nil)
	}
	seenNUMA := map[int]bool{}
	used := map[string]int{}
	for i, d := range l.nodes {
		if d.numa != nil && !seenNUMA[*d.numa] {
			seenNUMA[*d.numa] = true
			l.numa = append(l.numa, *d.numa)
		}
		if d.n.IOMMUGroup != nil && d.n.Kind != TopoHostBridge {
			l.groups[*d.n.IOMMUGroup] = append(l.groups[*d.n.IOMMUGroup], i)
		}
		id := diagramID(d.n)
		if k := used[id]; k > 0 {
			used[id]++
			id = fmt.Sprintf("%s_%d", id, k)
		} else {
			used[id] = 1
		}
		l.ids[d.n] = id
		l.style[d.n] = nodeStyles{accel: d.n.Accelerator != "" && !d.n.NIC, nic: d.n.NIC,
			port: d.n.Kind == TopoSwitchUpstream || d.n.Kind == TopoSwitchDownstream,
			host: d.n.Kind == TopoHostBridge, failing: d.n.Failing, warning: d.n.Warning && !d.n.Failing}
	}
	sort.Ints(l.numa)
	var gids []int
	for g := range l.groups {
		gids = append(gids, g)
	}
	sort.Ints(gids)
	for _, g := range gids {
		var where *int
		same := true
		for k, i := range l.groups[g] {
			p := l.nodes[i].numa
			if k == 0 {
				where = p
			} else if (p == nil) != (where == nil) || p != nil && *p != *where {
				same = false
			}
		}
		if !same {
			where = nil
		}
		l.where[g] = where
		if where == nil {
			l.gTop = append(l.gTop, g)
		} else {
			l.gByN[*where] = append(l.gByN[*where], g)
		}
	}
	for i, d := range l.nodes {
		if d.n.IOMMUGroup != nil && d.n.Kind != TopoHostBridge {
			continue
		}
		if d.numa == nil {
			l.top = append(l.top, i)
		} else {
			l.byNUMA[*d.numa] = append(l.byNUMA[*d.numa], i)
		}
	}
	return l
}

// diagramID is a node id both languages accept: letters, digits, _.
func diagramID(n *TopoNode) string {
	prefix := "fn_"
	if n.Kind == TopoHostBridge {
		prefix = "hb_"
	}
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range n.ID {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// labelLines are a box's lines: the id, the kind, the name, the details.
func labelLines(n *TopoNode) []string {
	head := n.ID
	if t := tags(n); len(t) > 0 {
		head += " [" + strings.Join(t, " ") + "]"
	}
	k := kindText(n)
	if n.KindFrom == "chain" {
		k += "*"
	}
	lines := []string{head, k}
	// The name is cut to fit a box; the ids never are.
	switch name, ids := n.Name, n.IDs; {
	case name != "" && ids != "":
		lines = append(lines, shorten(name, 56-len(ids)-3)+" ["+ids+"]")
	case name != "":
		lines = append(lines, shorten(name, 56))
	case ids != "":
		lines = append(lines, "["+ids+"]")
	}
	var det []string
	if len(n.Interfaces) > 0 {
		det = append(det, strings.Join(n.Interfaces, " "))
	}
	if n.Driver != "" {
		det = append(det, n.Driver)
	}
	if n.Link != "" {
		det = append(det, n.Link)
	}
	if n.NUMANode != nil {
		det = append(det, fmt.Sprintf("NUMA %d", *n.NUMANode))
	}
	if len(det) > 0 {
		lines = append(lines, strings.Join(det, ", "))
	}
	for i := range lines {
		lines[i] = safeLine(lines[i])
	}
	return lines
}

// shorten cuts s to n runes, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func numaLabel(l *diagramLayout, id int) string {
	s := fmt.Sprintf("NUMA node %d", id)
	if c := l.cpus[id]; c != "" {
		s += " (CPUs " + c + ")"
	}
	return safeLine(s)
}

// mermaidText escapes text for a quoted Mermaid label: the characters
// that end the label or start markup become Mermaid's entity codes
// (#quot; and numeric codes such as #35;), so host text stays text.
func mermaidText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString("#quot;")
		case '#', '<', '>', '&', '`', '\\':
			fmt.Fprintf(&b, "#%d;", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// WriteTopologyMermaid writes the tree as a Mermaid flowchart.
func WriteTopologyMermaid(w io.Writer, t *Topology) error {
	l := layout(t)
	ew := &errWriter{w: w}
	ew.printf("flowchart LR\n")
	box := func(ind string, i int) {
		n := l.nodes[i].n
		lines := labelLines(n)
		for k := range lines {
			lines[k] = mermaidText(lines[k])
		}
		open, close := "[\"", "\"]"
		if n.Kind == TopoHostBridge {
			open, close = "[[\"", "\"]]"
		}
		ew.printf("%s%s%s%s%s\n", ind, l.ids[n], open, strings.Join(lines, "<br/>"), close)
	}
	group := func(ind string, g int) {
		ew.printf("%ssubgraph grp_%d[\"IOMMU group %d\"]\n", ind, g, g)
		for _, i := range l.groups[g] {
			box(ind+"  ", i)
		}
		ew.printf("%send\n", ind)
	}
	for _, id := range l.numa {
		ew.printf("  subgraph numa_%d[\"%s\"]\n", id, mermaidText(numaLabel(l, id)))
		for _, i := range l.byNUMA[id] {
			box("    ", i)
		}
		for _, g := range l.gByN[id] {
			group("    ", g)
		}
		ew.printf("  end\n")
	}
	for _, i := range l.top {
		box("  ", i)
	}
	for _, g := range l.gTop {
		group("  ", g)
	}
	for _, e := range l.edges {
		arrow := "-->"
		if l.thick[e] {
			arrow = "==>"
		}
		ew.printf("  %s %s %s\n", l.ids[e[0]], arrow, l.ids[e[1]])
	}
	ew.printf("  classDef host fill:#e8e8e8,stroke:#333333,stroke-width:2px\n")
	ew.printf("  classDef port fill:#fff3cd,stroke:#8a6d00\n")
	ew.printf("  classDef accel fill:#d4edda,stroke:#2e7d32,stroke-width:2px\n")
	ew.printf("  classDef nic fill:#d6e4f7,stroke:#1f5fbf,stroke-width:2px\n")
	ew.printf("  classDef failing stroke:#c62828,stroke-width:4px,color:#c62828\n")
	ew.printf("  classDef warning stroke:#ef6c00,stroke-width:4px\n")
	for _, c := range []struct {
		name string
		has  func(nodeStyles) bool
	}{
		{"host", func(s nodeStyles) bool { return s.host }},
		{"port", func(s nodeStyles) bool { return s.port }},
		{"accel", func(s nodeStyles) bool { return s.accel }},
		{"nic", func(s nodeStyles) bool { return s.nic }},
		{"failing", func(s nodeStyles) bool { return s.failing }},
		{"warning", func(s nodeStyles) bool { return s.warning }},
	} {
		var ids []string
		for _, d := range l.nodes {
			if c.has(l.style[d.n]) {
				ids = append(ids, l.ids[d.n])
			}
		}
		if len(ids) > 0 {
			ew.printf("  class %s %s\n", strings.Join(ids, ","), c.name)
		}
	}
	return ew.err
}

// dotText escapes text for a quoted DOT string: a backslash (which would
// start one of DOT's label escapes, \n \l \N ...) and a quote.
func dotText(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// WriteTopologyDOT writes the tree as a Graphviz digraph.
func WriteTopologyDOT(w io.Writer, t *Topology) error {
	l := layout(t)
	ew := &errWriter{w: w}
	ew.printf("digraph topology {\n")
	legend := "green: accelerator   blue: NIC   yellow: switch port   " +
		strings.ReplaceAll(markLegend(t.Checked, "red outline", "orange outline", "accel-doctor topo lists the findings"), "; ", "   ")
	for _, d := range l.nodes {
		if d.n.KindFrom == "chain" {
			legend += "   *: kind told by the place in the tree"
			break
		}
	}
	ew.printf("  graph [rankdir=LR, fontname=\"Helvetica\", fontsize=12, labelloc=t, nodesep=0.15, ranksep=0.5,\n")
	ew.printf("         label=\"%s\\n%s\\n%s\"]\n", dotText(safeLine("PCIe topology of "+t.Source)), dotText(topoSummary(t)), legend)
	ew.printf("  node [shape=box, style=\"rounded,filled\", fillcolor=\"white\", fontname=\"Helvetica\", fontsize=10]\n")
	ew.printf("  edge [color=\"#555555\", arrowsize=0.6]\n")
	box := func(ind string, i int) {
		n := l.nodes[i].n
		lines := labelLines(n)
		for k := range lines {
			lines[k] = dotText(lines[k])
		}
		attrs := []string{fmt.Sprintf("label=\"%s\"", strings.Join(lines, `\n`))}
		s := l.style[n]
		var fill, color, pen string
		switch {
		case s.host:
			attrs = append(attrs, `style="filled,bold"`)
			fill = "#e8e8e8"
		case s.accel:
			fill, color, pen = "#d4edda", "#2e7d32", "2"
		case s.nic:
			fill, color, pen = "#d6e4f7", "#1f5fbf", "2"
		case s.port:
			fill, color = "#fff3cd", "#8a6d00"
		}
		// The outline of a check's FAIL or WARN replaces the kind's.
		switch {
		case s.failing:
			color, pen = "#c62828", "4"
			attrs = append(attrs, `fontcolor="#c62828"`)
		case s.warning:
			color, pen = "#ef6c00", "4"
		}
		if fill != "" {
			attrs = append(attrs, `fillcolor="`+fill+`"`)
		}
		if color != "" {
			attrs = append(attrs, `color="`+color+`"`)
		}
		if pen != "" {
			attrs = append(attrs, "penwidth="+pen)
		}
		ew.printf("%s%s [%s]\n", ind, l.ids[n], strings.Join(attrs, ", "))
	}
	group := func(ind string, g int) {
		ew.printf("%ssubgraph cluster_grp_%d {\n", ind, g)
		ew.printf("%s  label=\"IOMMU group %d\"; style=\"rounded,filled\"; fillcolor=\"#f4f4f4\"; color=\"#aaaaaa\"; fontsize=9\n", ind, g)
		for _, i := range l.groups[g] {
			box(ind+"  ", i)
		}
		ew.printf("%s}\n", ind)
	}
	for _, id := range l.numa {
		ew.printf("  subgraph cluster_numa_%d {\n", id)
		ew.printf("    label=\"%s\"; style=\"rounded,dashed\"; color=\"#555555\"\n", dotText(numaLabel(l, id)))
		for _, i := range l.byNUMA[id] {
			box("    ", i)
		}
		for _, g := range l.gByN[id] {
			group("    ", g)
		}
		ew.printf("  }\n")
	}
	for _, i := range l.top {
		box("  ", i)
	}
	for _, g := range l.gTop {
		group("  ", g)
	}
	for _, e := range l.edges {
		if l.thick[e] {
			ew.printf("  %s -> %s [penwidth=2.5, color=\"#8a6d00\"]\n", l.ids[e[0]], l.ids[e[1]])
			continue
		}
		ew.printf("  %s -> %s\n", l.ids[e[0]], l.ids[e[1]])
	}
	ew.printf("}\n")
	return ew.err
}
