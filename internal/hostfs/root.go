package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// DefaultReadLimit bounds ReadFile. sysfs attributes are at most a page and
// PCI config space 4 KiB; procfs files of interest are small.
const DefaultReadLimit = 1 << 20

// maxDirEntries bounds a directory listing.
const maxDirEntries = 1 << 16

// ErrTooLarge is returned for a file over the read limit.
var ErrTooLarge = errors.New("file larger than the read limit")

// ErrNotRegular is returned when ReadFile meets a FIFO, socket or device.
var ErrNotRegular = errors.New("not a regular file")

// Root reads a host through a directory. It is safe for concurrent use.
type Root struct {
	dir      string // absolute, cleaned; "/" for the live host
	manifest *Manifest
	limit    int64

	mu   sync.Mutex
	dirs map[string]string // host dir -> resolved real dir, for non-"/" roots
	rec  *Recorder

	covState
}

// Option configures a Root.
type Option func(*Root)

// WithReadLimit sets the largest file ReadFile returns.
func WithReadLimit(n int64) Option { return func(r *Root) { r.limit = n } }

// WithManifest uses m instead of the manifest found in the tree.
func WithManifest(m *Manifest) Option { return func(r *Root) { r.manifest = m } }

// New opens dir as a host root. A device manifest at ManifestPath inside
// dir is loaded when present; a malformed one is an error.
func New(dir string, opts ...Option) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("host root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("host root %s is not a directory", abs)
	}
	r := &Root{dir: abs, limit: DefaultReadLimit, dirs: map[string]string{}}
	for _, o := range opts {
		o(r)
	}
	if r.manifest == nil {
		b, err := r.ReadFile(ManifestPath)
		switch {
		case err == nil:
			m, perr := ParseManifest(strings.NewReader(string(b)))
			if perr != nil {
				return nil, fmt.Errorf("%s: %w", ManifestPath, perr)
			}
			r.manifest = m
		case errors.Is(err, fs.ErrNotExist):
		default:
			return nil, err
		}
	}
	return r, nil
}

// MustNew is New for tests and built-in scenarios; it panics on error.
func MustNew(dir string, opts ...Option) *Root {
	r, err := New(dir, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// Dir is the directory this root reads.
func (r *Root) Dir() string { return r.dir }

// IsLive reports whether the root is the running host's "/".
func (r *Root) IsLive() bool { return r.dir == "/" }

// Manifest returns the device manifest in use (nil when none).
func (r *Root) Manifest() *Manifest { return r.manifest }

// check rejects paths that are not clean host-absolute paths.
func check(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("host path %q is not absolute", p)
	}
	return nil
}

// resolveDir maps a host directory to a real directory under the root,
// resolving symlinks inside the root. Results are cached: sysfs readers
// read many files from the same directory.
func (r *Root) resolveDir(hostDir string) (string, error) {
	if r.dir == "/" {
		return hostDir, nil
	}
	r.mu.Lock()
	d, ok := r.dirs[hostDir]
	r.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := securejoin.SecureJoin(r.dir, hostDir)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.dirs[hostDir] = d
	r.mu.Unlock()
	return d, nil
}

// realPath maps a host path to a path under the root directory. With
// follow, a symlink in the last component is resolved inside the root too.
func (r *Root) realPath(p string, follow bool) (string, error) {
	if err := check(p); err != nil {
		return "", err
	}
	p = path.Clean(p)
	if r.dir == "/" {
		return p, nil
	}
	if p == "/" {
		return r.dir, nil
	}
	d, err := r.resolveDir(path.Dir(p))
	if err != nil {
		return "", err
	}
	full := filepath.Join(d, path.Base(p))
	if !follow {
		return full, nil
	}
	fi, err := os.Lstat(full)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return full, nil
	}
	// Resolve the last link relative to where it really lives.
	rel, err := filepath.Rel(r.dir, full)
	if err != nil {
		return "", err
	}
	return securejoin.SecureJoin(r.dir, "/"+rel)
}

// HostPath maps a real path under the root back to a host path.
func (r *Root) HostPath(real string) string {
	if r.dir == "/" {
		return real
	}
	rel, err := filepath.Rel(r.dir, real)
	if err != nil || strings.HasPrefix(rel, "..") {
		return real
	}
	return "/" + filepath.ToSlash(rel)
}

// ReadFile reads a regular file, at most the root's read limit.
func (r *Root) ReadFile(p string) ([]byte, error) {
	return r.ReadFileLimit(p, r.limit)
}

// ReadFileLimit reads a regular file of at most limit bytes. A FIFO, a
// socket or a device is ErrNotRegular and a larger file ErrTooLarge; neither
// blocks. Errors are wrapped with the host path.
func (r *Root) ReadFileLimit(p string, limit int64) ([]byte, error) {
	b, err := r.readFile(p, limit)
	r.record(p, recFile)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	return b, nil
}

