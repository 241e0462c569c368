package diagnose

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// A NOT_RUN finding's fix is about what kept its check from looking, not
// about the FAIL it would have judged: Out.NotRun takes a report.Why,
// whose blocker gives the fix. The helpers here make the Why of the
// usual blockers from what the readers return: typed errors (errors.Is
// and As against fs, hostfs and kubeletrpc), the root's coverage
// (Covers, NotGiven) and the kubelet reader's typed states.

// capSysAdmin is what reading BPF programs back and PCI config space
// beyond its first 64 bytes takes instead of root (kernel/bpf/syscall.c
// bpf_prog_query, bpf_prog_get_fd_by_id; drivers/pci/pci-sysfs.c
// pci_read_config).
const capSysAdmin = "CAP_SYS_ADMIN"

// missing is the why of a path p the root does not show: a pod's root
// that no mount gives it (NeedsHostPath), else a capture that did not
// copy it (NeedsCapture).
func (e *Env) missing(reason, p string) report.Why {
	if _, ng := e.Root.NotGiven(p); ng && path.IsAbs(p) {
		return report.HostPath(reason, p)
	}
	return report.Capture(reason, capturedTop(e.Root, p))
}

// gapWhy is, when the root cannot show p (captureGap), the why of that,
// with the gap's words ahead of the reason's tail.
func (e *Env) gapWhy(p, tail string) (report.Why, bool) {
	gap, ok := captureGap(e.Root, p)
	if !ok {
		return report.Why{}, false
	}
	reason := gap
	if tail != "" {
		reason += ": " + tail
	}
	return e.missing(reason, p), true
}

// capturedTop is the highest directory on the way to p that the tree
// lacks (what captureGap names), or p when its directory is there.
func capturedTop(root *hostfs.Root, p string) string {
	if !path.IsAbs(p) {
		return p
	}
	p = path.Clean(p)
	dir := path.Dir(p)
	if treeHas(root, dir) {
		return p
	}
	missing := dir
	for d := path.Dir(dir); d != "/" && !treeHas(root, d); d = path.Dir(d) {
		missing = d
	}
	return missing
}

// errWhy classifies err, met reading p (the error's own path when p is
// ""): EACCES or EPERM is a privilege (capability, "" for root alone); a
// path the root cannot show is what the capture or the pod lacks; the
// rest (I/O, a file larger than its writer makes, a FIFO) is p being
// unusable.
func (e *Env) errWhy(reason string, err error, p, capability string) report.Why {
	var pe *fs.PathError
	if p == "" && errors.As(err, &pe) {
		p = pe.Path
	}
	var nc *hostfs.NotCapturedError
	switch {
	case errors.As(err, &nc):
		return e.missing(reason, nc.Path)
	case errors.Is(err, fs.ErrPermission): // EACCES and EPERM are both
		return report.Privilege(reason, capability).FromCapture(!e.Root.IsLive() && e.snapshot())
	case errors.Is(err, fs.ErrNotExist) && path.IsAbs(p) && !e.Root.Covers(p):
		return e.missing(reason, p)
	}
	return report.Unusable(reason, p).FromCapture(e.snapshot())
}

// snapshot reports whether the root is a snapshot being replayed (not a
// directory of the host's files).
func (e *Env) snapshot() bool {
	_, ok := e.Root.ReadSnapshotMeta()
	return ok
}

// stateWhy is the why of a kubelet file or directory p that the reader
// could not use (kubelet.State), with its error text.
func (e *Env) stateWhy(reason string, st kubelet.State, p string, replayed bool) report.Why {
	switch st {
	case kubelet.NotCaptured:
		if _, ng := e.Root.NotGiven(p); ng {
			return report.HostPath(reason, p)
		}
		return report.Capture(reason, p)
	case kubelet.Denied:
		return report.Privilege(reason, "").FromCapture(replayed)
	}
	return report.Unusable(reason, p).FromCapture(replayed)
}

// dialWhy is the why of a socket call that says nothing of the server
// (kubeletrpc.Answer.CouldNotLook): no access, gone since the listing,
// or no call made, by its typed cause.
func dialWhy(d kubelet.Dial, replayed bool) report.Why {
	reason := dialText(d)
	switch d.Answer {
	case kubelet.NoAccess:
		return report.Privilege(reason+": connecting to a socket needs write permission on it", "").FromCapture(replayed)
	case kubelet.Gone:
		return report.Again(reason)
	case kubelet.NotDialed:
		name, dir := kubeletBinary, ""
		if d.Helper != nil {
			name, dir = d.Helper.Name, d.Helper.Dir
		}
		switch d.Cause {
		case kubeletrpc.CauseHelperFailed:
			return report.HelperBroken(reason, name, dir).FromCapture(replayed)
		case kubeletrpc.CauseHelperUntrusted:
			return report.Untrusted(reason, path.Join(dir, name)).FromCapture(replayed)
		case kubeletrpc.CauseNoCaller, kubeletrpc.CauseInternal:
			return report.Bug(reason)
		}
		// CauseNoHelper, and a capture of a release that did not say.
		return report.Helper(reason, name, dir).FromCapture(replayed)
	}
	return report.Unusable(reason, "")
}

// notRunBelow returns the first NOT_RUN recorded for subject at a layer
// below l: what kept that layer from looking keeps this one too.
func (e *Env) notRunBelow(subject string, l report.Layer) (report.Finding, bool) {
	return e.firstBelow(subject, l, report.NotRun)
}

// inherit is the why of a check that cannot look for what kept the
// earlier NOT_RUN f from looking: its reason, and its fix.
func inherit(reason string, f report.Finding) report.Why {
	return report.Explain(fmt.Sprintf("%s (layer %d could not look: %s: %s)", reason, int(f.Layer), f.Code, f.Reason), f.Remediation)
}

// kubeletReadWhy is why the kubelet's or DRA's reader could look at
// nothing: a --device-plugin-dir that is not a host path, or a snapshot's
// record of the sockets that does not parse.
func kubeletReadWhy(err error) report.Why {
	if errors.Is(err, kubelet.ErrKubeletDir) {
		return report.Input(err.Error(), "--kubelet-root-dir with the kubelet's --root-dir, a host-absolute path (`systemctl cat kubelet` shows it)")
	}
	return report.Unusable(err.Error(), "").FromCapture(true)
}

// kubeletBinary is the helper that makes layer 6's socket calls for a
// binary that links no gRPC (internal/kubeletrpc).
const kubeletBinary = "accel-doctor-kubelet"

func dialText(d kubelet.Dial) string {
	if d.Err != "" {
		return string(d.Answer) + ": " + d.Err
	}
	return string(d.Answer)
}
