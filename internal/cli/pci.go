package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// pciRow is the JSON form of one function: the inventory's facts, with
// errors as strings and optional values absent rather than zero.
type pciRow struct {
	Address         string   `json:"address"`
	Vendor          string   `json:"vendor_id,omitempty"`
	Device          string   `json:"device_id,omitempty"`
	SubsystemVendor string   `json:"subsystem_vendor_id,omitempty"`
	SubsystemDevice string   `json:"subsystem_device_id,omitempty"`
	Class           string   `json:"class,omitempty"`
	Revision        string   `json:"revision,omitempty"`
	VendorName      string   `json:"vendor_name,omitempty"`
	DeviceName      string   `json:"device_name,omitempty"`
	ClassName       string   `json:"class_name,omitempty"`
	Accelerator     string   `json:"accelerator,omitempty"` // kind, when it is one
	Driver          string   `json:"driver,omitempty"`
	NUMANode        *int     `json:"numa_node,omitempty"`
	IOMMUGroup      *int     `json:"iommu_group,omitempty"`
	LocalCPUs       string   `json:"local_cpus,omitempty"`
	LinkCurrent     string   `json:"link_current,omitempty"`
	LinkMax         string   `json:"link_max,omitempty"`
	Bridges         []string `json:"upstream_bridges,omitempty"`
	PhysFn          string   `json:"physfn,omitempty"`
	VFs             []string `json:"vfs,omitempty"`
	TotalVFs        *int     `json:"sriov_totalvfs,omitempty"`
	NumVFs          *int     `json:"sriov_numvfs,omitempty"`
	Errors          []string `json:"errors,omitempty"`

	// problems is "attr problem" per attribute that could not be used,
	// for the table (the JSON has the full errors).
	problems []string
	// unusable holds the attributes with a problem, so that the table
	// shows "?" (could not be read) instead of "-" (absent).
	unusable map[string]bool
}

func linkString(s *pci.LinkSpeed, w *int) string {
	var parts []string
	if s != nil {
		parts = append(parts, s.String())
	}
	if w != nil {
		parts = append(parts, fmt.Sprintf("x%d", *w))
	}
	return strings.Join(parts, " ")
}

func rowOf(d *pci.Device) pciRow {
	r := pciRow{Address: d.Address.String(), Driver: d.Driver, NUMANode: d.NUMANode, IOMMUGroup: d.IOMMUGroup,
		LocalCPUs: d.LocalCPUs, VendorName: d.VendorName, DeviceName: d.DeviceName, ClassName: d.ClassName,
		TotalVFs: d.TotalVFs, NumVFs: d.NumVFs,
		LinkCurrent: linkString(d.Link.CurrentSpeed, d.Link.CurrentWidth), LinkMax: linkString(d.Link.MaxSpeed, d.Link.MaxWidth)}
	if d.Has(pci.HasVendor) {
		r.Vendor = fmt.Sprintf("%04x", d.Vendor)
	}
	if d.Has(pci.HasDevice) {
		r.Device = fmt.Sprintf("%04x", d.Device)
	}
	if d.Has(pci.HasSubsystem) {
		r.SubsystemVendor, r.SubsystemDevice = fmt.Sprintf("%04x", d.SubsystemVendor), fmt.Sprintf("%04x", d.SubsystemDevice)
	}
	if d.Has(pci.HasClass) {
		r.Class = fmt.Sprintf("%06x", d.Class)
	}
	if d.Has(pci.HasRevision) {
		r.Revision = fmt.Sprintf("%02x", d.Revision)
	}
	if k, ok := pci.IsAccelerator(d); ok {
		r.Accelerator = k
	}
	for _, b := range d.Bridges {
		r.Bridges = append(r.Bridges, b.String())
	}
	if d.PhysFn != nil {
		r.PhysFn = d.PhysFn.String()
	}
	for _, v := range d.VFs {
		r.VFs = append(r.VFs, v.String())
	}
	r.unusable = map[string]bool{}
	for _, err := range d.Errors {
		r.Errors = append(r.Errors, err.Error())
		var ae *pci.AttrError
		if errors.As(err, &ae) {
			r.problems = append(r.problems, ae.Attr+" "+ae.Problem.String())
			r.unusable[ae.Attr] = ae.Problem != pci.Absent
		} else {
			r.problems = append(r.problems, "directory unreadable")
		}
	}
	return r
}

// cell is v, "-" when absent, and "?" when the attribute is there but
// could not be used (unreadable or malformed): absent and broken differ.
func (r pciRow) cell(v string, attrs ...string) string {
	for _, a := range attrs {
		if r.unusable[a] {
			return "?"
		}
	}
	return dash(v)
}

// pciTable is the inventory as a table. A function with read errors says
// which attributes in the ERRORS column, and every error is listed in
// full, with its path, under the table, with the scan's own errors.
func pciTable(rows []pciRow, scanErrs []error) *report.Table {
	t := &report.Table{Header: []string{"ADDRESS", "IDS", "CLASS", "NAME", "DRIVER", "NUMA", "IOMMU", "LINK", "ACCEL", "ERRORS"}}
	var errs []string
	for _, r := range rows {
		name := strings.TrimSpace(r.VendorName + " " + r.DeviceName)
		link := r.LinkCurrent
		if r.LinkMax != "" && r.LinkMax != r.LinkCurrent {
			link += " (max " + r.LinkMax + ")"
		}
		ids := r.cell(r.Vendor, "vendor") + ":" + r.cell(r.Device, "device")
		t.Rows = append(t.Rows, []string{r.Address, ids, r.cell(r.Class, "class"), name, r.cell(r.Driver, "driver"),
			r.cell(intOrDash(r.NUMANode), "numa_node"), r.cell(intOrDash(r.IOMMUGroup), "iommu_group"),
			r.cell(link, "current_link_speed", "current_link_width", "max_link_speed", "max_link_width"),
			r.Accelerator, strings.Join(r.problems, ", ")})
		for _, e := range r.Errors {
			errs = append(errs, "  "+r.Address+": "+e)
		}
	}
	if len(errs) > 0 {
		t.Notes = append([]string{"", "read errors (- is absent, ? is there but unusable):"}, errs...)
	}
	for _, e := range scanErrs {
		t.Notes = append(t.Notes, "error: "+e.Error())
	}
	return t
}

func newPCICmd(g *globals) *cobra.Command {
	var (
		snapshot string
		accel    bool
	)
	cmd := &cobra.Command{
		Use:   "pci",
		Short: "The PCI inventory as a table or JSON (read-only)",
		Long: `pci lists every PCI function of the host (or --root, or --snapshot) with its
ids, names from the host's pci.ids, driver, NUMA node, IOMMU group and link;
accelerators are marked with their kind. --accelerators lists only those.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, _, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			inv, err := pci.Scan(root)
			if err != nil {
				return err
			}
			var rows []pciRow
			for _, d := range inv.Devices {
				r := rowOf(d)
				if accel && r.Accelerator == "" {
					continue
				}
				rows = append(rows, r)
			}
			if rows == nil {
				rows = []pciRow{}
			}
			return g.renderTable(pciTable(rows, inv.Errors), rows)
		},
	}
	g.addRootFlag(cmd)
	Flag(cmd.Flags(), "snapshot", "").String(&snapshot, "")
	cmd.Flags().BoolVar(&accel, "accelerators", false, "only accelerators")
	g.addOutputFlag(cmd)
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func intOrDash(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
