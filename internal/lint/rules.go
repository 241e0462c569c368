package lint

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/resname"

	corev1 "k8s.io/api/core/v1"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// container is the part of a container (regular, init or ephemeral) the
// rules read, with its field path.
type container struct {
	path      string // spec.containers[0]
	ephemeral bool
	env       []corev1.EnvVar
	res       corev1.ResourceRequirements
	sc        *corev1.SecurityContext
	mounts    []corev1.VolumeMount
}

func containersOf(w workload) []container {
	var out []container
	for i, c := range w.spec.InitContainers {
		out = append(out, container{path: fmt.Sprintf("%s.initContainers[%d]", w.specPath, i), env: c.Env, res: c.Resources, sc: c.SecurityContext, mounts: c.VolumeMounts})
	}
	for i, c := range w.spec.Containers {
		out = append(out, container{path: fmt.Sprintf("%s.containers[%d]", w.specPath, i), env: c.Env, res: c.Resources, sc: c.SecurityContext, mounts: c.VolumeMounts})
	}
	for i, c := range w.spec.EphemeralContainers {
		// The API server forbids resources on ephemeral containers; what
		// they can do is set env, mount volumes and be privileged.
		out = append(out, container{path: fmt.Sprintf("%s.ephemeralContainers[%d]", w.specPath, i), ephemeral: true, env: c.Env, res: c.Resources, sc: c.SecurityContext, mounts: c.VolumeMounts})
	}
	return out
}

// isExtended: an extended resource, as the API server and the scheduler
// define it (internal/resname).
func isExtended(n corev1.ResourceName) bool { return resname.IsExtended(string(n)) }

// accelVendor is the vendor of an accelerator resource, and whether n is
// one: the GPU and accelerator vendors' device-plugin resources, and any
// extended resource with "gpu" in its name (example.com/gpu,
// gpu.example.com/xe). NVIDIA's Network Operator also advertises NICs
// under nvidia.com/ (rdma_shared_device_a, sriov..., hostdev...): those
// are not accelerators.
func accelVendor(n corev1.ResourceName) (string, bool) {
	if !isExtended(n) {
		return "", false
	}
	domain, name, _ := strings.Cut(string(n), "/")
	lname := strings.ToLower(name)
	switch {
	case domain == "nvidia.com":
		for _, nic := range []string{"rdma", "sriov", "hostdev", "mlnx"} {
			if strings.Contains(lname, nic) {
				return "", false
			}
		}
		return "nvidia", true
	case domain == "amd.com":
		return "amd", true
	case domain == "gpu.intel.com":
		return "intel", true
	case domain == "habana.ai":
		return "habana", true
	case domain == "aws.amazon.com" && strings.HasPrefix(lname, "neuron"):
		return "aws", true
	case strings.Contains(lname, "gpu"):
		return domain, true
	}
	return "", false
}

// classVendor is the vendor of a DRA DeviceClass by its name's domain:
// the vendors' drivers name their classes gpu.nvidia.com,
// mig.nvidia.com, gpu.amd.com, gpu.intel.com, ...
func classVendor(class string) (string, bool) {
	c := strings.ToLower(class)
	for _, v := range []struct{ suffix, vendor string }{
		{"nvidia.com", "nvidia"}, {"amd.com", "amd"}, {"intel.com", "intel"},
		{"habana.ai", "habana"}, {"amazonaws.com", "aws"}, {"amazon.com", "aws"},
	} {
		if c == v.suffix || strings.HasSuffix(c, "."+v.suffix) {
			return v.vendor, true
		}
	}
	return "", false
}

// accelResource is one accelerator resource a container asks for.
type accelResource struct {
	vendor string
	name   corev1.ResourceName
	path   string // the field path of the quantity
	value  string
}

// accels lists a container's accelerator resources (limits first: a
// request without a limit is its own finding, but still asks).
func (c container) accels() []accelResource {
	var out []accelResource
	seen := map[corev1.ResourceName]bool{}
	for _, field := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", c.res.Limits}, {"requests", c.res.Requests}} {
		for _, n := range sortedNames(field.list) {
			v, ok := accelVendor(n)
			if !ok || seen[n] {
				continue
			}
			seen[n] = true
			q := field.list[n]
			out = append(out, accelResource{vendor: v, name: n, path: fmt.Sprintf("%s.resources.%s[%s]", c.path, field.name, n), value: q.String()})
		}
	}
	return out
}

func (c container) asksNvidia() (accelResource, bool) {
	for _, a := range c.accels() {
		if a.vendor == "nvidia" {
			return a, true
		}
	}
	return accelResource{}, false
}

