package driver

import (
	"bytes"
	"path"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// BindState says whether a driver drives a PCI function.
type BindState uint8

const (
	// BindUnknown: no source could tell (a capture without driver links,
	// a link that loops).
	BindUnknown BindState = iota
	// Bound: a driver has claimed the function.
	Bound
	// Unbound: the host shows the function without a driver.
	Unbound
)

// Binding is which kernel driver drives a PCI function, and how that is
// known.
type Binding struct {
	State BindState
	// Driver is the driver's name; "" when unbound, unknown, or bound to a
	// driver no source names (a DRM card registered under the device).
	Driver string
	// Source is the host path of the evidence that decided; Via says what
	// it is ("the sysfs driver link").
	Source, Via string
	// Why is, for BindUnknown, why no source could tell, and for Unbound
	// what shows it.
	Why string
	// Err is, for BindUnknown, Why as an error: the link's
	// (LinkErr), or a hostfs.NotCapturedError for a capture that did
	// not keep it; nil when the sysfs directory was not resolved.
	Err error
	// Notes are what other sources said when the deciding one was not the
	// driver link (the link's state, for evidence).
	Notes []string
}

// Function is what the pci package read about a function's binding.
type Function struct {
	Address   string // "0000:17:00.0"
	SysfsPath string // the device's resolved directory; "" when it could not be resolved
	// Link is the basename of the sysfs driver link; "" when absent or
	// unusable. LinkErr is why it is unusable (a loop, a link to a file).
	Link    string
	LinkErr error
	// LinksInTree: some function of the tree has a driver link. A capture
	// in which none has one kept no driver links at all.
	LinksInTree bool
}

// Sources of a binding, in the order FindBinding consults them.
const (
	ViaLink   = "the sysfs driver link"
	ViaUevent = "DRIVER= in the device's uevent"
	ViaNVProc = "the NVIDIA driver's procfs entry for the GPU"
	ViaDRM    = "a DRM card registered under the device"
)

// FindBinding says which driver drives f, from every source the host
// gives: the sysfs driver link (drivers/base/bus.c, driver_sysfs_add);
// DRIVER= in the device's uevent (drivers/base/core.c, dev_uevent, while
// a driver is bound); /proc/driver/nvidia/gpus/<BDF>, which nvidia.ko
// creates for each GPU it probed (kernel-open/nvidia/nv-procfs.c); and a
// DRM card under the device, which only a bound DRM driver registers
// (drivers/gpu/drm/drm_drv.c, drm_dev_register). A function is Unbound
// only when the tree shows driver links and this one has none; it is
// BindUnknown when the capture kept no driver links or the link is
// unusable and nothing else tells.
func FindBinding(root *hostfs.Root, f Function) Binding {
	link := path.Join(f.SysfsPath, "driver")
	if f.Link != "" {
		return Binding{State: Bound, Driver: f.Link, Source: link, Via: ViaLink}
	}
	linkState := "no driver link"
	if f.LinkErr != nil {
		linkState = "driver link unusable: " + f.LinkErr.Error()
	}
	if b, ok := otherSources(root, f); ok {
		b.Notes = append(b.Notes, link+": "+linkState)
		return b
	}
	switch {
	case f.SysfsPath == "":
		return Binding{Why: "the device's sysfs directory could not be resolved"}
	case f.LinkErr != nil:
		return Binding{Source: link, Why: linkState, Err: f.LinkErr}
	case !root.IsLive() && !f.LinksInTree:
		return Binding{Source: link, Why: "the capture holds no driver links: none of its PCI functions has one", Err: &hostfs.NotCapturedError{Path: link}}
	case !root.Covers(link):
		return Binding{Source: link, Why: "the capture holds no " + f.SysfsPath, Err: &hostfs.NotCapturedError{Path: f.SysfsPath}}
	}
	return Binding{State: Unbound, Source: link, Why: linkState}
}

// otherSources consults the sources beside the driver link.
func otherSources(root *hostfs.Root, f Function) (Binding, bool) {
	if f.SysfsPath != "" {
		if drv, ok := ueventDriver(root, path.Join(f.SysfsPath, "uevent")); ok {
			return Binding{State: Bound, Driver: drv, Source: path.Join(f.SysfsPath, "uevent"), Via: ViaUevent}, true
		}
	}
	if validBDF(f.Address) {
		p := path.Join(NVIDIAGPUsDir, f.Address)
		if st, err := root.Stat(p); err == nil && st.Type == hostfs.TypeDir {
			return Binding{State: Bound, Driver: "nvidia", Source: p, Via: ViaNVProc}, true
		}
	}
	if f.SysfsPath != "" {
		if card, ok := drmCard(root, path.Join(f.SysfsPath, "drm")); ok {
			return Binding{State: Bound, Source: card, Via: ViaDRM}, true
		}
	}
	return Binding{}, false
}

func validBDF(s string) bool { return s != "" && !strings.Contains(s, "/") && s != "." && s != ".." }

// ueventDriver reads DRIVER=<name> from a uevent attribute.
func ueventDriver(root *hostfs.Root, p string) (string, bool) {
	b, err := root.ReadFileLimit(p, 64<<10)
	if err != nil {
		return "", false
	}
	for l := range bytes.Lines(b) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(string(l)), "DRIVER="); ok && v != "" && !strings.Contains(v, "/") {
			return v, true
		}
	}
	return "", false
}

// drmCard returns the first cardN directory under a device's drm dir.
func drmCard(root *hostfs.Root, dir string) (string, bool) {
	names, err := root.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, "card")
		if ok && rest != "" && !strings.Contains(rest, "-") {
			return path.Join(dir, n), true
		}
	}
	return "", false
}
