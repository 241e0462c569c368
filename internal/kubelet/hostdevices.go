package kubelet

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/lazyre"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// IDForm is what a device ID looks like, which decides what on the host
// can show whether the device is still there.
type IDForm string

const (
	// IDGPUUUID: an NVIDIA GPU UUID, "GPU-<uuid>" (NVIDIA's plugin with
	// the default --device-id-strategy=uuid). The driver lists each GPU's
	// UUID in /proc/driver/nvidia/gpus/<BDF>/information.
	IDGPUUUID IDForm = "nvidia-gpu-uuid"
	// IDMIGLegacy: "MIG-GPU-<uuid>/<gi>/<ci>", the MIG name of drivers
	// before R470: the parent GPU's UUID is in it.
	IDMIGLegacy IDForm = "nvidia-mig-legacy"
	// IDMIGUUID: "MIG-<uuid>". Only NVML knows which GPU a MIG UUID belongs
	// to; procfs does not list MIG UUIDs, so the host cannot show it.
	IDMIGUUID IDForm = "nvidia-mig-uuid"
	// IDPCIAddress: a PCI function address (AMD's plugin, SR-IOV and
	// VFIO plugins): /sys/bus/pci/devices/<BDF> shows it.
	IDPCIAddress IDForm = "pci-address"
	// IDDRMCard: "card<N>-<i>" (Intel's GPU plugin): /sys/class/drm/card<N>.
	IDDRMCard IDForm = "drm-card"
	// IDAMDPartition: "amdgpu_xcp_<n>": /sys/devices/platform/amdgpu_xcp_<n>.
	IDAMDPartition IDForm = "amd-partition"
	// IDOpaque: anything else (an index, a plugin's own names): only the
	// plugin knows what it names.
	IDOpaque IDForm = "opaque"
)

// HostState says whether the host still has a device.
type HostState string

const (
	HostPresent HostState = "present"
	HostAbsent  HostState = "absent"
	// HostUnknown: nothing on the host can tell (an opaque ID, a MIG UUID,
	// or a capture that did not hold the place to look).
	HostUnknown HostState = "unknown"
)

// DeviceMatch is one allocated device ID against what the node has.
type DeviceMatch struct {
	ID       string    `json:"id"`
	Resource string    `json:"resource"`
	Form     IDForm    `json:"form"`
	Key      string    `json:"key,omitempty"` // what was looked for: the UUID, address or name
	Host     HostState `json:"host"`
	// BDF is the PCI address of the device when the host tells it (a GPU
	// UUID's information file, a PCI-address ID): the key to layers 1-4.
	BDF string `json:"bdf,omitempty"`
	// Evidence says where the host was looked at and what it showed.
	Evidence string `json:"evidence"`
	// Registered: the ID is in the checkpoint's RegisteredDevices for its
	// resource (healthy at the kubelet's last write); Allocatable: in
	// PodResources' GetAllocatableResources (healthy now). nil when the
	// source did not tell. Missing from both with the host present means
	// unhealthy or no longer advertised, not gone.
	Registered  *bool `json:"registered,omitempty"`
	Allocatable *bool `json:"allocatable,omitempty"`
}