func (c container) privileged() bool {
	return c.sc != nil && c.sc.Privileged != nil && *c.sc.Privileged
}

// visibleDevices is the literal NVIDIA_VISIBLE_DEVICES of the container's
// env, and whether there is one (a valueFrom cannot be known offline).
func (c container) visibleDevices() (string, int, bool) {
	for i, e := range c.env {
		if e.Name == "NVIDIA_VISIBLE_DEVICES" && e.ValueFrom == nil {
			return e.Value, i, true
		}
	}
	return "", 0, false
}

// noGPUValue: the values nvidia-container-toolkit reads as "no GPU":
// "void" and "" (as runc would run it), "none" (no GPU, driver
// capabilities only).
func noGPUValue(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || v == "void" || v == "none"
}

// The RuntimeClass names the NVIDIA GPU operator creates.
var nvidiaRuntimeClasses = map[string]bool{"nvidia": true, "nvidia-cdi": true, "nvidia-legacy": true}

// accelDevicePath: a host path that is an accelerator's device node or
// the directory of them. NVIDIA: /dev/nvidia0, nvidiactl, nvidia-uvm,
// nvidia-caps/; DRM: /dev/dri/; AMD: /dev/kfd; the accel class
// (habanalabs, ivpu, amdxdna): /dev/accel/; VFIO: /dev/vfio/; iommufd:
// /dev/iommu; AWS Neuron: /dev/neuron0; Habana (older): /dev/hl0.
func accelDevicePath(p string) bool {
	for _, prefix := range []string{"/dev/nvidia", "/dev/neuron", "/dev/hl"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	for _, dir := range []string{"/dev/dri", "/dev/kfd", "/dev/accel", "/dev/vfio", "/dev/iommu"} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// rules runs every rule on one workload, in catalog order.
func (l *linter) rules(w workload) {
	cs := containersOf(w)
	l.extendedResources(w, cs)
	l.visibleDevicesWithoutGPU(w, cs)
	l.privilegedGPU(w, cs)
	l.runtimeClassWithoutGPU(w, cs)
	l.gpuWithoutToleration(w, cs)
	l.pluginAndDRA(w, cs)
	l.hostPathDevices(w, cs)
	l.vfioWithoutIPCLock(w, cs)
}

// extendedResources: what the API server's ValidateResourceRequirements
// and ValidateResourceQuantityValue refuse for extended resources.
func (l *linter) extendedResources(w workload, cs []container) {
	for _, c := range cs {
		if c.ephemeral {
			continue
		}
		for _, n := range sortedNames(c.res.Requests) {
			if !isExtended(n) {
				continue
			}
			req := c.res.Requests[n]
			reqPath := fmt.Sprintf("%s.resources.requests[%s]", c.path, n)
			lim, ok := c.res.Limits[n]
			switch {
			case !ok:
				l.add(w, CodeRequestWithoutLimit,
					fmt.Sprintf("%s requests %s %s with no limit: the API server rejects the pod (\"Limit must be set for non overcommitable resources\")", c.path, req.String(), n),
					[]report.Evidence{{Path: reqPath, Value: req.String()}, {Path: fmt.Sprintf("%s.resources.limits[%s]", c.path, n), Value: "(absent)"}})
			case req.Cmp(lim) != 0:
				l.add(w, CodeRequestNotLimit,
					fmt.Sprintf("%s requests %s %s but limits it to %s: the API server rejects the pod (\"must be equal to %s limit of %s\")", c.path, req.String(), n, lim.String(), n, lim.String()),
					[]report.Evidence{{Path: reqPath, Value: req.String()}, {Path: fmt.Sprintf("%s.resources.limits[%s]", c.path, n), Value: lim.String()}})
			}
		}
		for _, field := range []struct {
			name string
			list corev1.ResourceList
		}{{"limits", c.res.Limits}, {"requests", c.res.Requests}} {
			for _, n := range sortedNames(field.list) {
				q := field.list[n]
				if isExtended(n) && q.MilliValue()%1000 != 0 {
					p := fmt.Sprintf("%s.resources.%s[%s]", c.path, field.name, n)
					l.add(w, CodeNotInteger, fmt.Sprintf("%s is %s: extended resources are whole units, the API server rejects the pod (\"must be an integer\")", p, q.String()),
						[]report.Evidence{{Path: p, Value: q.String()}})
				}
			}
		}
	}
}

func (l *linter) visibleDevicesWithoutGPU(w workload, cs []container) {
	for _, c := range cs {
		v, i, ok := c.visibleDevices()
		if !ok || noGPUValue(v) {
			continue
		}
		if _, gpu := c.asksNvidia(); gpu || len(c.res.Claims) > 0 {
			continue
		}
		l.add(w, CodeVisibleDevicesNoGPU,
			fmt.Sprintf("%s sets NVIDIA_VISIBLE_DEVICES=%s and requests no NVIDIA GPU nor DRA claim: where the NVIDIA runtime honours the variable it gets those GPUs unaccounted", c.path, v),
			[]report.Evidence{{Path: fmt.Sprintf("%s.env[%d]", c.path, i), Value: "NVIDIA_VISIBLE_DEVICES=" + v}})
	}
}

func (l *linter) privilegedGPU(w workload, cs []container) {
	for _, c := range cs {
		if !c.privileged() {
			continue
		}
		as := c.accels()
		if len(as) == 0 {
			continue
		}
		l.add(w, CodePrivilegedGPU,
			fmt.Sprintf("%s is privileged and requests %s: it sees and can open every device of the node, not only the one allocated", c.path, as[0].name),
			[]report.Evidence{{Path: c.path + ".securityContext.privileged", Value: "true"}, {Path: as[0].path, Value: as[0].value}})
	}
}

func (l *linter) runtimeClassWithoutGPU(w workload, cs []container) {
	rc := w.spec.RuntimeClassName
	if rc == nil || !nvidiaRuntimeClasses[*rc] || len(w.spec.ResourceClaims) > 0 {
		return
	}
	neutral := true
	for _, c := range cs {
		if _, gpu := c.asksNvidia(); gpu || len(c.res.Claims) > 0 {
			return
		}
		if v, _, ok := c.visibleDevices(); !ok || !noGPUValue(v) {
			neutral = false
		}
	}
	if neutral {
		return
	}
	l.add(w, CodeRuntimeClassNoGPU,
		fmt.Sprintf("runtimeClassName %s with no NVIDIA GPU request nor DRA claim: a container whose image sets NVIDIA_VISIBLE_DEVICES=all (the CUDA images do) gets every GPU of the node", *rc),
		[]report.Evidence{{Path: w.specPath + ".runtimeClassName", Value: *rc}})
}

// gpuWithoutToleration: the scheduler's TaintToleration filter needs a
// toleration matching the taint's key (or an empty key with Exists) and
// its effect (an empty effect matches all) (k8s.io/api core/v1
// Toleration.ToleratesTaint). The taint's value is unknown offline, so an
// Equal toleration of any value counts.
func (l *linter) gpuWithoutToleration(w workload, cs []container) {
	var asked accelResource
	found := false
	for _, c := range cs {
		if a, ok := c.asksNvidia(); ok && !c.ephemeral {
			asked, found = a, true
			break
		}
	}
	if !found {
		return
	}
	if l.cluster != nil && l.cluster.NodesErr == nil {
		// The nodes were read: LINT_CLUSTER_TAINT_NOT_TOLERATED judges
		// their real taints instead of this guess.
		return
	}
	for _, t := range w.spec.Tolerations {
		keyOK := t.Key == "nvidia.com/gpu" || (t.Key == "" && t.Operator == corev1.TolerationOpExists)
		effectOK := t.Effect == "" || t.Effect == corev1.TaintEffectNoSchedule
		if keyOK && effectOK {
			return
		}
	}
	l.add(w, CodeNoToleration,
		fmt.Sprintf("%s is requested but no toleration matches a nvidia.com/gpu:NoSchedule taint (%d toleration(s)): where GPU nodes carry it the pod stays Pending", asked.name, len(w.spec.Tolerations)),
		[]report.Evidence{{Path: asked.path, Value: asked.value}, {Path: w.specPath + ".tolerations", Value: fmt.Sprintf("%d, none for nvidia.com/gpu", len(w.spec.Tolerations))}})
}

func (l *linter) pluginAndDRA(w workload, cs []container) {
	if len(w.spec.ResourceClaims) == 0 {
		return
	}
	plugin := map[string]accelResource{}
	for _, c := range cs {
		for _, a := range c.accels() {
			if _, ok := plugin[a.vendor]; !ok {
				plugin[a.vendor] = a
			}
		}
	}
	if len(plugin) == 0 {
		return
	}
	reported := map[string]bool{}
	for i, pc := range w.spec.ResourceClaims {
		var key claimKey
		switch {
		case pc.ResourceClaimName != nil:
			key = claimKey{"ResourceClaim", w.ns, *pc.ResourceClaimName}
		case pc.ResourceClaimTemplateName != nil:
			key = claimKey{"ResourceClaimTemplate", w.ns, *pc.ResourceClaimTemplateName}
		default:
			continue
		}
		for _, class := range l.classes[key] {
			v, ok := classVendor(class)
			a, both := plugin[v]
			if !ok || !both || reported[v] {
				continue
			}
			reported[v] = true
			l.add(w, CodePluginAndDRA,
				fmt.Sprintf("%s asks for %s through the device plugin and the pod's claim %q asks for device class %s through DRA: two allocators for %s devices", a.path, a.name, pc.Name, class, v),
				[]report.Evidence{{Path: a.path, Value: a.value},
					{Path: fmt.Sprintf("%s.resourceClaims[%d]", w.specPath, i), Value: fmt.Sprintf("%s %s: deviceClassName %s", key.kind, key.name, class)}})
		}
	}
}

func (l *linter) hostPathDevices(w workload, cs []container) {
	hostPaths := map[string]string{} // volume name -> cleaned host path
	for _, v := range w.spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = path.Clean(v.HostPath.Path)
		}
	}
	for _, c := range cs {
		for i, m := range c.mounts {
			p, ok := hostPaths[m.Name]
			if !ok {
				continue
			}
			ev := []report.Evidence{{Path: fmt.Sprintf("%s.volumeMounts[%d]", c.path, i), Value: fmt.Sprintf("%s at %s (hostPath %s)", m.Name, m.MountPath, p)}}
			switch {
			case p == "/dev":
				if !m.ReadOnly {
					l.add(w, CodeHostPathDevWritable,
						fmt.Sprintf("%s mounts the host's /dev writable at %s: the container can remove the node's device nodes", c.path, m.MountPath), ev)
				}
			case !accelDevicePath(p) || c.privileged():
				// A privileged container has every device already; the
				// mount adds nothing it could not open.
			case len(c.accels()) > 0 || len(c.res.Claims) > 0:
				l.add(w, CodeHostPathDeviceBeside,
					fmt.Sprintf("%s mounts %s by hostPath beside a device request: it opens only if it is one of the devices allocated", c.path, p), ev)
			default:
				l.add(w, CodeHostPathDevice,
					fmt.Sprintf("%s mounts %s by hostPath and requests no device: the node is visible but the device cgroup refuses its open() (EPERM)", c.path, p), ev)
			}
		}
	}
}

