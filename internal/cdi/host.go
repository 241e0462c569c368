package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// capturedModeDir names, in a snapshot, the mode bits of the hook
// programs checked: a snapshot keeps a stat'ed file as an empty 0444
// placeholder, which would read as "not executable" on replay.
const capturedModeDir = "cdi/mode"

// CheckEdits checks, on the host, every piece the edits name: each
// device node (present, a device, with the spec's type and major:minor),
// each bind mount's host path, each hook program (present, executable),
// each network interface. owner names whose edits they are (a device
// name or a spec file) and leads each fact's subject.
func CheckEdits(root *hostfs.Root, owner string, e *cdispec.ContainerEdits) Facts {
	if e == nil {
		return nil
	}
	c := checker{root: root, owner: owner}
	_, c.snapshot = root.ReadSnapshotMeta()
	var out Facts
	// One fact per host path and kind of piece: two hooks running one
	// program (nvidia-cdi-hook create-symlinks, update-ldcache) need it
	// checked once.
	seen := map[string]bool{}
	once := func(what, p string) bool {
		k := what + "\x00" + p
		if seen[k] {
			return false
		}
		seen[k] = true
		return true
	}
	for _, dn := range e.DeviceNodes {
		if dn == nil {
			continue
		}
		host := dn.HostPath
		if host == "" {
			host = dn.Path
		}
		if once("node", host+"\x00"+dn.Path) {
			out = append(out, c.node(dn))
		}
	}
	for _, m := range e.Mounts {
		if m == nil || !once("mount", m.HostPath+"\x00"+m.ContainerPath) {
			continue
		}
		if f, ok := c.mount(m); ok {
			out = append(out, f)
		}
	}
	for _, h := range e.Hooks {
		if h != nil && once("hook", h.Path) {
			out = append(out, c.hook(h.Path, "CDI "+h.HookName+" hook"))
		}
	}
	for _, n := range e.NetDevices {
		if n != nil {
			out = append(out, c.netdev(n))
		}
	}
	return out
}

type checker struct {
	root     *hostfs.Root
	owner    string
	snapshot bool
}

func (c checker) subject(p string) string { return c.owner + ": " + p }

// typeLetter is the CDI/OCI type letter of a host node type ("" when it
// is no device).
func typeLetter(t hostfs.FileType) string {
	switch t {
	case hostfs.TypeChar:
		return "c"
	case hostfs.TypeBlock:
		return "b"
	case hostfs.TypeFIFO:
		return "p"
	}
	return ""
}

