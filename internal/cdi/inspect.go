package cdi

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// MechanismKind names one way devices reach a container.
type MechanismKind string

const (
	// MechLinuxDevices: nodes listed in linux.devices, which the OCI
	// runtime creates in the container (a device plugin's DeviceSpecs, a
	// --device flag, and every runtime's own rendering of CDI edits).
	MechLinuxDevices MechanismKind = "linux.devices"
	// MechCDI: CDI device names the runtime resolves against the spec
	// files, or the traces their edits leave.
	MechCDI MechanismKind = "cdi"
	// MechNvidiaLegacy: the NVIDIA container runtime hook, which picks
	// GPUs from NVIDIA_VISIBLE_DEVICES and adds them behind the OCI
	// spec's back.
	MechNvidiaLegacy MechanismKind = "nvidia-legacy-hook"
	// MechPrivileged: every device allowed.
	MechPrivileged MechanismKind = "privileged"
)

// Mechanism is one mechanism found in a spec, and what it asks for.
type Mechanism struct {
	Kind     MechanismKind `json:"kind"`
	Summary  string        `json:"summary"`
	Devices  []string      `json:"devices,omitempty"`
	Evidence []Evidence    `json:"evidence,omitempty"`
}

// Source says where a CDI name was found in the spec.
type Source string

const (
	// SourceAnnotation: a cdi.k8s.io/* annotation, which every CDI-aware
	// runtime reads (cdi.ParseAnnotations).
	SourceAnnotation Source = "annotation"
	// SourceCRIOCopy: CRI-O's JSON copy of the Kubernetes annotations.
	SourceCRIOCopy Source = "cri-o annotations"
	// SourceOtherAnnotation: a qualified name in another annotation's
	// value (an NRI plugin's, a DRA driver's): no runtime resolves it by
	// itself.
	SourceOtherAnnotation Source = "other annotation"
	// SourceNvidiaEnv: a qualified name in NVIDIA_VISIBLE_DEVICES, which
	// the NVIDIA runtime's CDI mode resolves.
	SourceNvidiaEnv Source = "NVIDIA_VISIBLE_DEVICES"
)

// CDIRequest is one CDI device name the spec carries.
type CDIRequest struct {
	Name   string `json:"name"`
	Source Source `json:"source"`
	Where  string `json:"where"` // "annotations[cdi.k8s.io/x]"
	// Honoured: the runtime's own CDI support resolves names from here
	// (only cdi.k8s.io/* annotations; CRI-O's copy mirrors them).
	Honoured bool `json:"honoured"`
}

// HookRef is one hook of the spec.
type HookRef struct {
	Stage string `json:"stage"` // prestart, createRuntime, createContainer, ...
	Index int    `json:"index"`
	Path  string `json:"path"`
}

func (h HookRef) where() string { return fmt.Sprintf("hooks.%s[%d]", h.Stage, h.Index) }

// Privilege is what the spec says about access to every device.
type Privilege struct {
	// AllowAll: linux.resources.devices ends allowing every device (a
	// wildcard "a *:* rwm" allow with no deny after it).
	AllowAll bool `json:"allow_all"`
	// AllowRule is the index of the rule that allows all.
	AllowRule int `json:"allow_rule,omitempty"`
	// DevBind: the host's /dev is bind-mounted at the container's /dev.
	DevBind bool `json:"dev_bind"`
	// DevMount is the index of that mount.
	DevMount int `json:"dev_mount,omitempty"`
	// SysAdmin: CAP_SYS_ADMIN in the bounding set (evidence only).
	SysAdmin bool `json:"cap_sys_admin"`
}

