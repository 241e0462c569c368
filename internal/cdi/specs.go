package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// MaxSpecFileSize bounds one CDI spec file. A spec for eight GPUs with
// their driver libraries is tens of KiB; a DRA driver's per-claim spec a
// few hundred bytes.
const MaxSpecFileSize = 4 << 20

// DefaultSpecDirs are the library's default directories, in priority
// order (a later directory wins a name conflict): cdi.DefaultSpecDirs.
var DefaultSpecDirs = append([]string(nil), cdilib.DefaultSpecDirs...)

// RunCDIDir is where some writers put specs: the same directory as
// /var/run/cdi on hosts where /var/run links to /run, which most do.
const RunCDIDir = "/run/cdi"

// SpecFile is one file found in a spec directory.
type SpecFile struct {
	Path     string        `json:"path"` // host path
	Dir      string        `json:"dir"`
	Priority int           `json:"priority"` // index of Dir in the directory list: higher wins
	Spec     *cdispec.Spec `json:"-"`        // as parsed; nil when it did not parse
	// Err is why the library would not load the file, in its own words
	// ("failed to parse CDI Spec ..."); nil for a valid spec.
	Err error `json:"-"`
	// ReadErr is set when we could not read the file (permissions, a
	// FIFO, too large): the runtime may well read it, so nothing is
	// known about the spec itself.
	ReadErr error `json:"-"`
	// MinVersion is the lowest cdiVersion the spec's fields need
	// (specs-go MinimumRequiredVersion); "" when it did not parse.
	MinVersion string   `json:"min_version,omitempty"`
	Vendor     string   `json:"vendor,omitempty"`
	Class      string   `json:"class,omitempty"`
	Devices    []string `json:"devices,omitempty"` // qualified names, in file order
}

// Version is the spec's cdiVersion ("" when it did not parse).
func (s *SpecFile) Version() string {
	if s.Spec == nil {
		return ""
	}
	return s.Spec.Version
}

// Valid reports whether the library would load the file.
func (s *SpecFile) Valid() bool { return s.Err == nil && s.ReadErr == nil && s.Spec != nil }

// Device is a CDI device of a valid spec.
type Device struct {
	Name   string          // qualified: vendor/class=name
	Spec   *SpecFile       //
	Device *cdispec.Device // as declared
}

// Edits returns what injecting the device applies, in the library's
// order: the spec's global edits, then the device's own (Cache.InjectDevices
// appends the spec's edits once per spec, then each device's).
func (d *Device) Edits() *cdispec.ContainerEdits {
	e := &cdispec.ContainerEdits{}
	appendEdits(e, &d.Spec.Spec.ContainerEdits)
	appendEdits(e, &d.Device.ContainerEdits)
	return e
}

func appendEdits(e, o *cdispec.ContainerEdits) {
	e.Env = append(e.Env, o.Env...)
	e.DeviceNodes = append(e.DeviceNodes, o.DeviceNodes...)
	e.NetDevices = append(e.NetDevices, o.NetDevices...)
	e.Hooks = append(e.Hooks, o.Hooks...)
	e.Mounts = append(e.Mounts, o.Mounts...)
	if o.IntelRdt != nil {
		e.IntelRdt = o.IntelRdt
	}
	e.AdditionalGIDs = append(e.AdditionalGIDs, o.AdditionalGIDs...)
}

// Dir is one spec directory as it was found.
type Dir struct {
	Path     string `json:"path"`
	Priority int    `json:"priority"`
	Absent   bool   `json:"absent,omitempty"`
	// NotCaptured: a snapshot or capture that does not show whether the
	// directory exists.
	NotCaptured bool `json:"not_captured,omitempty"`
	// Err is why it could not be listed.
	Err error `json:"-"`
	// NotScanned: an earlier directory's error ended the library's scan
	// before this one.
	NotScanned bool     `json:"not_scanned,omitempty"`
	Files      []string `json:"files,omitempty"` // the .json/.yaml files, sorted
}

// Problem is what kept the directory from being read, typed: a
// hostfs.NotCapturedError when the root does not show it, Err when its
// listing failed, nil when it was read (or is absent).
func (d *Dir) Problem() error {
	switch {
	case d.NotCaptured:
		return &hostfs.NotCapturedError{Path: d.Path}
	case d.Err != nil && !d.Absent:
		return d.Err
	}
	return nil
}

