package probe

import "fmt"

// Decision is what a probe proves about the cgroup under test.
type Decision string

const (
	// Allowed: the access got past the device cgroup (it succeeded, or it
	// failed later, in the driver).
	Allowed Decision = "ALLOWED"
	// Denied: EPERM inside the cgroup and not outside it.
	Denied Decision = "DENIED"
	// Undetermined: the access failed before the device cgroup was asked
	// (missing node, mode, nodev), or it failed the same way outside the
	// cgroup, so the probe cannot tell what the cgroup would decide.
	Undetermined Decision = "UNDETERMINED"
)

// Verdict separates the cgroup under test from host-wide policy.
type Verdict struct {
	Decision Decision `json:"decision"`
	// HostWide is true when the baseline, taken outside the cgroup, failed
	// with the same errno: the cause is not the cgroup.
	HostWide bool   `json:"host_wide"`
	Reason   string `json:"reason"`
}

// Compare judges a probe made inside a cgroup against the same probe made
// outside it (the baseline). Only EPERM is a device-cgroup denial, and only
// when the baseline did not get EPERM too; ENXIO/ENODEV mean the cgroup said
// yes and the driver was missing, because the kernel asks the device cgroup
// before it calls the driver's open (fs/namei.c may_open, fs/char_dev.c
// chrdev_open).
func Compare(baseline, inCgroup Result) Verdict {
	same := baseline.Errno != 0 && baseline.Errno == inCgroup.Errno
	switch inCgroup.Class {
	case OK:
		v := Verdict{Decision: Allowed, Reason: "allowed inside the cgroup"}
		if baseline.Errno != 0 {
			v.Reason = fmt.Sprintf("allowed inside the cgroup although the baseline outside failed with %s", baseline.ErrnoName)
		}
		return v
	case NoDriver:
		return Verdict{Decision: Allowed, HostWide: same,
			Reason: fmt.Sprintf("allowed by the cgroup, no driver (%s)", inCgroup.ErrnoName)}
	case CgroupDenied:
		if same {
			return Verdict{Decision: Undetermined, HostWide: true,
				Reason: "EPERM outside the cgroup too: host-wide policy (an LSM, missing CAP_MKNOD or the caller's own cgroup), not this cgroup"}
		}
		return Verdict{Decision: Denied,
			Reason: fmt.Sprintf("denied by the device cgroup (EPERM inside, %s outside)", baselineWord(baseline))}
	case PermissionDenied:
		return Verdict{Decision: Undetermined, HostWide: same,
			Reason: "EACCES (file mode, nodev mount or LSM) comes before the device cgroup is asked"}
	case NotPresent:
		return Verdict{Decision: Undetermined, HostWide: same, Reason: "the node is not present"}
	}
	return Verdict{Decision: Undetermined, HostWide: same,
		Reason: fmt.Sprintf("failed with %s (%s)", inCgroup.ErrnoName, inCgroup.Message)}
}

func baselineWord(b Result) string {
	if b.Errno == 0 {
		return "OK"
	}
	return b.ErrnoName
}
