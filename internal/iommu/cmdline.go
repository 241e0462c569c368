package iommu

import (
	"fmt"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// CmdlinePath is the kernel command line of the running kernel.
const CmdlinePath = "/proc/cmdline"

// Param is one parameter of the kernel command line.
type Param struct {
	Name     string
	Value    string
	HasValue bool
}

func (p Param) String() string {
	if p.HasValue {
		return p.Name + "=" + p.Value
	}
	return p.Name
}

// Cmdline is what the kernel command line says about the IOMMU, read the
// way the kernel reads it. The meanings are those of
// Documentation/admin-guide/kernel-parameters.txt, and the parsing that of
// the handlers: intel_iommu_setup (drivers/iommu/intel/iommu.c),
// parse_amd_iommu_options (drivers/iommu/amd/init.c), iommu_setup
// (arch/x86/kernel/pci-dma.c) and iommu_set_def_domain_type /
// iommu_dma_setup (drivers/iommu/iommu.c). Each handler walks its
// comma-separated options by prefix (strncmp) and later parameters
// override earlier ones.
type Cmdline struct {
	Path string
	Raw  string
	Err  error // the read error; the rest is empty then

	// Params are the IOMMU-related parameters, in command-line order.
	Params []Param

	// IntelOn is the last of intel_iommu=on (Yes) and intel_iommu=off
	// (No); Unknown when neither is given: the kernel's default
	// (CONFIG_INTEL_IOMMU_DEFAULT_ON) decides.
	IntelOn Tri
	// IntelScalable is the last of intel_iommu=sm_on (Yes) and sm_off
	// (No). Scalable mode is a translation mode, not an on switch.
	IntelScalable Tri
	// AMDOff: amd_iommu=off. There is no amd_iommu=on: the AMD driver
	// initialises whenever the firmware has an IVRS table.
	AMDOff bool
	// X86Off: iommu=off (no_iommu): neither x86 IOMMU driver initialises.
	X86Off bool
	// Passthrough is the default domain type the command line asks for:
	// Yes for identity (iommu=pt, iommu.passthrough=1), No for
	// translated (iommu=nopt, iommu.passthrough=0), Unknown when not
	// given (CONFIG_IOMMU_DEFAULT_PASSTHROUGH and the driver decide).
	// PassthroughFrom is the parameter that decided.
	Passthrough     Tri
	PassthroughFrom string
	// Strict is iommu.strict=1 (Yes: DMA domains, synchronous TLB
	// invalidation) or 0 (No: DMA-FQ, lazy).
	Strict Tri
	// VFIOIDs is vfio-pci.ids= as given ("10de:2330,10de:22ba").
	VFIOIDs string
	// ACSOverride: pcie_acs_override= is present. It is no mainline
	// parameter; only kernels carrying the out-of-tree ACS override patch
	// honour it.
	ACSOverride bool

	// Unknown are options the handlers do not know: the kernel logs
	// "Unknown option" and ignores them.
	Unknown []string
	// Notes explain each IOMMU parameter given, one line each.
	Notes []string
}

// ReadCmdline reads and parses /proc/cmdline.
func ReadCmdline(root *hostfs.Root) Cmdline {
	s, err := root.ReadString(CmdlinePath)
	if err != nil {
		return Cmdline{Path: CmdlinePath, Err: err}
	}
	c := ParseCmdline(s)
	c.Path = CmdlinePath
	return c
}

// splitCmdline splits a command line as the kernel's next_arg does
// (driver.ParseCmdline: white space separates, double quotes group and
// are removed, "--" ends the kernel's parameters), keeping each name as
// written: the handlers here match their names exactly.
func splitCmdline(s string) []Param {
	ps := driver.ParseCmdline(s)
	out := make([]Param, 0, len(ps))
	for _, p := range ps {
		name, _, _ := strings.Cut(strings.ReplaceAll(p.Raw, `"`, ""), "=")
		out = append(out, Param{Name: name, Value: p.Value, HasValue: p.HasValue})
	}
	return out
}

// options splits a handler's comma-separated value, skipping empty ones
// as the handlers' strcspn loops do.
func options(v string) []string {
	var out []string
	for _, o := range strings.Split(v, ",") {
		if o != "" {
			out = append(out, o)
		}
	}
	return out
}

// ParseCmdline parses a kernel command line.
func ParseCmdline(s string) Cmdline {
	c := Cmdline{Raw: strings.TrimSpace(s)}
	note := func(format string, args ...any) { c.Notes = append(c.Notes, fmt.Sprintf(format, args...)) }
	for _, p := range splitCmdline(s) {
		// Module parameters are spelled with - or _ alike
		// (kernel/params.c, parameq).
		name := strings.ReplaceAll(p.Name, "-", "_")
		switch name {
		case "intel_iommu":
			c.Params = append(c.Params, p)
			c.intel(p.Value, note)
		case "amd_iommu":
			c.Params = append(c.Params, p)
			c.amd(p.Value, note)
		case "iommu":
			c.Params = append(c.Params, p)
			c.x86(p, note)
		case "iommu.passthrough":
			c.Params = append(c.Params, p)
			switch v, ok := boolParam(p.Value); {
			case !ok:
				c.Unknown = append(c.Unknown, p.String())
				note("%s: not a boolean; the kernel rejects it and keeps its default", p)
			case v:
				c.Passthrough, c.PassthroughFrom = Yes, p.String()
				note("%s: identity (passthrough) default domains: the IOMMU stays on, host drivers' DMA is not translated; VFIO attaches its own domains, so device assignment still works", p)
			default:
				c.Passthrough, c.PassthroughFrom = No, p.String()
				note("%s: translated (DMA) default domains", p)
			}
		case "iommu.strict":
			c.Params = append(c.Params, p)
			switch v, ok := boolParam(p.Value); {
			case !ok:
				c.Unknown = append(c.Unknown, p.String())
			case v:
				c.Strict = Yes
				note("%s: strict TLB invalidation (DMA domains)", p)
			default:
				c.Strict = No
				note("%s: lazy TLB invalidation (DMA-FQ domains)", p)
			}
		case "vfio_pci.ids":
			c.Params = append(c.Params, p)
			c.VFIOIDs = p.Value
			note("%s: vfio-pci claims these vendor:device ids when it loads (before another driver only if it loads first)", p)
		case "pcie_acs_override":
			c.Params = append(c.Params, p)
			c.ACSOverride = true
			note("%s: not a mainline parameter; a kernel with the out-of-tree ACS override patch then groups devices as if isolated, which the hardware does not guarantee", p)
		}
	}
	return c
}

// boolParam parses a boolean as kstrtobool does for these parameters.
func boolParam(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "y", "yes", "on", "true":
		return true, true
	case "0", "n", "no", "off", "false":
		return false, true
	}
	return false, false
}

