package dra

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
)

// A DRA driver hands the kubelet CDI device names in its
// NodePrepareResources answer; the kubelet passes them to the container
// runtime in the CRI CreateContainer request (ContainerConfig.CDIDevices,
// and the cdi.k8s.io annotations), and only the runtime resolves them
// against the spec files the driver wrote. A runtime with CDI off, or
// whose CDI library refuses the specs' cdiVersion, creates the container
// without the devices or fails it: the claim is prepared and the pod has
// no /dev/nvidia*. These are the facts to judge that by; internal/cdi
// reads the runtimes (binary build information, dpkg, configuration).

// DriverSpec is one CDI spec file taken to be a DRA driver's.
type DriverSpec struct {
	Driver  string `json:"driver"`
	Spec    string `json:"spec"`
	Version string `json:"cdi_version"`
	// By says why the spec is the driver's (draSpecOwners' reasons).
	By string `json:"by"`
}

// RuntimeCDI is the node's CRI runtimes' CDI support, read when the node
// has a DRA driver (ActiveDrivers).
type RuntimeCDI struct {
	// Drivers are the DRA drivers judged for, sorted.
	Drivers []string `json:"drivers"`
	// Runtimes are the runtimes the kubelet can use through CRI:
	// containerd and CRI-O, and dockerd when cri-dockerd is installed.
	// Which of them the kubelet's --container-runtime-endpoint names is
	// not read.
	Runtimes []*cdi.Runtime `json:"runtimes,omitempty"`
	// NotFound: no CRI runtime binary under the PATH directories.
	NotFound string `json:"not_found,omitempty"`
	// Specs are the drivers' spec files (one per file and driver), by path.
	Specs []DriverSpec `json:"specs,omitempty"`
	// SpecsUnsure says why the drivers' specs may be incomplete (a spec
	// directory that could not be listed or was not captured): a version
	// not seen is not judged.
	SpecsUnsure string `json:"specs_unsure,omitempty"`
	// SpecsErr is SpecsUnsure's directory problem (cdi.Dir.Problem).
	SpecsErr error `json:"-"`
}

