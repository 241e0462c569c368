package driver

import (
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
}

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
			return m, nil
		}
		return m, fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Type != hostfs.TypeDir {
		return m, fmt.Errorf("%s is a %s, not a directory", dir, st.Type)
	}
	m.Present = true
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
