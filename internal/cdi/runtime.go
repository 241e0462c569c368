package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// PathDirs are the directories searched for runtime binaries: a
// default PATH, then where k3s and RKE2 keep their own containerd.
var PathDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
	"/var/lib/rancher/k3s/data/current/bin", "/var/lib/rancher/rke2/bin"}

// RuntimeNames are the binaries looked for, in the order a spec
// directory configuration is taken from (see SpecDirs).
var RuntimeNames = []string{"containerd", "crio", "podman", "dockerd", "cri-dockerd"}

// packages are the dpkg packages that ship each runtime.
var packages = map[string][]string{
	"containerd":  {"containerd.io", "containerd"},
	"crio":        {"cri-o"},
	"podman":      {"podman"},
	"dockerd":     {"docker-ce", "docker.io", "moby-engine"},
	"cri-dockerd": {"cri-dockerd"},
}

// CDILib is the CDI library a runtime was built with, and what it loads.
type CDILib struct {
	// Version is the version of the module that decides which spec
	// versions load (specs-go from v1.0.0, the main module before), as
	// "v0.7.2"; "" when not known. Main and Specs are both modules' own.
	Version string `json:"version,omitempty"`
	Main    string `json:"main,omitempty"`
	Specs   string `json:"specs_go,omitempty"`
	// Exact: read from the binary's build information; otherwise
	// inferred from the runtime's release through the upstream table.
	Exact bool   `json:"exact"`
	From  string `json:"from,omitempty"`
	// None: the runtime has no CDI support at all (a release before it,
	// or a binary whose module list lacks the library).
	None bool `json:"none,omitempty"`
	// MaxSpec is the newest cdiVersion it loads; AtLeast says the
	// runtime is newer than the table and may load more.
	MaxSpec string `json:"max_spec,omitempty"`
	AtLeast bool   `json:"at_least,omitempty"`
}

// Runtime is one container runtime found on the host.
type Runtime struct {
	Name        string    `json:"name"`
	Binary      string    `json:"binary"`
	Version     string    `json:"version,omitempty"`
	VersionFrom string    `json:"version_from,omitempty"`
	CDI         CDILib    `json:"cdi"`
	Config      CDIConfig `json:"config"`
	// BuildInfoErr: the build information could not be read.
	BuildInfoErr error `json:"-"`
}

// DoesCDI reports whether the runtime resolves CDI names itself
// (cri-dockerd hands devices to dockerd, which does).
func (rt *Runtime) DoesCDI() bool { return rt.Name != "cri-dockerd" }

