package hostfs

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// An archive given as --snapshot comes from anywhere: a bug report, a
// colleague, a hostile upload. Unpacking it is bounded in every way it could
// cost us, each bound well above what a real snapshot needs. For scale: a
// snapshot of an 8-GPU host holds about 1,200 entries, 750 of them small
// files (3 MiB in 4 KiB pages), names at most 9 levels and 180 bytes deep;
// the largest file any snapshot holds is pci.ids (1.4 MB today, read up to
// 16 MiB).
type unpackLimits struct {
	archiveBytes int64 // compressed bytes read
	fileBytes    int64 // one regular file
	writeBytes   int64 // all files, counted in 4 KiB pages
	entries      int   // files, links and directories created
	entryHeader  int64 // tar header bytes before one entry
	headerBytes  int64 // all tar header bytes
	depth        int   // components of a name
	nameBytes    int   // a name, or a link's target
}

var defaultLimits = unpackLimits{
	// A real snapshot's files are text; gzip never makes a stream larger
	// than the bounds below allow it to produce, plus its framing.
	archiveBytes: 48<<20 + 32<<20 + 1<<20,
	fileBytes:    16 << 20,
	// pci.ids at its largest plus 8,000 attribute files: 16 times the
	// 8-GPU snapshot. /dev/shm holds an unpack only when this fits with
	// half of it to spare (see unpackParent).
	writeBytes: 48 << 20,
	entries:    1 << 16,
	// One entry's headers: the 512-byte header, a PAX header with a path
	// and a link target of PATH_MAX each, or GNU long-name and long-link
	// headers, and the padding before them. A chain of PAX or GNU headers
	// (archive/tar applies each to the next entry and shows none of them)
	// is cut here, while it is being read.
	entryHeader: 16 << 10,
	headerBytes: 32 << 20,
	depth:       128,
	nameBytes:   unix.PathMax - 1,
}

// LimitError is an archive refused because it passes one of the bounds of
// unpacking. It says which.
type LimitError struct {
	Bound string // what is bounded, e.g. "bytes per file"
	Limit int64
	Entry string // the entry that passed it, when there is one
}

func (e *LimitError) Error() string {
	limit := fmt.Sprint(e.Limit)
	if strings.Contains(e.Bound, "bytes") {
		limit = byteSize(e.Limit)
	}
	s := fmt.Sprintf("snapshot: over the bound on %s (%s)", e.Bound, limit)
	if e.Entry != "" {
		s += fmt.Sprintf(" at entry %q", short(e.Entry))
	}
	return s
}

// byteSize writes n in the largest binary unit that divides it.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// short keeps a hostile name from filling an error message.
func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// ErrSparse is a sparse entry: GNU's 'S' type or PAX GNU.sparse.* records
// (archive/tar expands either into zeros on read, so a few hundred bytes of
// archive can write gigabytes). A snapshot never holds one.
var ErrSparse = errors.New("sparse entries are refused (a snapshot never holds one)")

// meter counts the bytes read through it and refuses to read past limit,
// returning over. tripped remembers that it did: gzip and tar wrap (or
// replace) the errors of what they read, and the bound is the error to
// report.
type meter struct {
	r       io.Reader
	n       int64
	limit   int64
	over    error
	tripped error
}

func (m *meter) Read(p []byte) (int, error) {
	if m.n >= m.limit {
		m.tripped = m.over
		return 0, m.over
	}
	if int64(len(p)) > m.limit-m.n {
		p = p[:m.limit-m.n]
	}
	k, err := m.r.Read(p)
	m.n += int64(k)
	return k, err
}

// unpacker writes one archive into a directory it holds an fd of. Every
// directory it goes through is one it made (or found to be a real
// directory) and remembers in dirs, so no entry can be written through a
// link an earlier entry made, and no ancestor is looked at twice. Entries
// are created relative to an fd of their parent, and the fd of the last
// parent is kept: in an archive's order (a directory, then what it holds)
// each entry costs a constant number of syscalls whatever its depth, so
// the cost is linear in the archive.
type unpacker struct {
	fd    int // O_PATH of the unpack directory
	lim   unpackLimits
	dirs  map[string]bool // archive-relative directories made or checked
	made  int             // entries created, directories made for them included
	pages int64           // bytes written, in 4 KiB pages
	stop  *atomic.Bool    // set by RemoveUnpacked
	buf   []byte

	curRel string // the directory curFD holds
	curFD  int
}

