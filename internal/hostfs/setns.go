package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrNoLiveProc is returned when a root's /proc is not a running kernel's
// procfs (a snapshot, a fixture tree): its namespace files are not real.
var ErrNoLiveProc = errors.New("the root's /proc is not a live procfs")

// LiveProc reports whether the root's /proc is a running kernel's procfs:
// always on the live host, and under a host mounted at /host in a pod.
func (r *Root) LiveProc() bool {
	if r.dir == "/" {
		return true
	}
	d, err := r.resolveDir("/proc")
	if err != nil {
		return false
	}
	var st unix.Statfs_t
	return unix.Statfs(d, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// InNamespace runs fn on an OS thread of its own that has joined the
// namespace nsPath names (a /proc/PID/ns/* file of the root's live procfs,
// of kind nsType, e.g. unix.CLONE_NEWCGROUP), and returns fn's error.
// Nothing else in the process changes namespace: setns(2) moves only the
// calling thread, and the thread is never handed back to the Go scheduler
// (the goroutine ends locked, so the runtime terminates the thread; Go
// spawns new threads from a clean template thread, never from a locked
// one). fn must do its work on the calling goroutine.
//
// Joining a cgroup namespace needs CAP_SYS_ADMIN in our own user namespace
// and in the one that owns the target namespace (cgroupns_install,
// kernel/cgroup/namespace.c); opening the ns file needs ptrace read access
// to its process (proc_ns_get_link, fs/proc/namespaces.c).
func (r *Root) InNamespace(nsPath string, nsType int, fn func() error) error {
	if err := check(nsPath); err != nil {
		return err
	}
	nsPath = path.Clean(nsPath)
	if !r.LiveProc() {
		return &fs.PathError{Op: "setns", Path: nsPath, Err: ErrNoLiveProc}
	}
	dir, err := r.resolveDir(path.Dir(nsPath))
	if err != nil {
		return &fs.PathError{Op: "open", Path: nsPath, Err: unwrapPathErr(err)}
	}
	// The last component is a procfs magic link into nsfs: it must be
	// followed, and its directory was resolved inside the root.
	fd, err := unix.Open(filepath.Join(dir, path.Base(nsPath)), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: nsPath, Err: err}
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return &fs.PathError{Op: "statfs", Path: nsPath, Err: err}
	}
	if sfs.Type != unix.NSFS_MAGIC {
		return &fs.PathError{Op: "setns", Path: nsPath, Err: fmt.Errorf("not a namespace file (filesystem magic %#x)", sfs.Type)}
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(fd, nsType); err != nil {
			// The thread is unchanged and may go back to the scheduler.
			runtime.UnlockOSThread()
			done <- &fs.PathError{Op: "setns", Path: nsPath, Err: err}
			return
		}
		// No UnlockOSThread from here on: the thread dies with the goroutine.
		done <- fn()
	}()
	return <-done
}