// FindRuntimes looks for the runtime binaries under the root's PATH
// directories, reads each one's version and CDI library without running
// it, and its CDI configuration.
func FindRuntimes(root *hostfs.Root) ([]*Runtime, Facts) {
	var out []*Runtime
	var facts Facts
	var dpkg map[string]string
	var dpkgErr error
	dpkgRead := false
	readDpkg := func() {
		if dpkgRead {
			return
		}
		dpkgRead = true
		want := map[string]bool{}
		for _, ps := range packages {
			for _, p := range ps {
				want[p] = true
			}
		}
		b, err := root.ReadFileLimit(DpkgStatus, MaxDpkgStatus)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				dpkgErr = err
			}
			return
		}
		dpkg, dpkgErr = ParseDpkgStatus(b, want)
	}
	for _, name := range RuntimeNames {
		bin := findBinary(root, name)
		if bin == "" {
			continue
		}
		rt := &Runtime{Name: name, Binary: bin}
		out = append(out, rt)
		bi, err := ReadBuildInfo(root, bin)
		if err != nil {
			rt.BuildInfoErr = err
		} else {
			rt.Version, rt.VersionFrom = mainVersion(bi)
			m, okm := dep(bi, cdiModule, cdiModuleOld)
			s, oks := dep(bi, cdiSpecsModule, cdiSpecsModOld)
			switch {
			case okm && m.LocalReplace:
				rt.CDI.From = fmt.Sprintf("build information of %s: %s replaced by a local directory", bin, m.Path)
			case okm:
				rt.CDI.Main, rt.CDI.Exact = m.Version, true
				if oks && !s.LocalReplace {
					rt.CDI.Specs = s.Version
				}
				rt.CDI.From = fmt.Sprintf("build information of %s: %s %s", bin, m.Path, m.Version)
				if rt.CDI.Specs != "" {
					rt.CDI.From += fmt.Sprintf(", %s %s", s.Path, s.Version)
				}
			case len(bi.Deps) > 0 && rt.DoesCDI():
				rt.CDI.None, rt.CDI.Exact = true, true
				rt.CDI.From = fmt.Sprintf("build information of %s lists %d modules, none of them the CDI library", bin, len(bi.Deps))
			case len(bi.Deps) == 0:
				rt.CDI.From = fmt.Sprintf("build information of %s lists no modules (built outside module mode, as distributions' own Go packages are)", bin)
			}
		}
		if rt.Version == "" {
			readDpkg()
			for _, pkg := range packages[name] {
				if v, ok := dpkg[pkg]; ok {
					if up := upstreamVersion(v); up != "" {
						rt.Version, rt.VersionFrom = up, fmt.Sprintf("dpkg: %s %s (%s)", pkg, v, DpkgStatus)
						break
					}
				}
			}
		}
		if rt.DoesCDI() && !rt.CDI.Exact && rt.Version != "" {
			lib, none, beyond, ok := libForRelease(name, rt.Version)
			switch {
			case none:
				rt.CDI.None = true
				rt.CDI.From = fmt.Sprintf("%s %s predates CDI support (from %s)", name, rt.Version, runtimeTable[name].first)
			case ok:
				rt.CDI.Main = lib
				rt.CDI.AtLeast = beyond
				src := fmt.Sprintf("inferred: upstream %s %s requires container-device-interface %s (go.mod at its tag)", name, rt.Version, lib)
				if beyond {
					src = fmt.Sprintf("inferred: %s %s is newer than the releases known here (to %s, which requires %s): at least that", name, rt.Version, runtimeTable[name].last, lib)
				}
				if rt.CDI.From != "" {
					src = rt.CDI.From + "; " + src
				}
				rt.CDI.From = src + "; a distribution's build may use another"
			}
		}
		if rt.CDI.Main != "" {
			specs := rt.CDI.Specs
			if !rt.CDI.Exact {
				specs = rt.CDI.Main // the table's releases require the same minor of both
			}
			if mx, known := LibraryMaxSpec(rt.CDI.Main, specs); known {
				rt.CDI.MaxSpec = mx
			} else if maj, _, _, ok := semver(rt.CDI.Main); ok && maj >= 1 {
				// Newer than every release known here: it loads at
				// least what the newest known one does.
				rt.CDI.MaxSpec, rt.CDI.AtLeast = SpecVersions[len(SpecVersions)-1], true
			}
			rt.CDI.Version = rt.CDI.Main
			if maj, _, _, ok := semver(rt.CDI.Main); ok && maj >= 1 && specs != "" {
				rt.CDI.Version = specs
			}
		}
		switch name {
		case "containerd":
			rt.Config = ContainerdCDIConfig(root, rt.Version)
		case "crio":
			rt.Config = CRIOCDIConfig(root, rt.Version)
		case "dockerd":
			rt.Config = DockerCDIConfig(root, rt.Version)
		case "podman":
			rt.Config = PodmanCDIConfig(root)
		}
	}
	if dpkgErr != nil {
		facts = append(facts, fact(KindRuntimeUnknown, DpkgStatus, "the dpkg database could not be read for the runtimes' versions").
			with(DpkgStatus, dpkgErr.Error()).withErr(dpkgErr))
	}
	return out, facts
}

// findBinary is the first regular file named name in PathDirs (two
// directories that are one, /bin and /usr/bin on a merged-/usr host,
// give the same file: the first is kept).
//
// A snapshot holds no file over 16 MiB, so a runtime binary recorded by
// ReadBuildInfo is not in it: the build information captured for the
// path says it was there.
func findBinary(root *hostfs.Root, name string) string {
	for _, d := range PathDirs {
		p := path.Join(d, name)
		st, err := root.Stat(p)
		if err == nil && st.Type == hostfs.TypeRegular {
			return p
		}
		if _, ok := root.Captured(path.Join(capturedBuildInfoDir, p)); ok {
			return p
		}
	}
	return ""
}

// rpmPresent names an RPM database on the root, if any.
func rpmPresent(root *hostfs.Root) string {
	for _, p := range rpmDatabases {
		if st, err := root.Stat(p); err == nil && st.Type == hostfs.TypeRegular {
			return p
		}
	}
	return ""
}

