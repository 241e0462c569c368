package kubelet

import (
	"context"
	"sort"
	"time"

	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// PodResourcesSocketName is the PodResources socket, in the kubelet's
// "pod-resources" directory (pkg/kubelet/kubeletconfig/defaults.go,
// DefaultKubeletPodResourcesDirName).
const PodResourcesSocketName = "kubelet.sock"

// The calls made: both take an empty request and only read the kubelet's
// state (pkg/kubelet/apis/podresources/server_v1.go).
var (
	listMethod        = podresourcesapi.PodResourcesLister_List_FullMethodName
	allocatableMethod = podresourcesapi.PodResourcesLister_GetAllocatableResources_FullMethodName
)

// PodResources is what the kubelet's PodResources service answered.
type PodResources struct {
	Path string `json:"path"`
	// List is the List call; Containers what it gave: every container that
	// holds devices of a device plugin.
	List       Dial               `json:"list"`
	Containers []ContainerDevices `json:"containers,omitempty"`
	// Allocatable is the GetAllocatableResources call (a feature gate,
	// KubeletPodResourcesGetAllocatable, before 1.28: an older kubelet may
	// answer it with an error); Devices what it gave: per resource, the
	// devices the device manager counts as allocatable, which are the
	// healthy ones (ManagerImpl.GetAllocatableDevices filters allDevices by
	// healthyDevices), allocated or not.
	Allocatable Dial              `json:"allocatable"`
	Devices     []ResourceDevices `json:"devices,omitempty"`
}

// ContainerDevices is one container's devices of one resource.
type ContainerDevices struct {
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"device_ids"`
	NUMA      []int64  `json:"numa,omitempty"`
}

// ResourceDevices is one entry of GetAllocatableResources.
type ResourceDevices struct {
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"device_ids"`
	NUMA      []int64  `json:"numa,omitempty"`
}

// AllocatableIDs is, per resource, the device IDs GetAllocatableResources
// gave (nil when it did not answer).
func (p *PodResources) AllocatableIDs() map[string][]string {
	if p == nil || p.Allocatable.Answer != Answered {
		return nil
	}
	out := map[string][]string{}
	for _, d := range p.Devices {
		out[d.Resource] = append(out[d.Resource], d.DeviceIDs...)
	}
	for r, ids := range out {
		sort.Strings(ids)
		out[r] = compact(ids)
	}
	return out
}

func readPodResources(ctx context.Context, root *hostfs.Root, p string, timeout time.Duration) *PodResources {
	pr := &PodResources{Path: p}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, d := newClient(ctx, root, p)
	if d != nil {
		l, a := *d, *d
		l.Method, a.Method = listMethod, allocatableMethod
		pr.List, pr.Allocatable = l, a
		return pr
	}
	defer c.Close()
	cl := podresourcesapi.NewPodResourcesListerClient(c.cc)
	list, err := cl.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	pr.List = c.result(listMethod, err)
	if err == nil {
		for _, pod := range list.GetPodResources() {
			for _, ctr := range pod.GetContainers() {
				for _, dev := range ctr.GetDevices() {
					pr.Containers = append(pr.Containers, ContainerDevices{Namespace: pod.GetNamespace(), Pod: pod.GetName(),
						Container: ctr.GetName(), Resource: dev.GetResourceName(), DeviceIDs: sorted(dev.GetDeviceIds()),
						NUMA: numaOf(dev.GetTopology())})
				}
			}
		}
		sort.SliceStable(pr.Containers, func(i, j int) bool {
			a, b := pr.Containers[i], pr.Containers[j]
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			if a.Pod != b.Pod {
				return a.Pod < b.Pod
			}
			return a.Container < b.Container
		})
	}
	alloc, err := cl.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	pr.Allocatable = c.result(allocatableMethod, err)
	if err == nil {
		for _, dev := range alloc.GetDevices() {
			pr.Devices = append(pr.Devices, ResourceDevices{Resource: dev.GetResourceName(), DeviceIDs: sorted(dev.GetDeviceIds()),
				NUMA: numaOf(dev.GetTopology())})
		}
		sort.SliceStable(pr.Devices, func(i, j int) bool { return pr.Devices[i].Resource < pr.Devices[j].Resource })
	}
	return pr
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func numaOf(t *podresourcesapi.TopologyInfo) []int64 {
	var out []int64
	for _, n := range t.GetNodes() {
		out = append(out, n.GetID())
	}
	return out
}