// Registry is what a runtime's CDI cache would hold after a refresh of
// the given directories, with the library's conflict rules, and what we
// saw on the way.
type Registry struct {
	Dirs  []Dir
	Specs []*SpecFile
	// Devices are the names that resolve (conflicts removed).
	Devices map[string]*Device
	// Conflicts: names declared twice within one directory, with the
	// files; the library drops such a name from its cache altogether.
	Conflicts map[string][]string
	// Overrides: a name declared in two directories, the later winning.
	Overrides []Override
}

// Override is a device name a later directory's spec takes over.
type Override struct {
	Name   string
	Winner string // spec path
	Loser  string
}

// Load reads every spec in dirs (priority order) through root, as a
// runtime's CDI cache would on refresh. Nothing is read by the library
// itself: hostfs reads the bytes, the library parses and validates them.
func Load(root *hostfs.Root, dirs []string) *Registry {
	reg := &Registry{Devices: map[string]*Device{}, Conflicts: map[string][]string{}}
	stopped := false
	// The cache's scan (pkg/cdi/cache.go refresh, spec-dirs.go
	// scanSpecDirs): directories in order, a missing one skipped, any
	// other error ends the scan; files sorted by name, only .json and
	// .yaml, directories skipped.
	for prio, d := range dirs {
		d = path.Clean(d)
		dir := Dir{Path: d, Priority: prio}
		if stopped {
			dir.NotScanned = true
			reg.Dirs = append(reg.Dirs, dir)
			continue
		}
		names, err := root.ReadDir(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if root.Covers(d) {
				dir.Absent = true
			} else {
				dir.NotCaptured = true
			}
			reg.Dirs = append(reg.Dirs, dir)
			continue
		case err != nil:
			dir.Err = err
			// ENOTDIR is what the runtime gets too; a permission error
			// is ours (the runtime runs as root), and the runtime would
			// have gone on: only the former ends the scan we model.
			if errors.Is(err, unix.ENOTDIR) {
				stopped = true
			}
			reg.Dirs = append(reg.Dirs, dir)
			continue
		}
		for _, n := range names {
			p := path.Join(d, n)
			if ext := path.Ext(n); ext != ".json" && ext != ".yaml" {
				continue
			}
			// os.ReadDir's DirEntry.IsDir is the entry's own type: a
			// symlink to a directory is not skipped, and fails to read.
			if st, err := root.Lstat(p); err == nil && st.Type == hostfs.TypeDir {
				continue
			}
			dir.Files = append(dir.Files, p)
			sf := readSpecFile(root, p, d, prio)
			reg.Specs = append(reg.Specs, sf)
			if sf.Valid() {
				reg.add(sf)
			}
		}
		reg.Dirs = append(reg.Dirs, dir)
	}
	for name := range reg.Conflicts {
		delete(reg.Devices, name)
	}
	return reg
}

// add enters a valid spec's devices the way Cache.refresh does: a name
// already held from a lower-priority directory is taken over; one from
// the same directory is a conflict, and both lose.
func (reg *Registry) add(sf *SpecFile) {
	for i := range sf.Spec.Devices {
		d := &sf.Spec.Devices[i]
		q := parser.QualifiedName(sf.Vendor, sf.Class, d.Name)
		dev := &Device{Name: q, Spec: sf, Device: d}
		if old, ok := reg.Devices[q]; ok {
			switch {
			case sf.Priority > old.Spec.Priority:
				reg.Overrides = append(reg.Overrides, Override{Name: q, Winner: sf.Path, Loser: old.Spec.Path})
			case sf.Priority == old.Spec.Priority:
				reg.Conflicts[q] = appendNew(reg.Conflicts[q], old.Spec.Path, sf.Path)
				continue
			default:
				continue
			}
		}
		reg.Devices[q] = dev
	}
}

func appendNew(s []string, vs ...string) []string {
	for _, v := range vs {
		found := false
		for _, x := range s {
			found = found || x == v
		}
		if !found {
			s = append(s, v)
		}
	}
	return s
}

// readSpecFile reads and checks one file.
func readSpecFile(root *hostfs.Root, p, dir string, prio int) *SpecFile {
	sf := &SpecFile{Path: p, Dir: dir, Priority: prio}
	b, err := root.ReadFileLimit(p, MaxSpecFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// A dangling symlink: os.ReadFile fails the same way for the
			// runtime (cdi.ReadSpec returns the error unwrapped).
			sf.Err = err
		} else {
			sf.ReadErr = err
		}
		return sf
	}
	raw, err := ParseSpec(b, p)
	sf.Spec = raw
	if raw != nil {
		sf.MinVersion, _ = cdispec.MinimumRequiredVersion(raw)
		sf.Vendor, sf.Class = parser.ParseQualifier(raw.Kind)
		for _, d := range raw.Devices {
			sf.Devices = append(sf.Devices, parser.QualifiedName(sf.Vendor, sf.Class, d.Name))
		}
	}
	sf.Err = err
	return sf
}

