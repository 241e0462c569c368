package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// How a Root opens a host path.
//
// Confinement happens in the kernel. A non-live root holds an O_PATH fd of
// its directory for its whole life and resolves every path with openat2(2)
// relative to it, with RESOLVE_IN_ROOT (chroot semantics: an absolute link
// and ".." stop at the root, so a host tree's "/usr/lib/x -> /lib/y" works
// and a hostile "../../../.." or "/" stays inside) and RESOLVE_NO_MAGICLINKS
// (a procfs /proc/PID/root, /proc/PID/fd/N or /proc/PID/cwd is not followed:
// it would jump out of the root; fs/namei.c nd_jump_link). The lookup the
// kernel does is the lookup that opens: nothing changes between a check and
// a use. Kernels before 5.6 have no openat2; there, or where seccomp refuses
// it, filepath-securejoin's pathrs-lite emulates RESOLVE_IN_ROOT with O_PATH
// walks verified through procfs.
//
// Nothing that is not a regular file is ever opened for reading. Every read
// starts with an O_PATH open, which the kernel does without calling the
// inode's open (fs/open.c do_dentry_open: O_PATH sets FMODE_PATH and
// empty_fops and returns before f_op->open), so no driver runs, a FIFO does
// not wait for a writer, and fsnotify reports no IN_OPEN
// (include/linux/fsnotify.h fsnotify_file: FMODE_PATH files raise no
// events). fstat on that fd says what it is; only a regular file is reopened
// for reading, through /proc/self/fd/N: that opens the very inode the O_PATH
// fd holds, so no path is resolved twice and nothing can be swapped in
// between (a second openat2 with O_RDONLY would open whatever the path names
// by then, a device node included, before we could look at it). Directories
// are opened with O_DIRECTORY, which fails with ENOTDIR before any open of
// a non-directory (fs/namei.c do_open).

// resolveInRoot is how a non-live root resolves every path.
const resolveInRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// maxLookupRetries bounds the retries of a scoped lookup: openat2 gives
// EAGAIN (or EXDEV) when a rename or mount anywhere on the system raced a
// ".." step (fs/namei.c, the mount_lock and rename_lock sequence checks);
// an attacker who keeps renaming gets an error, not a spin.
const maxLookupRetries = 32

// openat2Works reports whether openat2 with RESOLVE_IN_ROOT is available.
var openat2Works = sync.OnceValue(func() bool {
	dfd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveInRoot})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// noOpenat2 makes tests take the fallback path.
var noOpenat2 bool

// relPath turns a clean host-absolute path into the name openat2 resolves
// relative to the root fd.
func relPath(p string) string {
	if p == "/" {
		return "."
	}
	return p[1:]
}

// open opens the clean host-absolute path p with flags (O_CLOEXEC is
// added). Callers pass O_PATH, possibly with O_NOFOLLOW or O_DIRECTORY, or
// O_RDONLY|O_DIRECTORY: never a flag set that could open a device.
func (r *Root) open(p string, flags int) (int, error) {
	flags |= unix.O_CLOEXEC
	if r.live {
		// The live host: the kernel's own resolution is the truth.
		for {
			fd, err := unix.Open(p, flags, 0)
			if err != unix.EINTR {
				return fd, err
			}
		}
	}
	if noOpenat2 || !openat2Works() {
		return r.openFallback(relPath(p), flags)
	}
	return openat2In(r.fd, relPath(p), flags, r)
}

// openat2In resolves rel under dirfd as its root. keep holds what owns
// dirfd alive for the duration of the call.
func openat2In(dirfd int, rel string, flags int, keep any) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: resolveInRoot}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if (err == unix.EAGAIN || err == unix.EXDEV) && i < maxLookupRetries || err == unix.EINTR {
			continue
		}
		runtime.KeepAlive(keep)
		return fd, err
	}
}

// openFallback is open without openat2: pathrs-lite resolves inside the
// root and hands back an O_PATH handle; a final component that must not be
// followed is opened from its resolved parent, where a single name other
// than ".." cannot leave that directory.
func (r *Root) openFallback(rel string, flags int) (int, error) {
	return openInRootFallback(r.file, rel, flags)
}

