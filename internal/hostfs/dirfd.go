package hostfs

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// OpenDirFD opens a host directory and returns its file descriptor, for
// the syscalls that take a directory fd instead of a path (BPF_PROG_QUERY
// on a cgroup2 directory, clone3 CLONE_INTO_CGROUP). The caller closes it.
func (r *Root) OpenDirFD(p string) (int, error) {
	real, err := r.realPath(p, true)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: p, Err: unwrapPathErr(err)}
	}
	fd, err := unix.Open(real, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}
