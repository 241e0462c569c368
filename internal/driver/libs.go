package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// LDCachePath is the dynamic loader's cache inside a root.
const LDCachePath = "/etc/ld.so.cache"

// maxLDCacheSize bounds the cache read: a cache of every library of a big
// distribution is well under 4 MiB.
const maxLDCacheSize = 16 << 20

// LibraryDirs are scanned, in order, when the ld.so.cache does not name a
// library: the multiarch and lib64 directories of the distributions and
// the directory the NVIDIA container images use, and Jetson's tegra dir.
var LibraryDirs = []string{
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
	"/lib64",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu/tegra",
	"/usr/local/nvidia/lib64",
}

// Sonames of the NVIDIA user-space driver libraries whose version must
// equal the kernel module's.
const (
	SonameCUDA = "libcuda.so.1"
	SonameNVML = "libnvidia-ml.so.1"
)

// Library is a shared library found on the root.
type Library struct {
	Soname string // what was looked for, "libcuda.so.1"
	Path   string // host path the loader would open
	// RealPath is Path with every symlink resolved inside the root.
	RealPath string
	// Version is the suffix of RealPath's name after "<stem>.so.", when it
	// is a driver version ("550.54.15"); VersionOK is false when the name
	// carries only the ABI number (libcuda.so.1, Jetson's libcuda.so.1.1).
	Version   string
	VersionOK bool
	Source    string // "/etc/ld.so.cache" or "scan of <dir>"
}

// LibraryVersion extracts the version from a real library file name:
// "libcuda.so.550.54.15" with soname "libcuda.so.1" gives "550.54.15".
// The suffixes "1" and "1.1" are soname ABI numbers, not driver versions.
func LibraryVersion(soname, realName string) (string, bool) {
	stem, _, ok := strings.Cut(soname, ".so")
	if !ok {
		return "", false
	}
	v, ok := strings.CutPrefix(realName, stem+".so.")
	if !ok || v == "1" || v == "1.1" || !IsDriverVersion(v) {
		return "", false
	}
	return v, true
}

// ReadLDCache reads and parses the root's /etc/ld.so.cache.
func ReadLDCache(root *hostfs.Root) ([]LDCacheEntry, error) {
	b, err := root.ReadFileLimit(LDCachePath, maxLDCacheSize)
	if err != nil {
		return nil, err
	}
	ents, err := ParseLDCache(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", LDCachePath, err)
	}
	return ents, nil
}

// LibrarySearch is the outcome of looking for libraries on a root.
type LibrarySearch struct {
	Found map[string]Library // by soname
	// CacheErr is why the ld.so.cache could not be used (nil when it was);
	// the directory scan ran regardless.
	CacheErr error
	// Errs are per-library errors (a found link that could not be
	// resolved).
	Errs []error
}

// FindLibraries looks for each soname through the root's ld.so.cache
// (64-bit entries first, as a 64-bit process would load them) and, for the
// ones the cache does not name, by scanning LibraryDirs for the soname or,
// failing that, any "<stem>.so.<version>" file.
func FindLibraries(root *hostfs.Root, sonames ...string) LibrarySearch {
	res := LibrarySearch{Found: map[string]Library{}}
	ents, err := ReadLDCache(root)
	if err != nil {
		res.CacheErr = err
	}
	for _, so := range sonames {
		if p, ok := lookupCache(ents, so); ok {
			lib, err := resolveLibrary(root, so, p, LDCachePath)
			if err == nil {
				res.Found[so] = lib
				continue
			}
			res.Errs = append(res.Errs, err)
		}
		lib, ok, err := scanLibrary(root, so)
		if err != nil {
			res.Errs = append(res.Errs, err)
		}
		if ok {
			res.Found[so] = lib
		}
	}
	return res
}

func lookupCache(ents []LDCacheEntry, soname string) (string, bool) {
	fallback := ""
	for _, e := range ents {
		if e.Name != soname {
			continue
		}
		if e.Is64() {
			return e.Path, true
		}
		if fallback == "" {
			fallback = e.Path
		}
	}
	return fallback, fallback != ""
}

func scanLibrary(root *hostfs.Root, soname string) (Library, bool, error) {
	stem, _, _ := strings.Cut(soname, ".so")
	var errs []error
	for _, dir := range LibraryDirs {
		p := path.Join(dir, soname)
		// Lstat, not Exists: a dangling soname link is a broken install
		// worth reporting, not an absent library.
		if _, err := root.Lstat(p); err == nil {
			lib, err := resolveLibrary(root, soname, p, "scan of "+dir)
			if err == nil {
				return lib, true, nil
			}
			errs = append(errs, err)
			continue
		}
		// No soname link (ldconfig never ran): take a versioned file.
		names, err := root.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		for _, n := range names {
			if _, ok := LibraryVersion(soname, n); ok && strings.HasPrefix(n, stem+".so.") {
				lib, err := resolveLibrary(root, soname, path.Join(dir, n), "scan of "+dir)
				if err == nil {
					return lib, true, nil
				}
				errs = append(errs, err)
			}
		}
	}
	return Library{}, false, errors.Join(errs...)
}

func resolveLibrary(root *hostfs.Root, soname, p, source string) (Library, error) {
	lib := Library{Soname: soname, Path: p, Source: source}
	st, err := root.Stat(p)
	if err != nil {
		return lib, fmt.Errorf("%s: %w", soname, err)
	}
	if st.Type != hostfs.TypeRegular {
		return lib, fmt.Errorf("%s: %s is a %s", soname, p, st.Type)
	}
	real, err := root.Resolve(p)
	if err != nil {
		return lib, fmt.Errorf("%s: %w", soname, err)
	}
	lib.RealPath = real
	lib.Version, lib.VersionOK = LibraryVersion(soname, path.Base(real))
	return lib, nil
}
