package cdi

import (
	"fmt"
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Options says what to resolve against.
type Options struct {
	// Dirs are the spec directories in priority order; nil: those of the
	// runtime's configuration, else the library's defaults.
	Dirs []string
	// Runtime restricts the runtime facts and compatibility to one
	// runtime ("containerd", "crio", "podman", "dockerd"): the one the
	// container runs under, when it is known.
	Runtime string
}

// Result is checkpoint 2's answer: what was read and the facts.
type Result struct {
	Dirs     []string
	DirsFrom string
	Registry *Registry
	Runtimes []*Runtime
	// Injection is the container's (Container only).
	Injection *Injection
	// Resolutions of the names asked about (Check, Container).
	Resolutions []Resolution
	Facts       Facts
}

func prepare(root *hostfs.Root, opts Options) *Result {
	res := &Result{}
	rts, rfacts := FindRuntimes(root)
	if opts.Runtime != "" {
		var keep []*Runtime
		for _, rt := range rts {
			if rt.Name == opts.Runtime {
				keep = append(keep, rt)
			}
		}
		rts = keep
	}
	res.Runtimes = rts
	res.Dirs, res.DirsFrom = opts.Dirs, "as given"
	if len(opts.Dirs) == 0 {
		res.Dirs, res.DirsFrom = SpecDirs(rts)
	}
	res.Registry = Load(root, res.Dirs)
	res.Facts = append(res.Facts, rfacts...)
	res.Facts = append(res.Facts, runtimeFacts(root, rts)...)
	if f, ok := unusedRunDir(root, res.Dirs); ok {
		res.Facts = append(res.Facts, f)
	}
	return res
}

// Validate checks every spec file of the spec directories: whether the
// library loads it, every host piece its edits name, and whether each
// runtime found loads its cdiVersion.
func Validate(root *hostfs.Root, opts Options) *Result {
	res := prepare(root, opts)
	reg := res.Registry
	res.Facts = append(res.Facts, reg.specFacts()...)
	for _, sf := range reg.Specs {
		if !sf.Valid() {
			continue
		}
		res.Facts = append(res.Facts, CheckEdits(root, sf.Path, &sf.Spec.ContainerEdits)...)
		for i := range sf.Spec.Devices {
			d := &sf.Spec.Devices[i]
			res.Facts = append(res.Facts, CheckEdits(root, parser.QualifiedName(sf.Vendor, sf.Class, d.Name), &d.ContainerEdits)...)
		}
		res.Facts = append(res.Facts, compatFacts(res.Runtimes, sf)...)
	}
	res.noteDirs()
	return res
}

// noteDirs adds, to the facts an absent spec explains, which spec
// directories were read and why those.
func (res *Result) noteDirs() {
	for i, f := range res.Facts {
		if f.Kind == KindSpecNone || f.Kind == KindDeviceUnresolved {
			res.Facts[i] = f.with("", fmt.Sprintf("spec directories read, in priority order: %s (%s)", strings.Join(res.Dirs, ", "), res.DirsFrom))
		}
	}
}

// Check resolves one qualified name: does it resolve, to which spec,
// what would it inject, and is every piece there.
func Check(root *hostfs.Root, name string, opts Options) *Result {
	res := prepare(root, opts)
	res.Facts = append(res.Facts, relevantSpecFacts(res.Registry, []string{name})...)
	res.resolve(root, []string{name}, map[string]string{})
	res.noteDirs()
	return res
}

// Container is checkpoint 2 for one container's OCI spec: its injection
// mechanisms and their conflicts, every CDI name it carries resolved and
// checked against the host, and the legacy NVIDIA hook's program.
func Container(root *hostfs.Root, s *specs.Spec, opts Options) *Result {
	inj := Inspect(s)
	names := inj.Names(true)
	var res *Result
	if len(names) > 0 || len(inj.CDIHooks) > 0 {
		res = prepare(root, opts)
	} else {
		// No CDI: the spec directories and runtimes do not bear on it.
		res = &Result{Registry: &Registry{Devices: map[string]*Device{}, Conflicts: map[string][]string{}}}
	}
	res.Injection = inj
	res.Facts = append(res.Facts, inj.Facts...)
	if len(names) > 0 {
		res.Facts = append(res.Facts, relevantSpecFacts(res.Registry, names)...)
		where := map[string]string{}
		for _, r := range inj.CDI {
			if _, ok := where[r.Name]; !ok {
				where[r.Name] = r.Where
			}
		}
		res.resolve(root, names, where)
		res.noteDirs()
	}
	c := checker{root: root, owner: "container"}
	_, c.snapshot = root.ReadSnapshotMeta()
	for _, h := range inj.NvidiaHooks {
		f := c.hook(h.Path, "legacy NVIDIA hook")
		f.Evidence = append([]Evidence{{Path: h.where(), Value: h.Path}}, f.Evidence...)
		res.Facts = append(res.Facts, f)
	}
	return res
}

// resolve adds, for each name, its resolution, its host pieces and its
// spec's compatibility (once per spec file).
func (res *Result) resolve(root *hostfs.Root, names []string, where map[string]string) {
	compatDone := map[string]bool{}
	for _, n := range names {
		r := res.Registry.Resolve(n)
		res.Resolutions = append(res.Resolutions, r)
		res.Facts = append(res.Facts, resolutionFact(res.Registry, r, where[n]))
		if r.Device == nil {
			continue
		}
		res.Facts = append(res.Facts, CheckEdits(root, n, r.Device.Edits())...)
		if sf := r.Device.Spec; !compatDone[sf.Path] {
			compatDone[sf.Path] = true
			res.Facts = append(res.Facts, compatFacts(res.Runtimes, sf)...)
		}
	}
}

// relevantSpecFacts are the facts about spec files that bear on the
// names: every spec the library rejects (any of them may be the one that
// declared the name), those of the names' vendor/class, and the names'
// conflicts and overrides.
func relevantSpecFacts(reg *Registry, names []string) Facts {
	kinds, want := map[string]bool{}, map[string]bool{}
	for _, n := range names {
		want[n] = true
		if v, c, _, err := parser.ParseQualifiedName(n); err == nil {
			kinds[v+"/"+c] = true
		}
	}
	var out Facts
	for _, f := range reg.specFacts() {
		switch f.Kind {
		case KindDeviceConflict, KindDeviceOverridden:
			if !want[f.Subject] {
				continue
			}
		case KindSpecLoaded:
			if !specOfKinds(reg, f.Subject, kinds) {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

func specOfKinds(reg *Registry, p string, kinds map[string]bool) bool {
	for _, sf := range reg.Specs {
		if sf.Path == p {
			return kinds[sf.Vendor+"/"+sf.Class]
		}
	}
	return false
}

// resolutionFact says whether a name resolves, and what it injects.
func resolutionFact(reg *Registry, r Resolution, where string) Fact {
	if r.Device == nil {
		if _, _, _, err := parser.ParseQualifiedName(r.Name); err != nil {
			f := fact(KindDeviceNameInvalid, r.Name, "%q is not a qualified CDI device name (vendor/class=name): %v", r.Name, err).withErr(err)
			if where != "" {
				f = f.with(where, r.Name)
			}
			return f
		}
		v, c, _, _ := parser.ParseQualifiedName(r.Name)
		kind := v + "/" + c
		f := fact(KindDeviceUnresolved, r.Name, "%v", r.Err).withErr(r.Err)
		if where != "" {
			f = f.with(where, r.Name)
		}
		declared, files := reg.declared(kind)
		switch {
		case len(reg.Conflicts[r.Name]) > 0:
			f.Summary += ": it is declared in two specs of one directory, and the library drops such a name"
		case len(files) == 0:
			f.Summary += fmt.Sprintf(": no valid spec declares kind %s", kind)
		case len(declared) == 1 && declared[0] == "all":
			f.Summary += fmt.Sprintf(": the specs of kind %s declare only \"all\"", kind)
		default:
			f.Summary += fmt.Sprintf(": the specs of kind %s declare %s", kind, strings.Join(declared, ", "))
		}
		for _, p := range files {
			f = f.with(p, "kind "+kind)
		}
		if len(declared) > 0 {
			f = f.with("", "declared: "+strings.Join(declared, ", "))
		}
		return f
	}
	d := r.Device
	e := d.Edits()
	f := fact(KindDeviceResolved, r.Name, "%s resolves to %s: %s", r.Name, d.Spec.Path, editsSummary(e))
	if where != "" {
		f = f.with(where, r.Name)
	}
	f = f.with(d.Spec.Path, fmt.Sprintf("cdiVersion %s, kind %s, device %q (spec directory %s, priority %d)", d.Spec.Version(), d.Spec.Spec.Kind, d.Device.Name, d.Spec.Dir, d.Spec.Priority))
	for _, ev := range editsEvidence(e) {
		f = f.with(d.Spec.Path, ev)
	}
	return f
}

func editsSummary(e *cdispec.ContainerEdits) string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(len(e.DeviceNodes), "device node(s)")
	add(len(e.Mounts), "mount(s)")
	add(len(e.Hooks), "hook(s)")
	add(len(e.Env), "env var(s)")
	add(len(e.NetDevices), "net device(s)")
	add(len(e.AdditionalGIDs), "additional GID(s)")
	if e.IntelRdt != nil {
		parts = append(parts, "Intel RDT")
	}
	if len(parts) == 0 {
		return "no edits"
	}
	return strings.Join(parts, ", ")
}

// editsEvidence lists every edit, for the reader and for checkpoint 3.
func editsEvidence(e *cdispec.ContainerEdits) []string {
	var out []string
	for _, dn := range e.DeviceNodes {
		if dn == nil {
			continue
		}
		s := "deviceNode " + dn.Path
		if dn.HostPath != "" && dn.HostPath != dn.Path {
			s += " from " + dn.HostPath
		}
		if dn.Type != "" || dn.Major != 0 {
			s += fmt.Sprintf(" (%s %d:%d)", dn.Type, dn.Major, dn.Minor)
		}
		out = append(out, s)
	}
	for _, m := range e.Mounts {
		if m != nil {
			out = append(out, fmt.Sprintf("mount %s -> %s (%s)", m.HostPath, m.ContainerPath, strings.Join(m.Options, ",")))
		}
	}
	for _, h := range e.Hooks {
		if h != nil {
			out = append(out, fmt.Sprintf("hook %s %s %s", h.HookName, h.Path, strings.Join(h.Args[min(1, len(h.Args)):], " ")))
		}
	}
	for _, v := range e.Env {
		out = append(out, "env "+v)
	}
	for _, n := range e.NetDevices {
		if n != nil {
			out = append(out, fmt.Sprintf("netDevice %s as %s", n.HostInterfaceName, n.Name))
		}
	}
	for _, g := range e.AdditionalGIDs {
		out = append(out, fmt.Sprintf("additionalGid %d", g))
	}
	return out
}

// compatFacts judges a valid spec's cdiVersion against each runtime.
func compatFacts(rts []*Runtime, sf *SpecFile) Facts {
	var out Facts
	v := strings.TrimPrefix(sf.Version(), "v")
	for _, rt := range rts {
		if !rt.DoesCDI() || rt.CDI.None {
			continue // said once by the runtime's own fact
		}
		subj := sf.Path + " @ " + rt.Name
		label := fmt.Sprintf("%s %s", rt.Name, orUnknown(rt.Version))
		switch {
		case rt.CDI.MaxSpec == "":
			out = append(out, fact(KindVersionUnknown, subj, "whether %s loads %s (cdiVersion %s) is not known: its CDI library version is not known", label, sf.Path, v).
				with(sf.Path, "cdiVersion "+v))
		case Loads(rt.CDI.MaxSpec, v):
			out = append(out, fact(KindVersionOK, subj, "%s (container-device-interface %s) loads %s (cdiVersion %s)", label, rt.CDI.Version, sf.Path, v).
				with(sf.Path, "cdiVersion "+v).with(rt.Binary, "loads up to "+rt.CDI.MaxSpec))
		case rt.CDI.AtLeast:
			out = append(out, fact(KindVersionUnknown, subj, "%s loads at least up to %s; whether it loads cdiVersion %s is not known", label, rt.CDI.MaxSpec, v).
				with(sf.Path, "cdiVersion "+v))
		default:
			f := fact(KindVersionTooNew, subj, "spec %s is cdiVersion %s, which needs a runtime built with container-device-interface >= %s", sf.Path, v, firstLib(v))
			if fr := FirstReleases(rt.Name, v); fr != "" {
				f.Summary += " (" + fr + ")"
			}
			f.Summary += fmt.Sprintf("; %s is built with %s, which loads up to %s: it ignores the spec (\"invalid version\")", label, rt.CDI.Version, rt.CDI.MaxSpec)
			if sf.MinVersion != "" && Loads(rt.CDI.MaxSpec, sf.MinVersion) {
				f.Summary += fmt.Sprintf("; its fields need only cdiVersion %s, which this runtime loads", sf.MinVersion)
			}
			out = append(out, f.with(sf.Path, "cdiVersion "+v+", fields need >= "+sf.MinVersion).with(rt.Binary, rt.CDI.From))
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "(version not known)"
	}
	return s
}

// unusedRunDir: /run/cdi holds spec files but is not one of the
// directories read (and not the same directory as one of them: on most
// hosts /var/run links to /run).
func unusedRunDir(root *hostfs.Root, dirs []string) (Fact, bool) {
	st, err := root.Stat(RunCDIDir)
	if err != nil || st.Type != hostfs.TypeDir {
		return Fact{}, false
	}
	real, err := root.Resolve(RunCDIDir)
	if err != nil {
		return Fact{}, false
	}
	for _, d := range dirs {
		if path.Clean(d) == RunCDIDir || resolveDir(root, d) == real {
			return Fact{}, false
		}
	}
	names, err := root.ReadDir(RunCDIDir)
	if err != nil {
		return Fact{}, false
	}
	var files []string
	for _, n := range names {
		if ext := path.Ext(n); ext == ".json" || ext == ".yaml" {
			files = append(files, path.Join(RunCDIDir, n))
		}
	}
	if len(files) == 0 {
		return Fact{}, false
	}
	f := fact(KindSpecDirUnused, RunCDIDir, "%s holds %d spec file(s), but it is not one of the directories the runtime reads (%s), nor the same directory as one: their devices do not resolve",
		RunCDIDir, len(files), strings.Join(dirs, ", "))
	for _, p := range files {
		f = f.with(p, "not read")
	}
	return f, true
}

// resolveDir is where a directory path leads inside the root, also when
// the directory itself does not exist (/var/run/cdi on a host whose
// /var/run links to /run, with no /run/cdi yet): its parent is resolved.
func resolveDir(root *hostfs.Root, d string) string {
	d = path.Clean(d)
	if r, err := root.Resolve(d); err == nil {
		return r
	}
	if d == "/" {
		return d
	}
	return path.Join(resolveDir(root, path.Dir(d)), path.Base(d))
}
