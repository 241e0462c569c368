package topo

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const hosts = "../../testdata/hosts/"

func addr(t testing.TB, s string) pci.Address {
	t.Helper()
	a, err := pci.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func readFixture(t testing.TB, name string, o Options) *Tree {
	t.Helper()
	tree, _, err := Read(hostfs.MustNew(hosts+name), o)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func node(t testing.TB, tree *Tree, s string) *Node {
	t.Helper()
	n := tree.Lookup(addr(t, s))
	if n == nil {
		t.Fatalf("%s is not in the tree", s)
	}
	return n
}

// fn describes a synthetic function: its sysfs path below /sys/devices
// ("pci0000:00/0000:00:01.0/0000:01:00.0"), class and numa_node.
type fn struct {
	path  string
	class uint32
	numa  int
}

// synthetic builds an inventory the way pci.Scan would fill it from a
// tree, without a tree: for the cases no fixture holds.
func synthetic(t testing.TB, fns ...fn) *pci.Inventory {
	t.Helper()
	inv := &pci.Inventory{}
	for _, f := range fns {
		a := addr(t, path.Base(f.path))
		numa := f.numa
		d := &pci.Device{Address: a, BusPath: path.Join(pci.DevicesDir, a.String()), Path: "/sys/devices/" + f.path,
			Class: f.class, Present: pci.HasClass, NUMANode: &numa}
		if strings.HasPrefix(f.path, "/") {
			d.Path = f.path
		}
		inv.Devices = append(inv.Devices, d)
	}
	return inv
}

const (
	bridge = 0x060400
	gpu    = 0x030200
	ib     = 0x020700
	nvme   = 0x010802
	vmd    = 0x010400
)

// TestRolesFromConfig: gpu4-switch-noacs has whole config spaces, so
// every bridge's role is its PCI Express port type; the switch is its
// upstream port and four downstream ports, and IOMMU group 3 holds the
// ports and the GPUs.
func TestRolesFromConfig(t *testing.T) {
	tree := readFixture(t, "gpu4-switch-noacs", Options{})
	want := map[string]Role{
		"0000:00:00.0": RoleEndpoint, "0000:00:01.0": RoleRootPort, "0000:00:02.0": RoleRootPort,
		"0000:01:00.0": RoleSwitchUpstream, "0000:02:00.0": RoleSwitchDownstream, "0000:02:03.0": RoleSwitchDownstream,
		"0000:03:00.0": RoleEndpoint, "0000:10:00.0": RoleEndpoint,
	}
	for a, r := range want {
		n := node(t, tree, a)
		if n.Role != r {
			t.Errorf("%s: role %v, want %v", a, n.Role, r)
		}
		if n.IsBridgeRole() && n.RoleFrom != FromConfig {
			t.Errorf("%s: role from %v (%s), want config", a, n.RoleFrom, n.RoleNote)
		}
	}
	if len(tree.Switches) != 1 || tree.Switches[0].Upstream.ID != "0000:01:00.0" || len(tree.Switches[0].Downstream) != 4 {
		t.Fatalf("switches: %+v", tree.Switches)
	}
	if len(tree.RootComplexes) != 1 || tree.RootComplexes[0].HostBridge.ID != "pci0000:00" || tree.RootComplexes[0].NUMA == nil {
		t.Fatalf("root complexes: %+v", tree.RootComplexes)
	}
	var g3 []string
	for _, g := range tree.Groups {
		if g.ID == 3 {
			for _, m := range g.Members {
				g3 = append(g3, m.ID)
			}
		}
	}
	if len(g3) != 8 || g3[0] != "0000:02:00.0" || g3[7] != "0000:06:00.0" {
		t.Errorf("group 3: %v", g3)
	}
	if n := node(t, tree, "0000:03:00.0"); n.Accelerator != pci.KindGPU || n.NIC {
		t.Errorf("L40S: accelerator %q nic %v", n.Accelerator, n.NIC)
	}
	if n := node(t, tree, "0000:10:00.0"); !n.NIC || n.Accelerator != "" {
		t.Errorf("ConnectX-7: accelerator %q nic %v", n.Accelerator, n.NIC)
	}
	for _, n := range tree.Notes {
		t.Errorf("unexpected note: %s", n)
	}
}

// TestChainAgreesWithConfig: on every fixture whose bridges have whole
// config spaces, the chain (a nil root reads no config) tells the same
// roles as the port types.
func TestChainAgreesWithConfig(t *testing.T) {
	for _, h := range []string{"gpu4-switch-noacs", "gpu4-switch-acs", "gpu-audio-snd-hda-intel", "hgx-h100x8-vfio", "iommu-off-sm-on"} {
		t.Run(h, func(t *testing.T) {
			root := hostfs.MustNew(hosts + h)
			inv, err := pci.Scan(root)
			if err != nil {
				t.Fatal(err)
			}
			cfg, chain := Build(root, inv, Options{}), Build(nil, inv, Options{})
			bridges := 0
			cfg.Walk(func(n *Node, _ int) {
				if !n.IsFunction() {
					return
				}
				if n.IsBridgeRole() {
					bridges++
					if n.RoleFrom != FromConfig {
						t.Errorf("%s: role from %v: %s", n.ID, n.RoleFrom, n.RoleNote)
					}
				}
				c := chain.Lookup(n.Address)
				if c.Role != n.Role {
					t.Errorf("%s: chain says %v, config %v", n.ID, c.Role, n.Role)
				}
				if c.IsBridgeRole() && c.RoleFrom != FromChain {
					t.Errorf("%s: nil root, role from %v", n.ID, c.RoleFrom)
				}
			})
			if bridges == 0 {
				t.Fatal("no bridge")
			}
		})
	}
}

// TestRolesFromChainUnprivileged: nvidia-h100x8 keeps 64 bytes of config,
// what a reader without CAP_SYS_ADMIN gets: every role comes from the
// chain, says why, and the BMC's PCIe-to-PCI bridge (nothing bridged
// below it) is a plain bridge, not a switch.
func TestRolesFromChainUnprivileged(t *testing.T) {
	tree := readFixture(t, "nvidia-h100x8", Options{})
	chained := 0
	tree.Walk(func(n *Node, _ int) {
		if !n.IsBridgeRole() {
			return
		}
		chained++
		if n.RoleFrom != FromChain || !strings.Contains(n.RoleNote, "CAP_SYS_ADMIN") {
			t.Errorf("%s: from %v, note %q", n.ID, n.RoleFrom, n.RoleNote)
		}
	})
	if chained != 33 {
		t.Errorf("%d bridges told by the chain, want 33", chained)
	}
	for a, r := range map[string]Role{"0000:15:01.0": RoleRootPort, "0000:16:00.0": RoleSwitchUpstream,
		"0000:17:01.0": RoleSwitchDownstream, "0000:07:00.0": RoleBridge, "0000:08:00.0": RoleEndpoint} {
		if n := node(t, tree, a); n.Role != r {
			t.Errorf("%s: %v, want %v", a, n.Role, r)
		}
	}
	if len(tree.Switches) != 9 {
		t.Errorf("%d switches, want 9 (the NVSwitch tray's and one per GPU)", len(tree.Switches))
	}
	found := false
	for _, n := range tree.Notes {
		found = found || strings.Contains(n, "33 bridge role(s) told by their place in the chain")
	}
	if !found {
		t.Errorf("notes %q lack the chain summary", tree.Notes)
	}
}

// TestHeaderOnlyNoteSaysWhoseLimit: a 64-byte config space is the
// kernel's answer to a reader without CAP_SYS_ADMIN. In a capture (a
// snapshot, a fixture tree) that reader was whoever took it: the notes
// say so and to take it again as root, never that this process lacks the
// capability; on a running kernel's sysfs the reader is this process:
// run as root.
func TestHeaderOnlyNoteSaysWhoseLimit(t *testing.T) {
	const capture, again, live = "the capture holds only the first 64 bytes of config space", "take it again as root", "run accel-doctor as root"
	tree := readFixture(t, "nvidia-h100x8", Options{})
	tree.Walk(func(n *Node, _ int) {
		if n.RoleFrom == FromChain && (!strings.Contains(n.RoleNote, capture) || !strings.Contains(n.RoleNote, again) || strings.Contains(n.RoleNote, live)) {
			t.Errorf("%s: note %q", n.ID, n.RoleNote)
		}
	})
	summary := ""
	for _, n := range tree.Notes {
		if strings.Contains(n, "told by their place in the chain") {
			summary = n
		}
	}
	if !strings.Contains(summary, "33 bridge role(s) told by their place in the chain: "+capture) || !strings.Contains(summary, again) ||
		strings.Contains(summary, "not readable without CAP_SYS_ADMIN") {
		t.Errorf("capture's summary %q", summary)
	}
	// No live host can be made to show a bridge's header only (a root
	// reader sees it whole, and this machine may have no bridge): the
	// live root's words, as role() gives them to each bridge.
	b := &builder{root: hostfs.MustNew("/")}
	if w := b.headerOnly(); !strings.Contains(w, live) || !strings.Contains(w, "CAP_SYS_ADMIN") || strings.Contains(w, "capture") {
		t.Errorf("live host's note %q", w)
	}
}

// TestMatrixH100x8: the HGX-shaped fixture has one GPU per switch, one
// ConnectX-7 beside GPU0, four root complexes per NUMA node.
func TestMatrixH100x8(t *testing.T) {
	tree := readFixture(t, "nvidia-h100x8", Options{LocalCPUs: true})
	m := tree.Matrix()
	want := []string{"GPU0", "GPU1", "GPU2", "GPU3", "GPU4", "GPU5", "GPU6", "GPU7", "NIC0"}
	if strings.Join(m.Labels, " ") != strings.Join(want, " ") {
		t.Fatalf("labels %v", m.Labels)
	}
	// The NVSwitches (class 0680) are fabric, not devices of the matrix.
	for _, d := range m.Devices {
		if d.Device.Class>>8 == 0x0680 {
			t.Errorf("%s: NVSwitch in the matrix", d.ID)
		}
	}
	cls := func(i, j int) Class { return m.Classes[i][j] }
	for i := range m.Devices {
		if cls(i, i) != ClassSelf {
			t.Errorf("%s to itself: %v", m.Labels[i], cls(i, i))
		}
		for j := range m.Devices {
			if cls(i, j) != cls(j, i) {
				t.Errorf("%s-%s %v but %s-%s %v", m.Labels[i], m.Labels[j], cls(i, j), m.Labels[j], m.Labels[i], cls(j, i))
			}
		}
	}
	for _, c := range []struct {
		i, j int
		want Class
	}{
		{0, 8, ClassPIX},  // GPU0 and the NIC: two downstream ports of one switch
		{1, 8, ClassNODE}, // another root complex, node 0
		{0, 3, ClassNODE},
		{0, 4, ClassSYS}, // node 0 to node 1
		{4, 7, ClassNODE},
		{8, 5, ClassSYS},
	} {
		if got := cls(c.i, c.j); got != c.want {
			t.Errorf("%s-%s: %v, want %v", m.Labels[c.i], m.Labels[c.j], got, c.want)
		}
	}
	if c := m.Devices[0].LocalCPUs(); c != "0-55,112-167" {
		t.Errorf("GPU0 CPUs %q", c)
	}
	if len(m.LeftOut) != 0 {
		t.Errorf("left out %d", len(m.LeftOut))
	}
}

// TestMatrixLeavesOutVFs: hgx-h100x8-vfio has 16 ConnectX-7 VFs; they
// stay out of the matrix, their PFs in.
func TestMatrixLeavesOutVFs(t *testing.T) {
	tree := readFixture(t, "hgx-h100x8-vfio", Options{})
	m := tree.Matrix()
	if len(m.Devices) != 10 || len(m.LeftOut) != 16 {
		t.Fatalf("%d devices, %d left out; want 10 and 16", len(m.Devices), len(m.LeftOut))
	}
	if m.Labels[8] != "NIC0" || m.Devices[8].ID != "0000:19:00.0" || m.Classes[0][8] != ClassPIX || m.Classes[1][9] != ClassPIX {
		t.Errorf("NICs: %v %v %v", m.Labels, m.Classes[0], m.Classes[1])
	}
	for _, n := range m.LeftOut {
		if n.Parent != node(t, tree, "0000:19:00.0").Parent && n.Parent != node(t, tree, "0000:2b:00.0").Parent {
			t.Errorf("VF %s under %s, not beside its PF", n.ID, n.Parent.ID)
		}
	}
}

// TestAffinityClasses covers the paths no fixture holds.
func TestAffinityClasses(t *testing.T) {
	inv := synthetic(t,
		// A DGX-2-like cascade: root port, switch A, two leaf switches
		// B and C, two GPUs each; a NIC on B.
		fn{"pci0000:2b/0000:2b:00.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0/0000:32:00.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0/0000:32:00.0/0000:33:00.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0/0000:32:00.0/0000:33:00.0/0000:34:00.0", gpu, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0/0000:32:00.0/0000:33:08.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0/0000:32:00.0/0000:33:08.0/0000:35:00.0", ib, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0/0000:32:00.0/0000:33:10.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:04.0/0000:32:00.0/0000:33:10.0/0000:36:00.0", gpu, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:0c.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:0c.0/0000:37:00.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:0c.0/0000:37:00.0/0000:38:00.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:00.0/0000:2c:00.0/0000:2d:0c.0/0000:37:00.0/0000:38:00.0/0000:39:00.0", gpu, 0},
		// A dual-port NIC straight below a second root port.
		fn{"pci0000:2b/0000:2b:02.0", bridge, 0},
		fn{"pci0000:2b/0000:2b:02.0/0000:3c:00.0", ib, 0},
		fn{"pci0000:2b/0000:2b:02.0/0000:3c:00.1", ib, 0},
		// Another root complex on node 0, one on node 1, one on no node.
		fn{"pci0000:4e/0000:4e:00.0", bridge, 0},
		fn{"pci0000:4e/0000:4e:00.0/0000:4f:00.0", gpu, 0},
		fn{"pci0000:ae/0000:ae:00.0", bridge, 1},
		fn{"pci0000:ae/0000:ae:00.0/0000:af:00.0", gpu, 1},
		fn{"pci0000:d0/0000:d0:00.0", bridge, -1},
		fn{"pci0000:d0/0000:d0:00.0/0000:d1:00.0", gpu, -1},
		// A VMD domain nested in root complex 0000:00 (an endpoint that
		// opens host bridge 10000:e0), beside a root port of its own.
		fn{"pci0000:00/0000:00:0e.5", vmd, 0},
		fn{"pci0000:00/0000:00:0e.5/pci10000:e0/10000:e0:06.0", bridge, 0},
		fn{"pci0000:00/0000:00:0e.5/pci10000:e0/10000:e0:06.0/10000:e1:00.0", nvme, 0},
		fn{"pci0000:00/0000:00:0e.5/pci10000:e0/10000:e0:07.0", bridge, 0},
		fn{"pci0000:00/0000:00:0e.5/pci10000:e0/10000:e0:07.0/10000:e2:00.0", nvme, 0},
		fn{"pci0000:00/0000:00:01.0", bridge, 0},
		fn{"pci0000:00/0000:00:01.0/0000:01:00.0", gpu, 0},
		// A function whose link did not resolve: no place.
		fn{"/sys/bus/pci/devices/0000:f0:00.0", gpu, 0},
	)
	tree := Build(nil, inv, Options{})
	for _, c := range []struct {
		a, b string
		want Class
	}{
		{"0000:34:00.0", "0000:34:00.0", ClassSelf},
		{"0000:34:00.0", "0000:36:00.0", ClassPIX}, // one leaf switch
		{"0000:34:00.0", "0000:35:00.0", ClassPIX}, // GPU and NIC on one leaf switch: GPUDirect RDMA's best
		{"0000:34:00.0", "0000:39:00.0", ClassPXB}, // leaf B, switch A, leaf C
		{"0000:3c:00.0", "0000:3c:00.1", ClassPIX}, // two ports of one NIC
		{"0000:34:00.0", "0000:3c:00.0", ClassPHB}, // different root ports
		{"0000:34:00.0", "0000:4f:00.0", ClassNODE},
		{"0000:34:00.0", "0000:af:00.0", ClassSYS},
		{"0000:34:00.0", "0000:d1:00.0", ClassUnknown}, // node unknown, NUMA nodes unknown
		{"10000:e1:00.0", "10000:e2:00.0", ClassPHB},   // two root ports of the VMD domain
		{"10000:e1:00.0", "0000:01:00.0", ClassPHB},    // through the VMD's host bridge and 0000:00's
		{"0000:f0:00.0", "0000:34:00.0", ClassUnknown},
	} {
		if got := tree.Affinity(node(t, tree, c.a), node(t, tree, c.b)); got != c.want {
			t.Errorf("%s-%s: %v, want %v", c.a, c.b, got, c.want)
		}
		if got := tree.Affinity(node(t, tree, c.b), node(t, tree, c.a)); got != c.want {
			t.Errorf("%s-%s: %v, want %v", c.b, c.a, got, c.want)
		}
	}
	for a, r := range map[string]Role{"0000:2c:00.0": RoleSwitchUpstream, "0000:2d:04.0": RoleSwitchDownstream,
		"0000:32:00.0": RoleSwitchUpstream, "0000:33:08.0": RoleSwitchDownstream, "0000:2b:02.0": RoleRootPort,
		"0000:00:0e.5": RoleEndpoint, "10000:e0:06.0": RoleRootPort, "0000:f0:00.0": RoleEndpoint} {
		if n := node(t, tree, a); n.Role != r {
			t.Errorf("%s: %v, want %v", a, n.Role, r)
		}
	}
	// One host: a single online node makes every root complex NODE.
	tree.NUMAKnown, tree.NUMANodes = true, []NUMANode{{ID: 0}}
	if got := tree.Affinity(node(t, tree, "0000:34:00.0"), node(t, tree, "0000:d1:00.0")); got != ClassNODE {
		t.Errorf("one NUMA node: %v, want NODE", got)
	}
	// The nested domain belongs to its outer root complex.
	if rc := node(t, tree, "10000:e1:00.0").RootComplex; rc == nil || rc.HostBridge.ID != "pci0000:00" {
		t.Errorf("VMD NVMe root complex %+v", rc)
	}
	if len(tree.Roots) != 6 || tree.Roots[5].ID != "0000:f0:00.0" {
		t.Errorf("roots: %d, last %s", len(tree.Roots), tree.Roots[len(tree.Roots)-1].ID)
	}
	if !strings.Contains(strings.Join(tree.Notes, "\n"), "0000:f0:00.0: no host bridge in its sysfs path") {
		t.Errorf("notes %q", tree.Notes)
	}
}

// TestNUMAConflict: functions of one root complex naming two nodes leave
// the root complex's node unknown and say so; each keeps its own.
func TestNUMAConflict(t *testing.T) {
	tree := Build(nil, synthetic(t,
		fn{"pci0000:00/0000:00:01.0", bridge, 0},
		fn{"pci0000:00/0000:00:01.0/0000:01:00.0", gpu, 1},
		fn{"pci0000:00/0000:00:02.0", bridge, -1},
	), Options{})
	rc := tree.RootComplexes[0]
	if rc.NUMA != nil || len(rc.NUMAConflict) != 2 {
		t.Fatalf("root complex NUMA %v conflict %v", rc.NUMA, rc.NUMAConflict)
	}
	if n := node(t, tree, "0000:01:00.0"); n.NUMA == nil || *n.NUMA != 1 {
		t.Errorf("GPU NUMA %v", n.NUMA)
	}
	if n := node(t, tree, "0000:00:02.0"); n.NUMA != nil {
		t.Errorf("port without a node: %v", *n.NUMA)
	}
	if !strings.Contains(strings.Join(tree.Notes, "\n"), "name NUMA nodes 0-1") {
		t.Errorf("notes %q", tree.Notes)
	}
}

// TestFailingAndInterfaces: failing subjects mark their nodes (PCI
// addresses in any spelling; other subjects are ignored), and a NIC's
// net/ and infiniband/ entries name it.
func TestFailingAndInterfaces(t *testing.T) {
	dir := t.TempDir()
	dev := "/sys/devices/pci0000:00/0000:00:02.0/0000:10:00.0"
	testutil.WriteTree(t, dir, map[string]string{
		"/sys/devices/pci0000:00/0000:00:02.0/class":  "0x060400\n",
		"/sys/devices/pci0000:00/0000:00:02.0/vendor": "0x8086\n",
		"/sys/devices/pci0000:00/0000:00:02.0/device": "0x352a\n",
		dev + "/class":                           "0x020700\n",
		dev + "/vendor":                          "0x15b3\n",
		dev + "/device":                          "0x1021\n",
		dev + "/numa_node":                       "0\n",
		dev + "/net/ibp16s0/type":                "32\n",
		dev + "/infiniband/mlx5_0/node_type":     "1: CA\n",
		"/sys/devices/system/node/online":        "0\n",
		"/sys/devices/system/node/node0/cpulist": "0-3\n",
	}, map[string]string{
		"/sys/bus/pci/devices/0000:00:02.0": "../../../devices/pci0000:00/0000:00:02.0",
		"/sys/bus/pci/devices/0000:10:00.0": "../../../devices/pci0000:00/0000:00:02.0/0000:10:00.0",
	}, "")
	tree, _, err := Read(hostfs.MustNew(dir), Options{Failing: []string{"10:00.0", "/dev/nvidia0", "host"}})
	if err != nil {
		t.Fatal(err)
	}
	n := node(t, tree, "0000:10:00.0")
	if !n.Failing || node(t, tree, "0000:00:02.0").Failing {
		t.Errorf("failing: NIC %v, port %v", n.Failing, node(t, tree, "0000:00:02.0").Failing)
	}
	if strings.Join(n.Interfaces, " ") != "mlx5_0 ibp16s0" || !n.NIC {
		t.Errorf("interfaces %v nic %v", n.Interfaces, n.NIC)
	}
	if !tree.NUMAKnown || len(tree.NUMANodes) != 1 || tree.NUMANodes[0].CPUs != "0-3" {
		t.Errorf("NUMA nodes %+v known %v", tree.NUMANodes, tree.NUMAKnown)
	}
	// No config file: the port's role is the chain's, with the reason.
	if p := node(t, tree, "0000:00:02.0"); p.Role != RoleRootPort || p.RoleFrom != FromChain || !strings.Contains(p.RoleNote, "config") {
		t.Errorf("port: %v from %v (%s)", p.Role, p.RoleFrom, p.RoleNote)
	}
}

// TestMark: a FAIL outranks a WARN on the same function; Mark, for
// checks that end after the tree is built, marks as Options does and
// clears what it does not name.
func TestMark(t *testing.T) {
	tree := readFixture(t, "nvidia-h100x8", Options{Failing: []string{"5d:00.0"}, Warning: []string{"0000:5d:00.0", "0000:ab:00.0", "pci0000:97"}})
	marks := func() map[string]string {
		got := map[string]string{}
		tree.Walk(func(n *Node, _ int) {
			switch {
			case n.Failing && n.Warning:
				got[n.ID] = "both"
			case n.Failing:
				got[n.ID] = "FAIL"
			case n.Warning:
				got[n.ID] = "WARN"
			}
		})
		return got
	}
	if got, want := marks(), map[string]string{"0000:5d:00.0": "FAIL", "0000:ab:00.0": "WARN", "pci0000:97": "WARN"}; !maps.Equal(got, want) {
		t.Errorf("Options marks %v, want %v", got, want)
	}
	tree.Mark([]string{"0000:18:00.0"}, []string{"18:00.0", "0000:2a:00.0"})
	if got, want := marks(), map[string]string{"0000:18:00.0": "FAIL", "0000:2a:00.0": "WARN"}; !maps.Equal(got, want) {
		t.Errorf("Mark %v, want %v", got, want)
	}
}

func TestParseHostBridge(t *testing.T) {
	for _, c := range []struct {
		in  string
		dom uint32
		bus uint8
		ok  bool
	}{
		{"pci0000:17", 0, 0x17, true},
		{"pci10000:e0", 0x10000, 0xe0, true},
		{"pcic1a4b:00", 0xc1a4b, 0, true},
		{"pci000:17", 0, 0, false},
		{"pci0000:1", 0, 0, false},
		{"pci0000:+1", 0, 0, false},
		{"pci0000:17:00.0", 0, 0, false},
		{"0000:17:00.0", 0, 0, false},
		{"pci_bus", 0, 0, false},
	} {
		dom, bus, ok := parseHostBridge(c.in)
		if ok != c.ok || ok && (dom != c.dom || bus != c.bus) {
			t.Errorf("%q: %x %x %v", c.in, dom, bus, ok)
		}
	}
}

func TestFormatList(t *testing.T) {
	for in, want := range map[string]string{"0-3,8": "0-3,8", "5,1,2,3": "1-3,5", "": "", "7,7,8": "7-8", "0-55,112-167": "0-55,112-167"} {
		v, err := pci.ParseList(in)
		if err != nil && in != "" {
			t.Fatal(err)
		}
		if got := FormatList(v); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// FuzzBuild feeds Build sysfs paths a capture could hold: it must never
// panic or loop, and every function must end in the tree once.
func FuzzBuild(f *testing.F) {
	f.Add("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:00/0000:00:01.0", uint32(bridge))
	f.Add("pci0000:00/0000:00:0e.5/pci10000:e0/10000:e0:06.0", "/sys/bus/pci/devices/x", uint32(gpu))
	f.Add("a/b/pci0000:00/junk/0000:00:01.0", "pci0000:00/0000:00:01.0/0000:00:01.0", uint32(0))
	f.Fuzz(func(t *testing.T, p1, p2 string, class uint32) {
		var devs []*pci.Device
		for i, p := range []string{p1, p2} {
			a := pci.Address{Bus: uint8(i), Dev: 1}
			devs = append(devs, &pci.Device{Address: a, Path: "/sys/devices/" + p + "/" + a.String(), Class: class, Present: pci.HasClass})
		}
		tree := Build(nil, &pci.Inventory{Devices: devs}, Options{})
		seen := map[*Node]int{}
		tree.Walk(func(n *Node, depth int) {
			seen[n]++
			if depth > 4096 {
				t.Fatal("depth")
			}
		})
		for _, d := range devs {
			n := tree.Lookup(d.Address)
			if n == nil || seen[n] != 1 {
				t.Fatalf("%s: node %v seen %d", d.Address, n, seen[n])
			}
		}
		m := tree.Matrix()
		for i := range m.Devices {
			if m.Classes[i][i] != ClassSelf {
				t.Fatal("self")
			}
		}
	})
}

// shown is what a tree shows of a host (what the renderers and the matrix
// read), as text.
func shown(t *Tree) string {
	var sb strings.Builder
	t.Walk(func(n *Node, depth int) {
		fmt.Fprintf(&sb, "%*s%s %v %v %q sw=%v numa=%v accel=%q nic=%v if=%q fail=%v\n", depth*2, "", n.ID, n.Role, n.RoleFrom,
			n.RoleNote, n.Switch != nil, deref(n.NUMA), n.Accelerator, n.NIC, n.Interfaces, n.Failing)
		if d := n.Device; d != nil {
			l := d.Link
			fmt.Fprintf(&sb, "%*s  %s %06x %q %q %q drv=%q iommu=%v vf=%v numa=%v cpus=%q link=%v/%v x%v/x%v %q %q\n", depth*2, "",
				d.IDString(), d.Class, d.VendorName, d.DeviceName, d.ClassName, d.Driver, deref(d.IOMMUGroup), d.IsVF(),
				deref(d.NUMANode), n.LocalCPUs(), l.CurrentSpeed, l.MaxSpeed, deref(l.CurrentWidth), deref(l.MaxWidth),
				l.CurrentWidthRaw, l.MaxWidthRaw)
		}
	})
	fmt.Fprintf(&sb, "notes %q\nnuma %v %v %v\n", t.Notes, t.NUMANodes, t.NUMAKnown, t.NUMAErr)
	for _, g := range t.Groups {
		fmt.Fprintf(&sb, "group %d:", g.ID)
		for _, m := range g.Members {
			fmt.Fprintf(&sb, " %s", m.ID)
		}
		sb.WriteString("\n")
	}
	m := t.Matrix()
	for i, row := range m.Classes {
		fmt.Fprintf(&sb, "%s %v\n", m.Labels[i], row)
	}
	return sb.String()
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestReadShowsWhatTheWholeScanShows: Read scans only Fields (and the
// local CPUs when asked), and the tree it builds shows every fixture host
// exactly as a tree built from the whole inventory does (without the local
// CPUs when they were not asked for).
func TestReadShowsWhatTheWholeScanShows(t *testing.T) {
	syss, _ := filepath.Glob(hosts + "*/sys")
	if len(syss) < 3 {
		t.Fatal("no fixture hosts")
	}
	for _, s := range syss {
		checkReadFields(t, filepath.Dir(s))
	}
}

func checkReadFields(t *testing.T, dir string) {
	t.Helper()
	root := hostfs.MustNew(dir)
	full, err := pci.Scan(root)
	if err != nil {
		return // no PCI bus: Read fails the same way
	}
	o := Options{Failing: []string{"0000:00:00.0"}}
	want := shown(Build(root, full, o))
	// Without the local CPUs, the tree is the whole scan's with none.
	noCPUs := *full
	noCPUs.Devices = nil
	for _, d := range full.Devices {
		c := *d
		c.LocalCPUs, c.LocalCPUMask = "", ""
		noCPUs.Devices = append(noCPUs.Devices, &c)
	}
	wantNoCPUs := shown(Build(root, &noCPUs, o))
	for _, c := range []struct {
		cpus   bool
		fields pci.Fields
		want   string
	}{
		{false, Fields, wantNoCPUs},
		{true, Fields | pci.FieldLocalCPUs, want},
	} {
		o.LocalCPUs = c.cpus
		tree, inv, err := Read(root, o)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if inv.Fields != c.fields {
			t.Errorf("%s: Read scanned %b, not %b", dir, inv.Fields, c.fields)
		}
		if got := shown(tree); got != c.want {
			t.Errorf("%s, local CPUs %v: the tree of Read differs from the whole scan's:\n%s\nwant\n%s", filepath.Base(dir), c.cpus, got, c.want)
		}
		if fmt.Sprint(inv.Errors) != fmt.Sprint(full.Errors) {
			t.Errorf("%s: scan errors %v, the whole scan's %v", filepath.Base(dir), inv.Errors, full.Errors)
		}
	}
}

// FuzzParseHostBridge asserts of the host bridge name parser ("pciDDDD:BB",
// pci_register_host_bridge's "pci%04x:%02x"):
//   - a name it reads is exactly "pci", 4 to 8 hex digits of domain, ':'
//     and 2 of bus, the values it gives spelt out (up to case);
//   - the kernel's spelling of those values parses back to them (round
//     trip);
//   - any other path component (a function's address, pci_bus, garbage)
//     is not a host bridge, never a panic.
func FuzzParseHostBridge(f *testing.F) {
	for _, s := range []string{"pci0000:00", "pci0000:17", "pci10000:e0", "pcic1a4b:00", "pciffffffff:ff", "pci100000000:00", "pci0000:1", "pci0000:+1", "pci-000:01", "pci0x00:00", "0000:17:00.0", "pci_bus", "pci0000:17:00.0"} {
		f.Add(s)
	}
	dirs, _ := filepath.Glob(hosts + "*/sys/devices/pci*")
	for _, d := range dirs[:min(3, len(dirs))] {
		f.Add(filepath.Base(d))
	}
	names := map[string]bool{}
	testutil.CorpusSeeds(f, "hwloc/linux/2pa-pcidomain32bits.tar.bz2", func(p string) bool {
		for _, c := range strings.Split(p, "/") {
			if strings.HasPrefix(c, "pci") {
				names[c] = true
			}
		}
		return false
	})
	for _, n := range slices.Sorted(maps.Keys(names)) {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dom, bus, ok := parseHostBridge(s)
		if !ok {
			if dom != 0 || bus != 0 {
				t.Fatalf("%q: not a host bridge, but %x:%x", s, dom, bus)
			}
			return
		}
		if n := len(s) - len("pci:00"); n < 4 || n > 8 || !strings.EqualFold(s, fmt.Sprintf("pci%0*x:%02x", n, dom, bus)) {
			t.Fatalf("%q read as domain %x, bus %x", s, dom, bus)
		}
		kernel := fmt.Sprintf("pci%04x:%02x", dom, bus)
		if d2, b2, ok := parseHostBridge(kernel); !ok || d2 != dom || b2 != bus {
			t.Fatalf("%x:%x, written %q, parsed back as %x:%x %v", dom, bus, kernel, d2, b2, ok)
		}
	})
}
