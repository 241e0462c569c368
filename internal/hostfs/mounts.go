package hostfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"strings"
)

// SelfMountInfo is this thread's mount table (proc(5),
// fs/proc_namespace.c show_mountinfo): the mounts of its own mount
// namespace, which in a pod are the container's, /host/... among them.
const SelfMountInfo = "/proc/thread-self/mountinfo"

// NotGiven reports whether p, absent under a directory root, is so only
// because the root was not given it, and says why. A root assembled from
// mounts (a DaemonSet pod's /host: hostPath volumes of /sys, /proc, /dev,
// /var/lib/kubelet/device-plugins, ... mounted under it) shows the host
// only inside those mounts; anywhere else under it is the container's own
// file system (the image, or a directory the runtime made as a mount
// point), where a missing file says nothing about the host. So p is not
// given when some mount lies under the root and the mount that holds
// root+p (the longest mount point that is a prefix of it) is not at or
// under the root.
//
// It is never true for the live root (/), a snapshot, or a directory
// with no mount under it (fixtures, unpacked captures): those are judged
// by Covers as before. The mount table is read once per Root; when it
// cannot be read nothing is claimed.
func (r *Root) NotGiven(p string) (string, bool) {
	if r.live || r.dir == "/" {
		return "", false
	}
	r.mountsOnce.Do(func() {
		b, err := os.ReadFile(SelfMountInfo)
		if err != nil {
			return
		}
		// A table read in part could lack the very mounts that give the
		// root its paths, and then call everything not given: use it
		// whole or not at all.
		if ms, err := ParseMountPoints(b); err == nil {
			r.mounts = ms
		}
	})
	holder, ok := notGiven(r.mounts, r.real, p)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%s is not mounted into the root %s (what is there is %s, not the host's): the host's %s was not given to it",
		path.Join(r.real, p), r.real, describeHolder(holder), path.Clean(p)), true
}

func describeHolder(m string) string {
	if m == "/" {
		return "the container's own file system"
	}
	return "the file system mounted at " + m
}

// notGiven is NotGiven's decision over a list of mount points: the mount
// holding dir+p and whether p is not given.
func notGiven(mounts []string, dir, p string) (string, bool) {
	dir = path.Clean(dir)
	full := path.Join(dir, path.Clean("/"+p))
	under := func(a, b string) bool { return a == b || b == "/" || strings.HasPrefix(a, b+"/") }
	assembled := false
	holder := ""
	for _, m := range mounts {
		if under(m, dir) {
			assembled = true
		}
		if under(full, m) && len(m) > len(holder) {
			holder = m
		}
	}
	if !assembled || holder == "" || under(holder, dir) {
		return "", false
	}
	return holder, true
}

// ParseMountPoints returns the mount point (the fifth field) of each line
// of a mountinfo file, with the kernel's octal escapes (\040 for a space,
// \011, \012, \134: fs/proc_namespace.c mangle) undone. A line with fewer
// than five fields is an error, reported once the rest is parsed.
func ParseMountPoints(b []byte) ([]string, error) {
	var out []string
	var bad int
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[4], "/") {
			bad++
			continue
		}
		out = append(out, path.Clean(unescapeOctal(f[4])))
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("mountinfo: %w", err)
	}
	if bad > 0 {
		return out, fmt.Errorf("mountinfo: %d line(s) without a mount point", bad)
	}
	return out, nil
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
