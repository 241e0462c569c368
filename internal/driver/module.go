package driver

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Module is what /sys/module/<name> tells about a kernel module.
//
// A loadable module has an "initstate" attribute (kernel/module/sysfs.c,
// module_uevent/modinfo_attrs); a built-in one appears under /sys/module
// only when it has parameters, a MODULE_VERSION or a driver registered with
// a mod_name (kernel/params.c, drivers/base/module.c), and never has
// "initstate".
type Module struct {
	Name    string
	Present bool // /sys/module/<name> exists
	BuiltIn bool // present without initstate
	// InitState is "live", "coming" or "going" for a loadable module; nil
	// when the attribute is absent (built in, or not present at all).
	InitState *string
	// Version is MODULE_VERSION as the module declares it (nvidia does,
	// amdgpu from AMD's DKMS package does, in-tree i915/xe/amdgpu do not);
	// nil when the module has no version attribute.
	Version *string
	// SrcVersion is the checksum of the module's sources, nil when absent.
	SrcVersion *string
	// Source is where the module was found: its /sys/module directory, or
	// ProcModulesPath when /sys/module/<name> is absent (a capture that
	// kept /proc but not /sys/module); "" when not present.
	Source string
	// Missing says, when Present is false, what was looked at and how it
	// answered, for evidence.
	Missing string
}

// ProcModulesPath lists the loaded modules (kernel/module/procfs.c); a
// built-in driver is never in it.
const ProcModulesPath = "/proc/modules"

// ProcModule is one line of /proc/modules.
type ProcModule struct {
	Name  string
	State string // "Live", "Loading" or "Unloading"
}

// ParseProcModules parses /proc/modules. kernel/module/procfs.c (m_show)
// prints "name size refcount deps state address [taints]"; without
// CONFIG_MODULE_UNLOAD refcount and deps are "- -", so the state is the
// fifth field either way. Lines that do not have that shape are skipped
// and counted in the error; the modules that parsed are returned with it.
func ParseProcModules(b []byte) (map[string]ProcModule, error) {
	mods := map[string]ProcModule{}
	var bad []int
	n := 0
	for l := range bytes.Lines(b) { // no line-length limit (bufio.Scanner has 64 KiB)
		n++
		f := strings.Fields(string(l))
		if len(f) == 0 {
			continue
		}
		if len(f) < 5 || !procModuleState[f[4]] || strings.Contains(f[0], "/") {
			bad = append(bad, n)
			continue
		}
		mods[f[0]] = ProcModule{Name: f[0], State: f[4]}
	}
	if len(bad) > 0 {
		return mods, fmt.Errorf("%s: %d line(s) not \"name size refcount deps state address\", the first line %d", ProcModulesPath, len(bad), bad[0])
	}
	return mods, nil
}

var procModuleState = map[string]bool{"Live": true, "Loading": true, "Unloading": true}

// initStates maps /proc/modules' words to /sys/module/<name>/initstate's
// (kernel/module/sysfs.c, show_initstate: "live", "coming", "going").
var initStates = map[string]string{"Live": "live", "Loading": "coming", "Unloading": "going"}

// ModuleName turns a driver name into the module name the kernel uses
// under /sys/module: KBUILD_MODNAME has '_' where the file name has '-'
// ("vfio-pci" binds as driver "vfio-pci", its module is "vfio_pci").
func ModuleName(driver string) string { return strings.ReplaceAll(driver, "-", "_") }

// ReadModule reads /sys/module/<name>. A module that is not there is not an
// error: Present is false. Other read errors are returned wrapped with the
// path, with what could be read.
func ReadModule(root *hostfs.Root, name string) (Module, error) {
	m := Module{Name: name}
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return m, fmt.Errorf("module name %q is not a single path element", name)
	}
	dir := path.Join("/sys/module", name)
	st, err := root.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return readProcModule(root, m, dir)
		}
		return m, fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Type != hostfs.TypeDir {
		return m, fmt.Errorf("%s is a %s, not a directory", dir, st.Type)
	}
	m.Present, m.Source = true, dir
	var errs []error
	opt := func(attr string) *string {
		s, err := root.ReadString(path.Join(dir, attr))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return nil
		}
		return &s
	}
	m.InitState = opt("initstate")
	m.Version = opt("version")
	m.SrcVersion = opt("srcversion")
	m.BuiltIn = m.InitState == nil && !root.Exists(path.Join(dir, "initstate"))
	return m, errors.Join(errs...)
}

// readProcModule looks for a module that /sys/module does not show in
// /proc/modules, the other list of loaded modules.
func readProcModule(root *hostfs.Root, m Module, dir string) (Module, error) {
	b, err := root.ReadFile(ProcModulesPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.Missing = "no " + dir + " and no " + ProcModulesPath + " under this root"
		return m, nil
	case err != nil:
		m.Missing = "no " + dir
		return m, err
	}
	mods, perr := ParseProcModules(b)
	pm, ok := mods[m.Name]
	if !ok {
		m.Missing = "no " + dir + ", and " + ProcModulesPath + " does not list " + m.Name
		return m, perr
	}
	st := initStates[pm.State]
	m.Present, m.Source, m.InitState = true, ProcModulesPath, &st
	return m, perr
}

// ReadDriverModule finds the module behind a PCI driver name: the
// /sys/bus/pci/drivers/<driver>/module link (drivers/base/module.c,
// module_add_driver) names it; without the link the driver name with '-'
// turned into '_' is tried.
func ReadDriverModule(root *hostfs.Root, driver string) (Module, error) {
	if driver == "" || strings.Contains(driver, "/") || driver == "." || driver == ".." {
		return Module{Name: driver}, fmt.Errorf("driver name %q is not a single path element", driver)
	}
	name := ModuleName(driver)
	link := path.Join("/sys/bus/pci/drivers", driver, "module")
	if t, err := root.Readlink(link); err == nil {
		if b := path.Base(t); b != "" && b != "." && b != "/" {
			name = b
		}
	}
	return ReadModule(root, name)
}
