package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// BAR is one Base Address Register as config space holds it (PCI Local
// Bus 3.0, 6.2.5.1; PCI_BASE_ADDRESS_* in pci_regs.h). Config space
// holds no size: sizing a BAR takes writes, so sizes come from the
// kernel's `resource` file (Regions).
type BAR struct {
	Index        int
	Raw          uint32
	IO           bool   // PCI_BASE_ADDRESS_SPACE_IO
	Mem64        bool   // PCI_BASE_ADDRESS_MEM_TYPE_64: this BAR and the next hold one address
	Below1M      bool   // PCI_BASE_ADDRESS_MEM_TYPE_1M (legacy)
	Prefetchable bool   // PCI_BASE_ADDRESS_MEM_PREFETCH
	Address      uint64 // the bus address the BAR is programmed with
	// Upper marks the high half of the 64-bit BAR at Index-1; the other
	// fields are zero.
	Upper bool
}

// Kind is "I/O", "32-bit memory" or "64-bit memory", with
// ", prefetchable" when it is.
func (b BAR) Kind() string {
	switch {
	case b.Upper:
		return "upper half of BAR " + strconv.Itoa(b.Index-1)
	case b.IO:
		return "I/O"
	}
	s := "32-bit memory"
	if b.Mem64 {
		s = "64-bit memory"
	}
	if b.Prefetchable {
		s += ", prefetchable"
	}
	return s
}

// BARs decodes the base address registers: six for a type 0 header, two
// for a bridge, one for a CardBus bridge (the kernel's pci_read_bases
// calls in drivers/pci/probe.c). A 64-bit BAR in the last slot, or a
// reserved memory type, is Malformed; the BARs before it are kept.
func (c *Config) BARs() ([]BAR, error) {
	n := map[uint8]int{HeaderNormal: 6, HeaderBridge: 2, HeaderCardBus: 1}[c.HeaderType]
	out := make([]BAR, 0, n)
	for i := 0; i < n; i++ {
		off := 0x10 + 4*i
		v := le.Uint32(c.Raw[off:])
		b := BAR{Index: i, Raw: v}
		if v&1 != 0 {
			b.IO, b.Address = true, uint64(v&^3)
			out = append(out, b)
			continue
		}
		b.Prefetchable = v&8 != 0
		b.Address = uint64(v &^ 0xf)
		switch v >> 1 & 3 {
		case 1:
			b.Below1M = true
		case 2:
			if i+1 >= n {
				return out, malformed(off, "BAR %d is 64-bit but is the last BAR: it has no upper half", i)
			}
			b.Mem64 = true
			b.Address |= uint64(le.Uint32(c.Raw[off+4:])) << 32
			out = append(out, b, BAR{Index: i + 1, Raw: le.Uint32(c.Raw[off+4:]), Upper: true})
			i++
			continue
		case 3:
			return out, malformed(off, "BAR %d has the reserved memory type 11b", i)
		}
		out = append(out, b)
	}
	return out, nil
}

// Resource flags of the `resource` file (include/linux/ioport.h).
const (
	ResourceIO       = 0x00000100 // IORESOURCE_IO
	ResourceMem      = 0x00000200 // IORESOURCE_MEM
	ResourcePrefetch = 0x00002000 // IORESOURCE_PREFETCH
	ResourceReadOnly = 0x00004000 // IORESOURCE_READONLY
	ResourceMem64    = 0x00100000 // IORESOURCE_MEM_64
	ResourceDisabled = 0x10000000 // IORESOURCE_DISABLED
	ResourceUnset    = 0x20000000 // IORESOURCE_UNSET: not assigned an address
)

// Resource is one line of the sysfs `resource` file: start, end and flags
// of the function's resources in index order (drivers/pci/pci-sysfs.c,
// resource_show): BARs 0-5, the expansion ROM (6), then the SR-IOV VF
// BARs (with CONFIG_PCI_IOV) or a bridge's windows.
type Resource struct {
	Index             int
	Start, End, Flags uint64
}

// Size is End-Start+1, 0 for an unused resource (all zero).
func (r Resource) Size() uint64 {
	if r.End == 0 || r.End < r.Start {
		return 0
	}
	return r.End - r.Start + 1
}

// IndexROM is the expansion ROM's line in `resource` (PCI_ROM_RESOURCE).
const IndexROM = 6

// ResourceAttr is the sysfs attribute listing a function's resources.
const ResourceAttr = "resource"

