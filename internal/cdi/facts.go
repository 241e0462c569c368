package cdi

import "fmt"

// Kind names what a Fact says. Kinds are stable: the diagnose layer maps
// each to exactly one finding code and status (codes.go), so a new
// situation is a new kind, never a new meaning of an old one.
type Kind string

// Spec files and directories.
const (
	KindSpecLoaded       Kind = "spec.loaded"         // a spec file parsed and validated
	KindSpecInvalid      Kind = "spec.invalid"        // the library rejects the file: its words
	KindSpecUnreadable   Kind = "spec.unreadable"     // we could not read the file (not the runtime's problem)
	KindSpecNone         Kind = "spec.none"           // no spec file in any spec directory
	KindSpecDirNotDir    Kind = "spec.dir-not-dir"    // a spec "directory" that is not one: the library stops scanning
	KindSpecDirUnread    Kind = "spec.dir-unreadable" // a spec directory we could not list
	KindSpecDirNotCaught Kind = "spec.dir-not-captured"
	KindSpecDirUnused    Kind = "spec.dir-unused" // specs in a directory the runtime does not read
)

// Devices of the spec files.
const (
	KindDeviceResolved    Kind = "device.resolved"
	KindDeviceUnresolved  Kind = "device.unresolvable"
	KindDeviceNameInvalid Kind = "device.name-invalid"
	KindDeviceConflict    Kind = "device.conflict"   // one name in two specs of one directory: neither resolves
	KindDeviceOverridden  Kind = "device.overridden" // a later directory's spec wins over an earlier one
)

// Host pieces the edits name.
const (
	KindNodeOK           Kind = "node.ok"
	KindNodeMissing      Kind = "node.missing"
	KindNodeMismatch     Kind = "node.mismatch" // type or major:minor differ from the host's node
	KindNodeNotDevice    Kind = "node.not-device"
	KindNodeUnreadable   Kind = "node.unreadable"
	KindMountOK          Kind = "mount.ok"
	KindMountMissing     Kind = "mount.missing"
	KindMountUnreadable  Kind = "mount.unreadable"
	KindHookOK           Kind = "hook.ok"
	KindHookMissing      Kind = "hook.missing"
	KindHookNotExec      Kind = "hook.not-executable"
	KindHookUnreadable   Kind = "hook.unreadable"
	KindNetDeviceOK      Kind = "netdev.ok"
	KindNetDeviceMissing Kind = "netdev.missing"
	KindNetDeviceUnread  Kind = "netdev.unreadable"
)

// Runtimes and compatibility.
const (
	KindRuntimeFound     Kind = "runtime.found"       // a runtime, its version and its CDI library
	KindRuntimeNone      Kind = "runtime.none"        // no runtime binary under the root's PATH
	KindRuntimeUnknown   Kind = "runtime.cdi-unknown" // found, but which CDI library it carries is not known
	KindRuntimeNoCDI     Kind = "runtime.no-cdi"      // the runtime (version) has no CDI support
	KindCDIEnabled       Kind = "cdi.enabled"
	KindCDIDisabled      Kind = "cdi.disabled"
	KindCDIConfigUnknown Kind = "cdi.config-unknown"
	KindVersionOK        Kind = "version.ok"
	KindVersionTooNew    Kind = "version.too-new"
	KindVersionUnknown   Kind = "version.unknown"
)

// A container's injection mechanisms and their conflicts.
const (
	KindMechanism         Kind = "inject.mechanism"
	KindNoMechanism       Kind = "inject.none"
	KindAnnotationInvalid Kind = "inject.annotation-invalid"
	KindNvidiaEnvInvalid  Kind = "inject.nvidia-env-invalid"
	KindConflictEnvCDI    Kind = "conflict.nvidia-env-with-cdi"
	KindConflictPriv      Kind = "conflict.privileged"
	KindConflictTwice     Kind = "conflict.requested-twice"
)

// Evidence is one thing read: where, and what it said. It mirrors the
// report's evidence without importing it (readers sit below report).
type Evidence struct {
	Path  string `json:"path,omitempty"`
	Value string `json:"value"`
}

// Fact is one observation. Subject is what it is about: a spec file, a
// qualified device name, a host path, a runtime binary. Err is set for
// the kinds that say something could not be read or was rejected, with
// the reader's or the library's own words.
type Fact struct {
	Kind     Kind       `json:"kind"`
	Subject  string     `json:"subject"`
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence,omitempty"`
	Err      error      `json:"-"`
	// Error is Err's text, for JSON.
	Error string `json:"error,omitempty"`
}

func fact(k Kind, subject, format string, a ...any) Fact {
	return Fact{Kind: k, Subject: subject, Summary: fmt.Sprintf(format, a...)}
}

func (f Fact) with(path, value string) Fact {
	f.Evidence = append(f.Evidence, Evidence{Path: path, Value: value})
	return f
}

func (f Fact) withErr(err error) Fact {
	f.Err = err
	if err != nil {
		f.Error = err.Error()
	}
	return f
}

// Facts is a list of facts with helpers for tests and callers.
type Facts []Fact

// OfKind returns the facts of kind k.
func (fs Facts) OfKind(k Kind) Facts {
	var out Facts
	for _, f := range fs {
		if f.Kind == k {
			out = append(out, f)
		}
	}
	return out
}

// Kinds returns the kinds present, in order of first appearance.
func (fs Facts) Kinds() []Kind {
	var out []Kind
	seen := map[Kind]bool{}
	for _, f := range fs {
		if !seen[f.Kind] {
			seen[f.Kind] = true
			out = append(out, f.Kind)
		}
	}
	return out
}
