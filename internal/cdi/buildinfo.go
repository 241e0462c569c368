package cdi

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime/debug"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/lazyre"
)

// MaxBinarySize bounds a runtime binary mapped to read its build
// information (containerd and dockerd are 40-100 MB; k3s's multi-call
// binary about 200 MB). Only the pages the ELF reader touches are read.
const MaxBinarySize = 1 << 30

// capturedBuildInfoDir names, in a snapshot, the build information read
// from each binary: a snapshot keeps no file over 16 MiB, and a runtime
// binary is more.
const capturedBuildInfoDir = "cdi/buildinfo"

// ReadBuildInfo reads the Go build information of a binary through the
// root without running it and without reading it whole: the file is
// mapped read-only and debug/buildinfo reads the ELF headers and the
// .go.buildinfo data through an io.ReaderAt over the mapping. In a
// snapshot being recorded the result is captured; a replay answers from
// the capture.
func ReadBuildInfo(root *hostfs.Root, p string) (*debug.BuildInfo, error) {
	capName := path.Join(capturedBuildInfoDir, p)
	if b, ok := root.Captured(capName); ok {
		return parseCapturedBuildInfo(b)
	}
	if _, snap := root.ReadSnapshotMeta(); snap {
		return nil, fmt.Errorf("%s: the snapshot holds no build information for it", p)
	}
	b, unmap, err := root.MapFile(p, MaxBinarySize)
	if err != nil {
		root.Capture(capName, []byte("error: "+err.Error()+"\n"))
		return nil, err
	}
	bi, err := BuildInfoFromBytes(b)
	unmap()
	if err != nil {
		err = fmt.Errorf("%s: %w", p, err)
		root.Capture(capName, []byte("error: "+err.Error()+"\n"))
		return nil, err
	}
	root.Capture(capName, []byte(bi.String()))
	return bi, nil
}

// BuildInfoFromBytes reads the build information of a Go binary held
// in memory (a mapping). A file truncated while mapped faults on access,
// and debug/elf has panicked on hostile headers before: both come back
// as errors.
func BuildInfoFromBytes(b []byte) (bi *debug.BuildInfo, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			bi, err = nil, fmt.Errorf("malformed executable: %v", r)
		}
	}()
	return buildinfo.Read(readerAt(b))
}

// readerAt is an io.ReaderAt over bytes that never hands out more than
// asked (bytes.Reader would do; this one makes the bound explicit).
type readerAt []byte

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= int64(len(r)) {
		return 0, io.EOF
	}
	n := copy(p, r[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// maxCapturedBuildInfo bounds a captured build information text.
const maxCapturedBuildInfo = 1 << 20

func parseCapturedBuildInfo(b []byte) (*debug.BuildInfo, error) {
	if len(b) > maxCapturedBuildInfo {
		return nil, fmt.Errorf("captured build information of %d bytes, over %d", len(b), maxCapturedBuildInfo)
	}
	s := string(b)
	if msg, ok := strings.CutPrefix(s, "error: "); ok {
		return nil, errors.New(strings.TrimSpace(msg))
	}
	bi, err := debug.ParseBuildInfo(s)
	if err != nil {
		return nil, fmt.Errorf("captured build information: %w", err)
	}
	return bi, nil
}

// moduleDep is one module of a binary's build, as used (a replacement's
// version when replaced).
type moduleDep struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	// Replaced says the build used a replacement; LocalReplace that it
	// was a local directory, whose version says nothing.
	Replaced     bool `json:"replaced,omitempty"`
	LocalReplace bool `json:"local_replace,omitempty"`
}

// dep finds a dependency by module path.
func dep(bi *debug.BuildInfo, paths ...string) (moduleDep, bool) {
	for _, d := range bi.Deps {
		for _, p := range paths {
			if d.Path != p {
				continue
			}
			m := moduleDep{Path: d.Path, Version: d.Version}
			if r := d.Replace; r != nil {
				m.Replaced = true
				m.Version = r.Version
				m.LocalReplace = r.Version == ""
			}
			return m, true
		}
	}
	return moduleDep{}, false
}

// ldflagsVersion finds the version a release build stamps with
// -ldflags "-X .../version.Version=1.7.24" (containerd, CRI-O, podman)
// or "-X .../dockerversion.Version=28.0.1" (dockerd), which module-mode
// builds record in the build settings (unless built with -trimpath,
// which leaves -ldflags out: then the package database answers).
var ldflagsVersion = lazyre.New(`-X[ =]'?([^ '=]*(?:/version|/dockerversion|/define))\.Version=([^ ']+)`)

// mainVersion is the runtime's own version from its build information:
// the main module's version, else the one stamped by -ldflags.
func mainVersion(bi *debug.BuildInfo) (v, from string) {
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		if _, _, _, ok := semver(mv); ok {
			return strings.TrimPrefix(mv, "v"), "main module " + bi.Main.Path + " " + mv
		}
	}
	for _, s := range bi.Settings {
		if s.Key != "-ldflags" {
			continue
		}
		if m := ldflagsVersion().FindStringSubmatch(s.Value); m != nil {
			if _, _, _, ok := semver(m[2]); ok {
				return strings.TrimPrefix(m[2], "v"), "-ldflags -X " + m[1] + ".Version=" + m[2]
			}
		}
	}
	return "", ""
}
