package iommu

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// Why a device shares its IOMMU group, from config space. The kernel
// puts a PCI device in a group of its own only if peer-to-peer DMA from
// it is forced up to the IOMMU (drivers/iommu/iommu.c, pci_device_group):
// walking from the device's bus to the root, it stops at the first bridge
// whose path to the root is ACS-enabled for REQ_ACS_FLAGS (SV, RR, CR,
// UF: pci.ACSIsolation) and otherwise joins that bridge's group; a
// multifunction device whose functions lack those controls shares one
// group (get_pci_function_alias_group). Whether one device "is
// ACS-enabled" is pci_acs_enabled (drivers/pci/pci.c): conventional PCI
// and PCI-X never are; PCIe-to-PCI bridges and root complex event
// collectors never are; root ports and switch downstream ports must
// implement ACS with the controls on (a control the capability does not
// advertise counts as hard-wired on, pci_acs_flags_enabled); endpoints,
// switch upstream ports and integrated endpoints need ACS only when they
// are multifunction.
//
// What is not modelled: device-specific ACS quirks
// (drivers/pci/quirks.c, pci_dev_acs_enabled: many Intel PCH and AMD root
// ports without an ACS capability are known to isolate), DMA aliases
// (pci_add_dma_alias quirks, PCIe-to-PCI bridges taking over their
// devices' requester ids), and the pcie_acs_override patch. The group the
// kernel made (sysfs) is the fact; this is the explanation, and says
// where it cannot be sure.

// HopState is what one device on the path contributes.
type HopState uint8

const (
	// HopIsolates: ACS with the isolation controls on.
	HopIsolates HopState = iota + 1
	// HopNotRequired: a port or function that needs no ACS to isolate
	// (a single-function endpoint or switch upstream port).
	HopNotRequired
	// HopBreaks: peer-to-peer traffic may bypass the IOMMU here.
	HopBreaks
	// HopUnknown: its config could not be read far enough to tell.
	HopUnknown
)

func (h HopState) String() string {
	switch h {
	case HopIsolates:
		return "isolates"
	case HopNotRequired:
		return "needs no ACS"
	case HopBreaks:
		return "does not isolate"
	case HopUnknown:
		return "unknown"
	}
	return "?"
}

// Hop is one device on the path from a device to its root port.
type Hop struct {
	Address pci.Address
	// Role is what the device is: "root port", "switch downstream port",
	// "multifunction endpoint", "conventional PCI bridge", ...
	Role    string
	ACS     *pci.ACS    // nil when absent or not read
	Missing pci.ACSBits // isolation controls left off (HopBreaks)
	State   HopState
	Reason  string // the evidence in a sentence
	Err     error  // the config problem behind HopUnknown
}

// Isolation is the ACS picture of one device.
type Isolation struct {
	Device pci.Address
	// Hops are the device itself when it is multifunction, then its
	// upstream bridges from the closest to the root port.
	Hops []Hop
	// Breaker is the first hop that does not isolate (nil: none found).
	Breaker *Hop
	// Unknown: a hop before any breaker could not be read, so the first
	// breaker, or whether there is one, is not known.
	Unknown bool
}

// Summary is one sentence: which hop breaks isolation and why, what
// could not be read, or that every hop isolates.
func (iso Isolation) Summary() string {
	var unknown *Hop
	for i := range iso.Hops {
		if iso.Hops[i].State == HopUnknown {
			unknown = &iso.Hops[i]
			break
		}
	}
	switch b := iso.Breaker; {
	case b != nil && unknown != nil:
		return fmt.Sprintf("%s (%s) %s: %s; %s (%s), closer to the device, could not be judged: %s",
			b.Address, b.Role, b.State, b.Reason, unknown.Address, unknown.Role, unknown.Reason)
	case b != nil:
		return fmt.Sprintf("%s (%s) %s: %s", b.Address, b.Role, b.State, b.Reason)
	case unknown != nil:
		return fmt.Sprintf("%s (%s): %s", unknown.Address, unknown.Role, unknown.Reason)
	}
	return "every device between " + iso.Device.String() + " and its root port isolates it"
}

// ConfigReader reads config spaces once each; it is safe for concurrent
// use.
type ConfigReader struct {
	root *hostfs.Root
	mu   sync.Mutex
	m    map[pci.Address]configResult
}

type configResult struct {
	c   *pci.Config
	err error
}

// NewConfigReader reads config spaces through root.
func NewConfigReader(root *hostfs.Root) *ConfigReader {
	return &ConfigReader{root: root, m: map[pci.Address]configResult{}}
}

// Config returns d's parsed config space.
func (r *ConfigReader) Config(d *pci.Device) (*pci.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x, ok := r.m[d.Address]; ok {
		return x.c, x.err
	}
	c, err := pci.ReadConfig(r.root, d)
	r.m[d.Address] = configResult{c, err}
	return c, err
}

