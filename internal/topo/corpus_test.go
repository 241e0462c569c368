package topo

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// The real captures in ../shared/corpus are other machines' data: the
// hwloc captures come with what lstopo itself made of them (an XML
// export, or lstopo's console output), the truth the tree is held to.

// hwEntry is what another tool says of one tree node.
type hwEntry struct {
	parent string // parent's ID: a function address or pciDDDD:BB
	bridge bool
	class  string // 4 hex digits, "" when not said
	ids    string // vvvv:dddd, "" when not said
	numa   []int  // the NUMA nodes it is local to; nil when not said
}

// ourView is the tree in the same terms. A function that a sysfs path
// names but /sys/bus/pci/devices does not list (Device nil) is left out,
// its children given to its parent: lstopo sees only listed functions.
func ourView(tree *Tree) map[string]hwEntry {
	v := map[string]hwEntry{}
	tree.Walk(func(n *Node, _ int) {
		if n.IsFunction() && n.Device == nil {
			return
		}
		e := hwEntry{bridge: n.IsBridgeRole() || n.Role == RoleHostBridge}
		for p := n.Parent; p != nil; p = p.Parent {
			if !p.IsFunction() || p.Device != nil {
				e.parent = p.ID
				break
			}
		}
		if d := n.Device; d != nil {
			if d.Has(pci.HasClass) {
				e.class = fmt.Sprintf("%04x", d.Class>>8)
			}
			if d.Has(pci.HasVendor | pci.HasDevice) {
				e.ids = d.IDString()
			}
		}
		if n.NUMA != nil {
			e.numa = []int{*n.NUMA}
		}
		v[n.ID] = e
	})
	return v
}

