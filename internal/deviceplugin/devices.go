package deviceplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/devnode"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// Device is one device of a resource as the plugin sees it.
type Device struct {
	ID string
	// PCI is the function's address (PCI selector, or the PCI device a
	// selected node belongs to); nil when there is none.
	PCI *pci.Address
	// Sysfs is the device's resolved directory under /sys/devices; ""
	// when unknown.
	Sysfs string
	// Nodes are the device's own nodes, given with it alone.
	Nodes []Node
	// Shared are nodes the device needs that other devices share
	// (/dev/nvidiactl, /dev/nvidia-uvm, /dev/vfio/vfio): given once per
	// container however many devices it gets.
	Shared []Node
	// NUMA is the device's NUMA node, -1 when the kernel says none
	// (NUMA_NO_NODE) or does not say.
	NUMA int
	// HostBridge is the PCI root ("pci0000:17") the device hangs from and
	// Bridges the functions between it and the device, top-down: the
	// PCIe tree that GetPreferredAllocation measures distance on.
	HostBridge string
	Bridges    []pci.Address

	Health string // pluginapi.Healthy or pluginapi.Unhealthy
	Reason string // why Unhealthy
}

// Node is a device node a device needs.
type Node struct {
	Path  string // host path, also the path in the container
	Type  hostfs.FileType
	Major uint32
	Minor uint32
	// Known: Major and Minor are what the node must have (the kernel
	// published them); otherwise any number is accepted.
	Known bool
	// Required nodes must be present for the device to be Healthy.
	Required bool
}

func (n Node) dev() string { return fmt.Sprintf("%d:%d", n.Major, n.Minor) }

// api is the device as ListAndWatch sends it.
func (d *Device) api() *pluginapi.Device {
	out := &pluginapi.Device{ID: d.ID, Health: d.Health}
	if d.NUMA >= 0 {
		out.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMA)}}}
	}
	return out
}

// discover lists the devices a resource's selector matches now, each
// with its health. A PCI function keeps being listed (Unhealthy) after it
// loses its driver, and a node after it disappears, through the caller
// (Monitor), which keeps every device it ever listed.
func discover(root *hostfs.Root, rc *ResourceConfig) ([]*Device, error) {
	if rc.Selector.PCI != nil {
		return discoverPCI(root, rc.Selector.PCI)
	}
	return discoverNodes(root, rc.Selector.DeviceNodes)
}

func discoverPCI(root *hostfs.Root, sel *PCISelector) ([]*Device, error) {
	inv, err := pci.Scan(root)
	if err != nil {
		return nil, err
	}
	var out []*Device
	for _, pd := range inv.Devices {
		if !pd.Has(pci.HasVendor|pci.HasDevice|pci.HasClass) || !sel.match(pd.Vendor, pd.Device, pd.Class) {
			continue
		}
		a := pd.Address
		d := &Device{ID: a.String(), PCI: &a, Sysfs: pd.Path, NUMA: -1, Bridges: pd.Bridges, HostBridge: hostBridge(pd.Path)}
		if pd.NUMANode != nil && *pd.NUMANode >= 0 {
			d.NUMA = *pd.NUMANode
		}
		out = append(out, d)
	}
	return out, nil
}

// hostBridge is the "pciDDDD:BB" component of a resolved sysfs path: the
// host bridge (drivers/pci/probe.c names the root bus's device
// "pci%04x:%02x").
func hostBridge(sysfs string) string {
	for _, c := range strings.Split(strings.TrimPrefix(sysfs, "/sys/devices/"), "/") {
		if strings.HasPrefix(c, "pci") {
			return c
		}
	}
	return ""
}

// discoverNodes makes a device of every node the globs match.
func discoverNodes(root *hostfs.Root, globs []string) ([]*Device, error) {
	seen := map[string]bool{}
	var out []*Device
	var errs []error
	for _, g := range globs {
		paths, err := root.Glob(g)
		if err != nil {
			errs = append(errs, fmt.Errorf("glob %s: %w", g, err))
			continue
		}
		for _, p := range paths {
			if seen[p] {
				continue
			}
			st, err := root.Stat(p)
			if err != nil || (st.Type != hostfs.TypeChar && st.Type != hostfs.TypeBlock) {
				continue // a directory or file the glob also matched
			}
			seen[p] = true
			d := &Device{ID: nodeID(p), NUMA: -1,
				Nodes: []Node{{Path: p, Type: st.Type, Major: st.Major, Minor: st.Minor, Known: true, Required: true}}}
			locateNode(root, d, st)
			out = append(out, d)
		}
	}
	// Two paths could make one ID (/dev/a_b and /dev/a/b): the second gets
	// a suffix so that IDs stay unique, which the kubelet needs (it keys
	// devices by ID, manager.go genericDeviceUpdateCallback).
	ids := map[string]int{}
	for _, d := range out {
		if n := ids[d.ID]; n > 0 {
			ids[d.ID] = n + 1
			d.ID = fmt.Sprintf("%s-%d", d.ID, n)
		} else {
			ids[d.ID] = 1
		}
	}
	return out, errors.Join(errs...)
}