// node checks one device node the way the runtime's library fills it in
// (pkg/cdi/container-edits_unix.go fillMissingInfo): the host path is
// lstat'ed; a node given with a type and a major ("minimally specified")
// is injected as given even when the host has no such path; otherwise
// the host's node supplies the type and numbers, and its absence or a
// non-device there fails the container's creation.
func (c checker) node(dn *cdispec.DeviceNode) Fact {
	host := dn.HostPath
	if host == "" {
		host = dn.Path
	}
	minimal := dn.Type != "" && (dn.Major != 0 || dn.Type == "p")
	want := dn.Type
	if dn.Major != 0 {
		want += fmt.Sprintf(" %d:%d", dn.Major, dn.Minor)
	}
	if want == "" {
		want = "type and numbers from the host"
	}
	subj := c.subject(host)
	ev := Evidence{Path: c.owner, Value: fmt.Sprintf("deviceNodes: path %s, hostPath %s, %s", dn.Path, host, want)}
	st, err := c.root.Lstat(host)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fact(KindNodeUnreadable, subj, "host node %s could not be examined", host).with(host, err.Error()).withErr(err)
		}
		if !c.root.Covers(host) {
			return fact(KindNodeUnreadable, subj, "the capture does not show %s", host).with(host, "not captured").withErr(&hostfs.NotCapturedError{Path: host})
		}
		f := fact(KindNodeMissing, subj, "CDI device node %s: the host has no %s", dn.Path, host)
		if minimal {
			f.Summary += fmt.Sprintf("; the spec gives %s, so the runtime creates the node in the container anyway, for a device the host has no node for", want)
		} else {
			f.Summary += fmt.Sprintf("; the runtime refuses the container (failed to stat CDI host device %q)", host)
		}
		f.Evidence = append(f.Evidence, ev)
		return f.with(host, err.Error())
	}
	got := typeLetter(st.Type)
	if st.Type == hostfs.TypeSymlink || got == "" {
		what := st.Type.String()
		if st.Type == hostfs.TypeSymlink {
			what = "a symlink to " + st.Target
		}
		f := fact(KindNodeNotDevice, subj, "CDI device node %s: host path %s is %s, not a device node", dn.Path, host, what)
		if minimal {
			f.Summary += fmt.Sprintf(" (the runtime injects %s as the spec gives it, which need not be the device %s leads to)", want, host)
		} else {
			f.Summary += " (the CDI library lstat's it: the runtime refuses the container)"
		}
		f.Evidence = append(f.Evidence, ev)
		return f.with(host, "lstat: "+what)
	}
	hostDesc := fmt.Sprintf("%s %d:%d mode %s uid %d gid %d", got, st.Major, st.Minor, st.ModeString(), st.UID, st.GID)
	if st.FromManifest {
		hostDesc += " (device manifest)"
	}
	specType := dn.Type
	if specType == "u" && minimal {
		specType = "c" // unbuffered char: the same node type to mknod
	}
	if specType != "" && specType != got {
		f := fact(KindNodeMismatch, subj, "CDI device node %s: the spec says type %s, host node %s is type %s", dn.Path, dn.Type, host, got)
		if !minimal {
			// pkg/cdi/container-edits_unix.go fillMissingInfo
			f.Summary += fmt.Sprintf(" (CDI device (%q, %q), host type mismatch (%s, %s): the runtime refuses the container)", dn.Path, host, dn.Type, got)
		}
		f.Evidence = append(f.Evidence, ev)
		return f.with(host, hostDesc)
	}
	if got != "p" && dn.Major != 0 && (uint32(dn.Major) != st.Major || uint32(dn.Minor) != st.Minor) {
		f := fact(KindNodeMismatch, subj, "CDI device node %s: the spec gives %d:%d, host node %s is %d:%d: the container gets a node for another device than the host's %s",
			dn.Path, dn.Major, dn.Minor, host, st.Major, st.Minor, host)
		f.Evidence = append(f.Evidence, ev)
		return f.with(host, hostDesc)
	}
	f := fact(KindNodeOK, subj, "CDI device node %s: host node %s is %s %d:%d", dn.Path, host, got, st.Major, st.Minor)
	f.Evidence = append(f.Evidence, ev)
	return f.with(host, hostDesc)
}

// isBind reports whether a CDI mount is a bind mount of a host path
// (the NVIDIA specs say "bind" or "rbind" in options; no type is a bind
// for runc when the options say so, and CDI specs give no other form for
// host files).
func isBind(m *cdispec.Mount) bool {
	for _, o := range m.Options {
		if o == "bind" || o == "rbind" {
			return true
		}
	}
	return m.Type == "" || m.Type == "bind" || m.Type == "rbind"
}

// mount checks a bind mount's host path (followed through links, as the
// kernel's bind mount does). A mount of another type names a source that
// is not a host path (tmpfs): nothing to check.
func (c checker) mount(m *cdispec.Mount) (Fact, bool) {
	if !isBind(m) {
		return Fact{}, false
	}
	subj := c.subject(m.HostPath)
	ev := Evidence{Path: c.owner, Value: fmt.Sprintf("mounts: %s -> %s (%s)", m.HostPath, m.ContainerPath, strings.Join(m.Options, ","))}
	st, err := c.root.Stat(m.HostPath)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fact(KindMountUnreadable, subj, "mount source %s could not be examined", m.HostPath).with(m.HostPath, err.Error()).withErr(err), true
		}
		if !c.root.Covers(m.HostPath) {
			return fact(KindMountUnreadable, subj, "the capture does not show %s", m.HostPath).with(m.HostPath, "not captured").withErr(&hostfs.NotCapturedError{Path: m.HostPath}), true
		}
		f := fact(KindMountMissing, subj, "CDI mount of %s (at %s in the container): the host has no such path: the runtime fails the container's creation (the bind mount has no source)",
			m.HostPath, m.ContainerPath)
		f.Evidence = append(f.Evidence, ev)
		return f.with(m.HostPath, err.Error()), true
	}
	f := fact(KindMountOK, subj, "CDI mount of %s (at %s in the container): host path present (%s)", m.HostPath, m.ContainerPath, st.Type)
	f.Evidence = append(f.Evidence, ev)
	return f.with(m.HostPath, st.Type.String()), true
}