// dirFD returns an O_PATH fd of the checked directory rel, valid until the
// next call.
func (u *unpacker) dirFD(rel string) (int, error) {
	switch {
	case rel == ".":
		return u.fd, nil
	case u.curFD > 0 && rel == u.curRel:
		return u.curFD, nil
	}
	// From the cached parent, one name; else the whole path from the top,
	// every component of which is a directory this unpack checked.
	from, name := u.fd, rel
	if u.curFD > 0 && path.Dir(rel) == u.curRel {
		from, name = u.curFD, path.Base(rel)
	}
	fd, err := unix.Openat(from, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	u.closeCur()
	u.curRel, u.curFD = rel, fd
	return fd, nil
}

func (u *unpacker) closeCur() {
	if u.curFD > 0 {
		unix.Close(u.curFD)
	}
	u.curRel, u.curFD = "", 0
}

// pageBytes is what tmpfs charges a file of n bytes: whole pages
// (mm/shmem.c); disk file systems allocate whole blocks alike.
func pageBytes(n int64) int64 { return (n + 4095) &^ 4095 }

// unpack reads a gzip'd tar from r into the directory dirfd.
func unpack(r io.Reader, dirfd int, lim unpackLimits, stop *atomic.Bool) error {
	in := &meter{r: r, limit: lim.archiveBytes, over: &LimitError{Bound: "archive bytes (compressed)", Limit: lim.archiveBytes}}
	gz, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("snapshot: %w", firstErr(in.tripped, err))
	}
	defer gz.Close()
	// One gzip member: our writers make one, and a chain of empty members
	// would cost time without producing a byte.
	gz.Multistream(false)
	out := &meter{r: gz}
	tr := tar.NewReader(out)
	u := &unpacker{fd: dirfd, lim: lim, dirs: map[string]bool{".": true}, stop: stop}
	defer u.closeCur()
	var headers int64
	for n := 0; ; n++ {
		if stop != nil && stop.Load() {
			return errStopped
		}
		// The headers of the next entry, PAX and GNU chains included, and
		// the padding of the last one's data.
		mark := out.n
		out.limit = out.n + lim.entryHeader
		out.over = &LimitError{Bound: "header bytes per entry", Limit: lim.entryHeader}
		h, err := tr.Next()
		headers += out.n - mark
		if errors.Is(err, io.EOF) && in.tripped == nil && out.tripped == nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("snapshot: %w", firstErr(in.tripped, firstErr(out.tripped, err)))
		}
		if headers > lim.headerBytes {
			return &LimitError{Bound: "header bytes", Limit: lim.headerBytes, Entry: h.Name}
		}
		if n >= lim.entries {
			return &LimitError{Bound: "entries", Limit: int64(lim.entries), Entry: h.Name}
		}
		out.limit = out.n + max(h.Size, 0)
		out.over = &LimitError{Bound: "bytes per file", Limit: lim.fileBytes, Entry: h.Name}
		if err := u.entry(h, tr); err != nil {
			return firstErr(in.tripped, firstErr(out.tripped, err))
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// entry writes one archive entry.
func (u *unpacker) entry(h *tar.Header, data io.Reader) error {
	if h.Typeflag == tar.TypeGNUSparse {
		return fmt.Errorf("snapshot: entry %q: %w", short(h.Name), ErrSparse)
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return fmt.Errorf("snapshot: entry %q: %w", short(h.Name), ErrSparse)
		}
	}
	rel, err := u.name(h.Name)
	if err != nil || rel == "." {
		return err
	}
	if h.Typeflag != tar.TypeReg && h.Size != 0 {
		return fmt.Errorf("snapshot: entry %q: a %q entry with %d bytes of data", short(h.Name), h.Typeflag, h.Size)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return u.mkdirAll(rel, h.Name)
	case tar.TypeSymlink:
		if h.Linkname == "" || strings.IndexByte(h.Linkname, 0) >= 0 {
			return fmt.Errorf("snapshot: entry %q: bad link target", short(h.Name))
		}
		if len(h.Linkname) > u.lim.nameBytes {
			return &LimitError{Bound: "bytes of a link target", Limit: int64(u.lim.nameBytes), Entry: h.Name}
		}
		// A link's target is charged like a file's data (tmpfs keeps
		// short ones in the inode: an overcount, on the safe side).
		pfd, err := u.create(rel, h.Name, pageBytes(int64(len(h.Linkname))))
		if err != nil {
			return err
		}
		// Links may point anywhere; Root resolves them inside the root.
		if err := unix.Symlinkat(h.Linkname, pfd, path.Base(rel)); err != nil {
			return u.exists(err, h.Name)
		}
		return nil
	case tar.TypeReg:
		if h.Size > u.lim.fileBytes {
			return &LimitError{Bound: "bytes per file", Limit: u.lim.fileBytes, Entry: h.Name}
		}
		pfd, err := u.create(rel, h.Name, pageBytes(h.Size))
		if err != nil {
			return err
		}
		return u.writeFile(pfd, path.Base(rel), h, data)
	}
	return fmt.Errorf("snapshot: entry %q has unsupported type %q", short(h.Name), h.Typeflag)
}

// name checks an entry name and returns it relative to the unpack
// directory ("." for the directory itself).
func (u *unpacker) name(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("snapshot: entry %q: NUL in the name", short(name))
	}
	if len(name) > u.lim.nameBytes {
		return "", &LimitError{Bound: "bytes of a name", Limit: int64(u.lim.nameBytes), Entry: name}
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("snapshot: entry %q climbs out of the archive", short(name))
		}
		if len(part) > unix.NAME_MAX {
			return "", &LimitError{Bound: "bytes of a name component", Limit: unix.NAME_MAX, Entry: name}
		}
	}
	rel := path.Clean("/" + name)[1:]
	if rel == "" {
		return ".", nil
	}
	if d := strings.Count(rel, "/") + 1; d > u.lim.depth {
		return "", &LimitError{Bound: "path depth", Limit: int64(u.lim.depth), Entry: name}
	}
	return rel, nil
}