// vfioWithoutIPCLock. Capabilities as containerd's CRI plugin applies
// them (internal/cri/server, the OCI spec's capabilities): "ALL" in add,
// then "ALL" in drop, then the single adds, then the single drops; a
// privileged container has every capability. CAP_IPC_LOCK is not in the
// default set.
func (l *linter) vfioWithoutIPCLock(w workload, cs []container) {
	hostPaths := map[string]string{}
	for _, v := range w.spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = path.Clean(v.HostPath.Path)
		}
	}
	for _, c := range cs {
		evidence, uses := "", false
		for _, f := range []corev1.ResourceList{c.res.Limits, c.res.Requests} {
			for _, n := range sortedNames(f) {
				if !uses && strings.Contains(strings.ToLower(string(n)), "vfio") {
					evidence, uses = fmt.Sprintf("resource %s", n), true
				}
			}
		}
		for _, m := range c.mounts {
			if p := hostPaths[m.Name]; !uses && (p == "/dev/vfio" || strings.HasPrefix(p, "/dev/vfio/")) {
				evidence, uses = "hostPath "+p, true
			}
		}
		if !uses || c.privileged() || hasIPCLock(c.sc) {
			continue
		}
		caps := "the runtime's default set"
		if c.sc != nil && c.sc.Capabilities != nil && len(c.sc.Capabilities.Drop) > 0 {
			caps = fmt.Sprintf("drop %v, add %v", c.sc.Capabilities.Drop, c.sc.Capabilities.Add)
		}
		l.add(w, CodeVFIOWithoutIPCLock,
			fmt.Sprintf("%s uses VFIO (%s) without CAP_IPC_LOCK: its DMA mappings are limited by RLIMIT_MEMLOCK", c.path, evidence),
			[]report.Evidence{{Path: c.path + ".securityContext.capabilities", Value: caps}})
	}
}

func hasIPCLock(sc *corev1.SecurityContext) bool {
	if sc == nil || sc.Capabilities == nil {
		return false
	}
	is := func(cs []corev1.Capability, want string) bool {
		for _, c := range cs {
			if strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_") == want {
				return true
			}
		}
		return false
	}
	add, drop := sc.Capabilities.Add, sc.Capabilities.Drop
	if is(drop, "IPC_LOCK") {
		return false
	}
	return is(add, "IPC_LOCK") || (is(add, "ALL") && !is(drop, "ALL"))
}