// maxResourceLines bounds ParseResources; the kernel writes at most
// DEVICE_COUNT_RESOURCE lines (17 with SR-IOV and bridge windows).
const maxResourceLines = 64

// ParseResources parses the `resource` file: one "0x%016llx 0x%016llx
// 0x%016llx" line per resource.
func ParseResources(s string) ([]Resource, error) {
	// SplitN: a file of a million newlines costs 65 lines, not a million.
	lines := strings.SplitN(strings.TrimRight(s, "\n"), "\n", maxResourceLines+1)
	if len(lines) > maxResourceLines {
		return nil, fmt.Errorf("more than %d lines: more than the kernel writes", maxResourceLines)
	}
	out := make([]Resource, 0, len(lines))
	for i, line := range lines {
		if strings.TrimSpace(line) == "" && len(lines) == 1 {
			return nil, nil
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d %s: want start, end and flags", i+1, quoteShort(line))
		}
		var v [3]uint64
		for j, x := range f {
			n, err := parseHex(x, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			v[j] = n
		}
		out = append(out, Resource{Index: i, Start: v[0], End: v[1], Flags: v[2]})
	}
	return out, nil
}

// ReadResources reads and parses d's `resource` file. Absent (a capture
// without it), unreadable and malformed are *AttrError.
func ReadResources(root *hostfs.Root, d *Device) ([]Resource, error) {
	p := d.AttrPath(ResourceAttr)
	s, err := root.ReadString(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &AttrError{Attr: ResourceAttr, Path: p, Problem: Absent, Err: err}
	case err != nil:
		return nil, &AttrError{Attr: ResourceAttr, Path: p, Problem: Unreadable, Err: err}
	}
	res, err := ParseResources(s)
	if err != nil {
		return nil, &AttrError{Attr: ResourceAttr, Path: p, Problem: Malformed, Err: err}
	}
	return res, nil
}

// Region is a BAR with what the kernel's `resource` file says of it.
type Region struct {
	BAR
	Size  uint64 // from `resource`; 0 when unused or unknown
	Flags uint64 // the resource's flags; 0 when unknown
	// Assigned is false when the kernel lists the resource as unset or
	// disabled, or holds no line for it.
	Assigned bool
}

// Mismatch is one disagreement between config space and the sysfs
// attributes the kernel derives from it.
type Mismatch struct {
	What   string // "BAR 2 type", "link width"
	Config string // what config space says
	Sysfs  string // what sysfs says
	Path   string // the sysfs attribute
	// Soft marks a difference that has a legitimate cause (a bus address
	// translated by the host bridge, a link retrained between two reads):
	// evidence, not a contradiction.
	Soft bool
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s: config space says %s, %s says %s", m.What, m.Config, m.Path, m.Sysfs)
}

// Regions decodes c's BARs, joins them with the `resource` lines of the
// same index and lists where the two disagree. Hard mismatches are the
// BAR bits the kernel copies into the resource flags
// (drivers/pci/probe.c, decode_bar): I/O against memory, and a resource
// flagged 64-bit or prefetchable whose BAR is not. Soft ones have a
// legitimate cause: a 64-bit or prefetchable BAR whose resource lacks
// the flag (kernels before 2.6.31 had no IORESOURCE_MEM_64 and spelled
// IORESOURCE_PREFETCH 0x1000, which is checked too), and the address
// (`resource` shows CPU addresses, which differ from the bus address in
// the BAR where the host bridge translates, pcibios_resource_to_bus).
// BARs 0-3 of an IDE controller in legacy mode are not compared: the
// kernel gives them the fixed legacy ports whatever they hold
// (drivers/pci/probe.c, pci_setup_device). path is the `resource`
// file's path, for evidence; the error is that of BARs.
func Regions(c *Config, res []Resource, path string) ([]Region, []Mismatch, error) {
	bars, err := c.BARs()
	legacyIDE := func(i int) bool {
		if c.Class>>8 != 0x0101 { // PCI_CLASS_STORAGE_IDE
			return false
		}
		progIf := uint8(c.Class)
		return i < 2 && progIf&1 == 0 || (i == 2 || i == 3) && progIf&4 == 0
	}
	var out []Region
	var mm []Mismatch
	for _, b := range bars {
		if b.Upper {
			if b.Index < len(res) && res[b.Index].Flags != 0 {
				mm = append(mm, Mismatch{What: fmt.Sprintf("BAR %d", b.Index), Config: "the upper half of 64-bit BAR " + strconv.Itoa(b.Index-1),
					Sysfs: fmt.Sprintf("a resource of its own (flags 0x%x)", res[b.Index].Flags), Path: path})
			}
			continue
		}
		r := Region{BAR: b}
		if b.Index < len(res) {
			x := res[b.Index]
			r.Size, r.Flags = x.Size(), x.Flags
			r.Assigned = x.Flags&(ResourceIO|ResourceMem) != 0 && x.Flags&(ResourceUnset|ResourceDisabled) == 0 && x.Size() > 0
			what := fmt.Sprintf("BAR %d", b.Index)
			switch {
			case legacyIDE(b.Index):
			case x.Flags&(ResourceIO|ResourceMem) != 0:
				mm = append(mm, compareBAR(what, b, x, r.Assigned, path)...)
			case b.Raw != 0 && !(b.IO && b.Raw == 1):
				// The kernel lists no resource for a BAR config space
				// programs: a BAR it could not size or rejected.
				mm = append(mm, Mismatch{What: what, Config: fmt.Sprintf("%s at 0x%x", b.Kind(), b.Address),
					Sysfs: "no resource", Path: path, Soft: true})
			}
		}
		out = append(out, r)
	}
	return out, mm, err
}

// resourcePrefetchOld is IORESOURCE_PREFETCH before Linux 2.6.31, when
// 0x1000 became IORESOURCE_BUS (a type no BAR resource has).
const resourcePrefetchOld = 0x1000

func compareBAR(what string, b BAR, x Resource, assigned bool, path string) []Mismatch {
	var mm []Mismatch
	if io := x.Flags&ResourceIO != 0; io != b.IO {
		return []Mismatch{{What: what + " space", Config: spaceName(b.IO), Sysfs: spaceName(io), Path: path}}
	}
	if !b.IO {
		if m64 := x.Flags&ResourceMem64 != 0; m64 != b.Mem64 {
			mm = append(mm, Mismatch{What: what + " width", Config: widthName(b.Mem64), Sysfs: widthName(m64), Path: path, Soft: b.Mem64})
		}
		pf := x.Flags&(ResourcePrefetch|resourcePrefetchOld) != 0
		if pf != b.Prefetchable {
			mm = append(mm, Mismatch{What: what + " prefetchable", Config: strconv.FormatBool(b.Prefetchable), Sysfs: strconv.FormatBool(pf),
				Path: path, Soft: b.Prefetchable})
		}
	}
	if assigned && b.Address != 0 && b.Address != x.Start {
		mm = append(mm, Mismatch{What: what + " address", Config: fmt.Sprintf("0x%x", b.Address),
			Sysfs: fmt.Sprintf("0x%x", x.Start), Path: path, Soft: true})
	}
	return mm
}

func spaceName(io bool) string {
	if io {
		return "I/O"
	}
	return "memory"
}

func widthName(m64 bool) string {
	if m64 {
		return "64-bit"
	}
	return "32-bit"
}

// CheckLink compares the PCI Express link registers with the link
// attributes sysfs derives from them (drivers/pci/pci-sysfs.c:
// current_link_speed and current_link_width from LNKSTA,
// max_link_speed from pcie_get_speed_cap, max_link_width from LNKCAP).
// The current values are soft: a link may retrain between the two reads.
func (e Express) CheckLink(d *Device) []Mismatch {
	if !e.Type.HasLink() {
		return nil
	}
	var mm []Mismatch
	l := d.Link
	speed := func(what, attr string, got *LinkSpeed, want int, soft bool) {
		if got == nil || !got.Known() || want == 0 || got.MTps == want {
			return
		}
		mm = append(mm, Mismatch{What: what, Config: LinkSpeed{MTps: want}.String(), Sysfs: got.Raw, Path: d.AttrPath(attr), Soft: soft})
	}
	width := func(what, attr string, got *int, want int, soft bool) {
		if got == nil || *got == want {
			return
		}
		mm = append(mm, Mismatch{What: what, Config: "x" + strconv.Itoa(want), Sysfs: "x" + strconv.Itoa(*got), Path: d.AttrPath(attr), Soft: soft})
	}
	speed("maximum link speed", "max_link_speed", l.MaxSpeed, e.MaxSpeedMTps(), false)
	width("maximum link width", "max_link_width", l.MaxWidth, e.MaxWidth(), false)
	speed("current link speed", "current_link_speed", l.CurrentSpeed, e.SpeedMTps(), true)
	width("current link width", "current_link_width", l.CurrentWidth, e.Width(), true)
	return mm
}

// CheckSRIOV compares the SR-IOV capability with sriov_totalvfs and
// sriov_numvfs (drivers/pci/iov.c): NumVFs must match; sysfs' total may
// be lower than the capability's, because a driver can cap it
// (pci_sriov_set_totalvfs), never higher.
func (s SRIOV) Check(d *Device) []Mismatch {
	var mm []Mismatch
	if d.NumVFs != nil && *d.NumVFs != int(s.NumVFs) {
		mm = append(mm, Mismatch{What: "SR-IOV NumVFs", Config: strconv.Itoa(int(s.NumVFs)), Sysfs: strconv.Itoa(*d.NumVFs),
			Path: d.AttrPath("sriov_numvfs"), Soft: true})
	}
	if d.TotalVFs != nil && *d.TotalVFs > int(s.TotalVFs) {
		mm = append(mm, Mismatch{What: "SR-IOV TotalVFs", Config: strconv.Itoa(int(s.TotalVFs)), Sysfs: strconv.Itoa(*d.TotalVFs),
			Path: d.AttrPath("sriov_totalvfs")})
	}
	return mm
}

// AER statistics attributes (drivers/pci/pcie/aer.c): per-device counters
// of each error bit and a total, and a root port's totals of the errors
// it received.
var (
	AERDevAttrs      = []string{"aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal"}
	AERRootPortAttrs = []string{"aer_rootport_total_err_cor", "aer_rootport_total_err_fatal", "aer_rootport_total_err_nonfatal"}
)

// AERCount is one line of an aer_dev_* file.
type AERCount struct {
	Name  string
	Count uint64
}

// AERStats is one AER statistics attribute.
type AERStats struct {
	Attr   string
	Path   string
	Counts []AERCount // per error bit; a root port total has none
	Total  uint64     // the TOTAL_ERR_* line, or the root port total
}

// maxAERLines bounds ParseAERStats: aer.c writes one line per error bit
// of the AER status register (at most 32) and the total.
const maxAERLines = 64

// ParseAERStats parses an aer_dev_* file ("Name count" lines, the last
// TOTAL_ERR_COR, TOTAL_ERR_FATAL or TOTAL_ERR_NONFATAL; aer.c,
// aer_stats_dev_attr) or an aer_rootport_total_err_* file (one number).
func ParseAERStats(s string) (AERStats, error) {
	var st AERStats
	t := strings.TrimSpace(s)
	// A root port's total: at most 20 digits (strconv's error would copy
	// a whole file of garbage).
	if len(t) <= 20 {
		if n, err := strconv.ParseUint(t, 10, 64); err == nil {
			st.Total = n
			return st, nil
		}
	}
	lines := strings.SplitN(t, "\n", maxAERLines+1)
	if len(lines) > maxAERLines {
		return st, fmt.Errorf("more than %d lines: more than the kernel writes", maxAERLines)
	}
	total := false
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			return st, fmt.Errorf("line %d %s: want a name and a count", i+1, quoteShort(line))
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return st, fmt.Errorf("line %d: count %s is not a number", i+1, quoteShort(f[1]))
		}
		if strings.HasPrefix(f[0], "TOTAL_ERR_") {
			st.Total, total = n, true
			continue
		}
		st.Counts = append(st.Counts, AERCount{Name: f[0], Count: n})
	}
	if !total {
		return st, errors.New("no TOTAL_ERR_* line")
	}
	return st, nil
}

// ReadAERStats reads the AER statistics attributes d has. Absent files
// are skipped (a kernel without AER statistics, a device without AER, a
// capture without them); the others are returned, or recorded as
// *AttrError.
func ReadAERStats(root *hostfs.Root, d *Device) ([]AERStats, []error) {
	var out []AERStats
	var errs []error
	for _, a := range append(append([]string{}, AERDevAttrs...), AERRootPortAttrs...) {
		p := d.AttrPath(a)
		s, err := root.ReadString(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, &AttrError{Attr: a, Path: p, Problem: Unreadable, Err: err})
			continue
		}
		st, err := ParseAERStats(s)
		if err != nil {
			errs = append(errs, &AttrError{Attr: a, Path: p, Problem: Malformed, Err: err})
			continue
		}
		st.Attr, st.Path = a, p
		out = append(out, st)
	}
	return out, errs
}