// compareTrees holds our tree to another tool's: the same host bridges
// and functions, each under the same parent, bridges and endpoints alike,
// the same class and ids, and (when numa) our NUMA node among those the
// tool places the node near.
func compareTrees(t *testing.T, ours, theirs map[string]hwEntry, numa bool, unconfigured map[string]bool) {
	t.Helper()
	var missing, extra []string
	for id, h := range theirs {
		o, ok := ours[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		if o.parent != h.parent {
			t.Errorf("%s: our parent %q, theirs %q", id, o.parent, h.parent)
		}
		if o.bridge != h.bridge {
			t.Errorf("%s: our bridge %v, theirs %v", id, o.bridge, h.bridge)
		}
		if h.class != "" && o.class != h.class {
			t.Errorf("%s: our class %s, theirs %s", id, o.class, h.class)
		}
		if h.ids != "" && h.ids != "0000:0000" && o.ids != h.ids {
			t.Errorf("%s: our ids %s, theirs %s", id, o.ids, h.ids)
		}
		// A node local to one NUMA node must be ours too; one local to
		// several (lstopo attaches what has no node to the machine) must
		// have no node of ours, or one of them.
		switch {
		case !numa || h.numa == nil:
		case len(h.numa) == 1 && (len(o.numa) != 1 || o.numa[0] != h.numa[0]):
			t.Errorf("%s: our NUMA %v, theirs %v", id, o.numa, h.numa)
		case len(o.numa) == 1 && !slices.Contains(h.numa, o.numa[0]):
			t.Errorf("%s: our NUMA %v, theirs %v", id, o.numa, h.numa)
		}
	}
	for id := range ours {
		if _, ok := theirs[id]; !ok && !unconfigured[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("nodes only theirs: %v; only ours: %v", missing, extra)
	}
	if len(theirs) == 0 {
		t.Fatal("the other tool's tree is empty")
	}
}

// unconfiguredBridges are the bridges whose config header gives
// secondary bus 0 (offset 0x19): not configured, nothing below them.
func unconfiguredBridges(root *hostfs.Root, tree *Tree) map[string]bool {
	out := map[string]bool{}
	tree.Walk(func(n *Node, _ int) {
		if !n.IsBridgeRole() || n.Device == nil || len(n.Children) > 0 {
			return
		}
		if cfg, err := pci.ReadConfig(root, n.Device); err == nil && cfg.HeaderType == pci.HeaderBridge && cfg.SecondaryBus == 0 {
			out[n.ID] = true
		}
	})
	return out
}

// hwObj is an object of an lstopo XML export (hwloc 2.x:
// doc/hwloc.dtd; PCI objects carry pci_busid and pci_type "cccc
// [vvvv:dddd] [ssss:ssss] rr", host bridges bridge_type "0-1" and their
// bus range in bridge_pci).
type hwObj struct {
	Type       string  `xml:"type,attr"`
	OSIndex    string  `xml:"os_index,attr"`
	Nodeset    string  `xml:"nodeset,attr"`
	BusID      string  `xml:"pci_busid,attr"`
	PCIType    string  `xml:"pci_type,attr"`
	BridgeType string  `xml:"bridge_type,attr"`
	BridgePCI  string  `xml:"bridge_pci,attr"`
	Children   []hwObj `xml:"object"`
}

func readHwlocXML(t *testing.T, p string) []hwObj {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Objects []hwObj `xml:"object"`
	}
	if err := xml.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	return top.Objects
}

// parseNodeset reads an hwloc bitmap ("0x00000011,0x11111111": 32-bit
// words, most significant first) as the set bits.
func parseNodeset(s string) []int {
	if s == "" {
		return nil
	}
	words := strings.Split(s, ",")
	var out []int
	for i, w := range words {
		v, err := strconv.ParseUint(strings.TrimPrefix(w, "0x"), 16, 32)
		if err != nil {
			return nil
		}
		base := 32 * (len(words) - 1 - i)
		for bit := 0; bit < 32; bit++ {
			if v&(1<<bit) != 0 {
				out = append(out, base+bit)
			}
		}
	}
	sort.Ints(out)
	return out
}

// hostBridgeID names an hwloc host bridge as sysfs does: its bus range
// "DDDD:[ss-ee]" starts at the root bus.
func hostBridgeID(busRange string) string {
	dom, rest, _ := strings.Cut(busRange, ":[")
	return "pci" + dom + ":" + strings.SplitN(rest, "-", 2)[0]
}

func isHostBridge(o *hwObj) bool { return o.Type == "Bridge" && o.BridgeType == "0-1" && o.BusID == "" }

// hwlocView is what an lstopo XML export says of the PCI tree: the NUMA
// locality of an I/O object is its nearest non-I/O ancestor's nodeset.
func hwlocView(objs []hwObj) map[string]hwEntry {
	v := map[string]hwEntry{}
	var walk func(o *hwObj, parent string, nodes []int)
	walk = func(o *hwObj, parent string, nodes []int) {
		id := ""
		switch {
		case isHostBridge(o):
			id = hostBridgeID(o.BridgePCI)
			v[id] = hwEntry{bridge: true, numa: nodes}
		case o.Type == "Bridge" || o.Type == "PCIDev":
			id = o.BusID
			e := hwEntry{parent: parent, bridge: o.Type == "Bridge", numa: nodes}
			if f := strings.Fields(o.PCIType); len(f) >= 2 {
				e.class, e.ids = f[0], strings.Trim(f[1], "[]")
			}
			v[id] = e
		case o.Type != "OSDev" && o.Type != "Misc":
			if ns := parseNodeset(o.Nodeset); ns != nil {
				nodes = ns
			}
		}
		if id == "" {
			id = parent
		}
		for i := range o.Children {
			walk(&o.Children[i], id, nodes)
		}
	}
	for i := range objs {
		walk(&objs[i], "", nil)
	}
	return v
}

// checkHwlocXML holds a capture's tree to the lstopo XML export beside
// it (made with --whole-io: every function). 32em64t-2n8c is a two-socket
// Xeon with 137 functions on two NUMA nodes. 40intel64's export was made
// with HWLOC_PCI_LOCALITY forcing each root complex near a package
// (hwloc's tests/hwloc/linux/40intel64-2g2n4c+pcilocality.test), while
// its sysfs says numa_node -1 (NUMA_NO_NODE) almost everywhere: there the
// tree is compared and the NUMA nodes are not.
func checkHwlocXML(t *testing.T, tree *Tree, root *hostfs.Root, xmlPath string, numa bool) {
	theirs := hwlocView(readHwlocXML(t, xmlPath))
	un := unconfiguredBridges(root, tree)
	compareTrees(t, ourView(tree), theirs, numa, un)
	t.Logf("%d nodes agree; %d root complexes, %d switches; unconfigured bridges %v", len(theirs), len(tree.RootComplexes), len(tree.Switches), un)
	if numa {
		return
	}
	// pci0000:00's functions all say -1; in pci0000:40 only 0000:43:00.0
	// names a node (2), which the root complex takes.
	for _, rc := range tree.RootComplexes {
		switch rc.HostBridge.ID {
		case "pci0000:00":
			if rc.NUMA != nil {
				t.Errorf("pci0000:00 NUMA %d", *rc.NUMA)
			}
		case "pci0000:40":
			if rc.NUMA == nil || *rc.NUMA != 2 {
				t.Errorf("pci0000:40 NUMA %v", rc.NUMA)
			}
		}
	}
}

// consoleLine is one object of lstopo's console output: "  PCIBridge
// L#1 (busid=0000:17:00.0 id=8086:2030 class=0604(PCIBridge) ...)".
var consoleLine = regexp.MustCompile(`^( *)([A-Za-z]+)(?:\[[^]]*\])?(?: L#\d+)? \((.*)\)`)

// consoleView is what lstopo's console output says: objects nest by
// indentation; a host bridge is near the NUMA nodes listed beside it
// under its parent (hwloc 2 attaches NUMA nodes as memory children).
func consoleView(t *testing.T, p string) map[string]hwEntry {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type obj struct {
		indent   int
		typ, id  string
		numa     []int // NUMANode children
		attrs    map[string]string
		parent   *obj
		children []*obj
	}
	var stack []*obj
	var all []*obj
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := consoleLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		o := &obj{indent: len(m[1]), typ: m[2], attrs: map[string]string{}}
		for _, kv := range strings.Fields(m[3]) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				o.attrs[k] = v
			} else if strings.HasPrefix(kv, "P#") {
				o.attrs["P"] = kv[2:]
			}
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= o.indent {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			o.parent = stack[len(stack)-1]
			o.parent.children = append(o.parent.children, o)
			if o.typ == "NUMANode" {
				n, _ := strconv.Atoi(o.attrs["P"])
				o.parent.numa = append(o.parent.numa, n)
			}
		}
		stack = append(stack, o)
		all = append(all, o)
	}
	v := map[string]hwEntry{}
	near := func(o *obj) []int {
		for p := o.parent; p != nil; p = p.parent {
			if len(p.numa) > 0 {
				return p.numa
			}
		}
		return nil
	}
	for _, o := range all {
		switch o.typ {
		case "HostBridge":
			o.id = hostBridgeID(o.attrs["buses"])
		case "PCIBridge", "PCI":
			o.id = o.attrs["busid"]
		}
	}
	for _, o := range all {
		if o.id == "" {
			continue
		}
		e := hwEntry{bridge: o.typ != "PCI", numa: near(o), ids: o.attrs["id"]}
		if cl := o.attrs["class"]; len(cl) >= 4 {
			e.class = cl[:4]
		}
		for p := o.parent; p != nil; p = p.parent {
			if p.id != "" {
				e.parent = p.id
				break
			}
		}
		v[o.id] = e
	}
	return v
}

