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
	live     bool   // dir is "/": paths are opened as they are
	manifest *Manifest
	limit    int64

	// A non-live root resolves every path relative to fd, an O_PATH fd of
	// dir held for the Root's life (file owns it: the fd is closed when
	// the Root is unreachable). real is the path the kernel gives that
	// directory, for mapping resolved files back to host paths.
	fd   int
	file *os.File
	real string

	mu  sync.Mutex
	rec *Recorder

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
	r := &Root{dir: abs, live: abs == "/", limit: DefaultReadLimit, fd: -1}
	if !r.live {
		if err := r.openDir(); err != nil {
			return nil, err
		}
	}
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

// openDir opens the root directory fd and checks, on that fd, that it is a
// directory.
func (r *Root) openDir() error {
	fd, err := unix.Open(r.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == unix.ENOTDIR {
		return fmt.Errorf("host root %s is not a directory", r.dir)
	}
	if err != nil {
		return fmt.Errorf("host root: %w", &fs.PathError{Op: "open", Path: r.dir, Err: err})
	}
	r.fd, r.file = fd, os.NewFile(uintptr(fd), r.dir)
	r.real = r.dir
	if real, err := fdPath(fd); err == nil && strings.HasPrefix(real, "/") {
		r.real = real
	} else if real, err := filepath.EvalSymlinks(r.dir); err == nil {
		r.real = real
	}
	return nil
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
func (r *Root) IsLive() bool { return r.live }

// Manifest returns the device manifest in use (nil when none).
func (r *Root) Manifest() *Manifest { return r.manifest }

// clean checks that p is host-absolute and cleans it.
func clean(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("host path %q is not absolute", p)
	}
	return path.Clean(p), nil
}

// HostPath maps a real path under the root back to a host path.
func (r *Root) HostPath(real string) string {
	if r.live {
		return real
	}
	for _, d := range []string{r.real, r.dir} {
		if hp, ok := realPrefix(d, real); ok {
			return hp
		}
	}
	return real
}

// ReadFile reads a regular file, at most the root's read limit.
func (r *Root) ReadFile(p string) ([]byte, error) {
	return r.ReadFileLimit(p, r.limit)
}

// ReadFileLimit reads a regular file of at most limit bytes. A FIFO, a
// socket or a device is ErrNotRegular and a larger file ErrTooLarge;
// neither is opened for reading, so neither blocks nor runs a driver's
// open. Errors are wrapped with the host path.
func (r *Root) ReadFileLimit(p string, limit int64) ([]byte, error) {
	b, err := r.readFile(p, limit)
	r.record(p, recFile)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: unwrapPathErr(err)}
	}
	return b, nil
}

func (r *Root) readFile(p string, limit int64) ([]byte, error) {
	p, err := clean(p)
	if err != nil {
		return nil, err
	}
	fd, st, err := r.openRegular(p)
	if err != nil {
		return nil, err
	}
	// Raw reads on the fd: os.NewFile would try to register a non-blocking
	// fd with the poller, a wasted syscall per sysfs attribute.
	defer unix.Close(fd)
	return readFD(fd, st.Size, limit)
}

// readFD reads fd to EOF, at most limit bytes; size is what fstat said.
func readFD(fd int, size, limit int64) ([]byte, error) {
	// sysfs reports 4096 and procfs 0 whatever the content: read until EOF
	// and never trust the size, but use it to size the buffer (pci.ids is
	// 1.4 MB: growing a buffer to that costs more than reading it).
	n, whole := int64(512), int64(0)
	if size > 0 && size < limit {
		n, whole = size+1, size
	}
	b, err := readAllLimit(fdReader(fd), n, limit+1, whole)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)
	}
	return b, nil
}

