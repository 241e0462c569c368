package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrNoLiveProc is returned when a root's /proc is not a running kernel's
// procfs (a snapshot, a fixture tree): its namespace files are not real.
var ErrNoLiveProc = errors.New("the root's /proc is not a live procfs")

// LiveProc reports whether the root's /proc is a running kernel's procfs:
// always on the live host, and under a host mounted at /host in a pod.
func (r *Root) LiveProc() bool {
	if r.live {
		return true
	}
	fd, err := r.open("/proc", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return isProcfs(fd)
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
	nsPath, err := clean(nsPath)
	if err != nil {
		return err
	}
	if !r.LiveProc() {
		return &fs.PathError{Op: "setns", Path: nsPath, Err: ErrNoLiveProc}
	}
	// The directory (/proc/PID/ns) is resolved inside the root and checked
	// to be procfs on its fd; the last component is procfs's own magic
	// link into nsfs, which must be followed (the one link followed here,
	// chosen by the kernel, not by the tree).
	dfd, err := r.open(path.Dir(nsPath), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return &fs.PathError{Op: "open", Path: nsPath, Err: err}
	}
	defer unix.Close(dfd)
	if !isProcfs(dfd) {
		return &fs.PathError{Op: "setns", Path: nsPath, Err: ErrNoLiveProc}
	}
	fd, err := unix.Openat(dfd, path.Base(nsPath), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
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
