package enter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/probe"
)

// The child is accel-doctor itself, executed from the fd of its
// /proc/self/exe that the host side opened, with ACCEL_DOCTOR_ENTER_ROLE
// set. Its descriptors:
//
//	0      /dev/null
//	1      the result pipe: one JSON childResult
//	2      its stderr, kept by the host side
//	3      the executable it was started from (closed at once)
//	4      the request pipe: one JSON request
//	5      the container's root directory (O_PATH, /proc/PID/root)
//	6..    the container's mount namespace and the CUDA helper, when
//	       the request names them
const (
	roleEnv   = "ACCEL_DOCTOR_ENTER_ROLE"
	roleProbe = "probe"

	fdExe     = 3
	fdRequest = 4
	fdRoot    = 5
	// childFailed is the exit status of a child that could not report.
	childFailed = 125
)

// request is what the host side tells the child.
type request struct {
	// MountFD is the container's mount namespace to setns into (-1: do
	// not; the child is in a replica user namespace that does not own
	// it, and enters the container's root by chroot alone).
	MountFD int `json:"mount_fd"`
	// HelperFD is the CUDA helper opened on the host (-1: none).
	HelperFD   int    `json:"helper_fd"`
	HelperPath string `json:"helper_path"`
	// HelperRefused is why the host's helper was not opened: it may be
	// changed by someone other than root (internal/helper).
	HelperRefused string        `json:"helper_refused,omitempty"`
	HelperTimeout time.Duration `json:"helper_timeout"`
	NoLibraries   bool          `json:"no_libraries"`
	Creds         Credentials   `json:"creds"`
	Timeout       time.Duration `json:"timeout"`
	Nodes         []string      `json:"nodes,omitempty"`
}

// childResult is what the child reports.
type childResult struct {
	Aspects []Aspect      `json:"aspects"`
	Probe   *probe.Report `json:"probe,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// TrampolineMain runs the child role of `container --probe`.
// cmd/accel-doctor's main calls it first, beside
// sandbox.TrampolineMain, and test binaries that call Probe call it from
// TestMain. It returns false at once when ACCEL_DOCTOR_ENTER_ROLE is not
// set; when it is, it does the child's job and exits the process.
func TrampolineMain() (handled bool) {
	role, ok := os.LookupEnv(roleEnv)
	if !ok {
		return false
	}
	if role != roleProbe {
		fmt.Fprintf(os.Stderr, "accel-doctor: unknown %s %q\n", roleEnv, role)
		os.Exit(childFailed)
	}
	os.Exit(childMain())
	return true
}

func childMain() int {
	// Every step below changes the state of this OS thread only (its
	// fs_struct, mount namespace, credentials): the main goroutine stays
	// on it to the end, and the helper is forked from it.
	runtime.LockOSThread()
	// Die with the thread that forked us (the host side waits on it to
	// the end). If it is gone already, the request read below ends.
	unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	unix.Close(fdExe)
	out := os.NewFile(1, "result")
	res := childResult{}
	report := func() int {
		if err := json.NewEncoder(out).Encode(res); err != nil {
			return childFailed
		}
		return 0
	}
	var req request
	if err := json.NewDecoder(io.LimitReader(os.NewFile(fdRequest, "request"), 1<<20)).Decode(&req); err != nil {
		res.Error = "read the request: " + err.Error()
		return report()
	}
	unix.Close(fdRequest)
	if err := enterRoot(req, &res); err != nil {
		res.Error = err.Error()
		return report()
	}
	if err := applyCredentials(req.Creds); err != nil {
		res.Error = "take the container's credentials: " + err.Error()
		return report()
	}
	opt := probe.Options{Dev: "/dev", NoLibraries: req.NoLibraries, HelperTimeout: req.HelperTimeout, Env: cleanEnv(os.Environ()), Nodes: req.Nodes}
	opt.HelperRefused = req.HelperRefused
	if req.HelperFD >= 0 {
		opt.HelperFile = os.NewFile(uintptr(req.HelperFD), req.HelperPath)
		opt.HelperPath = req.HelperPath
	} else if !req.NoLibraries {
		// Never look for a helper inside the container: the one named
		// here is the host's, and it was not there.
		opt.HelperPath = "/nonexistent/" + probe.HelperName
		if req.HelperPath != "" {
			opt.HelperPath = req.HelperPath
		}
	}
	ctx := context.Background()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	res.Probe = probe.Run(ctx, opt)
	return report()
}

// enterRoot gives the thread the container's file system view: the
// mount namespace (setns, which also makes its root the namespace's
// root), then the container process's own root directory (fchdir to the
// fd of /proc/PID/root and chroot "."), which is the namespace's root
// for a pivot_root runtime and differs for one that chroots.
func enterRoot(req request, res *childResult) error {
	// setns(CLONE_NEWNS) refuses a task that shares its fs_struct with
	// another (fs/namespace.c mntns_install: fs->users != 1), which every
	// thread of a Go process does; unshare(CLONE_FS) gives this thread
	// its own copy first.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare(CLONE_FS): %w", err)
	}
	if req.MountFD >= 0 {
		if err := unix.Setns(req.MountFD, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("setns into the container's mount namespace: %w", err)
		}
		unix.Close(req.MountFD)
		res.Aspects = append(res.Aspects, Aspect{Name: AspectMount, Reproduced: true, How: "setns(CLONE_NEWNS) into the container's mount namespace"})
	} else {
		res.Aspects = append(res.Aspects, Aspect{Name: AspectMount, Reproduced: false,
			How:  "the container's root directory entered by chroot from the host's mount namespace",
			Note: "not joined: its owner is the container's user namespace, which the replica does not own; paths resolve through the container's mounts all the same (the root's mount tree is the container's)"})
	}
	if err := unix.Fchdir(fdRoot); err != nil {
		return fmt.Errorf("fchdir to the container's root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot to the container's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	unix.Close(fdRoot)
	res.Aspects = append(res.Aspects, Aspect{Name: AspectRoot, Reproduced: true, Decisive: true, How: "fchdir(/proc/PID/root) and chroot(\".\")"})
	return nil
}

// cleanEnv drops the child's own variable from the environment the
// probe gives the libraries.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, roleEnv+"=") {
			out = append(out, e)
		}
	}
	return out
}
