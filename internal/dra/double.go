package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/lazyre"
)

// DoubleAdvert is one device that a device plugin registered with the
// kubelet and that a DRA driver's CDI spec also names: the scheduler
// counts it twice (once as an extended resource, once as a ResourceSlice
// device), so two pods can be given the same device.
type DoubleAdvert struct {
	// The device-plugin side: the resource and device ID in the device
	// manager's checkpoint (RegisteredDevices).
	Resource string `json:"resource"`
	DeviceID string `json:"device_id"`
	// The DRA side: the driver, the CDI device and the spec declaring it,
	// and why the spec is taken to be the driver's (DriverBy).
	Driver    string `json:"driver"`
	CDIDevice string `json:"cdi_device"`
	Spec      string `json:"spec"`
	DriverBy  string `json:"driver_by"`
	// Key is what both name: "uuid:…", "pci:…" or "node:/dev/…", and
	// Evidence how each side was seen to name it.
	Key      string `json:"key"`
	Evidence string `json:"evidence"`
}

var (
	uuidAny = lazyre.New(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	bdfAny  = lazyre.New(`\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b`)
	nvNode  = lazyre.New(`^/dev/nvidia([0-9]+)$`)
)

// double finds devices advertised both ways.
func (n *Node) double(root *hostfs.Root, reg *cdi.Registry, kdir string, cp *kubelet.Checkpoint) {
	n.Double, n.DoubleNotRun, n.DoubleErr = nil, "", nil
	if cp == nil {
		p := path.Join(kubelet.DevicePluginDir(kdir), kubelet.CheckpointName)
		// The file's AllocateResponses may hold secrets: never archived.
		b, err := root.ReadFileRedacted(p, kubelet.MaxCheckpointSize, func([]byte) []byte { return nil })
		switch st, why := stateOf(root, p, kdir, err); {
		case st == kubelet.Absent:
			return // no device plugin has ever registered: nothing doubled
		case err != nil && errors.Is(err, fs.ErrNotExist):
			n.DoubleNotRun = fmt.Sprintf("%s: not in this capture (the device-plugin checkpoint is never archived; the kubelet package's capture holds it parsed)", p)
			n.DoubleErr = &hostfs.NotCapturedError{Path: p}
			return
		case err != nil:
			n.DoubleNotRun, n.DoubleErr = fmt.Sprintf("%s: %s", p, why), err
			return
		}
		c, err := kubelet.ParseCheckpoint(b)
		if err != nil {
			n.DoubleNotRun, n.DoubleErr = fmt.Sprintf("%s: %v", p, err), &fs.PathError{Op: "parse", Path: p, Err: err}
			return
		}
		cp = c
	}
	if len(cp.Registered) == 0 {
		return
	}
	for i := range reg.Dirs {
		if d := &reg.Dirs[i]; d.Problem() != nil {
			n.DoubleNotRun = fmt.Sprintf("CDI spec directory %s could not be read: the DRA drivers' devices are not known", d.Path)
			n.DoubleErr = d.Problem()
			return
		}
	}
	hd := readNVIDIA(root)
	drivers := n.Drivers()
	owners := draSpecOwners(reg, n.State, drivers)
	if len(owners) == 0 {
		return
	}
	// Keys of every DRA CDI device.
	type draDev struct {
		d        *cdi.Device
		driver   string
		by       string
		evidence map[string]string
	}
	var devs []draDev
	names := reg.Names()
	for _, name := range names {
		d := reg.Devices[name]
		o, ok := owners[name]
		if !ok {
			continue
		}
		devs = append(devs, draDev{d: d, driver: o.driver, by: o.by, evidence: cdiKeys(root, hd, d)})
	}
	resources := make([]string, 0, len(cp.Registered))
	for r := range cp.Registered {
		resources = append(resources, r)
	}
	sort.Strings(resources)
	for _, res := range resources {
		for _, id := range cp.Registered[res] {
			keys := pluginKeys(root, hd, id)
			for _, dd := range devs {
				for _, k := range sortedKeys(keys) {
					if ev, ok := dd.evidence[k]; ok {
						n.Double = append(n.Double, DoubleAdvert{Resource: res, DeviceID: id, Driver: dd.driver,
							CDIDevice: dd.d.Name, Spec: dd.d.Spec.Path, DriverBy: dd.by, Key: k,
							Evidence: fmt.Sprintf("device plugin: %s; DRA: %s", keys[k], ev)})
						break
					}
				}
			}
		}
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type owner struct{ driver, by string }

// draSpecOwners says which CDI devices are a DRA driver's: a name a
// prepared claim of the driver holds (the state says so), or a device of a
// spec whose vendor is the driver's name or "k8s." and the driver's name
// (the NVIDIA DRA driver's convention: driver gpu.nvidia.com, CDI vendor
// k8s.gpu.nvidia.com). There is no other record tying a spec to a driver.
func draSpecOwners(reg *cdi.Registry, st *State, drivers []string) map[string]owner {
	out := map[string]owner{}
	if st != nil {
		for _, c := range st.Claims {
			for _, dc := range c.Drivers {
				for _, dv := range dc.Devices {
					for _, id := range dv.CDIDeviceIDs {
						if _, ok := reg.Devices[id]; ok {
							out[id] = owner{dc.Driver, fmt.Sprintf("claim %s/%s prepared by %s holds it (%s)", c.Namespace, c.Name, dc.Driver, StateName)}
						}
					}
				}
			}
		}
	}
	for _, name := range reg.Names() {
		if _, ok := out[name]; ok {
			continue
		}
		vendor := name[:strings.IndexByte(name, '/')]
		for _, drv := range drivers {
			if vendor == drv || vendor == "k8s."+drv {
				out[name] = owner{drv, fmt.Sprintf("CDI vendor %s is the driver's name", vendor)}
				break
			}
		}
	}
	return out
}

// nvidiaGPU is what /proc/driver/nvidia/gpus/BDF/information says.
type nvidiaGPU struct{ bdf, uuid, minor string }

type nvidiaInfo struct {
	byUUID  map[string]nvidiaGPU
	byMinor map[string]nvidiaGPU
}

// readNVIDIA reads the NVIDIA driver's per-GPU information files
// (driver.ReadGPUInformation), the one place that ties a GPU UUID to its
// PCI address and /dev/nvidiaN.
func readNVIDIA(root *hostfs.Root) nvidiaInfo {
	h := nvidiaInfo{byUUID: map[string]nvidiaGPU{}, byMinor: map[string]nvidiaGPU{}}
	names, err := root.ReadDir(driver.NVIDIAGPUsDir)
	if err != nil {
		return h
	}
	for _, bdf := range names {
		info, err := driver.ReadGPUInformation(root, bdf)
		if err != nil {
			continue
		}
		g := nvidiaGPU{bdf: strings.ToLower(bdf), uuid: strings.ToLower(uuidAny().FindString(info.UUID))}
		if info.DeviceMinor != nil {
			g.minor = strconv.FormatUint(uint64(*info.DeviceMinor), 10)
		}
		if g.uuid != "" {
			h.byUUID[g.uuid] = g
		}
		if g.minor != "" {
			h.byMinor[g.minor] = g
		}
	}
	return h
}

// pluginKeys are the keys a device-plugin device ID stands for, each with
// how it was derived.
func pluginKeys(root *hostfs.Root, hd nvidiaInfo, id string) map[string]string {
	keys := map[string]string{}
	form, key := kubelet.ClassifyID(id)
	switch form {
	case kubelet.IDGPUUUID, kubelet.IDMIGLegacy, kubelet.IDMIGUUID:
		u := strings.ToLower(uuidAny().FindString(key))
		keys["uuid:"+u] = fmt.Sprintf("ID %s", id)
		if form == kubelet.IDGPUUUID {
			if g, ok := hd.byUUID[u]; ok {
				src := fmt.Sprintf("ID %s is GPU %s in /proc/driver/nvidia/gpus/%s/information", id, g.bdf, g.bdf)
				keys["pci:"+g.bdf] = src
				if g.minor != "" {
					keys["node:/dev/nvidia"+g.minor] = src + ", Device Minor " + g.minor
				}
			}
		}
	case kubelet.IDPCIAddress:
		keys["pci:"+key] = fmt.Sprintf("ID %s", id)
		for _, node := range drmNodesOf(root, key) {
			keys["node:"+node] = fmt.Sprintf("ID %s has %s (/sys/bus/pci/devices/%s/drm)", id, node, key)
		}
	case kubelet.IDOpaque:
		// A plugin's own names (the device-plugin mock's mock-0, a
		// vendor's serial): only the same string in a DRA device's
		// env list or name ties them. Short IDs and bare indexes ("0",
		// "1") stand for too many things to match.
		if opaqueMatchable(id) {
			keys["id:"+id] = fmt.Sprintf("ID %s", id)
		}
	case kubelet.IDDRMCard:
		keys["node:/dev/dri/"+key] = fmt.Sprintf("ID %s is %s", id, key)
		if bdf := drmBDF(root, key); bdf != "" {
			keys["pci:"+bdf] = fmt.Sprintf("ID %s: /sys/class/drm/%s/device is %s", id, key, bdf)
		}
	}
	return keys
}

// cdiKeys are the keys a CDI device's edits name: its device nodes, the
// GPUs they are, and UUIDs and PCI addresses in its environment,
// annotations and name.
func cdiKeys(root *hostfs.Root, hd nvidiaInfo, d *cdi.Device) map[string]string {
	keys := map[string]string{}
	e := d.Edits()
	addNode := func(p string) {
		if p == "" {
			return
		}
		p = path.Clean(p)
		keys["node:"+p] = fmt.Sprintf("%s injects %s", d.Name, p)
		if m := nvNode().FindStringSubmatch(p); m != nil {
			if g, ok := hd.byMinor[m[1]]; ok {
				keys["pci:"+g.bdf] = fmt.Sprintf("%s injects %s, Device Minor %s of GPU %s", d.Name, p, m[1], g.bdf)
				keys["uuid:"+g.uuid] = keys["pci:"+g.bdf]
			}
		}
		if name, ok := strings.CutPrefix(p, "/dev/dri/"); ok {
			if bdf := drmBDF(root, name); bdf != "" {
				keys["pci:"+bdf] = fmt.Sprintf("%s injects %s, /sys/class/drm/%s/device is %s", d.Name, p, name, bdf)
			}
		}
	}
	for _, dn := range e.DeviceNodes {
		if dn == nil {
			continue
		}
		addNode(dn.HostPath)
		addNode(dn.Path)
	}
	scan := func(where, s string) {
		for _, u := range uuidAny().FindAllString(s, -1) {
			keys["uuid:"+strings.ToLower(u)] = fmt.Sprintf("%s names %s in %s", d.Name, u, where)
		}
		for _, b := range bdfAny().FindAllString(s, -1) {
			keys["pci:"+strings.ToLower(b)] = fmt.Sprintf("%s names %s in %s", d.Name, b, where)
		}
	}
	for _, env := range e.Env {
		k, v, _ := strings.Cut(env, "=")
		scan("env "+k, env)
		// Device lists in env values are comma-separated
		// (NVIDIA_VISIBLE_DEVICES, the mocks' MOCK_VISIBLE_DEVICES).
		for _, tok := range strings.Split(v, ",") {
			if opaqueMatchable(tok) {
				keys["id:"+tok] = fmt.Sprintf("%s sets %s=%s", d.Name, k, v)
			}
		}
	}
	annotations := func(a map[string]string) {
		for k, v := range a {
			scan("annotation "+k, v)
		}
	}
	if d.Spec.Spec != nil {
		annotations(d.Spec.Spec.Annotations)
	}
	annotations(d.Device.Annotations)
	scan("its name", d.Device.Name)
	if opaqueMatchable(d.Device.Name) {
		keys["id:"+d.Device.Name] = fmt.Sprintf("%s is named %s", d.Name, d.Device.Name)
	}
	return keys
}

// drmNodesOf lists /dev/dri nodes of a PCI function (its sysfs drm
// directory: card* and renderD*).
func drmNodesOf(root *hostfs.Root, bdf string) []string {
	names, err := root.ReadDir(path.Join("/sys/bus/pci/devices", bdf, "drm"))
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "card") || strings.HasPrefix(n, "renderD") {
			out = append(out, "/dev/dri/"+n)
		}
	}
	return out
}

// drmBDF is the PCI address of a DRM node (/sys/class/drm/NAME/device
// links to the PCI function's sysfs directory).
func drmBDF(root *hostfs.Root, name string) string {
	t, err := root.Readlink(path.Join("/sys/class/drm", name, "device"))
	if err != nil {
		return ""
	}
	b := path.Base(t)
	if bdfAny().MatchString(b) {
		return strings.ToLower(b)
	}
	return ""
}

// opaqueMatchable: an opaque ID long enough, and not a bare number, to be
// matched by equality.
func opaqueMatchable(id string) bool {
	if len(id) < 4 {
		return false
	}
	_, err := strconv.Atoi(id)
	return err != nil
}