// checkVectorEngines: the 8-VectorEngine host (two PLX PEX9797
// switches, each with four VEs and a ConnectX-4) against lstopo's console
// output of the same capture; then its matrix: the VEs and the HCA of one
// switch are PIX to each other, NODE to the other switch's (both root
// complexes on node 0), and the X722 ports on the third root complex are
// PIX to each other (two functions below one port).
func checkVectorEngines(t *testing.T, tree *Tree, root *hostfs.Root, console string) {
	compareTrees(t, ourView(tree), consoleView(t, console), true, unconfiguredBridges(root, tree))
	// 0000:5f:03.0 is in the sysfs path of the X722 ports but not listed:
	// the tree keeps it, without ids, and says so.
	if n := node(t, tree, "0000:5f:03.0"); n.Device != nil || n.Parent.ID != "0000:5e:00.0" || len(n.Children) != 2 {
		t.Errorf("5f:03.0: %+v", n)
	}
	if !strings.Contains(strings.Join(tree.Notes, "\n"), "1 function(s) named in sysfs paths are not listed") {
		t.Errorf("notes %q", tree.Notes)
	}

	m := tree.Matrix()
	if got := strings.Join(m.Labels, " "); got != "ACC0 ACC1 ACC2 ACC3 ACC4 ACC5 ACC6 ACC7 NIC0 NIC1 NIC2 NIC3" {
		t.Fatalf("labels %s", got)
	}
	idx := map[string]int{}
	for i, d := range m.Devices {
		idx[d.ID] = i
	}
	for _, c := range []struct {
		a, b string
		want Class
	}{
		{"0000:1b:00.0", "0000:1e:00.0", ClassPIX},
		{"0000:1b:00.0", "0000:1a:00.0", ClassPIX},
		{"0000:1b:00.0", "0000:3d:00.0", ClassNODE},
		{"0000:3e:00.0", "0000:41:00.0", ClassPIX},
		{"0000:1a:00.0", "0000:3e:00.0", ClassNODE},
		{"0000:60:00.0", "0000:60:00.1", ClassPIX},
		{"0000:60:00.0", "0000:1b:00.0", ClassNODE},
	} {
		if got := m.Classes[idx[c.a]][idx[c.b]]; got != c.want {
			t.Errorf("%s-%s: %v, want %v", c.a, c.b, got, c.want)
		}
	}
	// The capture's config files hold 64 bytes: every role is the chain's.
	tree.Walk(func(n *Node, _ int) {
		if n.IsBridgeRole() && n.RoleFrom != FromChain {
			t.Errorf("%s: role from %v", n.ID, n.RoleFrom)
		}
	})
}

