package cgroup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Target names the cgroup whose policy is read: a process (its
// /proc/PID/cgroup lines give the v1 devices and the cgroup2 paths) or a
// cgroup path, which is then used in both hierarchies ("/docker/ID" means
// <devices mount>/docker/ID and <cgroup2 mount>/docker/ID). A cgroup path
// is a path in the hierarchy as the mounts are read: on a host, and from
// a pod with the host at --root, from the hierarchy's own root.
type Target struct {
	PID    int
	Cgroup string
	// Self judges the reading process itself through /proc/self: on the
	// live host accel-doctor's own process, in a capture whatever process
	// took it.
	Self bool
}

func (t Target) String() string {
	if t.Self {
		return "self"
	}
	if t.PID > 0 {
		return fmt.Sprintf("pid %d", t.PID)
	}
	return "cgroup " + t.Cgroup
}

// Policy is the device policy in effect for a target: the v1 devices
// controller's part and the cgroup2 programs' part. On a hybrid host both
// apply: the kernel runs the cgroup2 programs first and then the v1 check
// (devcgroup_check_permission, security/device_cgroup.c), and either may
// refuse.
type Policy struct {
	Mounts *Mounts
	Target Target

	// V1Applies is true when the host mounts the v1 devices controller.
	// V1 is then the parsed hierarchy, or nil with V1Err.
	V1Applies bool
	V1Path    string // cgroup path in the devices hierarchy (see Place.Path)
	V1Shown   string // the path as accel-doctor's cgroup namespace showed it
	V1Dir     string // the directory judged ("" when not located)
	V1        *V1Policy
	V1Err     error

	// V2Applies is true when the host mounts cgroup2. V2 is then the
	// programs in effect, or nil with V2Err (ErrCapturedHost for a
	// snapshot, an EPERM error without privilege).
	V2Applies bool
	V2Path    string
	V2Shown   string
	V2Dir     string
	V2        *V2Policy
	V2Err     error

	// Resolved names the cgroup namespace the paths were read again in
	// when accel-doctor's own namespace showed them relative to a root it
	// could not place (Location.Via); "" when they were used as shown.
	Resolved string
}

// ReadPolicy reads the device policy of target. Errors reading one part
// are kept in V1Err / V2Err so the other part still answers; the returned
// error is for what stops both (mountinfo, the process's cgroup file, a
// target located in neither hierarchy: see Locate).
func ReadPolicy(root *hostfs.Root, target Target) (*Policy, error) {
	loc, err := Locate(root, target)
	if err != nil {
		return nil, err
	}
	m := loc.Mounts
	p := &Policy{Mounts: m, Target: target, V1Applies: m.DevicesV1 != "", V2Applies: m.Unified != "", Resolved: loc.Via}
	fill := func(pl Place) (shown, at, dir string, err error) {
		at = pl.Path
		if at == "" {
			at = pl.Shown
		}
		return pl.Shown, at, pl.Dir, pl.Err
	}
	if p.V1Applies {
		p.V1Shown, p.V1Path, p.V1Dir, p.V1Err = fill(loc.V1)
		if p.V1Err == nil {
			p.V1, p.V1Err = ReadV1(root, m.DevicesV1, p.V1Dir)
		}
	}
	if p.V2Applies {
		p.V2Shown, p.V2Path, p.V2Dir, p.V2Err = fill(loc.V2)
		if p.V2Err == nil {
			p.V2, p.V2Err = ReadV2(root, p.V2Dir)
		}
	}
	return p, nil
}

// AccessResult is the decision on one access (or one operation asking for
// several, as an O_RDWR open does) by each layer and combined.
type AccessResult struct {
	Access   Access
	V1       *Decision // nil when the v1 devices controller is not in use
	V2       *Decision // nil when the host has no cgroup2 hierarchy
	Combined Decision
}

// Result is the decision on a device for a set of accesses.
type Result struct {
	Device DeviceRef
	Access Access
	// Each is one result per access in Access, in r, w, m order: what
	// open(O_RDONLY), open(O_WRONLY) and mknod each get.
	Each []AccessResult
	// Whole is the decision for one operation asking for all of Access at
	// once. It can differ from Each: v1 needs a single exception holding
	// every access asked.
	Whole AccessResult
}

// Evaluate decides acc on dev with each layer that applies.
func (p *Policy) Evaluate(dev DeviceRef, acc Access) Result {
	res := Result{Device: dev, Access: acc, Whole: p.evaluate(dev, acc)}
	for _, b := range acc.Bits() {
		res.Each = append(res.Each, p.evaluate(dev, b))
	}
	return res
}

func (p *Policy) evaluate(dev DeviceRef, acc Access) AccessResult {
	ar := AccessResult{Access: acc}
	if p.V1Applies {
		d := undecidedErr(fmt.Sprintf("v1 devices policy unreadable: %v", p.V1Err), p.V1Err)
		if p.V1 != nil {
			d = p.V1.Evaluate(dev, acc)
		}
		ar.V1 = &d
	}
	if p.V2Applies {
		d := undecidedErr(fmt.Sprintf("cgroup2 device programs unreadable: %v", p.V2Err), p.V2Err)
		if p.V2 != nil {
			d = p.V2.Evaluate(dev, acc)
		}
		ar.V2 = &d
	}
	ar.Combined = Combine(ar.V1, ar.V2)
	return ar
}

// Combine joins the decisions of the layers that apply (nil ones do not):
// allowed only if every layer allows. A definite denial by one layer
// decides; otherwise any undecided layer leaves the whole undecided.
func Combine(parts ...*Decision) Decision {
	var by, reasons []string
	var firstErr error
	hidden := false
	n := 0
	for _, d := range parts {
		if d == nil {
			continue
		}
		n++
		if d.Known && !d.Allowed {
			return *d
		}
		if !d.Known {
			reasons = append(reasons, d.Reason)
			if firstErr == nil {
				firstErr = d.Err
			}
			hidden = hidden || d.Hidden
		}
		if d.DecidedBy != "" {
			by = append(by, d.DecidedBy)
		}
	}
	if n == 0 {
		return undecided("no cgroup device controller is in use")
	}
	if len(reasons) > 0 {
		return Decision{Reason: strings.Join(reasons, "; "), DecidedBy: strings.Join(by, "; "), Err: firstErr, Hidden: hidden && firstErr == nil}
	}
	return Decision{Allowed: true, Known: true, DecidedBy: strings.Join(by, "; ")}
}

// IsCapturedHost reports whether err says the v2 part needs the live host.
func IsCapturedHost(err error) bool { return errors.Is(err, ErrCapturedHost) }