// runtimeFacts says what was found of each runtime.
func runtimeFacts(root *hostfs.Root, rts []*Runtime) Facts {
	var out Facts
	if len(rts) == 0 {
		f := fact(KindRuntimeNone, "runtime", "no container runtime binary (%s) in the PATH directories: which CDI spec versions the node loads is not known",
			strings.Join(RuntimeNames, ", ")).with("", "looked in "+strings.Join(PathDirs, ", "))
		return append(out, f)
	}
	for _, rt := range rts {
		subj := rt.Name + " " + rt.Binary
		ver := rt.Version
		if ver == "" {
			ver = "version not known"
		}
		ev := []Evidence{}
		if rt.VersionFrom != "" {
			ev = append(ev, Evidence{Path: rt.Binary, Value: "version " + rt.Version + " from " + rt.VersionFrom})
		}
		if rt.BuildInfoErr != nil {
			ev = append(ev, Evidence{Path: rt.Binary, Value: "build information: " + rt.BuildInfoErr.Error()})
		}
		if rt.CDI.From != "" {
			ev = append(ev, Evidence{Path: rt.Binary, Value: rt.CDI.From})
		}
		switch {
		case !rt.DoesCDI():
			f := fact(KindRuntimeFound, subj, "%s %s (%s): it hands devices to dockerd, which resolves CDI names", rt.Name, ver, rt.Binary)
			f.Evidence = ev
			out = append(out, f)
			continue
		case rt.CDI.None:
			f := fact(KindRuntimeNoCDI, subj, "%s %s (%s) has no CDI support: CDI device names given to it are not resolved", rt.Name, ver, rt.Binary)
			f.Evidence = ev
			out = append(out, f)
			continue
		case rt.CDI.MaxSpec == "":
			why := "its build information names no CDI library version and its release is not known"
			if rt.Version != "" {
				why = "which CDI library this release was built with is not known"
			}
			if db := rpmPresent(root); db != "" && rt.Version == "" {
				ev = append(ev, Evidence{Path: db, Value: "an RPM database: not read (it needs SQLite or Berkeley DB; rpm -q " + rt.Name + " tells)"})
			}
			f := fact(KindRuntimeUnknown, subj, "%s %s (%s): %s", rt.Name, ver, rt.Binary, why)
			f.Evidence = ev
			out = append(out, f)
		default:
			loads := "up to " + rt.CDI.MaxSpec
			if rt.CDI.AtLeast {
				loads = "at least up to " + rt.CDI.MaxSpec
			}
			how := "exact, from its build information"
			if !rt.CDI.Exact {
				how = "inferred from its release"
			}
			f := fact(KindRuntimeFound, subj, "%s %s (%s) is built with container-device-interface %s (%s): it loads CDI spec versions %s",
				rt.Name, ver, rt.Binary, rt.CDI.Version, how, loads)
			f.Evidence = ev
			out = append(out, f)
		}
		out = append(out, configFact(rt))
	}
	return out
}

func configFact(rt *Runtime) Fact {
	subj := rt.Name + " " + rt.Binary
	c := rt.Config
	var f Fact
	switch {
	case c.Enabled == nil:
		f = fact(KindCDIConfigUnknown, subj, "whether %s has CDI enabled is not known", rt.Name)
		if len(c.Errs) > 0 {
			f.Summary += ": its configuration could not be read"
			f = f.withErr(errors.Join(c.Errs...))
		} else if rt.Version == "" {
			f.Summary += ": it is not set in its configuration, and the default depends on the release, which is not known"
		}
	case *c.Enabled:
		f = fact(KindCDIEnabled, subj, "%s has CDI enabled (%s)", rt.Name, c.EnabledFrom)
	default:
		f = fact(KindCDIDisabled, subj, "%s has CDI disabled (%s): CDI device names given to it are not resolved", rt.Name, c.EnabledFrom)
	}
	if c.EnabledFrom != "" {
		f = f.with(rt.Binary, c.EnabledFrom)
	}
	for _, p := range c.Files {
		f = f.with(p, "read")
	}
	for _, e := range c.Errs {
		f = f.with("", e.Error())
	}
	if c.DirsFrom != "" {
		f = f.with("", fmt.Sprintf("spec directories %s (%s)", strings.Join(c.Dirs, ", "), c.DirsFrom))
	}
	return f
}

// SpecDirs picks the spec directories resolution uses: the first
// CDI-resolving runtime whose configuration sets them, in RuntimeNames
// order; else the library's defaults.
func SpecDirs(rts []*Runtime) (dirs []string, from string) {
	for _, rt := range rts {
		if rt.DoesCDI() && len(rt.Config.Dirs) > 0 {
			return rt.Config.Dirs, rt.Name + ": " + rt.Config.DirsFrom
		}
	}
	return DefaultSpecDirs, "the CDI library's defaults (cdi.DefaultSpecDirs); no runtime configuration found sets others"
}