// hook checks that a hook's program exists and may be executed: runc
// execs the path as given (no PATH search) in the runtime's namespace.
// Root may execute a regular file when any execute bit is set
// (fs/namei.c generic_permission: CAP_DAC_OVERRIDE needs one x bit).
func (c checker) hook(p, what string) Fact {
	subj := c.subject(p)
	if p == "" || !strings.HasPrefix(p, "/") {
		return fact(KindHookMissing, subj, "%s %q is not an absolute path: runc cannot exec it", what, p).with(c.owner, "hook path "+strconv.Quote(p))
	}
	st, err := c.root.Stat(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fact(KindHookUnreadable, subj, "%s %s could not be examined", what, p).with(p, err.Error()).withErr(err)
		}
		if !c.root.Covers(p) {
			return fact(KindHookUnreadable, subj, "the capture does not show %s", p).with(p, "not captured").withErr(&hostfs.NotCapturedError{Path: p})
		}
		return fact(KindHookMissing, subj, "%s %s does not exist on the host: runc fails the container's creation when it runs the hook", what, p).
			with(p, err.Error())
	}
	if st.Type != hostfs.TypeRegular {
		return fact(KindHookNotExec, subj, "%s %s is a %s, not a program", what, p, st.Type).with(p, st.Type.String())
	}
	mode := st.Mode.Perm()
	from := "stat"
	capName := path.Join(capturedModeDir, p)
	if c.snapshot {
		b, ok := c.root.Captured(capName)
		if !ok {
			return fact(KindHookUnreadable, subj, "%s %s is present, but the snapshot keeps no mode bits for it", what, p).with(p, "present; mode not captured").withErr(&hostfs.NotCapturedError{Path: p})
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 8, 32)
		if err != nil {
			return fact(KindHookUnreadable, subj, "the snapshot's record of %s's mode is malformed", p).with(p, strconv.Quote(string(b)))
		}
		mode, from = fs.FileMode(v).Perm(), "mode recorded in the snapshot"
	} else {
		c.root.Capture(capName, fmt.Appendf(nil, "%04o\n", uint32(mode)))
	}
	if mode&0o111 == 0 {
		return fact(KindHookNotExec, subj, "%s %s is not executable (mode %04o): runc's exec of it fails with EACCES", what, p, uint32(mode)).
			with(p, fmt.Sprintf("%s: regular file, mode %04o", from, uint32(mode)))
	}
	return fact(KindHookOK, subj, "%s %s is present and executable", what, p).with(p, fmt.Sprintf("%s: regular file, mode %04o", from, uint32(mode)))
}

// netdev checks that a network interface the spec moves into the
// container exists on the host (/sys/class/net/NAME).
func (c checker) netdev(n *cdispec.LinuxNetDevice) Fact {
	p := path.Join("/sys/class/net", n.HostInterfaceName)
	subj := c.subject(p)
	if strings.Contains(n.HostInterfaceName, "/") {
		return fact(KindNetDeviceMissing, subj, "CDI net device %q is not an interface name", n.HostInterfaceName).with(c.owner, "hostInterfaceName "+strconv.Quote(n.HostInterfaceName))
	}
	if c.root.Exists(p) {
		return fact(KindNetDeviceOK, subj, "CDI net device %s (as %s in the container) is present on the host", n.HostInterfaceName, n.Name).with(p, "present")
	}
	if !c.root.Covers(p) {
		return fact(KindNetDeviceUnread, subj, "the capture does not show %s", p).with(p, "not captured").withErr(&hostfs.NotCapturedError{Path: p})
	}
	return fact(KindNetDeviceMissing, subj, "CDI net device %s is not on the host: the runtime cannot move it into the container", n.HostInterfaceName).with(p, "absent")
}