// Injection is what a container's OCI spec asks for, device-wise.
type Injection struct {
	Mechanisms   []Mechanism         `json:"mechanisms"`
	LinuxDevices []specs.LinuxDevice `json:"linux_devices,omitempty"`
	CDI          []CDIRequest        `json:"cdi,omitempty"`
	// NvidiaEnv is the parsed NVIDIA_VISIBLE_DEVICES (nil when unset);
	// NvidiaEnvIndex its index in process.env.
	NvidiaEnv      *NvidiaVisible `json:"nvidia_visible_devices,omitempty"`
	NvidiaEnvIndex int            `json:"-"`
	NvidiaHooks    []HookRef      `json:"nvidia_hooks,omitempty"`
	// CDIHooks are hooks that CDI specs add (nvidia-cdi-hook, nvidia-ctk
	// hook): traces of edits already applied.
	CDIHooks  []HookRef `json:"cdi_hooks,omitempty"`
	Privilege Privilege `json:"privilege"`
	// Facts: invalid annotations and env values, the mechanisms, and the
	// conflicts between them.
	Facts Facts `json:"facts"`
}

// Names returns the distinct CDI names the runtime itself resolves
// (Honoured), in order of first appearance; all adds the others.
func (inj *Injection) Names(all bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range inj.CDI {
		if (r.Honoured || all) && !seen[r.Name] {
			seen[r.Name] = true
			out = append(out, r.Name)
		}
	}
	return out
}

// CRIOAnnotations is the annotation in which CRI-O keeps a JSON copy of
// the container's Kubernetes annotations (cri-o internal/annotations
// Annotations).
const CRIOAnnotations = "io.kubernetes.cri-o.Annotations"

// maxAnnotationValue bounds what is parsed of one annotation: Kubernetes
// limits all of an object's annotations to 256 KiB together
// (apimachinery TotalAnnotationSizeLimitB).
const maxAnnotationValue = 256 << 10

// Inspect names the injection mechanisms of a container's OCI spec and
// what each asks for. It reads nothing but the spec.
func Inspect(s *specs.Spec) *Injection {
	inj := &Injection{NvidiaEnvIndex: -1}
	if s == nil {
		inj.Facts = append(inj.Facts, fact(KindNoMechanism, "container", "no OCI spec to inspect"))
		return inj
	}
	inj.annotations(s.Annotations)
	inj.env(s.Process)
	inj.hooks(s.Hooks)
	if s.Linux != nil {
		inj.LinuxDevices = s.Linux.Devices
	}
	inj.privilege(s)
	inj.mechanisms()
	inj.conflicts()
	return inj
}

// annotations collects CDI names: the cdi.k8s.io/* keys, parsed one key
// at a time with the library (so that an error names its key, in the
// library's words, as the runtime refuses the container with them),
// CRI-O's copy, and qualified names in any other annotation.
func (inj *Injection) annotations(ann map[string]string) {
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	direct := map[string]string{}
	for _, k := range keys {
		v := ann[k]
		switch {
		case strings.HasPrefix(k, cdilib.AnnotationPrefix):
			direct[k] = v
			inj.cdiAnnotation(k, v, SourceAnnotation, fmt.Sprintf("annotations[%s]", k))
		case k == CRIOAnnotations:
		default:
			if names := qualifiedList(v); names != nil {
				for _, n := range names {
					inj.CDI = append(inj.CDI, CDIRequest{Name: n, Source: SourceOtherAnnotation, Where: fmt.Sprintf("annotations[%s]", k)})
				}
			}
		}
	}
	v, ok := ann[CRIOAnnotations]
	if !ok {
		return
	}
	copied, err := parseCRIOAnnotations(v)
	if err != nil {
		inj.Facts = append(inj.Facts, fact(KindAnnotationInvalid, CRIOAnnotations,
			"annotation %s is not the JSON object CRI-O writes: the Kubernetes annotations it copies could not be read", CRIOAnnotations).
			with("annotations["+CRIOAnnotations+"]", err.Error()).withErr(err))
		return
	}
	ck := make([]string, 0, len(copied))
	for k := range copied {
		ck = append(ck, k)
	}
	sort.Strings(ck)
	for _, k := range ck {
		if !strings.HasPrefix(k, cdilib.AnnotationPrefix) {
			continue
		}
		if dv, ok := direct[k]; ok && dv == copied[k] {
			continue // the same request, kept in both places
		}
		inj.cdiAnnotation(k, copied[k], SourceCRIOCopy, fmt.Sprintf("annotations[%s][%s]", CRIOAnnotations, k))
	}
}