// nodeID is a device ID made from a node's path: the path below /dev with
// every character a CDI device name does not allow (pkg/parser
// ValidateDeviceName: alphanumerics, _ - . :) as '_', at most
// MaxDeviceIDLen characters.
func nodeID(p string) string {
	s := strings.TrimPrefix(p, "/dev/")
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':'
		if !ok {
			b[i] = '_'
		}
	}
	s = strings.Trim(string(b), "_-.:")
	if len(s) > MaxDeviceIDLen-4 {
		s = s[len(s)-(MaxDeviceIDLen-4):]
	}
	if s == "" {
		s = "dev"
	}
	return s
}

// locateNode finds the kernel device behind a node through
// /sys/dev/{char,block}/MAJOR:MINOR (drivers/base/core.c creates the
// link for every device with a dev_t) and, when it sits under a PCI
// function, that function's NUMA node and place in the PCIe tree.
func locateNode(root *hostfs.Root, d *Device, st hostfs.Node) {
	kind := "char"
	if st.Type == hostfs.TypeBlock {
		kind = "block"
	}
	sys, err := root.Resolve(fmt.Sprintf("/sys/dev/%s/%d:%d", kind, st.Major, st.Minor))
	if err != nil {
		return
	}
	d.Sysfs = sys
	d.HostBridge = hostBridge(sys)
	var fn *pci.Address
	var chain []pci.Address
	for _, c := range strings.Split(sys, "/") {
		if a, err := pci.ParseAddress(c); err == nil {
			if fn != nil {
				chain = append(chain, *fn)
			}
			a := a
			fn = &a
		}
	}
	if fn == nil {
		return
	}
	d.PCI, d.Bridges = fn, chain
	if s, err := root.ReadString(path.Join(pci.DevicesDir, fn.String(), "numa_node")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 0 {
			d.NUMA = n
		}
	}
}

