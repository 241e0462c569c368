package hostfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotSocket is returned by DialUnix for a path that is not a socket.
var ErrNotSocket = errors.New("not a socket")

// ModTime is the modification time of p itself (a final symlink is not
// followed), as lstat(2) gives it. A socket's is the time it was bound:
// bind(2) creates the inode (net/unix/af_unix.c unix_bind_bsd, through
// vfs_mknod) and nothing done on the socket later touches it.
func (r *Root) ModTime(p string) (time.Time, error) {
	cp, err := clean(p)
	if err != nil {
		return time.Time{}, pathErr("lstat", p, err)
	}
	st, _, err := r.lstatRaw(cp)
	if err != nil {
		return time.Time{}, pathErr("lstat", p, err)
	}
	return time.Unix(st.Mtim.Sec, st.Mtim.Nsec), nil
}

// DialUnix connects to the unix stream socket at host path p. The path is
// resolved inside the root like every other (a link that points out of the
// root stays in it) and must be a socket: a regular file, a FIFO or a
// device named like a socket is ErrNotSocket, never opened.
//
// The connect goes through the O_PATH fd of what was resolved
// ("/proc/self/fd/N"): connect(2) follows that link to the very inode
// checked (unix_find_bsd in net/unix/af_unix.c resolves sun_path with
// LOOKUP_FOLLOW), so nothing can swap the path between the check and the
// connect, and a deep root (a test's temp dir) is not limited by the 108
// bytes of sun_path. Connecting changes nothing on the host: the kernel
// queues a connection for the listener, or answers ECONNREFUSED when no
// one listens on the inode (a socket file left behind by a process that
// died). What is then said on the connection is the caller's business.
func (r *Root) DialUnix(ctx context.Context, p string) (net.Conn, error) {
	cp, err := clean(p)
	if err != nil {
		return nil, pathErr("dial", p, err)
	}
	fd, err := r.open(cp, unix.O_PATH)
	if err != nil {
		return nil, pathErr("dial", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathErr("dial", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, pathErr("dial", p, ErrNotSocket)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			err = unwrapSyscall(oe.Err)
		}
		return nil, &fs.PathError{Op: "dial", Path: p, Err: err}
	}
	return c, nil
}

// unwrapSyscall turns os.SyscallError{"connect", ECONNREFUSED} into the
// errno, which callers classify.
func unwrapSyscall(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
