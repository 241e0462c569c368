package hostfs

import "golang.org/x/sys/unix"

// OpenDirFD opens a host directory and returns its file descriptor, for
// the syscalls that take a directory fd instead of a path (BPF_PROG_QUERY
// on a cgroup2 directory, clone3 CLONE_INTO_CGROUP). The caller closes it.
// The path is resolved inside the root like every other; O_DIRECTORY makes
// anything but a directory ENOTDIR without opening it. The fd is O_RDONLY,
// not O_PATH: bpf(2) takes the cgroup from a real open file (fdget ignores
// O_PATH files, kernel/bpf/cgroup.c cgroup_bpf_prog_query via
// cgroup_get_from_fd).
func (r *Root) OpenDirFD(p string) (int, error) {
	cp, err := clean(p)
	if err != nil {
		return -1, pathErr("open", p, err)
	}
	fd, err := r.open(cp, unix.O_DIRECTORY|unix.O_RDONLY)
	if err != nil {
		return -1, pathErr("open", p, err)
	}
	return fd, nil
}