func (inj *Injection) cdiAnnotation(k, v string, src Source, where string) {
	if len(v) > maxAnnotationValue {
		err := fmt.Errorf("value of %d bytes, over Kubernetes' %d-byte annotation limit", len(v), maxAnnotationValue)
		inj.Facts = append(inj.Facts, fact(KindAnnotationInvalid, k, "CDI annotation %s is not a device list", k).with(where, err.Error()).withErr(err))
		return
	}
	_, devs, err := cdilib.ParseAnnotations(map[string]string{k: v})
	if err != nil {
		inj.Facts = append(inj.Facts, fact(KindAnnotationInvalid, k,
			"CDI annotation %s does not parse: the runtime refuses the container (failed to parse CDI device annotations: %v)", k, err).
			with(where, v).withErr(err))
		return
	}
	for _, d := range devs {
		inj.CDI = append(inj.CDI, CDIRequest{Name: d, Source: src, Where: where, Honoured: true})
	}
}

// parseCRIOAnnotations reads CRI-O's copy: a JSON object of strings.
func parseCRIOAnnotations(v string) (map[string]string, error) {
	if len(v) > maxAnnotationValue {
		return nil, fmt.Errorf("%d bytes, over Kubernetes' %d-byte annotation limit", len(v), maxAnnotationValue)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// qualifiedList returns the names of a value that is a comma-separated
// list of qualified CDI names, nil for any other value.
func qualifiedList(v string) []string {
	if v == "" || len(v) > maxAnnotationValue || !strings.Contains(v, "=") || !strings.Contains(v, "/") {
		return nil
	}
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if !parser.IsQualifiedName(t) {
			return nil
		}
		out = append(out, t)
	}
	return out
}

// env reads NVIDIA_VISIBLE_DEVICES (the last definition wins, as in
// execve's environment handling by the hook: it reads the spec's env
// list and keeps the last value).
func (inj *Injection) env(p *specs.Process) {
	if p == nil {
		return
	}
	for i, e := range p.Env {
		name, val, ok := strings.Cut(e, "=")
		if !ok || name != NvidiaVisibleDevicesEnv {
			continue
		}
		nv := ParseNvidiaVisible(val)
		inj.NvidiaEnv, inj.NvidiaEnvIndex = &nv, i
	}
	if inj.NvidiaEnv == nil {
		return
	}
	where := fmt.Sprintf("process.env[%d]", inj.NvidiaEnvIndex)
	if inj.NvidiaEnv.Kind == VisibleMalformed {
		inj.Facts = append(inj.Facts, fact(KindNvidiaEnvInvalid, NvidiaVisibleDevicesEnv,
			"%s is set to something that is not a device list: %v", NvidiaVisibleDevicesEnv, inj.NvidiaEnv.Err).
			with(where, NvidiaVisibleDevicesEnv+" (value not shown)").withErr(inj.NvidiaEnv.Err))
	}
	for _, d := range inj.NvidiaEnv.Devices {
		if d.Form == "cdi" {
			inj.CDI = append(inj.CDI, CDIRequest{Name: d.Value, Source: SourceNvidiaEnv, Where: where})
		}
	}
}

// Programs of the legacy NVIDIA hook (nvidia-container-toolkit: the
// hook was installed as nvidia-container-toolkit before it was renamed
// nvidia-container-runtime-hook) and of the hooks CDI specs generated by
// nvidia-ctk add (nvidia-cdi-hook; "nvidia-ctk hook" before it).
var (
	nvidiaHookNames = map[string]bool{"nvidia-container-runtime-hook": true, "nvidia-container-toolkit": true}
	cdiHookNames    = map[string]bool{"nvidia-cdi-hook": true, "nvidia-ctk": true}
)

func (inj *Injection) hooks(h *specs.Hooks) {
	if h == nil {
		return
	}
	stages := []struct {
		name  string
		hooks []specs.Hook
	}{
		{"prestart", h.Prestart}, {"createRuntime", h.CreateRuntime}, {"createContainer", h.CreateContainer},
		{"startContainer", h.StartContainer}, {"poststart", h.Poststart}, {"poststop", h.Poststop},
	}
	for _, st := range stages {
		for i, hk := range st.hooks {
			ref := HookRef{Stage: st.name, Index: i, Path: hk.Path}
			prog := path.Base(hk.Path)
			arg0 := ""
			if len(hk.Args) > 0 {
				arg0 = path.Base(hk.Args[0])
			}
			switch {
			case (st.name == "prestart" || st.name == "createRuntime") && (nvidiaHookNames[prog] || nvidiaHookNames[arg0]):
				inj.NvidiaHooks = append(inj.NvidiaHooks, ref)
			case cdiHookNames[prog] || cdiHookNames[arg0]:
				inj.CDIHooks = append(inj.CDIHooks, ref)
			}
		}
	}
}

// privilege reads what a privileged container's spec looks like: device
// rules that allow everything, the host's /dev bind-mounted.
func (inj *Injection) privilege(s *specs.Spec) {
	if s.Linux != nil && s.Linux.Resources != nil {
		allow, at := false, 0
		for i, r := range s.Linux.Resources.Devices {
			if wildcardAll(r) {
				allow, at = r.Allow, i
				continue
			}
			if !r.Allow && allow {
				allow = false // a deny after the allow-all: not everything
			}
		}
		inj.Privilege.AllowAll, inj.Privilege.AllowRule = allow, at
	}
	for i, m := range s.Mounts {
		if path.Clean(m.Destination) != "/dev" || path.Clean(m.Source) != "/dev" {
			continue
		}
		bind := m.Type == "bind" || m.Type == "rbind"
		for _, o := range m.Options {
			bind = bind || o == "bind" || o == "rbind"
		}
		if bind {
			inj.Privilege.DevBind, inj.Privilege.DevMount = true, i
		}
	}
	if s.Process != nil && s.Process.Capabilities != nil {
		for _, c := range s.Process.Capabilities.Bounding {
			inj.Privilege.SysAdmin = inj.Privilege.SysAdmin || c == "CAP_SYS_ADMIN"
		}
	}
}

// wildcardAll: a rule for every device and every access ("a *:* rwm";
// runc reads an empty type as "a" and an empty access as "rwm").
func wildcardAll(r specs.LinuxDeviceCgroup) bool {
	if (r.Type != "" && r.Type != "a") || r.Major != nil || r.Minor != nil {
		return false
	}
	acc := r.Access
	return acc == "" || (strings.Contains(acc, "r") && strings.Contains(acc, "w") && strings.Contains(acc, "m"))
}

func devString(d specs.LinuxDevice) string {
	return fmt.Sprintf("%s %d:%d %s", d.Type, d.Major, d.Minor, d.Path)
}

// mechanisms turns what was collected into one Mechanism (and fact) each.
func (inj *Injection) mechanisms() {
	if n := len(inj.LinuxDevices); n > 0 {
		m := Mechanism{Kind: MechLinuxDevices, Summary: fmt.Sprintf("%d device node(s) in linux.devices, created in the container by the OCI runtime", n)}
		for i, d := range inj.LinuxDevices {
			m.Devices = append(m.Devices, devString(d))
			m.Evidence = append(m.Evidence, Evidence{Path: fmt.Sprintf("linux.devices[%d]", i), Value: devString(d)})
		}
		inj.Mechanisms = append(inj.Mechanisms, m)
	}
	if names := inj.Names(true); len(names) > 0 || len(inj.CDIHooks) > 0 {
		m := Mechanism{Kind: MechCDI, Devices: names}
		honoured := inj.Names(false)
		switch {
		case len(honoured) > 0:
			m.Summary = fmt.Sprintf("CDI: %d device name(s) for the runtime to resolve: %s", len(honoured), strings.Join(honoured, ", "))
		case len(names) > 0:
			m.Summary = fmt.Sprintf("CDI device names outside cdi.k8s.io/* annotations (%s): only the component that wrote them (the NVIDIA runtime's CDI mode, an NRI plugin) resolves them", strings.Join(names, ", "))
		default:
			m.Summary = "CDI: the spec holds the hooks a CDI spec adds, but names no CDI device: the runtime resolved the names before it wrote config.json (containerd and Docker do not keep them)"
		}
		for _, r := range inj.CDI {
			m.Evidence = append(m.Evidence, Evidence{Path: r.Where, Value: r.Name})
		}
		for _, h := range inj.CDIHooks {
			m.Evidence = append(m.Evidence, Evidence{Path: h.where(), Value: h.Path})
		}
		inj.Mechanisms = append(inj.Mechanisms, m)
	}
	if len(inj.NvidiaHooks) > 0 || inj.NvidiaEnv != nil {
		m := Mechanism{Kind: MechNvidiaLegacy}
		env := "not set"
		if inj.NvidiaEnv != nil {
			env = inj.NvidiaEnv.String()
			switch inj.NvidiaEnv.Kind {
			case VisibleAll:
				m.Devices = []string{"all"}
			case VisibleList:
				for _, d := range inj.NvidiaEnv.Devices {
					m.Devices = append(m.Devices, d.Value)
				}
			}
			m.Evidence = append(m.Evidence, Evidence{Path: fmt.Sprintf("process.env[%d]", inj.NvidiaEnvIndex), Value: NvidiaVisibleDevicesEnv + ": " + env})
		}
		for _, h := range inj.NvidiaHooks {
			m.Evidence = append(m.Evidence, Evidence{Path: h.where(), Value: h.Path})
		}
		if len(inj.NvidiaHooks) > 0 {
			m.Summary = fmt.Sprintf("legacy NVIDIA hook %s in hooks.%s; %s: %s: the hook adds the GPUs and their cgroup rules outside the OCI spec",
				inj.NvidiaHooks[0].Path, inj.NvidiaHooks[0].Stage, NvidiaVisibleDevicesEnv, env)
		} else {
			m.Summary = fmt.Sprintf("%s is set (%s) but no NVIDIA hook is in the spec: only nvidia-container-runtime (as the OCI runtime) acts on it", NvidiaVisibleDevicesEnv, env)
		}
		inj.Mechanisms = append(inj.Mechanisms, m)
	}
	p := inj.Privilege
	if p.AllowAll || p.DevBind {
		m := Mechanism{Kind: MechPrivileged}
		switch {
		case p.AllowAll && p.DevBind:
			m.Summary = "privileged: the device rules allow every device and the host's /dev is bind-mounted: the container sees and may open every host device"
		case p.AllowAll:
			m.Summary = "every device allowed: the device rules allow a *:* rwm (with no deny after it)"
		default:
			m.Summary = "the host's /dev is bind-mounted: every node is visible, and the device rules still decide which open"
		}
		m.Devices = []string{"all"}
		if p.AllowAll {
			m.Evidence = append(m.Evidence, Evidence{Path: fmt.Sprintf("linux.resources.devices[%d]", p.AllowRule), Value: "allow a *:* rwm"})
		}
		if p.DevBind {
			m.Evidence = append(m.Evidence, Evidence{Path: fmt.Sprintf("mounts[%d]", p.DevMount), Value: "/dev bind-mounted from the host's /dev"})
		}
		if p.SysAdmin {
			m.Evidence = append(m.Evidence, Evidence{Path: "process.capabilities.bounding", Value: "CAP_SYS_ADMIN"})
		}
		inj.Mechanisms = append(inj.Mechanisms, m)
	}
	for _, m := range inj.Mechanisms {
		f := fact(KindMechanism, string(m.Kind), "%s", m.Summary)
		f.Evidence = append(f.Evidence, m.Evidence...)
		inj.Facts = append(inj.Facts, f)
	}
	if len(inj.Mechanisms) == 0 {
		inj.Facts = append(inj.Facts, fact(KindNoMechanism, "container",
			"the spec asks for no device: no linux.devices, no CDI name, no NVIDIA hook or NVIDIA_VISIBLE_DEVICES, not privileged"))
	}
}

// conflicts: mechanisms that ask for the same GPUs twice or make a
// request moot.
func (inj *Injection) conflicts() {
	honoured := inj.Names(false)
	if inj.NvidiaEnv != nil && inj.NvidiaEnv.Kind != VisibleVoid && (len(honoured) > 0 || len(inj.CDIHooks) > 0) {
		what := strings.Join(honoured, ", ")
		if what == "" {
			what = "the edits of a CDI spec (its hooks are in the spec)"
		}
		f := fact(KindConflictEnvCDI, NvidiaVisibleDevicesEnv,
			"%s (%s) is set together with CDI devices (%s): under nvidia-container-runtime in legacy mode its hook injects what the variable asks on top of the CDI devices; with runc the variable does nothing",
			NvidiaVisibleDevicesEnv, inj.NvidiaEnv.String(), what).
			with(fmt.Sprintf("process.env[%d]", inj.NvidiaEnvIndex), NvidiaVisibleDevicesEnv+": "+inj.NvidiaEnv.String())
		for _, r := range inj.CDI {
			if r.Honoured {
				f = f.with(r.Where, r.Name)
			}
		}
		inj.Facts = append(inj.Facts, f)
	}
	if inj.Privilege.AllowAll {
		asked := []string{}
		for _, m := range inj.Mechanisms {
			if m.Kind != MechPrivileged {
				asked = append(asked, string(m.Kind))
			}
		}
		s := "the container may open every host device: device allocation (a plugin's, CDI's, NVIDIA_VISIBLE_DEVICES) does not limit it"
		if inj.Privilege.DevBind {
			s = "the container sees and may open every host device (/dev bind-mounted, every device allowed): device allocation (a plugin's, CDI's, NVIDIA_VISIBLE_DEVICES) does not limit it"
		}
		if len(asked) > 0 {
			s += "; it also asks for devices through " + strings.Join(asked, ", ")
		}
		inj.Facts = append(inj.Facts, fact(KindConflictPriv, "container", "%s", s).
			with(fmt.Sprintf("linux.resources.devices[%d]", inj.Privilege.AllowRule), "allow a *:* rwm"))
	}
	// The same CDI name twice among the names the runtime resolves.
	first := map[string]string{}
	for _, r := range inj.CDI {
		if !r.Honoured {
			continue
		}
		if w, ok := first[r.Name]; ok {
			inj.Facts = append(inj.Facts, fact(KindConflictTwice, r.Name, "CDI device %s is requested twice", r.Name).with(w, r.Name).with(r.Where, r.Name))
			continue
		}
		first[r.Name] = r.Where
	}
	// The same node path twice in linux.devices.
	paths := map[string]int{}
	for i, d := range inj.LinuxDevices {
		p := path.Clean(d.Path)
		if j, ok := paths[p]; ok {
			inj.Facts = append(inj.Facts, fact(KindConflictTwice, p, "device node %s is listed twice in linux.devices", p).
				with(fmt.Sprintf("linux.devices[%d]", j), devString(inj.LinuxDevices[j])).with(fmt.Sprintf("linux.devices[%d]", i), devString(d)))
			continue
		}
		paths[p] = i
	}
	// The same GPU twice in NVIDIA_VISIBLE_DEVICES.
	if inj.NvidiaEnv != nil {
		seen := map[string]bool{}
		for _, d := range inj.NvidiaEnv.Devices {
			if seen[d.Value] {
				inj.Facts = append(inj.Facts, fact(KindConflictTwice, d.Value, "%s names %s twice", NvidiaVisibleDevicesEnv, d.Value).
					with(fmt.Sprintf("process.env[%d]", inj.NvidiaEnvIndex), NvidiaVisibleDevicesEnv+": "+inj.NvidiaEnv.String()))
			}
			seen[d.Value] = true
		}
	}
}