// checkPower9: the POWER9 capture copied /sys/bus/pci/devices
// entries as directories, so no function has a path to a host bridge.
// lstopo invents a host bridge per bus; the tree does not guess: the six
// V100s are unplaced, their matrix all "?", and the notes say why.
func checkPower9(t *testing.T, tree *Tree, console string) {
	theirs := consoleView(t, console)
	gpus := 0
	for id, e := range theirs {
		if e.bridge {
			continue
		}
		n := tree.Lookup(addr(t, id))
		if n == nil || n.Parent != nil || n.Accelerator != pci.KindGPU {
			t.Errorf("%s: %+v", id, n)
			continue
		}
		gpus++
	}
	if gpus != 6 || len(tree.RootComplexes) != 0 || len(tree.Notes) < 6 {
		t.Errorf("%d GPUs, %d root complexes, notes %q", gpus, len(tree.RootComplexes), tree.Notes)
	}
	m := tree.Matrix()
	for i := range m.Devices {
		for j := range m.Devices {
			if want := ClassUnknown; i != j && m.Classes[i][j] != want {
				t.Errorf("%s-%s: %v", m.Labels[i], m.Labels[j], m.Classes[i][j])
			}
		}
	}
}

// inventoryFromHwloc turns an lstopo XML export into the inventory
// pci.Scan would read on that machine: each function at the sysfs path
// its place in the tree gives, with its class, ids and the NUMA node of
// its package.
func inventoryFromHwloc(t *testing.T, objs []hwObj) *pci.Inventory {
	t.Helper()
	inv := &pci.Inventory{}
	var walk func(o *hwObj, p string, numa int)
	walk = func(o *hwObj, p string, numa int) {
		switch {
		case isHostBridge(o):
			p += "/" + hostBridgeID(o.BridgePCI)
		case o.Type == "Bridge" || o.Type == "PCIDev":
			a := addr(t, o.BusID)
			p += "/" + a.String()
			d := &pci.Device{Address: a, Path: p}
			if f := strings.Fields(o.PCIType); len(f) >= 2 {
				cl, _ := strconv.ParseUint(f[0], 16, 16)
				d.Class = uint32(cl) << 8
				var v, dv uint16
				fmt.Sscanf(f[1], "[%x:%x]", &v, &dv)
				d.Vendor, d.Device = v, dv
				d.Present = pci.HasClass | pci.HasVendor | pci.HasDevice
			}
			n := numa
			d.NUMANode = &n
			inv.Devices = append(inv.Devices, d)
		case o.Type == "Package":
			for i := range o.Children {
				if o.Children[i].Type == "NUMANode" {
					numa, _ = strconv.Atoi(o.Children[i].OSIndex)
				}
			}
		}
		for i := range o.Children {
			walk(&o.Children[i], p, numa)
		}
	}
	for i := range objs {
		walk(&objs[i], "/sys/devices", -1)
	}
	sort.Slice(inv.Devices, func(i, j int) bool { return inv.Devices[i].Address.Compare(inv.Devices[j].Address) < 0 })
	return inv
}