// ActiveDrivers are the node's DRA drivers that a runtime must serve: a
// live, supported registration, or claims it prepared in the kubelet's
// state; sorted.
func (n *Node) ActiveDrivers() []string {
	seen := map[string]bool{}
	for _, r := range n.Registrations {
		if r.Info != nil && r.Info.Type == TypeDRA && r.Info.Name != "" && n.Registered(r.Info.Name) {
			seen[r.Info.Name] = true
		}
	}
	if n.State != nil {
		for _, c := range n.State.Claims {
			for _, dc := range c.Drivers {
				if dc.Driver != "" {
					seen[dc.Driver] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// criRuntime reports whether the kubelet can use the runtime through CRI
// (podman has no CRI server; dockerd only behind cri-dockerd).
func criRuntime(rt *cdi.Runtime, criDockerd bool) bool {
	switch rt.Name {
	case "containerd", "crio":
		return true
	case "dockerd":
		return criDockerd
	}
	return false
}

// NewRuntimeCDI is the CRI runtimes among rts (cdi.FindRuntimes of the
// root) to judge for the given consumers of CDI devices (DRA drivers, or
// any other names the caller gives Specs for), with what reg says of the
// spec directories' readability. The caller adds the consumers' Specs.
func NewRuntimeCDI(consumers []string, rts []*cdi.Runtime, reg *cdi.Registry) *RuntimeCDI {
	rc := &RuntimeCDI{Drivers: consumers}
	criDockerd := false
	for _, rt := range rts {
		criDockerd = criDockerd || rt.Name == "cri-dockerd"
	}
	for _, rt := range rts {
		if criRuntime(rt, criDockerd) {
			rc.Runtimes = append(rc.Runtimes, rt)
		}
	}
	if len(rc.Runtimes) == 0 {
		dirs := make([]string, 0, len(cdi.PathDirs))
		for _, d := range cdi.PathDirs {
			dirs = append(dirs, path.Clean(d))
		}
		rc.NotFound = "no containerd, crio, or dockerd with cri-dockerd in " + strings.Join(dirs, ", ")
	}
	for i := range reg.Dirs {
		d := &reg.Dirs[i]
		switch {
		case d.NotCaptured:
			rc.SpecsUnsure = d.Path + ": not captured"
		case d.Err != nil && !d.Absent:
			rc.SpecsUnsure = fmt.Sprintf("%s: %v", d.Path, d.Err)
		}
		if rc.SpecsUnsure != "" {
			rc.SpecsErr = d.Problem()
			break
		}
	}
	return rc
}

// AddSpec adds sf as a spec of consumer (once per file and consumer).
func (rc *RuntimeCDI) AddSpec(consumer string, sf *cdi.SpecFile, by string) {
	if sf == nil || sf.Spec == nil {
		return
	}
	for _, sp := range rc.Specs {
		if sp.Driver == consumer && sp.Spec == sf.Path {
			return
		}
	}
	rc.Specs = append(rc.Specs, DriverSpec{Driver: consumer, Spec: sf.Path, Version: strings.TrimPrefix(sf.Version(), "v"), By: by})
}

// readRuntimeCDI judges the CRI runtimes among rts (cdi.FindRuntimes of
// the root) against the drivers' spec versions in reg.
func (n *Node) readRuntimeCDI(reg *cdi.Registry, rts []*cdi.Runtime) {
	drivers := n.ActiveDrivers()
	if len(drivers) == 0 {
		return
	}
	rc := NewRuntimeCDI(drivers, rts, reg)
	n.RuntimeCDI = rc
	// A spec is the driver's when a prepared claim's CDI ID resolves to
	// it, or its vendor is the driver's name (draSpecOwners). A spec
	// that parses but that our library rejects (a cdiVersion newer than
	// it knows) is still the driver's by its vendor: its version is
	// what the runtime is judged against.
	add := rc.AddSpec
	for name, o := range draSpecOwners(reg, n.State, drivers) {
		if d := reg.Devices[name]; d != nil {
			add(o.driver, d.Spec, o.by)
		}
	}
	for _, sf := range reg.Specs {
		if sf.Spec == nil || sf.Valid() {
			continue // valid ones came through their devices
		}
		for _, drv := range drivers {
			if sf.Vendor == drv || sf.Vendor == "k8s."+drv {
				add(drv, sf, fmt.Sprintf("CDI vendor %s is the driver's name", sf.Vendor))
			}
		}
	}
	sort.Slice(rc.Specs, func(i, j int) bool {
		if rc.Specs[i].Driver != rc.Specs[j].Driver {
			return rc.Specs[i].Driver < rc.Specs[j].Driver
		}
		return rc.Specs[i].Spec < rc.Specs[j].Spec
	})
}

// Answer is whether a runtime serves a driver's CDI devices.
type Answer string

const (
	// Serves: CDI is on and the runtime's library loads every spec
	// version of the driver seen.
	Serves Answer = "serves"
	// NoCDI: the runtime has no CDI support, or its configuration turns
	// it off.
	NoCDI Answer = "no-cdi"
	// TooOld: its CDI library refuses a spec's cdiVersion.
	TooOld Answer = "too-old"
	// AnswerUnknown: its configuration or library version is not known.
	AnswerUnknown Answer = "unknown"
)

// Unsure is what an AnswerUnknown does not know.
type Unsure int

const (
	UnsureNone    Unsure = iota
	UnsureConfig         // the runtime's configuration could not be read (Err)
	UnsureDefault        // the configuration does not set CDI and the release's default is not known
	UnsureLibrary        // which CDI library the runtime is built with is not known
	UnsureNewer          // the runtime is newer than the releases known here
	UnsureSpecs          // a CDI spec directory could not be read (Err)
)

// Serving is the answer for one runtime and driver, with what it rests on.
type Serving struct {
	Answer Answer
	// Why is the summary's reason; Spec the spec it is about (TooOld,
	// and the unknown versions).
	Why string
	// Unsure is, for AnswerUnknown, what is not known (the fix follows
	// from it); Err the read that left it so, when one did.
	Unsure Unsure
	Err    error
	Spec   *DriverSpec
	// Evidence: where each piece was read.
	Evidence [][2]string
}

// Serve judges whether rt resolves driver's CDI devices: CDI support in
// the binary, CDI on in its configuration, then each of the driver's
// spec versions against its library's known versions (cdi.Loads). An
// unreadable configuration is unknown, never "on": it may turn CDI off.
func (rc *RuntimeCDI) Serve(rt *cdi.Runtime, driver string) Serving {
	label := rt.Name + " " + rt.Binary
	if rt.Version != "" {
		label = rt.Name + " " + rt.Version + " (" + rt.Binary + ")"
	}
	s := Serving{}
	ev := func(p, v string) { s.Evidence = append(s.Evidence, [2]string{p, v}) }
	if rt.CDI.From != "" {
		ev(rt.Binary, rt.CDI.From)
	}
	if rt.VersionFrom != "" {
		ev(rt.Binary, "version "+rt.Version+" from "+rt.VersionFrom)
	}
	if rt.CDI.None {
		s.Answer, s.Why = NoCDI, label+" has no CDI support"
		return s
	}
	c := rt.Config
	for _, e := range c.Errs {
		ev("configuration", e.Error())
	}
	// CRI-O has no switch (cdi.CRIOCDIConfig): an unreadable drop-in
	// changes its directories, never whether CDI is on.
	if len(c.Errs) > 0 && rt.Name != "crio" {
		s.Answer, s.Why = AnswerUnknown, "whether "+label+" has CDI enabled is not known: its configuration could not be read"
		s.Unsure, s.Err = UnsureConfig, errors.Join(c.Errs...)
		return s
	}
	if c.Enabled == nil {
		s.Answer, s.Why = AnswerUnknown, "whether "+label+" has CDI enabled is not known: it is not set in its configuration and the release's default is not known"
		s.Unsure = UnsureDefault
		return s
	}
	where := rt.Binary // a release's default
	if len(c.Files) > 0 {
		where = strings.Join(c.Files, ", ")
	}
	ev(where, c.EnabledFrom)
	if !*c.Enabled {
		s.Answer, s.Why = NoCDI, label+" has CDI disabled ("+c.EnabledFrom+")"
		return s
	}
	unknown := -1
	for i := range rc.Specs {
		sp := &rc.Specs[i]
		if sp.Driver != driver {
			continue
		}
		switch {
		case rt.CDI.MaxSpec != "" && cdi.Loads(rt.CDI.MaxSpec, sp.Version):
			continue
		case rt.CDI.MaxSpec != "" && !rt.CDI.AtLeast:
			s.Answer, s.Spec = TooOld, sp
			s.Why = fmt.Sprintf("%s is built with container-device-interface %s, which loads cdiVersion up to %s; %s is cdiVersion %s", label, rt.CDI.Version, rt.CDI.MaxSpec, sp.Spec, sp.Version)
			if fr := cdi.FirstReleases(rt.Name, sp.Version); fr != "" {
				s.Why += " (loaded by " + fr + ")"
			}
			ev(sp.Spec, "cdiVersion "+sp.Version+" ("+sp.By+")")
			return s
		case unknown < 0:
			unknown = i
		}
	}
	if unknown >= 0 {
		sp := &rc.Specs[unknown]
		s.Answer, s.Spec = AnswerUnknown, sp
		s.Why = fmt.Sprintf("whether %s loads %s (cdiVersion %s) is not known: ", label, sp.Spec, sp.Version)
		if rt.CDI.MaxSpec == "" {
			s.Why += "which CDI library it is built with is not known"
			s.Unsure = UnsureLibrary
		} else {
			s.Why += "it is newer than the releases known here, which load up to " + rt.CDI.MaxSpec
			s.Unsure = UnsureNewer
		}
		ev(sp.Spec, "cdiVersion "+sp.Version)
		return s
	}
	s.Answer = Serves
	var vs []string
	for _, sp := range rc.Specs {
		if sp.Driver == driver {
			vs = append(vs, sp.Spec+" (cdiVersion "+sp.Version+")")
			ev(sp.Spec, "cdiVersion "+sp.Version+" ("+sp.By+")")
		}
	}
	switch {
	case len(vs) == 0 && rc.SpecsUnsure != "":
		s.Answer, s.Unsure, s.Err = AnswerUnknown, UnsureSpecs, rc.SpecsErr
		s.Why = label + " has CDI enabled; whether it loads " + driver + "'s specs is not known: " + rc.SpecsUnsure
	case len(vs) == 0:
		s.Why = label + " has CDI enabled; no CDI spec of " + driver + " is on the node yet to judge its version by"
	default:
		s.Why = label + " has CDI enabled and loads " + strings.Join(vs, ", ")
	}
	if rt.CDI.MaxSpec != "" {
		ev(rt.Binary, "loads cdiVersion up to "+rt.CDI.MaxSpec)
	}
	return s
}