// readAttrFD reads a sysfs text attribute (Dir.ReadAttr): one read into a
// buffer larger than the attribute can be (show() writes at most a page,
// and the size sysfs reports is that page), which a read that fills it
// goes on from.
//
// The read goes into a buffer of the pool, and only what it read is kept:
// sysfs reports every attribute as a page (4096 bytes), and a buffer of
// that size per attribute was most of a live scan's garbage.
func readAttrFD(fd int, limit int64) ([]byte, error) {
	bp := attrBufs.Get().(*[attrBufSize]byte)
	defer attrBufs.Put(bp)
	buf := bp[:min(int64(len(bp)), limit+1)]
	n, err := fdReader(fd).Read(buf)
	if err != nil && err != io.EOF {
		return nil, err
	}
	b := make([]byte, n, n+1) // not nil: an empty attribute is read
	copy(b, buf[:n])
	if n == len(buf) && int64(n) <= limit {
		// Filled: a page larger than the buffer (64 KiB pages), read on.
		b, err = readAllLimitFrom(fdReader(fd), b, limit+1, -1)
		if err != nil {
			return nil, err
		}
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
	cp, err := clean(p)
	if err != nil {
		return "", pathErr("readlink", p, err)
	}
	t, err := r.readlinkRaw(cp)
	if err == nil {
		r.record(p, recLink)
		return t, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if n, ok := r.manifest.Lookup(cp); ok && n.Type == TypeSymlink {
			return n.Target, nil
		}
	}
	r.record(p, recMissing)
	return "", pathErr("readlink", p, err)
}

// Resolve returns the host path p points at after resolving every symlink
// inside the root. sysfs readers use it to walk from
// /sys/bus/pci/devices/BDF to the device's place under /sys/devices.
func (r *Root) Resolve(p string) (string, error) {
	cp, err := clean(p)
	if err != nil {
		return "", err
	}
	r.recordChain(p)
	// The kernel resolves (inside the root) and names what it found: one
	// open and one readlink, where walking the links by hand is an lstat
	// per component (on the live host too).
	fd, err := r.open(cp, unix.O_PATH)
	if err != nil {
		return "", pathErr("resolve", p, err)
	}
	defer unix.Close(fd)
	real, err := fdPath(fd)
	if err != nil {
		return "", pathErr("resolve", p, err)
	}
	if r.live {
		return real, nil
	}
	hp, ok := realPrefix(r.real, real)
	if !ok {
		// Only a root directory moved or unmounted under us gets here.
		return "", pathErr("resolve", p, fmt.Errorf("resolved to %s, outside the root %s", real, r.real))
	}
	return hp, nil
}

// ReadDir lists the names in a directory, sorted. Entries of the device
// manifest under the same host path are merged in; a directory the
// manifest lists and the tree lacks is an empty one (git keeps no empty
// directory, such as a host's /sys/kernel/iommu_groups without groups).
func (r *Root) ReadDir(p string) ([]string, error) {
	cp, err := clean(p)
	if err != nil {
		return nil, pathErr("readdir", p, err)
	}
	names, err := r.readDir(cp)
	return r.mergeListing(p, cp, names, err)
}

// mergeListing records the listing of p (clean: cp) and merges the
// manifest's entries into names, what listing the tree gave (err).
func (r *Root) mergeListing(p, cp string, names []string, err error) ([]string, error) {
	r.record(p, recDir)
	extra := r.manifest.Children(cp)
	md, inManifest := r.manifest.Lookup(cp)
	if err != nil && !(errors.Is(err, fs.ErrNotExist) && (len(extra) > 0 || inManifest && md.Type == TypeDir)) {
		return nil, pathErr("readdir", p, err)
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

// readDir lists the clean host directory p. O_DIRECTORY: a FIFO or a
// device where a directory was expected is ENOTDIR, never opened.
func (r *Root) readDir(p string) ([]string, error) {
	fd, err := r.open(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readDirNames(fd)
}

// Lstat describes p without following a final symlink. A path not really
// present is looked up in the device manifest.
func (r *Root) Lstat(p string) (Node, error) {
	cp, err := clean(p)
	if err != nil {
		return Node{}, pathErr("lstat", p, err)
	}
	p = cp
	st, target, err := r.lstatRaw(p)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			if n, ok := r.manifest.Lookup(p); ok {
				r.recordNode(n)
				return n, nil
			}
		}
		r.record(p, recMissing)
		return Node{}, pathErr("lstat", p, err)
	}
	n := nodeFromStat(p, &st)
	n.Target = target
	r.recordNode(n)
	return n, nil
}

// Stat describes what p points at, following symlinks inside the root and
// through the manifest (a manifest link to a real node works, and so does
// a real link to a manifest node).
func (r *Root) Stat(p string) (Node, error) {
	p = path.Clean(p)
	if r.live && r.manifest == nil && r.recorder() == nil && path.IsAbs(p) {
		// Nothing to merge and no chain to record: the kernel follows
		// the links in one call.
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return Node{}, &fs.PathError{Op: "stat", Path: p, Err: err}
		}
		return nodeFromStat(p, &st), nil
	}
	return r.statWalk(p, 0)
}

// statWalk is Stat's walk from p, hops links already followed.
func (r *Root) statWalk(p string, hops int) (Node, error) {
	for i := hops; i < 40; i++ { // the kernel's MAXSYMLINKS (include/linux/namei.h)
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
	// The kernel's resolution may find what the lexical walk of Stat does
	// not ("a/link/../b").
	cp, err := clean(p)
	if err != nil {
		return false
	}
	fd, err := r.open(cp, unix.O_PATH)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Glob returns the host paths matching pattern (path.Match syntax, one
// directory level of wildcards per component), sorted.
func (r *Root) Glob(pattern string) ([]string, error) {
	if _, err := clean(pattern); err != nil {
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
// size bytes. whole > 0 is the length fstat gave: a read that brings the
// bytes to exactly that, with room left in the buffer, is the end, and the
// read that would return 0 is spared (a third of the syscalls of a small
// file). A regular file's read(2) returns fewer bytes than asked only at
// its end (POSIX read: "fewer bytes than requested remain before end of
// file"); a file of sysfs, procfs or cgroupfs says 4096 or 0 whatever it
// holds (fs/kernfs/inode.c, fs/proc), so its text never matches and is
// read to EOF, and a sysfs binary attribute (config) holds at most the
// size it reports (fs/sysfs/file.c sysfs_kf_bin_read). A file that grew
// since the fstat fills the buffer and is read on. whole < 0 says any read
// that leaves room in the buffer is the end (a sysfs attribute,
// readAttrFD).
func readAllLimit(r io.Reader, size, max, whole int64) ([]byte, error) {
	return readAllLimitFrom(r, make([]byte, 0, size), max, whole)
}

// attrBufSize is the pooled buffer of readAttrFD: two pages of 4 KiB, more
// than any text attribute of such a kernel (show() fills at most a page).
const attrBufSize = 8192

var attrBufs = sync.Pool{New: func() any { return new([attrBufSize]byte) }}

// readAllLimitFrom is readAllLimit going on after the bytes b holds.
func readAllLimitFrom(r io.Reader, b []byte, max, whole int64) ([]byte, error) {
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
		if (whole > 0 && int64(len(b)) == whole || whole < 0) && len(b) < cap(b) {
			return b, nil
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
// sysfs) is read instead. A file truncated while mapped faults on access:
// callers parse under debug.SetPanicOnFault. Like ReadFile, it opens
// nothing but a regular file.
func (r *Root) MapFile(p string, limit int64) (b []byte, unmap func(), err error) {
	r.record(p, recFile)
	cp, err := clean(p)
	if err != nil {
		return nil, nil, pathErr("read", p, err)
	}
	fd, st, err := r.openRegular(cp)
	if err != nil {
		return nil, nil, pathErr("read", p, err)
	}
	defer unix.Close(fd)
	if st.Size > limit {
		return nil, nil, pathErr("read", p, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit))
	}
	if st.Size == 0 {
		b, err := readFD(fd, 0, limit)
		if err != nil {
			return nil, nil, pathErr("read", p, err)
		}
		return b, func() {}, nil
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
//
// That magic link is the one this package follows on purpose, and it is
// safe: the /proc directory is opened inside the root and checked, on the
// fd, to be a procfs (fstatfs: PROC_SUPER_MAGIC), so a tree cannot plant a
// link of its own there; "PID" is a number we format, opened with
// O_NOFOLLOW, and "root" in a procfs is the kernel's own link to the
// process's root directory (fs/proc/base.c proc_root_link), chosen by the
// kernel, not by anything the tree holds. From that directory, p is
// resolved with RESOLVE_IN_ROOT, as the process itself would resolve it
// (its absolute links stay in its root), and never through another magic
// link. The kernel checks that we may look (ptrace_may_access, read mode).
func (r *Root) StatInProcess(pid int, p string) (Node, error) {
	p = path.Clean("/" + p)
	hp := fmt.Sprintf("/proc/%d/root%s", pid, p)
	procfd, err := r.open("/proc", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil || !isProcfs(procfd) {
		if err == nil {
			unix.Close(procfd)
		}
		return r.Stat(hp)
	}
	st, err := statInProcess(procfd, pid, p)
	unix.Close(procfd)
	if err != nil {
		return Node{}, &fs.PathError{Op: "stat", Path: hp, Err: err}
	}
	n := nodeFromStat(hp, &st)
	if n.Type == TypeChar || n.Type == TypeBlock || n.Type == TypeDir {
		r.recordNode(n)
	}
	return n, nil
}

func isProcfs(fd int) bool {
	var sfs unix.Statfs_t
	return unix.Fstatfs(fd, &sfs) == nil && sfs.Type == unix.PROC_SUPER_MAGIC
}

// statInProcess stats p inside the root of process pid, from a verified
// procfs fd.
func statInProcess(procfd, pid int, p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := openInProcess(procfd, pid, p, unix.O_PATH)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	err = unix.Fstat(fd, &st)
	return st, err
}
