package cdi

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func FuzzBuildInfoFromBytes(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Add([]byte("\xff Go buildinf:\x08\x02"))
	if testing.Short() {
		f.Add([]byte{})
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		bi, err := BuildInfoFromBytes(b)
		if err == nil && bi == nil {
			t.Fatal("no error and no build information")
		}
	})
}

// FuzzBuildInfoOfRealBinary mutates a real Go binary's build information
// region (the fuzzer edits the bytes from the magic on). It asserts that a
// read never panics (BuildInfoFromBytes recovers what debug/buildinfo
// would not), that a read without an error has build information, and
// that the binary as built, the region unchanged, reads as built (CDI
// v0.6.2, specs-go v0.6.0).
func FuzzBuildInfoOfRealBinary(f *testing.F) {
	b := fakeRuntime(f, "v0.6.2", "v0.6.0", "")
	i := strings.Index(string(b), "\xff Go buildinf:")
	if i < 0 {
		f.Skip("no build information magic in the test binary")
	}
	// The seed is the build information itself: the 32-byte header and,
	// since Go 1.18 (flag 2), the two varint-prefixed strings that follow
	// it, the Go version and the module information (the format
	// debug/buildinfo reads). The rest of the data segment would only make
	// each input, and its minimization, longer.
	end := min(i+4096, len(b))
	if i+32 <= len(b) && b[i+15]&2 != 0 {
		end = i + 32
		for range 2 {
			n, w := binary.Uvarint(b[end:])
			if w <= 0 || n > uint64(len(b)-end-w) {
				f.Fatalf("build information at %d: no string at %d", i, end)
			}
			end += w + int(n)
		}
	}
	f.Add(b[i:end])
	// One copy of the binary for the process, the region written over and
	// put back for each input: a copy of the whole binary per input was
	// most of an execution. The fuzz function runs one input at a time
	// (no t.Parallel), so one buffer serves them all.
	mut := append([]byte(nil), b...)
	f.Fuzz(func(t *testing.T, region []byte) {
		n := copy(mut[i:], region)
		defer copy(mut[i:i+n], b[i:i+n])
		bi, err := BuildInfoFromBytes(mut)
		if err == nil && bi == nil {
			t.Fatal("no error and no build information")
		}
		if bytes.Equal(region[:n], b[i:i+n]) {
			if err != nil {
				t.Fatalf("the binary as built: %v", err)
			}
			if d, ok := dep(bi, cdiModule); !ok || d.Version != "v0.6.2" {
				t.Fatalf("the binary as built lists CDI %+v (%v)", d, ok)
			}
		}
	})
}

func FuzzParseCapturedBuildInfo(f *testing.F) {
	f.Add("go\tgo1.22.1\npath\texample.com/x\nmod\texample.com/x\t(devel)\t\ndep\ttags.cncf.io/container-device-interface\tv0.6.2\th1:x\n")
	f.Add("error: /usr/bin/containerd: not a Go executable\n")
	f.Add("dep\ta\tv1\n=>\tb\tv2\th1:y\n")
	f.Fuzz(func(t *testing.T, s string) {
		bi, err := parseCapturedBuildInfo([]byte(s))
		if err != nil {
			return
		}
		_, _ = mainVersion(bi)
		_, _ = dep(bi, cdiModule, cdiModuleOld)
	})
}

func FuzzParseDpkgStatus(f *testing.F) {
	f.Add([]byte("Package: containerd\nStatus: install ok installed\nVersion: 1.7.24~ds1-6\n\nPackage: x\n"))
	f.Add([]byte("Package: a\n Description continues\n\n\n:\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseDpkgStatus(b, nil)
		if err == nil {
			for p, v := range m {
				if p == "" || v == "" {
					t.Fatalf("empty package or version: %q=%q", p, v)
				}
			}
		}
	})
}

func FuzzSemver(f *testing.F) {
	for _, s := range []string{"v1.7.13", "1.7.24~ds1-6", "2:28.0.1-1~debian", "v0.0.0-20230101000000-abcdef012345", "1.", "99999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		maj, min, patch, ok := semver(s)
		if ok && (maj < 0 || min < 0 || patch < 0) {
			t.Fatalf("%q: negative", s)
		}
		if cmpVersion(s, s) != 0 {
			t.Fatalf("%q does not equal itself", s)
		}
		_, _, _, _ = libForRelease("containerd", s)
		_, _ = libMaxSpec(s)
	})
}

// FuzzContainerdConfig: a runtime configuration is the host's, parsed by
// go-toml; the lookups over what it decodes must hold whatever the shape.
func FuzzContainerdConfig(f *testing.F) {
	f.Add([]byte("version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = true\ncdi_spec_dirs = ['/etc/cdi']\n"))
	f.Add([]byte("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = 'yes'\ncdi_spec_dirs = [1, 2]\nimports = 7\n"))
	f.Add([]byte("[crio.runtime]\ncdi_spec_dirs = \"/etc/cdi\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := parseTOML(b, "config.toml")
		if err != nil {
			return
		}
		for _, tb := range containerdCRITables {
			if v, ok := lookup(doc, "plugins", tb, "cdi_spec_dirs"); ok {
				_, _ = stringList(v)
			}
		}
		if v, ok := lookup(doc, "crio", "runtime", "cdi_spec_dirs"); ok {
			_, _ = stringList(v)
		}
		if v, ok := doc["imports"]; ok {
			_, _ = stringList(v)
		}
	})
}
