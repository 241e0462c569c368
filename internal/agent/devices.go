package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Identity is how other exporters name a device, so that a query can join
// the agent's series with theirs. Each value is "" when this host does not
// tell it.
type Identity struct {
	// PCIBusID is the address in NVML's form, the value of DCGM
	// exporter's pci_bus_id label: an 8-digit domain and upper-case hex,
	// "00000000:18:00.0" (nvmlPciInfo_t.busId, NVML_DEVICE_PCI_BUS_ID_FMT).
	PCIBusID string
	// GPU is DCGM exporter's gpu label, the NVML index: NVML numbers the
	// GPUs it sees in PCI bus order, so this is the device's position in
	// address order among the functions the NVIDIA driver lists under
	// /proc/driver/nvidia/gpus.
	GPU string
	// UUID and ModelName are DCGM exporter's UUID and modelName labels,
	// from /proc/driver/nvidia/gpus/<BDF>/information ("GPU UUID",
	// "Model"), the strings nvidia-smi and NVML print.
	UUID, ModelName string
	// Resource is the extended resource the kubelet lists the device
	// under (its checkpoint or PodResources), in kube-state-metrics'
	// form: kube_node_status_capacity's resource label sanitizes the name
	// to a Prometheus label value ("nvidia.com/gpu" is "nvidia_com_gpu").
	Resource string
}

// NVMLBusID writes a PCI address (0000:18:00.0) as NVML does
// (00000000:18:00.0); an address it does not parse is returned as is.
func NVMLBusID(bdf string) string {
	dom, rest, ok := strings.Cut(bdf, ":")
	if !ok || strings.Count(rest, ":") != 1 {
		return bdf
	}
	d, err := strconv.ParseUint(dom, 16, 32)
	if err != nil {
		return bdf
	}
	return fmt.Sprintf("%08X:%s", d, strings.ToUpper(rest))
}

// SanitizeResource is kube-state-metrics' form of a resource name: every
// character that may not appear in a Prometheus label name becomes "_"
// (its SanitizeLabelName).
func SanitizeResource(r string) string {
	b := []byte(r)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' && i > 0) {
			b[i] = '_'
		}
	}
	return string(b)
}

// Identities names each device of the report (by its PCI address). root
// is the host the report read; kn the kubelet's state (nil when it could
// not be read: no resource is known then).
func Identities(root *hostfs.Root, r *report.Report, kn *kubelet.Node) map[string]Identity {
	out := make(map[string]Identity, len(r.Devices))
	resource := map[string]string{} // BDF or UUID -> resource
	if kn != nil {
		for _, ms := range [][]kubelet.DeviceMatch{kn.Devices, kn.Allocatable} {
			for _, m := range ms {
				if m.BDF != "" && m.Resource != "" {
					resource[m.BDF] = m.Resource
				}
			}
		}
		if kn.Checkpoint != nil {
			for res, ids := range kn.Checkpoint.Registered {
				for _, id := range ids {
					if _, ok := resource[id]; !ok {
						resource[id] = res
					}
				}
			}
		}
	}
	var nvidia []string
	for _, d := range r.Devices {
		id := Identity{PCIBusID: NVMLBusID(d.ID)}
		if info, err := driver.ReadGPUInformation(root, d.ID); err == nil {
			id.UUID, id.ModelName = info.UUID, info.Model
			nvidia = append(nvidia, d.ID)
		}
		res := resource[d.ID]
		if res == "" && id.UUID != "" {
			res = resource[id.UUID]
		}
		if res != "" {
			id.Resource = SanitizeResource(res)
		}
		out[d.ID] = id
	}
	slices.Sort(nvidia)
	for i, bdf := range nvidia {
		id := out[bdf]
		id.GPU = strconv.Itoa(i)
		out[bdf] = id
	}
	return out
}

// Resources are the extended resources the kubelet knows of, sorted.
func Resources(kn *kubelet.Node) []string {
	if kn == nil {
		return nil
	}
	var out []string
	for r := range kn.Resources() {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// deviceOf is the device a finding is about: its subject is the device's
// address, or one of the device's nodes; "" when it is about no one
// device (the host, a driver, a layer).
func deviceOf(r *report.Report, f report.Finding) string {
	for _, d := range r.Devices {
		if f.Subject == d.ID || slices.Contains(d.Nodes, f.Subject) {
			return d.ID
		}
	}
	return ""
}