// TestCorpusDGX2: the DGX-2's lstopo export (no sysfs capture: the tree
// is built from the export). Each root complex holds a PLX PEX9781 (or
// 9797) switch whose downstream ports lead to two PEX9781 leaf switches
// with two V100s each: GPUs on one leaf switch are PIX, on the two leaf
// switches of one tree PXB, on the other root complex of the same socket
// NODE, on the other socket SYS. Every GPU has 1 PIX, 2 PXB, 4 NODE and
// 8 SYS peers. The NVSwitches (class 0680) are not in the matrix; their
// NVLinks are (NVLinkBandwidth in the export, from NVML) and are out of
// sysfs' reach.
func TestCorpusDGX2(t *testing.T) {
	objs := readHwlocXML(t, filepath.Join(testutil.CorpusDir(t), "hwloc", "xml", "nvidiaDGX2.xml"))
	tree := Build(nil, inventoryFromHwloc(t, objs), Options{})
	compareTrees(t, ourView(tree), hwlocView(objs), true, nil)
	m := tree.Matrix()
	if len(m.Devices) != 16 || m.Labels[15] != "GPU15" {
		t.Fatalf("labels %v", m.Labels)
	}
	idx := map[string]int{}
	for i, d := range m.Devices {
		idx[d.ID] = i
	}
	for _, c := range []struct {
		a, b string
		want Class
	}{
		{"0000:34:00.0", "0000:36:00.0", ClassPIX},
		{"0000:34:00.0", "0000:39:00.0", ClassPXB},
		{"0000:34:00.0", "0000:3b:00.0", ClassPXB},
		{"0000:34:00.0", "0000:57:00.0", ClassNODE},
		{"0000:34:00.0", "0000:b7:00.0", ClassSYS},
		{"0000:b7:00.0", "0000:b9:00.0", ClassPIX},
		{"0000:b7:00.0", "0000:bc:00.0", ClassPXB},
		{"0000:e0:00.0", "0000:e5:00.0", ClassPXB},
	} {
		if got := m.Classes[idx[c.a]][idx[c.b]]; got != c.want {
			t.Errorf("%s-%s: %v, want %v", c.a, c.b, got, c.want)
		}
	}
	for i := range m.Devices {
		count := map[Class]int{}
		for j := range m.Devices {
			count[m.Classes[i][j]]++
		}
		if count[ClassSelf] != 1 || count[ClassPIX] != 1 || count[ClassPXB] != 2 || count[ClassNODE] != 4 || count[ClassSYS] != 8 {
			t.Errorf("%s (%s): %v", m.Labels[i], m.Devices[i].ID, count)
		}
	}
}

// ncclPCI is a pci element of an NCCL topology file (NCCL_TOPO_FILE;
// NCCL's src/graph/xml.cc writes and reads them): a switch holds its
// devices as nested pci elements, as NCCL merges a switch's ports.
type ncclPCI struct {
	BusID    string    `xml:"busid,attr"`
	Class    string    `xml:"class,attr"`
	Vendor   string    `xml:"vendor,attr"`
	Device   string    `xml:"device,attr"`
	Children []ncclPCI `xml:"pci"`
}

