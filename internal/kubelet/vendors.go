package kubelet

import (
	"slices"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/lazyre"
)

// VendorPlugin is what a vendor's device plugin registers for devices
// bound to a kernel driver: its resource names, its socket names in the
// device-plugin directory where they are known, and the form of the device
// IDs it advertises. Each row cites where the facts come from.
type VendorPlugin struct {
	Driver    string   // the PCI driver of the devices it serves
	Resources []string // resource names it registers (the first is the default)
	Plugin    string   // the plugin's project
	// Sockets are the names its sockets have; "" where the plugin's
	// source could not be checked here.
	Sockets []string
	IDs     string // what its device IDs are
	Source  string
	// DRADrivers are the vendor's DRA drivers for these devices: the
	// names their kubelet plugins register (plugins_registry) and
	// publish ResourceSlices under. A node whose devices one of them
	// serves needs no device plugin. DRASource cites where the names
	// come from.
	DRADrivers []string
	DRASource  string
}

// VendorPlugins is the table, by driver. A node can run a plugin not
// listed here (the generic plugins: accel-doctor's own, Akri, the
// smarter-device-manager, SR-IOV's): a driver with no row names no
// resource, and a driver whose row's resources are all absent from a node
// may still be served under another name.
var VendorPlugins = []VendorPlugin{{
	Driver:     "nvidia",
	Resources:  []string{"nvidia.com/gpu", "nvidia.com/mig-<profile>"},
	Plugin:     "NVIDIA/k8s-device-plugin",
	Sockets:    []string{"nvidia-gpu.sock", "nvidia-mig-<profile>.sock"},
	IDs:        `GPU UUIDs ("GPU-<uuid>"), MIG UUIDs ("MIG-<uuid>", or "MIG-GPU-<uuid>/<gi>/<ci>" before driver R470), with "::<n>" appended per replica when time-slicing or MPS shares a GPU; GPU indices with --device-id-strategy=index`,
	Source:     `internal/plugin/server.go (socket: DevicePluginPath + "nvidia-" + <resource name after the slash> + ".sock"); internal/rm/devices.go (ID = UUID, AnnotatedID "<id>::<replica>")`,
	DRADrivers: []string{"gpu.nvidia.com", "compute-domain.nvidia.com"},
	DRASource:  `NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu): cmd/gpu-kubelet-plugin (DriverName "gpu.nvidia.com") and cmd/compute-domain-kubelet-plugin (DriverName "compute-domain.nvidia.com")`,
}, {
	Driver:     "amdgpu",
	Resources:  []string{"amd.com/gpu"},
	Plugin:     "ROCm/k8s-device-plugin",
	Sockets:    []string{"amd.com_gpu"},
	IDs:        `PCI addresses of the GPUs ("0000:19:00.0"), "amdgpu_xcp_<n>" for compute partitions`,
	Source:     `internal/pkg/manager/manager.go (kubevirt device-plugin-manager, namespace "amd.com"; its socket is DevicePluginPath + namespace + "_" + name); internal/pkg/amdgpu/amdgpu.go (GetAMDGPUs keys devices by the base name of /sys/module/amdgpu/drivers/pci:amdgpu/<BDF>)`,
	DRADrivers: []string{"gpu.amd.com"},
	DRASource:  `ROCm/k8s-gpu-dra-driver (its kubelet plugin's driver name and DeviceClass "gpu.amd.com")`,
}, {
	Driver:     "i915",
	Resources:  []string{"gpu.intel.com/i915"},
	Plugin:     "intel/intel-device-plugins-for-kubernetes (gpu_plugin)",
	Sockets:    []string{"gpu.intel.com-i915.sock"},
	IDs:        `"<DRM card>-<n>" ("card0-0"), n up to -shared-dev-num`,
	Source:     `pkg/deviceplugin/server.go (socket: namespace + "-" + devType + ".sock"); cmd/gpu_plugin/gpu_plugin.go (devID := card name + "-" + i)`,
	DRADrivers: []string{"gpu.intel.com"},
	DRASource:  intelDRASource,
}, {
	Driver:     "xe",
	Resources:  []string{"gpu.intel.com/xe"},
	Plugin:     "intel/intel-device-plugins-for-kubernetes (gpu_plugin)",
	Sockets:    []string{"gpu.intel.com-xe.sock"},
	IDs:        `"<DRM card>-<n>" ("card0-0")`,
	Source:     `pkg/deviceplugin/server.go; cmd/gpu_plugin/gpu_plugin.go (the device type is the card's driver, i915 or xe)`,
	DRADrivers: []string{"gpu.intel.com"},
	DRASource:  intelDRASource,
}, {
	Driver:     "habanalabs",
	Resources:  []string{"habana.ai/gaudi"},
	Plugin:     "HabanaAI/gaudi-device-plugin",
	IDs:        "not checked here",
	Source:     "Intel Gaudi documentation, Kubernetes installation (the plugin exposes habana.ai/gaudi); its source is not in the stores searched",
	DRADrivers: []string{"gaudi.intel.com"},
	DRASource:  intelDRASource,
}, {
	Driver:    "neuron",
	Resources: []string{"aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "aws.amazon.com/neurondevice"},
	Plugin:    "aws-neuron/neuron-device-plugin",
	IDs:       "not checked here",
	Source:    "AWS Neuron documentation, Neuron Device Plugin (it registers aws.amazon.com/neuron and aws.amazon.com/neuroncore; newer releases also aws.amazon.com/neurondevice)",
}}

// intelDRASource: Intel's DRA drivers share one repository.
const intelDRASource = `intel/intel-resource-drivers-for-kubernetes: cmd/gpu-kubelet-plugin (driver "gpu.intel.com", for i915 and xe GPUs) and cmd/gaudi-kubelet-plugin (driver "gaudi.intel.com", for habanalabs Gaudi accelerators)`

// VendorFor returns the row whose DRA drivers include name.
func VendorFor(draDriver string) (VendorPlugin, bool) {
	for _, v := range VendorPlugins {
		if slices.Contains(v.DRADrivers, draDriver) {
			return v, true
		}
	}
	return VendorPlugin{}, false
}

// VendorPluginFor returns the row for a driver.
func VendorPluginFor(driver string) (VendorPlugin, bool) {
	for _, v := range VendorPlugins {
		if v.Driver == driver {
			return v, true
		}
	}
	return VendorPlugin{}, false
}

// MatchesResource reports whether resource is one v registers
// ("<profile>" in a row matches any MIG profile).
func (v VendorPlugin) MatchesResource(resource string) bool {
	for _, r := range v.Resources {
		if r == resource {
			return true
		}
		if pre, ok := strings.CutSuffix(r, "<profile>"); ok && strings.HasPrefix(resource, pre) && len(resource) > len(pre) {
			return true
		}
	}
	return false
}

var (
	// internal/deviceplugin's DefaultSocketName and MockSocketName.
	accelDoctorSocket = lazyre.New(`^accel-doctor-(mock-)?([a-z0-9-]+(?:\.[a-z0-9-]+)*)_([A-Za-z0-9][A-Za-z0-9_.-]*?)(?:@[0-9]+)?\.sock$`)
	nvidiaSocket      = lazyre.New(`^nvidia-([a-z0-9][a-z0-9.-]*)\.sock$`)
	// DNS-1123 subdomain, dash, name, ".sock": Intel's dpapi.
	intelSocket = lazyre.New(`^([a-z0-9-]+(?:\.[a-z0-9-]+)+)-([a-z0-9][a-z0-9_.]*)\.sock$`)
	// kubevirt device-plugin-manager: namespace "_" name, no suffix.
	dpmSocket = lazyre.New(`^([a-z0-9-]+(?:\.[a-z0-9-]+)+)_([A-Za-z0-9][A-Za-z0-9_.-]*)$`)
)

// resourceFromSocketName infers a resource from a socket's name by the
// conventions of the plugins in VendorPlugins. It is a hint: any plugin
// may name its socket as it likes.
func resourceFromSocketName(name string) (resource, hint string) {
	// accel-doctor's own first: its names would also fit the patterns
	// below, wrongly.
	if m := accelDoctorSocket().FindStringSubmatch(name); m != nil {
		return m[2] + "/" + m[3], `accel-doctor's plugin or mock, "accel-doctor-[mock-]<domain>_<name>[@<instance>].sock"`
	}
	if m := nvidiaSocket().FindStringSubmatch(name); m != nil {
		return "nvidia.com/" + m[1], `NVIDIA k8s-device-plugin's "nvidia-<name>.sock"`
	}
	if m := intelSocket().FindStringSubmatch(name); m != nil {
		return m[1] + "/" + m[2], `Intel device plugins' "<namespace>-<type>.sock"`
	}
	if m := dpmSocket().FindStringSubmatch(name); m != nil {
		return m[1] + "/" + m[2], `kubevirt device-plugin-manager's "<namespace>_<name>" (AMD's plugin)`
	}
	return "", ""
}