// create accounts for one new entry of cost bytes at rel, makes its
// parent directories and returns an fd of its parent.
func (u *unpacker) create(rel, name string, cost int64) (int, error) {
	parent := path.Dir(rel)
	if err := u.mkdirAll(parent, name); err != nil {
		return -1, err
	}
	if err := u.charge(name, cost); err != nil {
		return -1, err
	}
	fd, err := u.dirFD(parent)
	if err != nil {
		return -1, fmt.Errorf("snapshot: entry %q: %w", short(name), err)
	}
	return fd, nil
}

func (u *unpacker) charge(name string, cost int64) error {
	u.made++
	if u.made > u.lim.entries {
		return &LimitError{Bound: "entries", Limit: int64(u.lim.entries), Entry: name}
	}
	u.pages += cost
	if u.pages > u.lim.writeBytes {
		return &LimitError{Bound: "bytes written (in 4 KiB pages)", Limit: u.lim.writeBytes, Entry: name}
	}
	return nil
}

// mkdirAll makes rel and its missing ancestors, each checked once.
func (u *unpacker) mkdirAll(rel, name string) error {
	if u.dirs[rel] {
		return nil
	}
	parent, base := path.Dir(rel), path.Base(rel)
	if err := u.mkdirAll(parent, name); err != nil {
		return err
	}
	pfd, err := u.dirFD(parent)
	if err != nil {
		return fmt.Errorf("snapshot: entry %q: %w", short(name), err)
	}
	err = unix.Mkdirat(pfd, base, 0o755)
	switch {
	case err == nil:
		if err := u.charge(name, 0); err != nil {
			return err
		}
	case err == unix.EEXIST:
		// Not one this unpack made: only a real directory will do (an
		// earlier entry's link or file is refused). pfd is a checked
		// directory, so this lstat sees the thing itself.
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("snapshot: entry %q would be written through %q, which an earlier entry made a link or a file", short(name), short(rel))
		}
	default:
		return fmt.Errorf("snapshot: entry %q: %w", short(name), err)
	}
	u.dirs[rel] = true
	return nil
}

func (u *unpacker) exists(err error, name string) error {
	if err == unix.EEXIST {
		return fmt.Errorf("snapshot: entry %q is in the archive twice", short(name))
	}
	return fmt.Errorf("snapshot: entry %q: %w", short(name), err)
}

// writeFile creates base in the directory pfd (never through a link, never
// over anything) and copies the entry's data into it.
func (u *unpacker) writeFile(pfd int, base string, h *tar.Header, data io.Reader) error {
	fd, err := unix.Openat(pfd, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return u.exists(err, h.Name)
	}
	defer unix.Close(fd)
	if u.buf == nil {
		u.buf = make([]byte, 32<<10)
	}
	for left := h.Size; left > 0; {
		chunk := u.buf
		if int64(len(chunk)) > left {
			chunk = chunk[:left]
		}
		n, rerr := io.ReadFull(data, chunk)
		if err := writeAll(fd, chunk[:n]); err != nil {
			return fmt.Errorf("snapshot: entry %q: %w", short(h.Name), err)
		}
		left -= int64(n)
		if rerr != nil {
			return fmt.Errorf("snapshot: entry %q: %w", short(h.Name), rerr)
		}
		if u.stop != nil && u.stop.Load() {
			return errStopped
		}
	}
	return nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