func openInRootFallback(root *os.File, rel string, flags int) (int, error) {
	target, base := rel, ""
	if flags&unix.O_NOFOLLOW != 0 && rel != "." {
		target, base = path.Dir(rel), path.Base(rel)
	}
	h, err := pathrs.OpenatInRoot(root, target)
	if err != nil {
		return -1, unwrapPathErr(err)
	}
	defer h.Close()
	hfd := int(h.Fd())
	if base != "" {
		return unix.Openat(hfd, base, flags, 0)
	}
	// "." from a directory fd is that directory: it reopens h with the
	// flags asked for (O_DIRECTORY makes a non-directory ENOTDIR).
	if flags&unix.O_PATH == 0 || flags&unix.O_DIRECTORY != 0 {
		var st unix.Stat_t
		if err := unix.Fstat(hfd, &st); err != nil {
			return -1, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if flags&unix.O_DIRECTORY != 0 {
				return -1, unix.ENOTDIR
			}
			return -1, fmt.Errorf("hostfs: fallback opens only directories with flags %#x", flags)
		}
		return unix.Openat(hfd, ".", flags, 0)
	}
	return unix.FcntlInt(uintptr(hfd), unix.F_DUPFD_CLOEXEC, 0)
}

// procSelfFD is /proc/self/fd, through which a regular file found with an
// O_PATH open is reopened for reading. It must be a real procfs: a fake
// /proc (CVE-2019-19921 is this trick against runc) could hand back
// another file. It is checked once, here, to be procfs; then each reopen
// through it is of the O_PATH fd's own inode (reopenStat says why).
var procSelfFD = sync.OnceValues(func() (int, error) {
	fd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("reading a file needs /proc/self/fd: %w", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil || sfs.Type != unix.PROC_SUPER_MAGIC {
		unix.Close(fd)
		return -1, errors.New("reading a file needs /proc/self/fd, and /proc is not a procfs")
	}
	return fd, nil
})

// openRegular opens p for reading only when it is a regular file: an O_PATH
// open, fstat, then a reopen of that same inode. Anything else is
// ErrNotRegular and was never opened. st describes the file.
func (r *Root) openRegular(p string) (fd int, st unix.Stat_t, err error) {
	if r.live && inKernelTree(p) {
		return openKernelAttr(p)
	}
	pfd, err := r.open(p, unix.O_PATH)
	if err != nil {
		return -1, st, err
	}
	defer unix.Close(pfd)
	return reopenRegular(pfd)
}

// kernelTrees reports whether the live host's /sys and /proc are the
// kernel's sysfs and procfs (checked once per process).
var kernelTrees = sync.OnceValue(func() bool {
	var sys, proc unix.Statfs_t
	return unix.Statfs("/sys", &sys) == nil && sys.Type == unix.SYSFS_MAGIC &&
		unix.Statfs("/proc", &proc) == nil && proc.Type == unix.PROC_SUPER_MAGIC
})

// kernelFS are the file systems openKernelAttr reads (statfs(2) magic
// numbers, include/uapi/linux/magic.h).
var kernelFS = map[int64]bool{unix.SYSFS_MAGIC: true, unix.PROC_SUPER_MAGIC: true, unix.CGROUP_SUPER_MAGIC: true, unix.CGROUP2_SUPER_MAGIC: true}

// inKernelTree: p is under the live host's sysfs or procfs.
func inKernelTree(p string) bool {
	return (strings.HasPrefix(p, "/sys/") || strings.HasPrefix(p, "/proc/")) && kernelTrees()
}

// openKernelAttr opens a sysfs, procfs or cgroupfs file of the live host
// directly, without the O_PATH-and-reopen dance (a third of a read's cost,
// and reads of these trees are most of a live check): none of these file
// systems holds a device node, FIFO or socket whose open could have a side
// effect (kernfs, behind sysfs and cgroupfs, makes directories, attribute
// files and links: fs/kernfs; procfs its own files, directories and links:
// fs/proc), and O_NOFOLLOW refuses the one kind of entry that could lead
// elsewhere, the magic links of /proc/PID/fd and /proc/PID/{cwd,root,exe},
// as the last component. What this does not hold against is root mounting
// a device node over a path under /sys or /proc on the live host (root
// there can do worse): the fd's file system is checked after the open, and
// anything but these is refused unread. Every other file, and every file
// of a root that is not the live host, takes the careful path.
func openKernelAttr(p string) (fd int, st unix.Stat_t, err error) {
	const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	for {
		fd, err = unix.Open(p, flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return -1, st, err
	}
	if err := checkKernelAttr(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// checkKernelAttr fstats a file opened directly from a kernel tree (into
// st) and refuses it unless it is a regular file of sysfs, procfs or
// cgroupfs.
func checkKernelAttr(fd int, st *unix.Stat_t) error {
	var sfs unix.Statfs_t
	if err := unix.Fstat(fd, st); err != nil {
		return err
	}
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return err
	}
	if !kernelFS[int64(sfs.Type)] || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ErrNotRegular
	}
	return nil
}

// reopenRegular turns an O_PATH fd of a regular file into a readable one.
func reopenRegular(pfd int) (fd int, st unix.Stat_t, err error) {
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, st, err
	}
	return reopenStat(pfd, st)
}

// reopenStat is reopenRegular of an O_PATH fd that st describes.
func reopenStat(pfd int, st unix.Stat_t) (fd int, _ unix.Stat_t, err error) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, st, ErrNotRegular
	}
	procfd, err := procSelfFD()
	if err != nil {
		return -1, st, err
	}
	// O_NONBLOCK and O_NOCTTY cannot matter for a regular file; they are
	// there so that even a kernel that got this wrong would not wait or
	// take a terminal.
	const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	for {
		fd, err = unix.Openat(procfd, strconv.Itoa(pfd), flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return -1, st, err
	}
	// No second fstat: the reopen is of the inode st describes. The
	// entry /proc/self/fd/N is a magic link whose target is the open
	// file's own path, the dentry the O_PATH fd holds (fs/proc/fd.c,
	// proc_fd_link; the walk jumps to it, nd_jump_link in fs/namei.c),
	// not a name looked up again, and a held dentry keeps its inode
	// through a rename or an unlink. procfd is checked once to be procfs
	// (procSelfFD), so the link is the kernel's.
	return fd, st, nil
}

