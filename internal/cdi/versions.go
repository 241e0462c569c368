package cdi

import (
	"fmt"
	"strconv"
	"strings"
)

// The CDI library's module paths: the project moved from
// github.com/container-orchestrated-devices to tags.cncf.io in v0.6.1,
// and split the spec types into their own module (specs-go) in v0.6.0.
const (
	cdiModule      = "tags.cncf.io/container-device-interface"
	cdiModuleOld   = "github.com/container-orchestrated-devices/container-device-interface"
	cdiSpecsModule = cdiModule + "/specs-go"
	cdiSpecsModOld = cdiModuleOld + "/specs-go"
	// ourLibraryVersion is go.mod's; the spec versions it knows end at
	// cdispec.CurrentVersion. TestOurLibraryVersion holds it to go.mod.
	ourLibraryVersion = "v1.1.2"
)

// SpecVersions are the released CDI spec versions, oldest first
// (specs-go version.go validSpecVersions).
var SpecVersions = []string{"0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"}

// libMaxSpec is the newest spec version a CDI library release loads.
// Every release rejects a cdiVersion outside its list of known versions
// ("invalid version"). Up to v0.8.x the list lives in pkg/cdi
// (spec.go validSpecVersions, then version.go from v0.5.4), so the main
// module's version decides; from v1.0.0 it lives in specs-go
// (version.go), so the specs-go module's version decides. Read from the
// tags of cncf-tags/container-device-interface: v0.3.x knows up to
// 0.3.0, v0.4.0 0.4.0, v0.5.x 0.5.0, v0.6.x 0.6.0, v0.7.x 0.7.0, v0.8.x
// 0.8.0, specs-go v1.0.x 1.0.0, specs-go v1.1.x 1.1.0.
func libMaxSpec(v string) (max string, known bool) {
	maj, min, _, ok := semver(v)
	if !ok {
		return "", false
	}
	switch {
	case maj == 0 && min >= 3 && min <= 8:
		return fmt.Sprintf("0.%d.0", min), true
	case maj == 1 && min <= 1:
		return fmt.Sprintf("1.%d.0", min), true
	}
	return "", false
}

// firstLib is the first library release that loads spec version s.
func firstLib(s string) string {
	if s == "0.1.0" || s == "0.2.0" {
		return "v0.3.0"
	}
	return "v" + s
}

// release is a runtime release and the CDI library its go.mod (or
// vendor.mod) requires; a table lists only the releases where that
// changes.
type release struct {
	version string // the runtime's
	lib     string // the CDI library's (main module; specs-go decides from v1.0.0, and moved with it)
}

// runtimeTable is, per runtime, the releases at which the required CDI
// library changes, and the last release the table was read from (a
// newer release may carry a newer library). Read from the go.mod (moby:
// vendor.mod) at each tag of containerd/containerd, cri-o/cri-o and
// moby/moby; where the library requires a specs-go of its own it is the
// same minor version. containerd's CRI gained CDI in 1.7.0, CRI-O in
// 1.24.0, Docker in 25.0.0.
var runtimeTable = map[string]struct {
	releases []release
	last     string
	first    string // first release with CDI support
}{
	"containerd": {first: "1.7.0", last: "2.3.4", releases: []release{
		{"1.7.0", "v0.5.4"}, {"1.7.12", "v0.6.1"}, {"1.7.13", "v0.6.2"}, {"1.7.16", "v0.7.2"}, {"1.7.27", "v0.8.1"},
		{"2.0.0", "v0.8.0"}, {"2.0.3", "v0.8.1"}, {"2.0.5", "v1.0.0"}, {"2.1.0", "v1.0.1"}, {"2.2.1", "v1.1.0"},
	}},
	"crio": {first: "1.24.0", last: "1.36.3", releases: []release{
		{"1.24.0", "v0.3.2"}, {"1.25.0", "v0.5.0"}, {"1.25.2", "v0.5.2"}, {"1.25.5", "v0.5.4"}, {"1.26.0", "v0.5.3"},
		{"1.27.0", "v0.5.4"}, {"1.28.0", "v0.6.0"}, {"1.29.0", "v0.6.2"}, {"1.30.0", "v0.7.2"}, {"1.31.0", "v0.8.0"},
		{"1.32.2", "v0.8.1"}, {"1.33.0", "v1.0.1"}, {"1.35.0", "v1.1.0"},
	}},
	"dockerd": {first: "25.0.0", last: "29.7.2", releases: []release{
		{"25.0.0", "v0.6.2"}, {"25.0.17", "v0.8.1"}, {"26.0.0", "v0.6.2"}, {"26.1.0", "v0.7.1"}, {"26.1.1", "v0.7.2"},
		{"27.4.0", "v0.8.0"}, {"28.0.1", "v0.8.1"}, {"28.1.0", "v1.0.1"}, {"29.2.0", "v1.1.0"},
	}},
}