type ncclCPU struct {
	NUMAID   string    `xml:"numaid,attr"`
	Affinity string    `xml:"affinity,attr"`
	PCIs     []ncclPCI `xml:"pci"`
}

// ncclLeaf is an endpoint of an NCCL file, with the chain of elements
// above it: its switches, innermost first, then its cpu's index.
type ncclLeaf struct {
	busid string
	above []string
	cpu   int
}

// ncclClass is the path type NCCL's own rules give two endpoints of its
// tree (src/graph/paths.cc, ncclTopoSetPaths: a PCI-to-PCI link makes a
// path PXB, a link through a CPU PHB, CPU to CPU SYS; a path through one
// switch stays PIX).
func ncclClass(a, b ncclLeaf) Class {
	if a.busid == b.busid {
		return ClassSelf
	}
	if a.cpu != b.cpu {
		return ClassSYS
	}
	for i, x := range a.above {
		if j := slices.Index(b.above, x); j >= 0 {
			if i+j+1 == 1 {
				return ClassPIX
			}
			return ClassPXB
		}
	}
	return ClassPHB
}

func hexAttr(s string) (uint64, bool) {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
	return v, err == nil && s != ""
}

// inventoryFromNCCL builds the inventory of an NCCL file's machine, one
// host bridge per cpu element (NCCL's CPU node is what PHB crosses). flat
// keeps NCCL's merged switches as single bridges; otherwise each switch
// is expanded to the hardware's shape: a root port above it, the switch's
// element as its upstream port, a downstream port per device.
func inventoryFromNCCL(t *testing.T, cpus []ncclCPU, flat bool) (*pci.Inventory, []ncclLeaf) {
	t.Helper()
	inv := &pci.Inventory{}
	var leaves []ncclLeaf
	next := 0
	synth := func() string { next++; return fmt.Sprintf("fffe:%02x:00.0", next) }
	add := func(busid, p string, class uint32, e *ncclPCI, numa int, mask string) string {
		a := addr(t, busid)
		p += "/" + a.String()
		d := &pci.Device{Address: a, Path: p, Class: class, Present: pci.HasClass, NUMANode: &numa, LocalCPUMask: mask}
		if e != nil {
			if c, ok := hexAttr(e.Class); ok {
				d.Class = uint32(c)
			} else {
				d.Present = 0
			}
			if v, ok := hexAttr(e.Vendor); ok {
				d.Vendor, d.Present = uint16(v), d.Present|pci.HasVendor
			}
			if v, ok := hexAttr(e.Device); ok {
				d.Device, d.Present = uint16(v), d.Present|pci.HasDevice
			}
		}
		inv.Devices = append(inv.Devices, d)
		return p
	}
	var walk func(e *ncclPCI, p string, above []string, k, numa int, mask string)
	walk = func(e *ncclPCI, p string, above []string, k, numa int, mask string) {
		if len(e.Children) == 0 {
			add(e.BusID, p, 0, e, numa, mask)
			leaves = append(leaves, ncclLeaf{busid: addr(t, e.BusID).String(), above: above, cpu: k})
			return
		}
		p = add(e.BusID, p, bridge, e, numa, mask)
		above = append([]string{e.BusID}, above...)
		for i := range e.Children {
			cp := p
			if !flat {
				cp = add(synth(), p, bridge, nil, numa, mask) // the downstream port
			}
			walk(&e.Children[i], cp, above, k, numa, mask)
		}
	}
	for k, c := range cpus {
		numa, _ := strconv.Atoi(c.NUMAID)
		hb := fmt.Sprintf("/sys/devices/pcifffd:%02x", k)
		for i := range c.PCIs {
			p := hb
			if !flat {
				p = add(synth(), hb, bridge, nil, numa, c.Affinity) // the root port
			}
			walk(&c.PCIs[i], p, nil, k, numa, c.Affinity)
		}
	}
	sort.Slice(inv.Devices, func(i, j int) bool { return inv.Devices[i].Address.Compare(inv.Devices[j].Address) < 0 })
	return inv, leaves
}