func (c *Cmdline) intel(v string, note func(string, ...any)) {
	for _, o := range options(v) {
		switch {
		case strings.HasPrefix(o, "on"):
			c.IntelOn = Yes
			note("intel_iommu=on: turns the Intel IOMMU driver on (DMA remapping)")
		case strings.HasPrefix(o, "off"):
			c.IntelOn = No
			note("intel_iommu=off: turns Intel DMA remapping off, and with it the firmware's DMA protection opt-in")
		case strings.HasPrefix(o, "igfx_off"):
			note("intel_iommu=igfx_off: no DMA remapping for the integrated graphics")
		case strings.HasPrefix(o, "forcedac"):
			note("intel_iommu=forcedac: deprecated, iommu.forcedac=1")
		case strings.HasPrefix(o, "strict"):
			c.Strict = Yes
			note("intel_iommu=strict: deprecated, iommu.strict=1")
		case strings.HasPrefix(o, "sp_off"):
			note("intel_iommu=sp_off: no superpages in IOMMU page tables")
		case strings.HasPrefix(o, "sm_on"):
			c.IntelScalable = Yes
			note("intel_iommu=sm_on: selects scalable mode where the hardware supports it; it does not turn the IOMMU on (intel_iommu=on or CONFIG_INTEL_IOMMU_DEFAULT_ON does)")
		case strings.HasPrefix(o, "sm_off"):
			c.IntelScalable = No
			note("intel_iommu=sm_off: disallows scalable mode (legacy translation); it does not turn the IOMMU off")
		case strings.HasPrefix(o, "tboot_noforce"):
			note("intel_iommu=tboot_noforce: a tboot launch no longer forces the IOMMU on")
		default:
			c.Unknown = append(c.Unknown, "intel_iommu="+o)
			note("intel_iommu=%s: not an option of the Intel IOMMU driver; the kernel logs \"Unknown option\" and ignores it", o)
		}
	}
}

func (c *Cmdline) amd(v string, note func(string, ...any)) {
	for _, o := range options(v) {
		switch {
		case strings.HasPrefix(o, "fullflush"):
			c.Strict = Yes
			note("amd_iommu=fullflush: deprecated, iommu.strict=1")
		case strings.HasPrefix(o, "force_enable"):
			note("amd_iommu=force_enable: enables the IOMMU on platforms known to be buggy with it")
		case strings.HasPrefix(o, "off"):
			c.AMDOff = true
			note("amd_iommu=off: the AMD IOMMU driver does not initialise")
		case strings.HasPrefix(o, "force_isolation"):
			note("amd_iommu=force_isolation: every device isolated; does not override iommu=pt")
		case strings.HasPrefix(o, "pgtbl_v1"), strings.HasPrefix(o, "pgtbl_v2"):
			note("amd_iommu=%s: selects the page table format", o)
		case strings.HasPrefix(o, "irtcachedis"), strings.HasPrefix(o, "nohugepages"), strings.HasPrefix(o, "v2_pgsizes_only"):
			note("amd_iommu=%s: a tuning option", o)
		default:
			c.Unknown = append(c.Unknown, "amd_iommu="+o)
			extra := ""
			if o == "on" {
				extra = " (the AMD IOMMU is on by default wherever the firmware has an IVRS table; amd_iommu=on is a common misconception)"
			}
			note("amd_iommu=%s: not an option of the AMD IOMMU driver; the kernel logs \"Unknown option\" and ignores it%s", o, extra)
		}
	}
}

func (c *Cmdline) x86(p Param, note func(string, ...any)) {
	for _, o := range options(p.Value) {
		switch {
		case strings.HasPrefix(o, "off"):
			c.X86Off = true
			note("iommu=off: no_iommu; the Intel and AMD IOMMU drivers do not initialise")
		case strings.HasPrefix(o, "pt"):
			c.Passthrough, c.PassthroughFrom = Yes, "iommu=pt"
			note("iommu=pt: keeps the IOMMU on with identity (passthrough) default domains: host drivers' DMA is not translated; VFIO attaches its own domains, so device assignment still works")
		case strings.HasPrefix(o, "nopt"):
			c.Passthrough, c.PassthroughFrom = No, "iommu=nopt"
			note("iommu=nopt: translated (DMA) default domains")
		case strings.HasPrefix(o, "noforce"), strings.HasPrefix(o, "force"):
			note("iommu=%s: whether the x86 (GART) IOMMU is forced on where it is not needed", o)
		case strings.HasPrefix(o, "soft"):
			note("iommu=soft: software bounce buffers (swiotlb), not a hardware IOMMU")
		default:
			note("iommu=%s: an x86 DMA option without effect on DMA remapping", o)
		}
	}
}