// ParseSpec parses and validates CDI spec bytes as cdi.ReadSpec does
// after reading the file, and returns its error text unchanged (name is
// the path the error names). The raw spec is returned whenever the bytes
// parsed, valid or not, so that its version can still be reported.
//
// cdi.ReadSpec reads the file itself, and the function it then calls
// (newSpec) is not exported, so its steps are taken here with the
// library's exported parts, in its order (pkg/cdi/spec.go newSpec and
// Spec.validate, device.go Device.validate, v1.1.2):
//
//	ParseSpec; specs-go ValidateVersion; vendor and class names; the
//	spec's edits; each device: its name, non-empty edits, its edits;
//	duplicate names; at least one device.
//
// The library also validates annotations, but its check is handed a
// map[string]string and asserts map[string]any (internal/validation
// ValidateSpecAnnotations), so it never rejects anything: nor does this.
// TestParseSpecMatchesLibrary holds the two to the same answers.
func ParseSpec(b []byte, name string) (*cdispec.Spec, error) {
	raw, err := cdilib.ParseSpec(b)
	if err != nil {
		return nil, fmt.Errorf("failed to parse CDI Spec %q: %w", name, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("failed to parse CDI Spec %q, no Spec data", name)
	}
	if err := validateSpec(raw); err != nil {
		return raw, fmt.Errorf("invalid CDI Spec: %w", err)
	}
	return raw, nil
}

func validateSpec(raw *cdispec.Spec) error {
	vendor, class := parser.ParseQualifier(raw.Kind)
	if err := cdispec.ValidateVersion(raw); err != nil {
		return err
	}
	if err := parser.ValidateVendorName(vendor); err != nil {
		return err
	}
	if err := parser.ValidateClassName(class); err != nil {
		return err
	}
	if err := (&cdilib.ContainerEdits{ContainerEdits: &raw.ContainerEdits}).Validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range raw.Devices {
		d := &raw.Devices[i]
		if err := validateDevice(d); err != nil {
			return fmt.Errorf("failed add device %q: %w", d.Name, err)
		}
		if seen[d.Name] {
			return fmt.Errorf("invalid spec, multiple device %q", d.Name)
		}
		seen[d.Name] = true
	}
	if len(seen) == 0 {
		return fmt.Errorf("invalid spec, no devices")
	}
	return nil
}

func validateDevice(d *cdispec.Device) error {
	if err := parser.ValidateDeviceName(d.Name); err != nil {
		return err
	}
	e := &d.ContainerEdits
	if len(e.Env) == 0 && len(e.DeviceNodes) == 0 && len(e.Hooks) == 0 && len(e.Mounts) == 0 &&
		len(e.AdditionalGIDs) == 0 && e.IntelRdt == nil && len(e.NetDevices) == 0 {
		return fmt.Errorf("invalid device, empty device edits")
	}
	if err := (&cdilib.ContainerEdits{ContainerEdits: e}).Validate(); err != nil {
		return fmt.Errorf("invalid device %q: %w", d.Name, err)
	}
	return nil
}

// Names returns the resolvable device names, sorted.
func (reg *Registry) Names() []string {
	out := make([]string, 0, len(reg.Devices))
	for n := range reg.Devices {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// declared returns what the valid specs declare for one vendor/class
// (conflicting names included), for an unresolvable name's evidence.
func (reg *Registry) declared(kind string) (names []string, files []string) {
	for _, sf := range reg.Specs {
		if !sf.Valid() || sf.Vendor+"/"+sf.Class != kind {
			continue
		}
		files = append(files, sf.Path)
		for _, d := range sf.Spec.Devices {
			names = appendNew(names, d.Name)
		}
	}
	return names, files
}

// Resolution is what one qualified name resolves to.
type Resolution struct {
	Name   string
	Device *Device // nil when it does not resolve
	// Err says why not: not a qualified name (the parser's words), or
	// "unresolvable CDI devices NAME" as the runtime says it.
	Err error
}

// Resolve looks one name up as Cache.InjectDevices does.
func (reg *Registry) Resolve(name string) Resolution {
	if _, _, _, err := parser.ParseQualifiedName(name); err != nil {
		return Resolution{Name: name, Err: err}
	}
	if d := reg.Devices[name]; d != nil {
		return Resolution{Name: name, Device: d}
	}
	// The words of pkg/cdi/cache.go InjectDevices.
	return Resolution{Name: name, Err: fmt.Errorf("unresolvable CDI devices %s", name)}
}

// specFacts are the facts about the directories and files themselves.
func (reg *Registry) specFacts() Facts {
	var out Facts
	nfiles := 0
	for _, d := range reg.Dirs {
		nfiles += len(d.Files)
		switch {
		case d.NotScanned:
			// Said by the fact of the directory that ended the scan.
		case d.NotCaptured:
			out = append(out, fact(KindSpecDirNotCaught, d.Path, "the capture does not show %s", d.Path).withErr(d.Problem()))
		case d.Err != nil && errors.Is(d.Err, unix.ENOTDIR):
			f := fact(KindSpecDirNotDir, d.Path,
				"%s is not a directory: the CDI library's scan stops there, so no later directory is read", d.Path).
				with(d.Path, d.Err.Error()).withErr(d.Err)
			for _, later := range reg.Dirs {
				if later.NotScanned {
					f = f.with(later.Path, "not scanned by the runtime")
				}
			}
			out = append(out, f)
		case d.Err != nil:
			out = append(out, fact(KindSpecDirUnread, d.Path, "%s could not be listed", d.Path).
				with(d.Path, d.Err.Error()).withErr(d.Err))
		}
	}
	for _, sf := range reg.Specs {
		switch {
		case sf.ReadErr != nil:
			out = append(out, fact(KindSpecUnreadable, sf.Path, "%s could not be read", sf.Path).
				with(sf.Path, sf.ReadErr.Error()).withErr(sf.ReadErr))
		case sf.Err != nil:
			f := fact(KindSpecInvalid, sf.Path, "the CDI library rejects %s: %v", sf.Path, sf.Err).
				with(sf.Path, sf.Err.Error()).withErr(sf.Err)
			if sf.Spec != nil {
				f = f.with(sf.Path, fmt.Sprintf("cdiVersion %q, kind %q; its fields need cdiVersion >= %s", sf.Spec.Version, sf.Spec.Kind, sf.MinVersion))
				if _, _, _, ok := semver(sf.Spec.Version); ok && cmpVersion(sf.Spec.Version, cdispec.CurrentVersion) > 0 {
					f.Summary += fmt.Sprintf(" (cdiVersion %s is newer than the CDI library accel-doctor is built with, %s, knows: up to %s; a runtime with a newer library may load it)",
						sf.Spec.Version, ourLibraryVersion, cdispec.CurrentVersion)
				}
			}
			out = append(out, f)
		default:
			out = append(out, fact(KindSpecLoaded, sf.Path, "%s: kind %s, cdiVersion %s, %d device(s)", sf.Path, sf.Spec.Kind, sf.Spec.Version, len(sf.Devices)).
				with(sf.Path, fmt.Sprintf("cdiVersion %s (its fields need >= %s); devices: %s", sf.Spec.Version, sf.MinVersion, strings.Join(sf.Devices, ", "))))
		}
	}
	names := make([]string, 0, len(reg.Conflicts))
	for n := range reg.Conflicts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := fact(KindDeviceConflict, n, "%s is declared by %d specs of one directory: the CDI library drops it, so it does not resolve", n, len(reg.Conflicts[n]))
		for _, p := range reg.Conflicts[n] {
			f = f.with(p, "declares "+n)
		}
		for _, o := range reg.Overrides {
			if o.Name == n {
				f = f.with(o.Winner, "declares "+n+" too, in a later directory: the library drops the name all the same")
			}
		}
		out = append(out, f)
	}
	for _, o := range reg.Overrides {
		if len(reg.Conflicts[o.Name]) > 0 {
			continue // said by the conflict
		}
		out = append(out, fact(KindDeviceOverridden, o.Name, "%s resolves to %s; the same name in %s is ignored (a later spec directory wins)", o.Name, o.Winner, o.Loser).
			with(o.Winner, "declares "+o.Name+" (used)").with(o.Loser, "declares "+o.Name+" (ignored)"))
	}
	if nfiles == 0 {
		var ds, unseen []string
		broken := false
		for _, d := range reg.Dirs {
			ds = append(ds, d.Path)
			if d.NotCaptured {
				unseen = append(unseen, d.Path)
			}
			broken = broken || d.Err != nil
		}
		if !broken {
			f := fact(KindSpecNone, strings.Join(ds, ", "), "no CDI spec file in %s", strings.Join(ds, ", "))
			if len(unseen) > 0 {
				f.Summary += fmt.Sprintf(" (the capture does not show %s)", strings.Join(unseen, ", "))
			}
			out = append(out, f)
		}
	}
	return out
}
