package hostfs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"
)

// What a container's process sees, read from the host without entering it:
// StatInProcess (root.go) follows links as open(2) would; LstatInProcess and
// ReadDirInProcess list a directory of the process's root the way ls -l
// would, for an inventory of its /dev (whose links, /dev/ptmx -> pts/ptmx,
// /dev/fd -> /proc/self/fd, name the process's paths and must not be
// followed from here). All three reach the process's root the same way
// (openInProcess): through the root's verified procfs, never through a
// link the tree holds.

// LstatInProcess describes p as process pid sees it, without following a
// final symlink (a link's Target is its text). Like StatInProcess, it
// resolves inside /proc/PID/root when the root's /proc is a live procfs,
// and reads the tree's /proc/PID/root path otherwise (a capture or a
// fixture, where a recorded manifest entry answers). A snapshot records
// devices and directories, as StatInProcess does; a link or regular file
// seen through the magic link cannot be archived by its path (the archive
// would follow /proc/PID/root on the host), so readers that need those in
// a replay capture them themselves (Capture).
func (r *Root) LstatInProcess(pid int, p string) (Node, error) {
	p = path.Clean("/" + p)
	hp := fmt.Sprintf("/proc/%d/root%s", pid, p)
	procfd, ok := r.liveProcFD()
	if !ok {
		return r.Lstat(hp)
	}
	defer unix.Close(procfd)
	fd, err := openInProcess(procfd, pid, p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return Node{}, &fs.PathError{Op: "lstat", Path: hp, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Node{}, &fs.PathError{Op: "lstat", Path: hp, Err: err}
	}
	n := nodeFromStat(hp, &st)
	if n.Type == TypeSymlink {
		// readlinkat(fd, "") reads the link an O_PATH|O_NOFOLLOW fd holds.
		t, err := readlinkat(fd, "")
		if err != nil {
			return Node{}, &fs.PathError{Op: "readlink", Path: hp, Err: err}
		}
		n.Target = t
	}
	if n.Type == TypeChar || n.Type == TypeBlock || n.Type == TypeDir {
		r.recordNode(n)
	}
	return n, nil
}

// ReadDirInProcess lists directory p as process pid sees it, sorted; the
// listing is bounded like ReadDir's. Without a live procfs it is ReadDir of
// the tree's /proc/PID/root path. It records nothing: a listing taken
// through the magic link cannot be archived by path (see LstatInProcess).
func (r *Root) ReadDirInProcess(pid int, p string) ([]string, error) {
	p = path.Clean("/" + p)
	hp := fmt.Sprintf("/proc/%d/root%s", pid, p)
	procfd, ok := r.liveProcFD()
	if !ok {
		return r.ReadDir(hp)
	}
	defer unix.Close(procfd)
	// O_DIRECTORY: anything but a directory is ENOTDIR, never opened.
	fd, err := openInProcess(procfd, pid, p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: hp, Err: err}
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: hp, Err: err}
	}
	return names, nil
}

// liveProcFD opens the root's /proc when it is a live procfs (checked on
// the fd); the caller closes it.
func (r *Root) liveProcFD() (int, bool) {
	procfd, err := r.open("/proc", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, false
	}
	if !isProcfs(procfd) {
		unix.Close(procfd)
		return -1, false
	}
	return procfd, true
}

// openInProcess opens p inside the root of process pid with flags (O_PATH,
// possibly with O_NOFOLLOW, or O_RDONLY|O_DIRECTORY: never a flag set that
// could open a device), from a verified procfs fd. "PID" is a number we
// format, opened with O_NOFOLLOW; "root" is procfs's own link to the
// process's root (fs/proc/base.c proc_root_link), the one magic link
// followed, chosen by the kernel; from there p is resolved with
// RESOLVE_IN_ROOT, as the process itself would resolve it.
func openInProcess(procfd, pid int, p string, flags int) (int, error) {
	pidfd, err := unix.Openat(procfd, strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pidfd)
	if !isProcfs(pidfd) {
		return -1, fmt.Errorf("/proc/%d is not procfs", pid)
	}
	rootfd, err := unix.Openat(pidfd, "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootfd)
	flags |= unix.O_CLOEXEC
	if noOpenat2 || !openat2Works() {
		// pathrs-lite takes an *os.File; give it its own copy of the fd.
		dfd, derr := unix.FcntlInt(uintptr(rootfd), unix.F_DUPFD_CLOEXEC, 0)
		if derr != nil {
			return -1, derr
		}
		f := os.NewFile(uintptr(dfd), "root")
		defer f.Close()
		return openInRootFallback(f, relPath(p), flags)
	}
	return openat2In(rootfd, relPath(p), flags, nil)
}