// TestCorpusNCCLTopologies: the NCCL topology files AWS and Azure publish
// for their GPU machines hold each GPU's and NIC's PCI path and NUMA
// node. For every pair of endpoints, the class of our tree (built from
// the file, with switches merged as NCCL writes them and expanded to the
// hardware's ports) is the path type NCCL's rules give on the file's own
// tree. Each host bridge here stands for a whole cpu element (NCCL's CPU
// node merges a NUMA node's host bridges), so NODE cannot arise.
func TestCorpusNCCLTopologies(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testutil.CorpusDir(t), "nccl-topo", "*.xml"))
	if len(files) == 0 {
		t.Skip("no NCCL topology files in the corpus")
	}
	want := map[string]struct {
		devices int
		checks  [][3]string
		cpus    [2]string
	}{
		"aws-p4d-24xl-topo.xml": {12, [][3]string{
			{"0000:10:1c.0", "0000:10:1b.0", "PIX"}, {"0000:10:1c.0", "0000:10:1d.0", "PIX"},
			{"0000:10:1c.0", "0000:20:1c.0", "PHB"}, {"0000:10:1c.0", "0000:90:1c.0", "SYS"},
		}, [2]string{"0000:10:1c.0", "0-23,48-71"}},
		"azure-ndv4-topo.xml": {16, [][3]string{
			{"0003:00:00.0", "0103:00:00.0", "PIX"}, {"0003:00:00.0", "0001:00:00.0", "SYS"},
		}, [2]string{"0003:00:00.0", "0-23"}},
		"azure-ndv2-topo.xml": {9, [][3]string{
			{"0001:00:00.0", "0002:00:00.0", "PHB"}, {"0001:00:00.0", "0101:00:00.0", "PHB"}, {"0001:00:00.0", "0005:00:00.0", "SYS"},
		}, [2]string{"0005:00:00.0", "20-39"}},
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var sys struct {
				CPUs []ncclCPU `xml:"cpu"`
			}
			if err := xml.Unmarshal(b, &sys); err != nil {
				t.Fatal(err)
			}
			for _, flat := range []bool{true, false} {
				inv, leaves := inventoryFromNCCL(t, sys.CPUs, flat)
				tree := Build(nil, inv, Options{})
				pairs := 0
				for _, a := range leaves {
					for _, b := range leaves {
						got := tree.Affinity(tree.Lookup(addr(t, a.busid)), tree.Lookup(addr(t, b.busid)))
						if w := ncclClass(a, b); got != w {
							t.Errorf("flat %v: %s-%s: ours %v, NCCL's rules %v", flat, a.busid, b.busid, got, w)
						}
						pairs++
					}
				}
				m := tree.Matrix()
				w, ok := want[name]
				if !ok {
					t.Logf("flat %v: %d endpoint pairs agree; matrix of %d devices %v", flat, pairs, len(m.Devices), m.Labels)
					continue
				}
				if len(m.Devices) != w.devices {
					t.Errorf("flat %v: %d devices %v, want %d", flat, len(m.Devices), m.Labels, w.devices)
				}
				idx := map[string]int{}
				for i, d := range m.Devices {
					idx[d.ID] = i
				}
				for _, c := range w.checks {
					i, ok1 := idx[c[0]]
					j, ok2 := idx[c[1]]
					if !ok1 || !ok2 || m.Classes[i][j].String() != c[2] {
						t.Errorf("flat %v: %s-%s: %v, want %s", flat, c[0], c[1], m.Classes[i][j], c[2])
					}
				}
				if got := m.Devices[idx[w.cpus[0]]].LocalCPUs(); got != w.cpus[1] {
					t.Errorf("%s CPU affinity %q, want %q", w.cpus[0], got, w.cpus[1])
				}
				t.Logf("flat %v: %d endpoint pairs agree with NCCL's rules; matrix %v", flat, pairs, m.Labels)
			}
		})
	}
}

