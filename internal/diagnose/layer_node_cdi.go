package diagnose

import (
	"slices"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/dra"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 5 on a node: what every CDI device on it depends on. A device
// plugin in CDI mode answers Allocate with CDI device names, and the
// kubelet hands them to the CRI runtime, which alone resolves them
// against the spec files: a runtime without CDI, or whose CDI library
// refuses a spec's cdiVersion, starts the container without the device.
// The same holds for DRA drivers, whose runtime is judged with their
// claims in layer 6 (DRA_RUNTIME_*); this check judges the rest: the
// device plugins whose checkpointed allocations name CDI devices, and
// the node's other specs, which nothing known hands out. `cdi validate`
// stays the full listing of the specs.

const (
	CodeNodeCDIOK         = "NODE_CDI_RUNTIME_OK"
	CodeNodeCDINoCDI      = "NODE_CDI_RUNTIME_NO_CDI"
	CodeNodeCDITooOld     = "NODE_CDI_RUNTIME_TOO_OLD"
	CodeNodeCDINotChecked = "NODE_CDI_RUNTIME_NOT_CHECKED"
)

var nodeCDICodes = []Code{{
	Code: CodeNodeCDIOK, Layer: report.LayerRuntime,
	Title: "the node's CRI runtime injects the CDI devices handed out on it",
	Explain: `The CRI runtime (containerd, CRI-O, or dockerd behind cri-dockerd) has CDI
support, CDI is on in its configuration, and its CDI library loads the cdiVersion of every
spec that declares a CDI device handed out on the node: the devices a device plugin in CDI
mode named in its Allocate answers (the kubelet's checkpoint keeps them), or the node's
other specs. Which runtime the kubelet's --container-runtime-endpoint names is not read.`,
}, {
	Code: CodeNodeCDINoCDI, Layer: report.LayerRuntime,
	Title: "the node's CRI runtime does not inject CDI devices, and the node hands out CDI devices",
	Explain: `A device plugin on the node answers Allocate with CDI device names (its
allocations in the kubelet's checkpoint name them), or the node holds CDI specs, and the CRI
runtime has no CDI support (containerd before 1.7, CRI-O before 1.23) or its configuration
turns it off (containerd's enable_cdi = false in the CRI plugin's section; on by default from
containerd 2.0). The kubelet passes the names in the CRI CreateContainer request, and the
runtime ignores them: the container starts without its device nodes, mounts and
environment, and the application sees no device (CUDA_ERROR_NO_DEVICE, an empty
/dev/dri). FAIL when a device plugin hands out CDI devices and no CRI runtime on the node
can inject them; WARN when another CRI runtime may, or when no plugin is known to hand the
specs out.`,
	Remediation: "Turn CDI on in the runtime (`enable_cdi = true` and `cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]` under containerd's CRI plugin section, then `systemctl restart containerd`), or upgrade it to a release with CDI (containerd 1.7+, CRI-O 1.23+); or run the device plugin without its CDI mode.",
}, {
	Code: CodeNodeCDITooOld, Layer: report.LayerRuntime,
	Title: "the node's CRI runtime refuses the cdiVersion of a spec whose devices are handed out",
	Explain: `The runtime's CDI library loads spec versions up to a maximum, and a spec
that declares CDI devices handed out on the node has a newer cdiVersion: the library skips
the whole file, the names it declares do not resolve, and the container fails to start
("unresolvable CDI devices") or starts without them. The runtime's CDI library version is
read from its binary's build information.`,
	Remediation: "Upgrade the runtime to a release whose CDI library loads the spec's cdiVersion (`accel-doctor explain CDI_VERSION_UNSUPPORTED` lists the first releases), or have the spec's generator write an older cdiVersion (e.g. `nvidia-ctk cdi generate` writes the lowest version the spec's features need).",
}, {
	Code: CodeNodeCDINotChecked, Layer: report.LayerRuntime,
	Title: "whether the node's CRI runtime injects its CDI devices could not be judged",
	Explain: `A device plugin hands out CDI devices or the node holds CDI specs, and the
runtime's CDI support could not be judged: no CRI runtime binary was found, its
configuration could not be read, its release's default is not known, or which CDI library it
is built with is not known.`,
}}

func nodeCDICheck() Check {
	return Check{ID: "runtime.node_cdi", Layer: report.LayerRuntime,
		Title: "the CRI runtime's CDI support against the CDI devices handed out on this node",
		Codes: []string{CodeNodeCDIOK, CodeNodeCDINoCDI, CodeNodeCDITooOld, CodeNodeCDINotChecked},
		Run:   checkNodeCDI}
}

// nodeSpecs is the consumer name of the node's specs that no device
// plugin or DRA driver is known to hand out.
const nodeSpecs = "the node's CDI specs"

func checkNodeCDI(e *Env, out *Out) {
	// The device plugins in CDI mode: their allocations' CDI names.
	byResource := map[string][]string{}
	if n, err := e.Kubelet(); err == nil && n != nil && n.Checkpoint != nil {
		for _, a := range n.Checkpoint.Entries {
			if a.Response != nil && len(a.Response.CDIDevices) > 0 {
				byResource[a.Resource] = append(byResource[a.Resource], a.Response.CDIDevices...)
			}
		}
	}
	dirs := e.Opts.CDISpecDirs
	var reg *cdi.Registry
	if dirs == nil && len(byResource) == 0 {
		// This runs on every check: the runtimes (their binaries'
		// build information, their configuration) are read only where
		// a CDI device may be handed out, a spec in the library's
		// directories or a plugin's allocation naming one.
		reg = cdi.Load(e.Root, cdi.DefaultSpecDirs)
		if len(reg.Specs) == 0 && !unsureDirs(reg) {
			return
		}
	}
	rts, _ := cdi.FindRuntimes(e.Root)
	if dirs == nil {
		dirs, _ = cdi.SpecDirs(rts)
	}
	if reg == nil || !slices.Equal(dirs, cdi.DefaultSpecDirs) {
		reg = cdi.Load(e.Root, dirs)
	}
	// The DRA drivers' specs are layer 6's (judgeDRARuntime).
	draOwned := map[string]bool{}
	if dn, err := e.DRA(); err == nil && dn != nil && dn.RuntimeCDI != nil {
		for _, sp := range dn.RuntimeCDI.Specs {
			draOwned[sp.Spec] = true
		}
	}
	var consumers []string
	plugin := map[string]bool{}
	for r := range byResource {
		c := "device plugin " + r
		consumers = append(consumers, c)
		plugin[c] = true
	}
	sort.Strings(consumers)
	rc := dra.NewRuntimeCDI(nil, rts, reg)
	unresolved := map[string][]string{}
	claimed := map[string]bool{}
	for _, c := range consumers {
		for _, name := range byResource[strings.TrimPrefix(c, "device plugin ")] {
			d := reg.Devices[name]
			if d == nil {
				unresolved[c] = appendOnce(unresolved[c], name)
				continue
			}
			rc.AddSpec(c, d.Spec, "its allocations in "+kubelet.CheckpointName+" name "+name)
			claimed[d.Spec.Path] = true
		}
	}
	rest := false
	for _, sf := range reg.Specs {
		if sf.Spec == nil || claimed[sf.Path] || draOwned[sf.Path] {
			continue
		}
		rc.AddSpec(nodeSpecs, sf, "in a CDI spec directory")
		rest = true
	}
	if rest {
		consumers = append(consumers, nodeSpecs)
	}
	if len(consumers) == 0 {
		if rc.SpecsUnsure != "" && rc.SpecsErr != nil {
			// A spec directory that was not captured or could not be
			// read may hold the specs: not looked at is NOT_RUN.
			out.NotRun(CodeNodeCDINotChecked, "host", "whether CDI devices are handed out on this node is not known",
				e.errWhy(rc.SpecsUnsure, rc.SpecsErr, "", ""))
		}
		return // no CDI device is handed out here: nothing to judge
	}
	rc.Drivers = consumers
	subjectOf := func(c, rt string) string { return c + " @ " + rt }
	if rc.NotFound != "" {
		for _, c := range consumers {
			out.NotRun(CodeNodeCDINotChecked, c, "whether the container runtime injects the CDI devices of "+c+" is not known",
				report.Explain(rc.NotFound, "Find the node's CRI runtime (`crictl info` names it and shows enableCDI) and read its CDI setting by hand (`containerd config dump | grep -i cdi`, `crio config | grep -i cdi`)."))
		}
		return
	}
	for _, c := range consumers {
		// FAIL only for what a device plugin hands out, and only when
		// no CRI runtime on the node can inject it, whichever the
		// kubelet uses; specs nothing is known to hand out are a WARN.
		answers, st := serveEach(rc, c)
		if !plugin[c] {
			st = report.Warn
		}
		for i, rt := range rc.Runtimes {
			a := answers[i]
			ev := make([]report.Evidence, 0, len(a.Evidence)+1)
			for _, x := range a.Evidence {
				ev = append(ev, Ev(x[0], x[1]))
			}
			if u := unresolved[c]; len(u) > 0 {
				ev = append(ev, Ev("CDI devices no spec declares", strings.Join(u, ", ")))
			}
			subj := subjectOf(c, rt.Name)
			switch a.Answer {
			case dra.Serves:
				out.Add(CodeNodeCDIOK, report.Pass, subj, a.Why, ev...)
			case dra.NoCDI:
				out.Add(CodeNodeCDINoCDI, st, subj, a.Why+": the CDI devices of "+c+" reach no container"+otherRuntimes(st), ev...)
			case dra.TooOld:
				out.Add(CodeNodeCDITooOld, st, subj, a.Why+": the runtime skips that spec and the devices it declares do not resolve"+otherRuntimes(st), ev...)
			default:
				out.NotRun(CodeNodeCDINotChecked, subj, "whether "+rt.Name+" injects the CDI devices of "+c+" is not known", e.servingWhy(a, rt.Name), ev...)
			}
		}
	}
}

// unsureDirs: a spec directory was not captured or could not be read.
func unsureDirs(reg *cdi.Registry) bool {
	for _, d := range reg.Dirs {
		if d.NotCaptured || d.Err != nil && !d.Absent {
			return true
		}
	}
	return false
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
