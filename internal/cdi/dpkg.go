package cdi

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// DpkgStatus is the Debian package database the runtime's version is
// read from when its binary carries no module information (Debian's own
// Go packages are built that way).
const DpkgStatus = "/var/lib/dpkg/status"

// MaxDpkgStatus bounds the database read (a server's is 1-5 MiB).
const MaxDpkgStatus = 64 << 20

// rpmDatabases are where an RPM database may be; reading one needs
// SQLite or Berkeley DB, which accel-doctor does not carry.
var rpmDatabases = []string{"/var/lib/rpm/rpmdb.sqlite", "/usr/lib/sysimage/rpm/rpmdb.sqlite", "/var/lib/rpm/Packages"}

// maxDpkgLine bounds one line of the database (a long Description line
// or Conffiles entry is a few KiB).
const maxDpkgLine = 1 << 20

// ParseDpkgStatus returns the installed packages' versions from a dpkg
// status file (deb-control(5) stanzas: "Field: value" lines, blank lines
// between packages, continuation lines starting with a space). Only
// packages whose Status says "installed" are kept. Only the packages in
// want are returned (nil: all).
func ParseDpkgStatus(b []byte, want map[string]bool) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), maxDpkgLine)
	var pkg, ver, status string
	flush := func() {
		if pkg != "" && ver != "" && strings.HasSuffix(status, " installed") && (want == nil || want[pkg]) {
			out[pkg] = ver
		}
		pkg, ver, status = "", "", ""
	}
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			continue // continuation of a multi-line field
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return out, fmt.Errorf("line %d: not a \"Field: value\" line", line)
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Package":
			pkg = v
		case "Version":
			ver = v
		case "Status":
			status = v
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("line %d: %w", line+1, err)
	}
	flush()
	return out, nil
}