var (
	uuidRe      = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`
	gpuUUID     = lazyre.New(`^GPU-` + uuidRe + `$`)
	migLegacy   = lazyre.New(`^MIG-(GPU-` + uuidRe + `)/[0-9]+/[0-9]+$`)
	migUUID     = lazyre.New(`^MIG-` + uuidRe + `$`)
	drmCard     = lazyre.New(`^(card[0-9]+)-[0-9]+$`)
	amdXCP      = lazyre.New(`^amdgpu_xcp_[0-9]+$`)
	replicaPart = lazyre.New(`::[0-9]+$`)
)

// ClassifyID says what a device ID looks like and the key to look for on
// the host. A "::<n>" replica suffix (NVIDIA's time-slicing and MPS) is
// stripped first.
func ClassifyID(id string) (IDForm, string) {
	base := replicaPart().ReplaceAllString(id, "")
	switch {
	case gpuUUID().MatchString(base):
		return IDGPUUUID, base
	case migLegacy().MatchString(base):
		return IDMIGLegacy, migLegacy().FindStringSubmatch(base)[1]
	case migUUID().MatchString(base):
		return IDMIGUUID, base
	case amdXCP().MatchString(base):
		return IDAMDPartition, base
	case drmCard().MatchString(base):
		return IDDRMCard, drmCard().FindStringSubmatch(base)[1]
	}
	if a, err := pci.ParseAddress(base); err == nil && strings.Count(base, ":") == 2 {
		return IDPCIAddress, a.String()
	}
	return IDOpaque, ""
}

// hostDevices is what the host shows, read once.
type hostDevices struct {
	root *hostfs.Root
	// uuids maps an NVIDIA GPU UUID to the PCI address whose information
	// file names it.
	uuids     map[string]string
	nvErr     error // listing /proc/driver/nvidia/gpus failed
	nvCovered bool
	nvCount   int
}

func readHostDevices(root *hostfs.Root) *hostDevices {
	h := &hostDevices{root: root, uuids: map[string]string{}}
	names, err := root.ReadDir(driver.NVIDIAGPUsDir)
	h.nvCovered = root.Covers(driver.NVIDIAGPUsDir)
	if err != nil {
		h.nvErr = err
		return h
	}
	for _, bdf := range names {
		info, err := driver.ReadGPUInformation(root, bdf)
		if err != nil || info.UUID == "" {
			continue
		}
		h.nvCount++
		h.uuids[info.UUID] = bdf
	}
	return h
}

// match looks for one ID.
func (h *hostDevices) match(resource, id string) DeviceMatch {
	form, key := ClassifyID(id)
	m := DeviceMatch{ID: id, Resource: resource, Form: form, Key: key, Host: HostUnknown}
	switch form {
	case IDGPUUUID, IDMIGLegacy:
		m.Host, m.Evidence = h.matchUUID(key)
		m.BDF = h.uuids[key]
		if form == IDMIGLegacy && m.Host == HostPresent {
			// The parent GPU is there; whether the MIG instance still is,
			// only NVML says.
			m.Host, m.Evidence = HostUnknown, "parent GPU present ("+m.Evidence+"); the GPU instance itself is visible only through NVML"
		}
	case IDMIGUUID:
		if h.nvErr == nil && h.nvCount == 0 && h.nvCovered {
			m.Host, m.Evidence = HostAbsent, driver.NVIDIAGPUsDir+" lists no GPU: no MIG device can exist"
		} else {
			m.Evidence = "MIG UUIDs are visible only through NVML, not in " + driver.NVIDIAGPUsDir
		}
	case IDPCIAddress:
		m.Host, m.Evidence = h.matchPath(path.Join(pci.DevicesDir, key))
		m.BDF = key
	case IDDRMCard:
		m.Host, m.Evidence = h.matchPath(path.Join("/sys/class/drm", key))
	case IDAMDPartition:
		m.Host, m.Evidence = h.matchPath(path.Join("/sys/devices/platform", key))
	default:
		m.Evidence = "the ID has no form the host can show (an index or a plugin's own name): only the plugin knows what it names"
	}
	return m
}

func (h *hostDevices) matchUUID(uuid string) (HostState, string) {
	if bdf, ok := h.uuids[uuid]; ok {
		return HostPresent, driver.GPUInformationPath(bdf) + ": GPU UUID " + uuid
	}
	if h.nvErr != nil {
		if !h.nvCovered {
			return HostUnknown, driver.NVIDIAGPUsDir + ": not in this capture"
		}
		return HostAbsent, fmt.Sprintf("%s cannot be listed (%v): the NVIDIA driver lists no GPU", driver.NVIDIAGPUsDir, h.nvErr)
	}
	return HostAbsent, fmt.Sprintf("none of the %d GPU(s) in %s has this UUID", h.nvCount, driver.NVIDIAGPUsDir)
}

func (h *hostDevices) matchPath(p string) (HostState, string) {
	if h.root.Exists(p) {
		return HostPresent, p + " exists"
	}
	if !h.root.Covers(p) {
		return HostUnknown, p + ": not in this capture"
	}
	return HostAbsent, p + " does not exist"
}

// matchAllocatable checks every device PodResources reports allocatable
// against the host.
func matchAllocatable(h *hostDevices, alloc map[string][]string) []DeviceMatch {
	var out []DeviceMatch
	resources := make([]string, 0, len(alloc))
	for r := range alloc {
		resources = append(resources, r)
	}
	sort.Strings(resources)
	for _, r := range resources {
		for _, id := range alloc[r] {
			m := h.match(r, id)
			m.Allocatable = ptrTrue()
			out = append(out, m)
		}
	}
	return out
}

func ptrTrue() *bool { t := true; return &t }

// matchAllocations checks every allocated device of cp against the host
// and the advertised lists.
func matchAllocations(h *hostDevices, cp *Checkpoint, alloc map[string][]string) []DeviceMatch {
	var out []DeviceMatch
	ids := cp.AllocatedIDs()
	resources := make([]string, 0, len(ids))
	for r := range ids {
		resources = append(resources, r)
	}
	sort.Strings(resources)
	paths := singleDevicePaths(cp)
	for _, r := range resources {
		for _, id := range ids[r] {
			m := h.match(r, id)
			if p := paths[r+"\x00"+id]; m.Form == IDOpaque && len(p.paths) > 0 {
				m.Host, m.Evidence = h.matchPaths(p)
			}
			if cp.Registered != nil || len(cp.Entries) > 0 {
				in := contains(cp.Registered[r], id)
				m.Registered = &in
			}
			if alloc != nil {
				in := contains(alloc[r], id)
				m.Allocatable = &in
			}
			out = append(out, m)
		}
	}
	return out
}

func contains(sortedIDs []string, id string) bool {
	i := sort.SearchStrings(sortedIDs, id)
	return i < len(sortedIDs) && sortedIDs[i] == id
}

// givenPaths are the host paths an AllocateResponse gave a container:
// its device nodes, or, from a plugin that gives none, the host paths it
// mounts (a plugin of files or directories, such as Kubernetes' sample
// device plugin, which mounts one file per device).
type givenPaths struct {
	what  string // "device" or "mount source"
	paths []string
}

// singleDevicePaths maps "resource\x00ID" to the host paths the plugin's
// AllocateResponse gave a container, for the allocations of exactly one
// device: for an opaque ID those paths are what the host can show of it.
// (With several devices in one response, which path is whose is the
// plugin's secret.) Device nodes are the device when there are any; the
// mounts then may be the driver's shared files, and are left alone. A
// mount source that is gone makes the container's creation fail either
// way (the runtime cannot bind it).
func singleDevicePaths(cp *Checkpoint) map[string]givenPaths {
	out := map[string]givenPaths{}
	for _, e := range cp.Entries {
		if len(e.DeviceIDs) != 1 || e.Response == nil {
			continue
		}
		k := e.Resource + "\x00" + e.DeviceIDs[0]
		switch {
		case len(e.Response.DeviceNodes) > 0:
			out[k] = givenPaths{"device", e.Response.DeviceNodes}
		case len(e.Response.Mounts) > 0:
			out[k] = givenPaths{"mount source", e.Response.Mounts}
		}
	}
	return out
}

func (h *hostDevices) matchPaths(g givenPaths) (HostState, string) {
	for _, p := range g.paths {
		st, ev := h.matchPath(path.Clean("/" + p))
		if st != HostPresent {
			return st, "the AllocateResponse kept in the checkpoint gave the container host " + g.what + "(s) " + strings.Join(g.paths, ", ") + "; " + ev
		}
	}
	return HostPresent, "the AllocateResponse kept in the checkpoint gave the container host " + g.what + "(s) " + strings.Join(g.paths, ", ") + ", which exist"
}