// Isolate works out the ACS path of d, read through cr. Bridges missing
// from the inventory are hops of unknown state.
func Isolate(d *pci.Device, inv *pci.Inventory, cr *ConfigReader) Isolation {
	iso := Isolation{Device: d.Address}
	if c, err := cr.Config(d); err != nil || c.MultiFunction {
		// A device whose header cannot be read might be multifunction:
		// its own hop is then unknown.
		iso.Hops = append(iso.Hops, hop(d, c, err, true))
	}
	for i := len(d.Bridges) - 1; i >= 0; i-- {
		b := inv.Lookup(d.Bridges[i])
		if b == nil {
			iso.Hops = append(iso.Hops, Hop{Address: d.Bridges[i], Role: "bridge", State: HopUnknown,
				Reason: "in the sysfs path but not among the PCI functions read"})
			continue
		}
		c, err := cr.Config(b)
		iso.Hops = append(iso.Hops, hop(b, c, err, false))
	}
	for i := range iso.Hops {
		switch iso.Hops[i].State {
		case HopUnknown:
			iso.Unknown = true
		case HopBreaks:
			iso.Breaker = &iso.Hops[i]
		}
		if iso.Breaker != nil {
			break
		}
	}
	return iso
}

// hop judges one device as pci_acs_enabled does. self is the device
// whose isolation is asked about (only its multifunction ACS matters).
func hop(d *pci.Device, c *pci.Config, err error, self bool) Hop {
	h := Hop{Address: d.Address, Role: "device"}
	if err != nil {
		h.State, h.Err = HopUnknown, err
		h.Reason = "config space not usable: " + err.Error()
		return h
	}
	e, eerr := c.Express()
	switch {
	case errors.Is(eerr, pci.ErrCapAbsent):
		h.Role = "conventional PCI function"
		if c.HeaderType == pci.HeaderBridge {
			h.Role = "conventional PCI bridge"
		}
		h.State = HopBreaks
		h.Reason = "conventional PCI and PCI-X never isolate: every device on a shared bus can reach the others (pci_acs_enabled)"
		return h
	case eerr != nil:
		h.State, h.Err = HopUnknown, eerr
		h.Role = roleFromClass(d, c)
		h.Reason = notReadable(eerr)
		return h
	}
	h.Role = e.Type.String()
	multi := c.MultiFunction
	switch e.Type {
	case pci.PortPCIeToPCI, pci.PortPCIToPCIe, pci.PortRCEventColl:
		h.State = HopBreaks
		h.Reason = "the kernel never credits ACS to a " + e.Type.String() + " (pci_acs_enabled): devices behind it share its group"
		return h
	case pci.PortRoot, pci.PortDownstream:
		return acsHop(h, c, e.Type == pci.PortRoot)
	case pci.PortEndpoint, pci.PortLegacyEndpoint, pci.PortUpstream, pci.PortRCEndpoint:
		if multi {
			h.Role = "multifunction " + h.Role
			h = acsHop(h, c, false)
			if h.State == HopBreaks && self {
				h.Reason += "; the kernel puts the functions of such a device in one group (get_pci_function_alias_group)"
			}
			return h
		}
	}
	h.State = HopNotRequired
	h.Reason = "a single-function " + e.Type.String() + " needs no ACS (pci_acs_enabled)"
	return h
}

func roleFromClass(d *pci.Device, c *pci.Config) string {
	if c != nil && c.HeaderType == pci.HeaderBridge || d.Has(pci.HasClass) && d.Class>>8 == 0x0604 {
		return "bridge"
	}
	return "device"
}

// notReadable says why a config region could not be read, in the words
// a NOT_RUN gives.
func notReadable(err error) string {
	if errors.Is(err, pci.ErrConfigUnprivileged) {
		return "ACS not readable without CAP_SYS_ADMIN (config space beyond 64 bytes, drivers/pci/pci-sysfs.c)"
	}
	return "ACS not readable: " + err.Error()
}

// acsHop judges the ACS controls of a port or multifunction device.
func acsHop(h Hop, c *pci.Config, rootPort bool) Hop {
	acs, err := c.ACS()
	switch {
	case errors.Is(err, pci.ErrCapAbsent):
		h.State = HopBreaks
		h.Reason = "no ACS capability"
		if rootPort {
			h.Reason += " (unless a kernel quirk vouches for this root port: drivers/pci/quirks.c, pci_dev_acs_enabled)"
		}
		return h
	case err != nil:
		h.State, h.Err = HopUnknown, err
		h.Reason = notReadable(err)
		return h
	}
	h.ACS = &acs
	h.Missing = acs.Missing(pci.ACSIsolation)
	if h.Missing == 0 {
		h.State = HopIsolates
		h.Reason = fmt.Sprintf("ACS controls %s on (capability %s)", (acs.Ctrl & pci.ACSIsolation).String(), acs.Cap.String())
		return h
	}
	h.State = HopBreaks
	h.Reason = fmt.Sprintf("ACS control %s off (capability %s, control %s)", h.Missing.String(), acs.Cap.String(), ctrlString(acs.Ctrl))
	return h
}

func ctrlString(b pci.ACSBits) string {
	if b == 0 {
		return "all off"
	}
	return strings.TrimSpace(b.String())
}
