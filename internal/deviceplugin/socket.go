package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// SocketMode is the mode of every unix socket accel-doctor's plugins,
// mocks and testers serve: only its owner (root, in a DaemonSet) may
// connect. That is all the kubelet needs: it runs as root and dials the
// plugins' sockets as root (connect(2) needs write permission on the
// socket, unix(7), which CAP_DAC_OVERRIDE grants whatever the mode), and
// a plugin connects to kubelet.sock as root too, a socket the kubelet
// binds with its own umask, 0755 under the usual 022
// (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go Start: no
// chmod), so that no other user could write to it either.
const SocketMode fs.FileMode = 0o600

// maxSunPath is the longest path a unix socket address holds: sun_path
// is 108 bytes with its terminating NUL (include/uapi/linux/un.h
// UNIX_PATH_MAX).
const maxSunPath = 107

// ListenUnix listens on a new unix stream socket at path that has mode
// SocketMode from the moment path exists, whatever the process's umask.
// Nothing may exist at path (a caller removes a stale socket first); a
// file made there meanwhile is an error (fs.ErrExist), never replaced.
// Closing the listener removes path while it is still this socket.
//
// bind(2) makes the socket file 0777 less the umask (unix(7)), and
// permission is checked at connect(2) only: a chmod after the bind
// leaves a window in which whoever can reach the directory connects,
// and keeps that connection after the chmod. The umask cannot be
// narrowed around the bind either: it is the process's, and every other
// goroutine's files would be made under it meanwhile (unshare(2)
// CLONE_FS could make it one thread's, but containerd's RuntimeDefault
// seccomp profile allows unshare only to a container that holds
// CAP_SYS_ADMIN, contrib/seccomp seccomp_default.go, and the plugin's
// holds no capability). So the socket is
// bound in a directory of its own made beside path with mode 0700,
// which no one but its owner and root can enter, chmod-ed there, and
// then linked to path: link(2) makes path appear already at
// SocketMode, listening, and fails when path exists (rename(2) would
// replace what another process made since the caller looked). The
// directory and the name in it are removed at once.
//
// Both names begin with a dot, because the kubelet's plugin watcher
// ignores a dot-named file or directory that appears in
// plugins_registry (pkg/kubelet/pluginmanager/pluginwatcher
// plugin_watcher.go handleCreateEvent), and its device manager leaves
// directories in device-plugins alone (manager.go
// CleanupPluginDirectory). The kernel keeps the name a socket was
// bound to: getsockname(2), /proc/net/unix and `ss -xl` show it as
// DIR/.accel-doctor-N/.s, a name that existed for the microseconds of
// the bind; the file the kubelet dials is path, the same socket (the
// same inode: `stat -c %i` of path is the inode `ss -xl` lists).
func ListenUnix(ctx context.Context, path string) (net.Listener, error) {
	if len(path) > maxSunPath {
		return nil, fmt.Errorf("socket %s: %d bytes, longer than a unix socket address holds (%d)", path, len(path), maxSunPath)
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, &fs.PathError{Op: "listen", Path: path, Err: fs.ErrExist}
	}
	priv, err := os.MkdirTemp(filepath.Dir(path), ".accel-doctor-")
	if err != nil {
		return nil, fmt.Errorf("socket %s: make the directory to bind it in: %w", path, err)
	}
	defer os.RemoveAll(priv)
	// MkdirTemp asks for 0700 and the umask can only take bits away; a
	// umask that takes the owner's too would leave it unusable.
	if err := os.Chmod(priv, 0o700); err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	tmp := filepath.Join(priv, ".s")
	if len(tmp) > maxSunPath {
		return nil, fmt.Errorf("socket %s: it is bound first as %s, %d bytes, longer than a unix socket address holds (%d): give a shorter directory", path, tmp, len(tmp), maxSunPath)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", tmp)
	if err != nil {
		return nil, err
	}
	ul := l.(*net.UnixListener)
	// The name it was bound to is gone once linked: Close removes path
	// (below), not that name.
	ul.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		ul.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if err := os.Chmod(tmp, SocketMode); err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(tmp, &st); err != nil {
		return fail(err)
	}
	if err := os.Link(tmp, path); err != nil {
		return fail(err)
	}
	return &unixListener{UnixListener: ul, path: path, dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// unixListener is a listener of ListenUnix: its address is the path
// clients dial, and Close removes that path while it is still this
// socket (the kubelet may have removed it and another process bound the
// name again).
type unixListener struct {
	*net.UnixListener
	path     string
	dev, ino uint64
	once     sync.Once
}

func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close removes path first, while the open socket still holds its
// inode: a file there with this device and inode number is this socket,
// since a number is not given to another file before the socket is
// closed.
func (l *unixListener) Close() error {
	var rmErr error
	l.once.Do(func() {
		var st unix.Stat_t
		if unix.Lstat(l.path, &st) == nil && uint64(st.Dev) == l.dev && uint64(st.Ino) == l.ino {
			if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				rmErr = err
			}
		}
	})
	return errors.Join(l.UnixListener.Close(), rmErr)
}
