package topo

import (
	"errors"
	"fmt"

	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// isBridge reports whether a function is a bridge: its class says so, or
// functions sit below it in sysfs (the kernel nests a function under the
// bridge whose secondary bus it is on, whatever a damaged class reads).
// A function with only a host bridge below it is not one: a VMD endpoint
// (Intel Volume Management Device, drivers/pci/controller/vmd.c) opens a
// domain of its own, a host bridge nested in the tree.
func isBridge(n *Node) bool {
	for _, c := range n.Children {
		if c.IsFunction() {
			return true
		}
	}
	d := n.Device
	if d == nil || !d.Has(pci.HasClass) {
		return false
	}
	return pci.IsBridgeClass(d.Class)
}

// assignRoles gives each function below n its role, parents first (the
// chain's answer for a child depends on its parent's role).
func (b *builder) assignRoles(n *Node) {
	if n.IsFunction() && n.Role == 0 {
		b.role(n)
	}
	for _, c := range n.Children {
		b.assignRoles(c)
	}
}

// role tells a function's role. An endpoint is whatever is not a bridge.
// A bridge's role is its PCI Express Device/Port Type (PCIe Base
// Specification 7.5.3.2; PCI_EXP_FLAGS_TYPE) when config space is
// readable that far: root port, switch upstream or downstream port,
// PCIe-to-PCI or PCI-to-PCIe bridge; a bridge with no PCI Express
// capability in a capability list read to its end is a conventional PCI
// bridge. Otherwise the chain tells it.
func (b *builder) role(n *Node) {
	if !isBridge(n) {
		n.Role = RoleEndpoint
		return
	}
	reason := "no host root to read config space from"
	if b.root != nil && n.Device != nil {
		cfg, err := pci.ReadConfig(b.root, n.Device)
		if err == nil {
			var e pci.Express
			e, err = cfg.Express()
			switch {
			case err == nil:
				if r, ok := portRole(e.Type); ok {
					n.Role, n.RoleFrom = r, FromConfig
					return
				}
				err = fmt.Errorf("the PCI Express capability gives port type %q, which is not a bridge's", e.Type)
			case errors.Is(err, pci.ErrCapAbsent):
				n.Role, n.RoleFrom = RoleBridge, FromConfig
				n.RoleNote = "no PCI Express capability: a conventional PCI bridge"
				return
			}
		}
		reason = err.Error()
		n.roleWhy = why(err)
		if errors.Is(err, pci.ErrConfigUnprivileged) {
			reason = b.headerOnly()
			n.roleWhy = reason
		}
	} else if n.Device == nil {
		reason = "the function is not listed in " + pci.DevicesDir
	}
	if n.roleWhy == "" {
		n.roleWhy = reason
	}
	n.Role, n.RoleFrom, n.RoleNote = chainRole(n), FromChain, reason
}

// headerOnly is why a bridge's config space ends at 64 bytes, in the
// terms of what can be done about it: the kernel shows a reader without
// CAP_SYS_ADMIN only the header (drivers/pci/pci-sysfs.c,
// pci_read_config). On a running kernel's sysfs that reader is this
// process; a capture was taken that way, whoever reads it now.
func (b *builder) headerOnly() string {
	if b.capture == nil {
		c := !b.root.LiveSysfs()
		b.capture = &c
	}
	if *b.capture {
		return "the capture holds only the first 64 bytes of config space: it was taken without CAP_SYS_ADMIN, " +
			"and the kernel shows such a reader no more (drivers/pci/pci-sysfs.c, pci_read_config); " +
			"take it again as root (`accel-doctor snapshot`) for the port types"
	}
	return "config space beyond the first 64 bytes is readable only with CAP_SYS_ADMIN " +
		"(drivers/pci/pci-sysfs.c, pci_read_config): run accel-doctor as root for the port types"
}

// why is a config space error without the path it names, so that the
// tree's notes count the bridges that share a reason (a header-only
// config space is headerOnly's).
func why(err error) string {
	var ae *pci.AttrError
	var ce *pci.ConfigError
	switch {
	case errors.As(err, &ae):
		return "their config attribute is " + ae.Problem.String()
	case errors.As(err, &ce):
		return "their config space is " + ce.Problem.String()
	}
	return err.Error()
}

// portRole maps a bridge's Device/Port Type to its role.
func portRole(t pci.PortType) (Role, bool) {
	switch t {
	case pci.PortRoot:
		return RoleRootPort, true
	case pci.PortUpstream:
		return RoleSwitchUpstream, true
	case pci.PortDownstream:
		return RoleSwitchDownstream, true
	case pci.PortPCIeToPCI, pci.PortPCIToPCIe:
		return RoleBridge, true
	}
	return 0, false
}

// chainRole tells a bridge's role by what is above and below it, as PCI
// Express builds the hierarchy: the bridges on a root complex's root bus
// are its root ports; a bridge on the link below a root port or a
// switch's downstream port, with bridges below it, is a switch's upstream
// port (a link has one upstream and one downstream end, PCIe Base
// Specification 1.3; a switch's internal bus holds the virtual bridges of
// its downstream ports); the bridges on an upstream port's internal bus
// are that switch's downstream ports. NCCL reads sysfs the same way,
// climbing two directories at a time to go from a device past a switch
// (src/graph/xml.cc, ncclTopoGetXmlFromSys). A bridge below a port with
// no bridge below it is a plain bridge (a PCIe-to-PCI bridge such as a
// BMC's); below a plain bridge there are no PCIe ports. What the chain
// cannot tell: a conventional PCI bridge on a root bus (a VM's
// pci-bridge, a chipset's PCI bridge) reads as a root port. Either way
// the affinity classes do not change: a switch and a bridge are one unit
// each on a path (affinity.go).
func chainRole(n *Node) Role {
	parent := n.Parent
	if parent == nil {
		return RoleBridge
	}
	switch parent.Role {
	case RoleHostBridge:
		return RoleRootPort
	case RoleRootPort, RoleSwitchDownstream:
		for _, c := range n.Children {
			if c.IsFunction() && isBridge(c) {
				return RoleSwitchUpstream
			}
		}
		return RoleBridge
	case RoleSwitchUpstream:
		return RoleSwitchDownstream
	}
	return RoleBridge
}
