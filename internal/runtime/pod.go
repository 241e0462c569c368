package runtime

// Pod is a container's Kubernetes identity, from the annotations the CRI
// runtime wrote into its OCI spec.
type Pod struct {
	Namespace string
	Name      string
	UID       string
	// Container is the container's name in the pod spec; "" for the
	// sandbox (containerd names none; CRI-O names it "POD").
	Container string
	// Sandbox: this is the pod's sandbox (pause, infra) container, which
	// holds the pod's namespaces and runs no workload.
	Sandbox   bool
	SandboxID string
	// From names the annotation scheme: "containerd" (io.kubernetes.cri.*)
	// or "cri-o" (io.kubernetes.pod.*, io.kubernetes.cri-o.*).
	From string
}

// The CRI annotations. containerd's CRI plugin writes
// io.kubernetes.cri.* (internal/cri/annotations/annotations.go:
// ContainerType "sandbox"|"container", SandboxID, SandboxNamespace,
// SandboxName, SandboxUID, ContainerName). CRI-O adds the kubelet's labels
// (io.kubernetes.pod.namespace, .name, .uid, io.kubernetes.container.name:
// k8s.io/kubelet/pkg/types/labels.go) as annotations, and its own
// io.kubernetes.cri-o.ContainerType and SandboxID
// (internal/factory/container/container.go, server/sandbox_run_linux.go);
// its sandbox's container name is "POD" (internal/oci/oci_linux.go
// InfraContainerName).
const (
	annCRIType          = "io.kubernetes.cri.container-type"
	annCRISandboxID     = "io.kubernetes.cri.sandbox-id"
	annCRINamespace     = "io.kubernetes.cri.sandbox-namespace"
	annCRIName          = "io.kubernetes.cri.sandbox-name"
	annCRIUID           = "io.kubernetes.cri.sandbox-uid"
	annCRIContainer     = "io.kubernetes.cri.container-name"
	annKubeNamespace    = "io.kubernetes.pod.namespace"
	annKubeName         = "io.kubernetes.pod.name"
	annKubeUID          = "io.kubernetes.pod.uid"
	annKubeContainer    = "io.kubernetes.container.name"
	annCRIOType         = "io.kubernetes.cri-o.ContainerType"
	annCRIOSandboxID    = "io.kubernetes.cri-o.SandboxID"
	annContainerManager = "io.container.manager"
	typeSandbox         = "sandbox"
	crioInfraName       = "POD"
)

// PodOf reads the Kubernetes identity from a container's annotations; ok
// is false when they name no pod.
func PodOf(ann map[string]string) (p Pod, ok bool) {
	if ns, name := ann[annCRINamespace], ann[annCRIName]; ns != "" || name != "" {
		p = Pod{Namespace: ns, Name: name, UID: ann[annCRIUID], Container: ann[annCRIContainer],
			SandboxID: ann[annCRISandboxID], From: "containerd"}
		p.Sandbox = ann[annCRIType] == typeSandbox
		if p.Sandbox {
			p.Container = ""
		}
		return p, true
	}
	if ns, name := ann[annKubeNamespace], ann[annKubeName]; ns != "" || name != "" {
		p = Pod{Namespace: ns, Name: name, UID: ann[annKubeUID], Container: ann[annKubeContainer],
			SandboxID: ann[annCRIOSandboxID], From: "cri-o"}
		p.Sandbox = ann[annCRIOType] == typeSandbox || p.Container == crioInfraName
		if p.Sandbox {
			p.Container = ""
		}
		return p, true
	}
	return Pod{}, false
}
