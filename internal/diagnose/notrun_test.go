package diagnose

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/iommu"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// The whys made from what the readers return are classified by the
// errors' types and the readers' typed states, and each blocker gives
// the fix of that blocker: the capability for BPF read-back and config
// space, the helper and its directory, a capture to take again, a
// process to run again.
func TestWhysFollowTheReadersErrors(t *testing.T) {
	tree := hostfs.MustNew(t.TempDir())
	e := &Env{Root: tree}
	eperm := fmt.Errorf("prog id 7: %w", unix.EPERM)
	for _, c := range []struct {
		name    string
		why     report.Why
		blocker report.Blocker
		fix     []string
	}{
		{"BPF read-back refused", decisionWhy(e, cgroup.Decision{Reason: "prog id 7: operation not permitted", Err: eperm}), report.NeedsPrivilege, []string{"CAP_SYS_ADMIN", "SYS_ADMIN"}},
		{"BPF programs not in the capture", decisionWhy(e, cgroup.Decision{Reason: "r", Err: fmt.Errorf("d: %w", cgroup.ErrCapturedHost)}), report.NeedsCapture, []string{"BPF device programs", "accel-doctor snapshot"}},
		{"default-allow v1", decisionWhy(e, cgroup.Decision{Reason: "r", Hidden: true}), report.Explained, []string{"root included", "runc exec"}},
		{"config space beyond 64 bytes", e.isolationWhy(iommu.Isolation{Hops: []iommu.Hop{{State: iommu.HopUnknown, Err: pci.ErrConfigUnprivileged}}}), report.NeedsPrivilege, []string{"snapshot on the host, as root"}},
		{"socket refused to this user", dialWhy(kubelet.Dial{Answer: kubelet.NoAccess, Err: "permission denied"}, false), report.NeedsPrivilege, []string{"as root"}},
		{"helper missing", dialWhy(kubelet.Dial{Answer: kubelet.NotDialed, Err: "x", Cause: kubeletrpc.CauseNoHelper, Helper: &kubeletrpc.Helper{Name: "accel-doctor-kubelet", Dir: "/opt/ad"}}, false), report.NeedsHelper, []string{"accel-doctor-kubelet", "/opt/ad"}},
		{"helper missing when the capture was taken", dialWhy(kubelet.Dial{Answer: kubelet.NotDialed, Cause: kubeletrpc.CauseNoHelper}, true), report.NeedsHelper, []string{"accel-doctor-kubelet", "take a snapshot"}},
		{"helper failed", dialWhy(kubelet.Dial{Answer: kubelet.NotDialed, Cause: kubeletrpc.CauseHelperFailed, Helper: &kubeletrpc.Helper{Name: "accel-doctor-kubelet", Dir: "/opt/ad"}}, false), report.HelperFailed, []string{"of this accel-doctor's release", "/opt/ad"}},
		{"socket gone", dialWhy(kubelet.Dial{Answer: kubelet.Gone}, false), report.Changed, []string{"again"}},
		{"kubelet dir denied", e.stateWhy("r", kubelet.Denied, "/var/lib/kubelet/device-plugins", false), report.NeedsPrivilege, []string{"as root"}},
		{"kubelet dir not captured", e.stateWhy("r", kubelet.NotCaptured, "/var/lib/kubelet/device-plugins", true), report.NeedsCapture, []string{"/var/lib/kubelet/device-plugins"}},
		{"permission", e.errWhy("r", &fs.PathError{Op: "open", Path: "/proc/1/environ", Err: unix.EACCES}, "", capPtrace), report.NeedsPrivilege, []string{"CAP_SYS_PTRACE"}},
		{"not captured (typed)", e.errWhy("r", fmt.Errorf("x: %w", &hostfs.NotCapturedError{Path: "/proc/driver/nvidia/version"}), "", ""), report.NeedsCapture, []string{"holds no /proc "}},
		{"absent from a tree", e.errWhy("r", &fs.PathError{Op: "open", Path: "/sys/module/nvidia/initstate", Err: fs.ErrNotExist}, "", ""), report.NeedsCapture, []string{"/sys"}},
		{"too large", e.errWhy("r", fmt.Errorf("read /proc/devices: %w", hostfs.ErrTooLarge), "/proc/devices", ""), report.Unreadable, []string{"/proc/devices"}},
		{"kubelet dir not absolute", kubeletReadWhy(fmt.Errorf("kubelet dir %q: %w", "rel", kubelet.ErrKubeletDir)), report.NeedsInput, []string{"--kubelet-root-dir"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.why.Blocker != c.blocker {
				t.Errorf("blocker %v, want %v (fix %q)", c.why.Blocker, c.blocker, c.why.Fix())
			}
			for _, s := range c.fix {
				if !strings.Contains(c.why.Fix(), s) {
					t.Errorf("fix %q does not say %q", c.why.Fix(), s)
				}
			}
		})
	}
}