// libForRelease infers the CDI library of a runtime release from the
// table: the latest table entry of the same major.minor line not newer
// than it, else the latest entry of an older line. ok is false for a
// runtime or version the table cannot answer; none is true for a
// release older than the runtime's CDI support; beyond is true for a
// release newer than the table (its library is at least the one given).
func libForRelease(rt, ver string) (lib string, none, beyond, ok bool) {
	t, found := runtimeTable[rt]
	if !found {
		return "", false, false, false
	}
	if _, _, _, valid := semver(ver); !valid {
		return "", false, false, false
	}
	if cmpVersion(ver, t.first) < 0 {
		return "", true, false, true
	}
	line := func(v string) string { maj, min, _, _ := semver(v); return fmt.Sprintf("%d.%d", maj, min) }
	best, bestOther := "", ""
	for _, r := range t.releases {
		if cmpVersion(r.version, ver) > 0 {
			continue
		}
		if line(r.version) == line(ver) {
			best = r.lib
		} else {
			bestOther = r.lib
		}
	}
	if best == "" {
		best = bestOther
	}
	if best == "" {
		return "", false, false, false
	}
	return best, false, cmpVersion(ver, t.last) > 0, true
}

// FirstReleases names the releases of a runtime whose CDI library loads
// spec version s, from the table: ">= 1.7.16" when every later release
// does, and a release line's own range when a newer line went back to an
// older library (Docker 25.0.17 carries v0.8.1; 26.0.0 went back to
// v0.6.2). "" when no release in the table loads it.
func FirstReleases(rt, s string) string {
	t, ok := runtimeTable[rt]
	if !ok {
		return ""
	}
	loads := func(lib string) bool {
		max, known := libMaxSpec(lib)
		return known && Loads(max, s)
	}
	// The release lines of the table, in order.
	var lines []string
	for _, r := range t.releases {
		l := lineOf(r.version)
		if len(lines) == 0 || lines[len(lines)-1] != l {
			lines = append(lines, l)
		}
	}
	var parts []string
	open := ""
	for _, l := range lines {
		// A line's first release carries what the line before left, up
		// to the line's first entry.
		min := ""
		if lib, _, _, ok := libForRelease(rt, l+".0"); ok && loads(lib) {
			min = l + ".0"
		} else {
			for _, r := range t.releases {
				if lineOf(r.version) == l && loads(r.lib) {
					min = r.version
					break
				}
			}
		}
		switch {
		case open != "" && min == l+".0":
			// the open range goes on
		case open != "":
			parts = append(parts, open+" to before "+l+".0")
			open = min
		default:
			open = min
		}
	}
	if open != "" {
		parts = append(parts, ">= "+open)
	}
	if len(parts) == 0 {
		return ""
	}
	return runtimeLabel(rt) + " " + strings.Join(parts, " or ")
}

func lineOf(v string) string {
	maj, min, _, _ := semver(v)
	return fmt.Sprintf("%d.%d", maj, min)
}

func runtimeLabel(rt string) string {
	switch rt {
	case "dockerd":
		return "Docker Engine"
	case "crio":
		return "CRI-O"
	}
	return rt
}

// LibraryMaxSpec is the newest spec version a runtime's CDI library
// loads: the specs-go module's version decides from v1.0.0, the main
// module's before (see libMaxSpec).
func LibraryMaxSpec(mainVer, specsVer string) (max string, known bool) {
	if maj, _, _, ok := semver(mainVer); ok && maj >= 1 && specsVer != "" {
		return libMaxSpec(specsVer)
	}
	return libMaxSpec(mainVer)
}

// Loads reports whether a library that loads up to max accepts
// cdiVersion v (the known-versions check of every release).
func Loads(max, v string) bool {
	v = strings.TrimPrefix(v, "v")
	for _, s := range SpecVersions {
		if s == v {
			return cmpVersion(v, max) <= 0
		}
	}
	return false
}

// semver parses "v1.7.13", "1.7.13", "1.7.24~ds1-1" (the upstream part
// of a Debian version) and "2:28.0.1-1~debian.12~bookworm" into numbers.
// Pre-release and build suffixes are ignored; a pseudo-version is not
// valid (its base says nothing about the code).
func semver(v string) (maj, min, patch int, ok bool) {
	if i := strings.IndexByte(v, ':'); i >= 0 && i < 4 && isDigits(v[:i]) {
		v = v[i+1:] // a Debian epoch
	}
	v = strings.TrimPrefix(v, "v")
	if strings.Count(v, "-") >= 2 && len(v) > 20 {
		return 0, 0, 0, false // v0.0.0-20230101000000-abcdef012345
	}
	end := len(v)
	for i, c := range v {
		if (c < '0' || c > '9') && c != '.' {
			end = i
			break
		}
	}
	parts := strings.Split(v[:end], ".")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, 0, false
	}
	nums := [3]int{}
	for i, p := range parts {
		if !isDigits(p) {
			return 0, 0, 0, false
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return 0, 0, 0, false
		}
		nums[i] = n
	}
	return nums[0], nums[1], nums[2], true
}

// cmpVersion compares two versions semver parses (an unparsable one
// sorts first).
func cmpVersion(a, b string) int {
	am, an, ap, aok := semver(a)
	bm, bn, bp, bok := semver(b)
	switch {
	case !aok && !bok:
		return 0
	case !aok:
		return -1
	case !bok:
		return 1
	}
	for _, d := range [3]int{am - bm, an - bn, ap - bp} {
		if d != 0 {
			if d < 0 {
				return -1
			}
			return 1
		}
	}
	return 0
}

// upstreamVersion is "1.7.24" of a package version "1.7.24~ds1-1" or
// "2:28.0.1-1~debian.12~bookworm", "" when it has no such part.
func upstreamVersion(pkg string) string {
	maj, min, patch, ok := semver(pkg)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", maj, min, patch)
}