// evaluate sets the health of a resource's devices from the host as it
// is now, and refreshes the nodes of PCI devices (a rebind to vfio-pci
// changes them).
func evaluate(root *hostfs.Root, rc *ResourceConfig, devs []*Device) {
	var pciDevs []devnode.Device
	idx := map[string]*Device{}
	drivers := map[string]string{}
	for _, d := range devs {
		d.Health, d.Reason = pluginapi.Healthy, ""
		if rc.Selector.PCI == nil {
			evaluateNode(root, d)
			continue
		}
		bus := path.Join(pci.DevicesDir, d.ID)
		if _, err := root.Lstat(bus); err != nil {
			d.Health, d.Reason = pluginapi.Unhealthy, fmt.Sprintf("sysfs entry %s is gone: %v", bus, shortErr(err))
			d.Nodes, d.Shared = nil, nil
			continue
		}
		drv := ""
		if t, err := root.Readlink(path.Join(bus, "driver")); err == nil {
			drv = path.Base(t)
		}
		switch {
		case drv == "":
			d.Health, d.Reason = pluginapi.Unhealthy, "no driver bound ("+path.Join(bus, "driver")+" absent)"
		case len(rc.Selector.PCI.Drivers) > 0 && !slices.Contains(rc.Selector.PCI.Drivers, drv):
			d.Health, d.Reason = pluginapi.Unhealthy, fmt.Sprintf("bound to %s, not to %s", drv, strings.Join(rc.Selector.PCI.Drivers, " or "))
		}
		var class uint32
		if s, err := root.ReadString(path.Join(bus, "class")); err == nil {
			v, _ := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "0x"), 16, 32)
			class = uint32(v)
		}
		var vendor uint16
		if d.PCI != nil {
			if s, err := root.ReadString(path.Join(bus, "vendor")); err == nil {
				v, _ := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "0x"), 16, 16)
				vendor = uint16(v)
			}
		}
		pciDevs = append(pciDevs, devnode.Device{Address: d.ID, Vendor: vendor, Driver: drv, Class: class, SysfsPath: d.Sysfs})
		idx[d.ID] = d
		drivers[d.ID] = drv
	}
	if len(pciDevs) == 0 {
		return
	}
	x := devnode.Expected(root, pciDevs)
	for _, d := range idx {
		d.Nodes, d.Shared = nil, nil
	}
	for _, n := range x.Nodes {
		node := Node{Path: n.Path, Type: n.Type, Major: n.Major, Minor: n.Minor, Known: n.DevKnown, Required: n.Required}
		for _, s := range n.Subjects {
			d := idx[s]
			if d == nil {
				continue
			}
			// A VFIO group node is shared only by the functions of one
			// IOMMU group, and is what a container opens to reach this
			// device: it goes with the device (in a CDI spec, in the
			// device's own edits, not the global ones every container
			// of the resource gets).
			if n.Shared && n.Kind != devnode.KindVFIOGroup {
				if n.Required {
					d.Shared = append(d.Shared, node)
				}
			} else {
				d.Nodes = append(d.Nodes, node)
			}
		}
	}
	for _, d := range idx {
		if d.Health != pluginapi.Healthy {
			continue
		}
		if rc.CDI != nil && len(d.Nodes) == 0 {
			// A CDI device is its own nodes (buildSpec): one without a
			// node cannot be declared in the spec, and a name Allocate
			// gave for it would resolve nowhere.
			d.Health, d.Reason = pluginapi.Unhealthy, fmt.Sprintf("no device node of its own (none known for its driver %s): a CDI resource declares a device by its nodes, so it is left out of the CDI spec", drivers[d.ID])
			continue
		}
		for _, n := range append(slices.Clone(d.Nodes), d.Shared...) {
			if !n.Required {
				continue
			}
			if why := nodeProblem(root, n); why != "" {
				d.Health, d.Reason = pluginapi.Unhealthy, why
				break
			}
		}
	}
}

// evaluateNode: a node device is Healthy while its node exists as a
// device and, when the kernel had a sysfs entry for it, that entry is
// still there (a node left behind after its driver unregistered the
// device opens with ENXIO).
func evaluateNode(root *hostfs.Root, d *Device) {
	n := &d.Nodes[0]
	st, err := root.Stat(n.Path)
	switch {
	case err != nil:
		d.Health, d.Reason = pluginapi.Unhealthy, fmt.Sprintf("node %s is gone: %v", n.Path, shortErr(err))
		return
	case st.Type != hostfs.TypeChar && st.Type != hostfs.TypeBlock:
		d.Health, d.Reason = pluginapi.Unhealthy, fmt.Sprintf("%s is a %s, not a device node", n.Path, st.Type)
		return
	}
	// A node recreated with other numbers (a reloaded driver's dynamic
	// major) is the same device under its new number.
	n.Type, n.Major, n.Minor = st.Type, st.Major, st.Minor
	if d.Sysfs != "" {
		kind := "char"
		if st.Type == hostfs.TypeBlock {
			kind = "block"
		}
		link := fmt.Sprintf("/sys/dev/%s/%d:%d", kind, st.Major, st.Minor)
		if _, err := root.Lstat(link); err != nil {
			d.Health, d.Reason = pluginapi.Unhealthy, fmt.Sprintf("node %s (%s) has no kernel device: %s is gone", n.Path, n.dev(), link)
		}
	}
}

// nodeProblem says why a required node is not usable, "" when it is.
func nodeProblem(root *hostfs.Root, n Node) string {
	st, err := root.Stat(n.Path)
	switch {
	case err != nil:
		return fmt.Sprintf("node %s is missing: %v", n.Path, shortErr(err))
	case st.Type != hostfs.TypeChar:
		return fmt.Sprintf("%s is a %s, not a char device", n.Path, st.Type)
	case n.Known && (st.Major != n.Major || st.Minor != n.Minor):
		return fmt.Sprintf("%s is %d:%d, the kernel says %s", n.Path, st.Major, st.Minor, n.dev())
	}
	return ""
}

func shortErr(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// sortDevices orders devices by ID (PCI addresses sort as the bus does).
func sortDevices(ds []*Device) {
	sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
}
