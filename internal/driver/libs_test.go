package driver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

func TestLibraryVersion(t *testing.T) {
	tests := []struct {
		soname, real string
		want         string
		ok           bool
	}{
		{"libcuda.so.1", "libcuda.so.550.54.15", "550.54.15", true},
		{"libnvidia-ml.so.1", "libnvidia-ml.so.565.57.01", "565.57.01", true},
		{"libcuda.so.1", "libcuda.so.1", "", false},
		{"libcuda.so.1", "libcuda.so.1.1", "", false}, // Jetson
		{"libcuda.so.1", "libcuda.so", "", false},
		{"libcuda.so.1", "libcudart.so.12.4.127", "", false},
		{"libcuda.so.1", "libcuda.so.550.54.15.bak", "", false},
		{"notalib", "libcuda.so.550.54.15", "", false},
	}
	for _, tt := range tests {
		got, ok := LibraryVersion(tt.soname, tt.real)
		if got != tt.want || ok != tt.ok {
			t.Errorf("LibraryVersion(%q, %q) = %q, %v; want %q, %v", tt.soname, tt.real, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFindLibraries(t *testing.T) {
	lib := "/usr/lib/x86_64-linux-gnu"
	dir := tree(t, map[string]string{
		lib + "/libcuda.so.550.54.15":                  "ELF",
		"/usr/lib/i386-linux-gnu/libcuda.so.550.54.15": "ELF",
		// Not in the cache: found by scanning, without a soname link.
		"/usr/local/nvidia/lib64/libnvidia-ml.so.535.104.05": "ELF",
	}, map[string]string{
		lib + "/libcuda.so.1":                  "libcuda.so.550.54.15",
		"/usr/lib/i386-linux-gnu/libcuda.so.1": "libcuda.so.550.54.15",
	})
	cache := newLDCache([]cacheEntry{
		{flags: LDCacheFlagELFLibc6, name: "libcuda.so.1", path: "/usr/lib/i386-linux-gnu/libcuda.so.1"},
		{flags: LDCacheFlagELFLibc6 | LDCacheFlagX8664Lib64, name: "libcuda.so.1", path: lib + "/libcuda.so.1"},
	})
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/ld.so.cache"), cache, 0o644); err != nil {
		t.Fatal(err)
	}
	got := FindLibraries(hostfs.MustNew(dir), SonameCUDA, SonameNVML, "libnvidia-absent.so.1")
	want := LibrarySearch{Found: map[string]Library{
		SonameCUDA: {Soname: SonameCUDA, Path: lib + "/libcuda.so.1", RealPath: lib + "/libcuda.so.550.54.15",
			Version: "550.54.15", VersionOK: true, Source: LDCachePath},
		SonameNVML: {Soname: SonameNVML, Path: "/usr/local/nvidia/lib64/libnvidia-ml.so.535.104.05",
			RealPath: "/usr/local/nvidia/lib64/libnvidia-ml.so.535.104.05",
			Version:  "535.104.05", VersionOK: true, Source: "scan of /usr/local/nvidia/lib64"},
	}}
	if d := cmp.Diff(want, got, cmpopts.EquateErrors()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestFindLibrariesNoCache(t *testing.T) {
	lib := "/usr/lib64"
	dir := tree(t, map[string]string{lib + "/libcuda.so.1": "ELF"}, nil)
	got := FindLibraries(hostfs.MustNew(dir), SonameCUDA)
	if got.CacheErr == nil {
		t.Error("missing ld.so.cache: CacheErr is nil")
	}
	l, ok := got.Found[SonameCUDA]
	if !ok || l.Path != lib+"/libcuda.so.1" || l.VersionOK {
		t.Errorf("Found = %+v, %v; want %s/libcuda.so.1 without a version", l, ok, lib)
	}
}

func TestFindLibrariesDanglingLink(t *testing.T) {
	dir := tree(t, nil, map[string]string{"/usr/lib64/libcuda.so.1": "libcuda.so.550.54.15"})
	got := FindLibraries(hostfs.MustNew(dir), SonameCUDA)
	if _, ok := got.Found[SonameCUDA]; ok {
		t.Error("dangling soname link counted as found")
	}
	if len(got.Errs) == 0 {
		t.Error("dangling soname link: no error reported")
	}
}
