package kubelet

import (
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
)

// PodResourcesSocketName is the PodResources socket, in the kubelet's
// "pod-resources" directory (pkg/kubelet/kubeletconfig/defaults.go,
// DefaultKubeletPodResourcesDirName).
const PodResourcesSocketName = "kubelet.sock"

// PodResources is what the kubelet's PodResources service answered.
type (
	PodResources     = rpc.PodResources
	ContainerDevices = rpc.ContainerDevices
	ResourceDevices  = rpc.ResourceDevices
)