// TestCorpusCaptures builds the tree of every capture, unpacking each
// once, and holds it to what else the capture shows: the bus numbers in
// its config spaces (checkBusNumbers), and lstopo's view of the same
// machine where the corpus has it.
func TestCorpusCaptures(t *testing.T) {
	dir := testutil.CorpusDir(t)
	var archives []string
	for _, g := range []string{"ghw/*.tar.gz", "hwloc/linux/*.tar.bz2", "nfd/*.tar.gz", "procfs/*.tar.gz"} {
		m, _ := filepath.Glob(filepath.Join(dir, g))
		archives = append(archives, m...)
	}
	hw := filepath.Join(dir, "hwloc", "linux")
	for _, a := range archives {
		name := filepath.Base(a)
		t.Run(name, func(t *testing.T) {
			d := testutil.Unpack(t, a)
			if d == "" {
				t.Skip("no sys/bus/pci in this capture")
			}
			root := hostfs.MustNew(d)
			inv, err := pci.Scan(root)
			if err != nil {
				t.Skipf("no PCI inventory: %v", err)
			}
			tree := Build(root, inv, Options{})
			t.Run("bus-numbers", func(t *testing.T) { checkBusNumbers(t, root, inv, tree) })
			t.Run("read-fields", func(t *testing.T) { checkReadFields(t, d) })
			switch name {
			case "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2":
				t.Run("lstopo-xml", func(t *testing.T) {
					checkHwlocXML(t, tree, root, filepath.Join(hw, "32em64t-2n8c+dax+nvme+mic+dimms.xml"), true)
				})
			case "40intel64-2g2n4c+pcilocality.tar.bz2":
				t.Run("lstopo-xml", func(t *testing.T) {
					checkHwlocXML(t, tree, root, filepath.Join(hw, "40intel64-2g2n4c+pcilocality.xml"), false)
				})
			case "32intel64-2p8co2t+8ve.tar.bz2":
				t.Run("lstopo-console", func(t *testing.T) {
					checkVectorEngines(t, tree, root, filepath.Join(hw, "32intel64-2p8co2t+8ve.console"))
				})
			case "nvidiagpunumanodes.tar.bz2":
				t.Run("lstopo-console", func(t *testing.T) { checkPower9(t, tree, filepath.Join(hw, "nvidiagpunumanodes.console")) })
			}
		})
	}
}

// checkBusNumbers holds a tree to evidence the sysfs paths do not give:
// the bus numbers in config space. A function sits on its parent bridge's
// secondary bus, or on a bus below it up to the subordinate bus (header
// type 1, offsets 0x19 and 0x1a: in the first 64 bytes, readable by
// anyone); a function right below a host bridge is on its root bus. Where
// config space is whole, the chain's roles are held to the port types.
func checkBusNumbers(t *testing.T, root *hostfs.Root, inv *pci.Inventory, tree *Tree) {
	chain := Build(nil, inv, Options{})
	checked, compared := 0, 0
	tree.Walk(func(n *Node, _ int) {
		if !n.IsFunction() || n.Parent == nil {
			return
		}
		p := n.Parent
		if p.Role == RoleHostBridge {
			if n.Address.Domain != p.Domain || n.Address.Bus != p.Bus {
				t.Errorf("%s right below %s", n.ID, p.ID)
			}
			checked++
			return
		}
		if p.Device == nil {
			return
		}
		cfg, err := pci.ReadConfig(root, p.Device)
		if err != nil || cfg.HeaderType != pci.HeaderBridge {
			return
		}
		if n.Address.Bus < cfg.SecondaryBus || n.Address.Bus > cfg.SubordinateBus {
			t.Errorf("%s below %s, whose buses are %02x-%02x", n.ID, p.ID, cfg.SecondaryBus, cfg.SubordinateBus)
		}
		checked++
	})
	tree.Walk(func(n *Node, _ int) {
		if n.RoleFrom == FromConfig && n.RoleNote == "" {
			compared++
			if c := chain.Lookup(n.Address); c.Role != n.Role {
				t.Errorf("%s: config says %v, the chain %v", n.ID, n.Role, c.Role)
			}
		}
	})
	t.Logf("%d functions, %d placements checked against bus numbers, %d roles against port types, %d root complexes",
		len(inv.Devices), checked, compared, len(tree.RootComplexes))
}