func (r *Root) readFile(p string, limit int64) ([]byte, error) {
	// Most files are not links: open without following the last component
	// and resolve it inside the root only when the kernel says it is one
	// (ELOOP from O_NOFOLLOW), saving an lstat per read.
	real, err := r.realPath(p, false)
	if err != nil {
		return nil, unwrapPathErr(err)
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	nofollow := 0
	if r.dir != "/" {
		nofollow = unix.O_NOFOLLOW
	}
	fd, err := unix.Open(real, flags|nofollow, 0)
	if err == unix.ELOOP && nofollow != 0 {
		if real, err = r.realPath(p, true); err != nil {
			return nil, unwrapPathErr(err)
		}
		fd, err = unix.Open(real, flags|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, err
	}
	// Raw reads on the fd: os.NewFile would try to register a non-blocking
	// fd with the poller, a wasted syscall per sysfs attribute.
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, ErrNotRegular
	}
	// sysfs reports 4096 and procfs 0 whatever the content: read until EOF
	// and never trust the size, but use it to size the buffer (pci.ids is
	// 1.4 MB: growing a buffer to that costs more than reading it).
	size := int64(512)
	if st.Size > 0 && st.Size < limit {
		size = st.Size + 1
	}
	b, err := readAllLimit(fdReader(fd), size, limit+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)
	}
	return b, nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReadString reads a file and trims surrounding white space, as sysfs
// attributes end in a newline.
func (r *Root) ReadString(p string) (string, error) {
	b, err := r.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Readlink returns the target of a symlink as written. A manifest symlink
// answers when the path is not really present.
func (r *Root) Readlink(p string) (string, error) {
	real, err := r.realPath(p, false)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: p, Err: unwrapPathErr(err)}
	}
	t, err := os.Readlink(real)
	if err == nil {
		r.record(p, recLink)
		return t, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if n, ok := r.manifest.Lookup(path.Clean(p)); ok && n.Type == TypeSymlink {
			return n.Target, nil
		}
	}
	r.record(p, recMissing)
	return "", &fs.PathError{Op: "readlink", Path: p, Err: unwrapPathErr(err)}
}

// Resolve returns the host path p points at after resolving every symlink
// inside the root. sysfs readers use it to walk from
// /sys/bus/pci/devices/BDF to the device's place under /sys/devices.
func (r *Root) Resolve(p string) (string, error) {
	if err := check(p); err != nil {
		return "", err
	}
	r.recordChain(p)
	if r.dir == "/" {
		s, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", err
		}
		return s, nil
	}
	real, err := securejoin.SecureJoin(r.dir, p)
	if err != nil {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: unwrapPathErr(err)}
	}
	if _, err := os.Lstat(real); err != nil {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: unwrapPathErr(err)}
	}
	return r.HostPath(real), nil
}

// ReadDir lists the names in a directory, sorted. Entries of the device
// manifest under the same host path are merged in.
func (r *Root) ReadDir(p string) ([]string, error) {
	names, err := r.readDir(p)
	r.record(p, recDir)
	extra := r.manifest.Children(path.Clean(p))
	if err != nil && !(errors.Is(err, fs.ErrNotExist) && len(extra) > 0) {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: unwrapPathErr(err)}
	}
	if len(extra) > 0 {
		seen := make(map[string]bool, len(names))
		for _, n := range names {
			seen[n] = true
		}
		for _, n := range extra {
			if !seen[n] {
				names = append(names, n)
			}
		}
		sort.Strings(names)
	}
	return names, nil
}

func (r *Root) readDir(p string) ([]string, error) {
	real, err := r.realPath(p, true)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(maxDirEntries + 1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if len(names) > maxDirEntries {
		return nil, fmt.Errorf("more than %d entries", maxDirEntries)
	}
	sort.Strings(names)
	return names, nil
}

// Lstat describes p without following a final symlink. A path not really
// present is looked up in the device manifest.
func (r *Root) Lstat(p string) (Node, error) {
	p = path.Clean(p)
	real, err := r.realPath(p, false)
	if err != nil {
		return Node{}, &fs.PathError{Op: "lstat", Path: p, Err: unwrapPathErr(err)}
	}
	var st unix.Stat_t
	if err := unix.Lstat(real, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			if n, ok := r.manifest.Lookup(p); ok {
				r.recordNode(n)
				return n, nil
			}
		}
		r.record(p, recMissing)
		return Node{}, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	n := nodeFromStat(p, &st)
	if n.Type == TypeSymlink {
		n.Target, _ = os.Readlink(real)
	}
	r.recordNode(n)
	return n, nil
}

// Stat describes what p points at, following symlinks inside the root and
// through the manifest (a manifest link to a real node works, and so does
// a real link to a manifest node).
func (r *Root) Stat(p string) (Node, error) {
	p = path.Clean(p)
	for i := 0; i < 40; i++ { // the kernel's MAXSYMLINKS (include/linux/namei.h)
		n, err := r.Lstat(p)
		if err != nil {
			return Node{}, err
		}
		if n.Type != TypeSymlink {
			return n, nil
		}
		t := n.Target
		if !strings.HasPrefix(t, "/") {
			t = path.Join(path.Dir(p), t)
		}
		p = path.Clean(t)
	}
	return Node{}, &fs.PathError{Op: "stat", Path: p, Err: unix.ELOOP}
}

func nodeFromStat(p string, st *unix.Stat_t) Node {
	var m fs.FileMode
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m = fs.ModeDir
	case unix.S_IFLNK:
		m = fs.ModeSymlink
	case unix.S_IFCHR:
		m = fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m = fs.ModeDevice
	case unix.S_IFIFO:
		m = fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m = fs.ModeSocket
	}
	perm := fs.FileMode(st.Mode & 0o777)
	if st.Mode&unix.S_ISUID != 0 {
		perm |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		perm |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		perm |= fs.ModeSticky
	}
	n := Node{Path: p, Type: typeOf(m), Mode: perm, UID: st.Uid, GID: st.Gid}
	if n.Type == TypeChar || n.Type == TypeBlock {
		n.Major, n.Minor = unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))
	}
	return n
}