// fdPath is the path the kernel gives an fd (d_path through
// /proc/self/fd), used to map a resolved file back to a host path.
func fdPath(fd int) (string, error) {
	procfd, err := procSelfFD()
	if err != nil {
		return "", err
	}
	return readlinkat(procfd, strconv.Itoa(fd))
}

// readlinkat reads a link's target, however long.
func readlinkat(dirfd int, name string) (string, error) {
	// Most targets (sysfs links, /proc/self/fd names) fit in a buffer on
	// the stack: only the string is allocated.
	var small [256]byte
	n, err := unix.Readlinkat(dirfd, name, small[:])
	if err != nil {
		return "", err
	}
	if n < len(small) {
		return string(small[:n]), nil
	}
	for size := 2 * len(small); ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size > 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}

// lstatRaw describes the clean host path p as the tree has it (no
// manifest), with a symlink's target when it is one.
func (r *Root) lstatRaw(p string) (st unix.Stat_t, target string, err error) {
	if r.live {
		if err := unix.Lstat(p, &st); err != nil {
			return st, "", err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			target, _ = os.Readlink(p)
		}
		return st, target, nil
	}
	fd, err := r.open(p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return st, "", err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		// readlinkat(fd, "") reads the link an O_PATH|O_NOFOLLOW fd holds.
		target, _ = readlinkat(fd, "")
	}
	return st, target, nil
}

// readlinkRaw reads the symlink at the clean host path p in the tree.
func (r *Root) readlinkRaw(p string) (string, error) {
	if r.live {
		return os.Readlink(p)
	}
	st, t, err := r.lstatRaw(p)
	if err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", unix.EINVAL // what readlink(2) says of a non-link
	}
	return t, nil
}

// readDirNames lists a directory fd, sorted, at most maxDirEntries names
// (readDirEntries without the types).
func readDirNames(fd int) ([]string, error) {
	es, err := readDirEntries(fd)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.name
	}
	return names, nil
}

// realPrefix reports whether real (a path the kernel gave) lies under dir,
// and the host path it is.
func realPrefix(dir, real string) (string, bool) {
	if real == dir {
		return "/", true
	}
	if dir == "/" {
		return real, strings.HasPrefix(real, "/")
	}
	rest, ok := strings.CutPrefix(real, dir)
	if !ok || !strings.HasPrefix(rest, "/") {
		return "", false
	}
	return rest, true
}

func pathErr(op, p string, err error) error {
	return &fs.PathError{Op: op, Path: p, Err: unwrapPathErr(err)}
}