// Exists reports whether p is present (really or in the manifest),
// following symlinks.
func (r *Root) Exists(p string) bool {
	if _, err := r.Stat(p); err == nil {
		return true
	}
	real, err := r.realPath(p, true)
	if err != nil {
		return false
	}
	_, err = os.Stat(real)
	return err == nil
}

// Glob returns the host paths matching pattern (path.Match syntax, one
// directory level of wildcards per component), sorted.
func (r *Root) Glob(pattern string) ([]string, error) {
	if err := check(pattern); err != nil {
		return nil, err
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean(pattern), "/"), "/")
	cur := []string{"/"}
	for _, part := range parts {
		var next []string
		for _, dir := range cur {
			if !hasMeta(part) {
				next = append(next, path.Join(dir, part))
				continue
			}
			names, err := r.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, n := range names {
				if ok, err := path.Match(part, n); err != nil {
					return nil, err
				} else if ok {
					next = append(next, path.Join(dir, n))
				}
			}
		}
		cur = next
	}
	var out []string
	for _, p := range cur {
		if r.Exists(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// readAllLimit reads r to EOF or to max bytes, starting with a buffer of
// size bytes.
func readAllLimit(r io.Reader, size, max int64) ([]byte, error) {
	b := make([]byte, 0, size)
	for int64(len(b)) < max {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := b[len(b):cap(b)]
		if int64(len(room)) > max-int64(len(b)) {
			room = room[:max-int64(len(b))]
		}
		n, err := r.Read(room)
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// fdReader reads a file descriptor directly.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// MapFile maps a regular file of at most limit bytes read-only into memory
// and returns its bytes and the function that unmaps them. Large, static
// files (pci.ids: 1.4 MB) are read this way: no copy and no zeroed buffer,
// only page-cache pages. The bytes must not be used after unmap, nor kept:
// copy what is needed. A file whose size the kernel does not report (procfs,
// sysfs) is read with ReadFileLimit instead. A file truncated while mapped
// faults on access: callers parse under debug.SetPanicOnFault.
func (r *Root) MapFile(p string, limit int64) (b []byte, unmap func(), err error) {
	r.record(p, recFile)
	real, err := r.realPath(p, true)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "read", Path: p, Err: unwrapPathErr(err)}
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, &fs.PathError{Op: "read", Path: p, Err: ErrNotRegular}
	}
	if st.Size > limit {
		return nil, nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)}
	}
	if st.Size == 0 {
		b, err := r.ReadFileLimit(p, limit)
		return b, func() {}, err
	}
	m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "mmap", Path: p, Err: err}
	}
	return m, func() { unix.Munmap(m) }, nil
}

// StatInProcess describes p as process pid sees it, through
// /proc/PID/root. When the root's /proc is a live procfs (the live host,
// or a host mounted at /host in a pod), the kernel follows the magic link
// into the process's mount namespace, which resolving inside the root
// cannot do; in a capture, /proc/PID/root is whatever the capture holds.
// A snapshot records what the kernel showed under the /proc/PID/root path
// itself (in its manifest), never the magic link, so a replay answers the
// same.
func (r *Root) StatInProcess(pid int, p string) (Node, error) {
	hp := fmt.Sprintf("/proc/%d/root%s", pid, path.Clean("/"+p))
	real := ""
	if r.dir == "/" {
		real = hp
	} else {
		var sfs unix.Statfs_t
		procDir, err := r.resolveDir("/proc")
		if err == nil && unix.Statfs(procDir, &sfs) == nil && sfs.Type == unix.PROC_SUPER_MAGIC {
			real = filepath.Join(procDir, fmt.Sprint(pid), "root", path.Clean("/"+p))
		}
	}
	if real == "" {
		return r.Stat(hp)
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return Node{}, &fs.PathError{Op: "stat", Path: hp, Err: err}
	}
	n := nodeFromStat(hp, &st)
	if n.Type == TypeChar || n.Type == TypeBlock || n.Type == TypeDir {
		r.recordNode(n)
	}
	return n, nil
}
