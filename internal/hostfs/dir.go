package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Dir is a directory of a Root held open, for reading many of its entries
// by name: a PCI function's dozen sysfs attributes, say. Each entry is then
// found by one name relative to the directory's fd instead of the whole
// path from the root (a lookup of one component instead of eight, about
// half the cost of an open; see BenchmarkDirReadFile), with the same
// answers as the Root's own methods on the joined path and the same
// refusals: nothing but a regular file is ever opened for reading.
//
// Why a name relative to the fd is as confined as the whole path: the fd
// was opened by resolving the directory's path inside the root, like every
// other open; a single component that is neither "." nor ".." and is not
// followed (O_NOFOLLOW) names an entry of that very directory and cannot
// leave it. A symlink entry is not read through the fd: it is handed to the
// Root, which follows it inside the root as it follows any link.
//
// A Dir is for one goroutine at a time; Close it.
type Dir struct {
	r    *Root
	path string // clean host path
	fd   int    // -1 when the directory could not be opened: every call goes through the root
	// entries is the kernel's listing, sorted by name, with each entry's
	// d_type; names is the listing with the manifest's entries merged in,
	// as ReadDir gives it.
	entries []dirent
	names   []string
	// link is the last link read by name (Readlink, stat), which the
	// next question about the same entry reuses: a driver link is read,
	// then followed, then its text checked.
	link struct{ name, target string }
	// kern is whether fd is on a kernel tree (sysfs, procfs, cgroupfs),
	// sysfs whether on sysfs; closed whether the directory is one that no
	// one but root and this process's user can change (closedDir); fsKnown
	// says they were looked up (lazily: a Dir only listed never asks).
	kern, sysfs, closed, fsKnown bool
}

type dirent struct {
	name string
	typ  uint8 // unix.DT_*; DT_UNKNOWN when the file system does not say
}

// OpenDir opens and lists the directory p. Names gives what ReadDir(p)
// gives, and fails where it fails; a directory that only the manifest
// holds is a Dir without an fd, whose reads all go through the root.
func (r *Root) OpenDir(p string) (*Dir, error) {
	cp, err := clean(p)
	if err != nil {
		return nil, pathErr("readdir", p, err)
	}
	fd, err := r.open(cp, unix.O_RDONLY|unix.O_DIRECTORY)
	return r.listDir(p, cp, fd, err)
}

// listDir is the Dir of the clean host path cp (asked for as p), from fd,
// its open directory, or the open's error openErr: the listing, merged
// with the manifest's, or the error OpenDir gives.
func (r *Root) listDir(p, cp string, fd int, openErr error) (*Dir, error) {
	d := &Dir{r: r, path: cp, fd: -1}
	err := openErr
	if err == nil {
		d.entries, err = readDirEntries(fd)
		if err != nil {
			unix.Close(fd)
		} else {
			d.fd = fd
		}
	}
	var names []string
	if err == nil {
		names = make([]string, len(d.entries))
		for i, e := range d.entries {
			names[i] = e.name
		}
	}
	d.names, err = r.mergeListing(p, cp, names, err)
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// ResolveDir is Resolve(p) and then OpenDir of the path it gave, with the
// answers of those two calls: real and err are Resolve's (when err is set
// nothing was opened), d and dirErr OpenDir's. A device's directory is
// reached through its link in /sys/bus/pci/devices: the one open of p
// that follows the link (inside the root, as Resolve's own does) is kept
// as the Dir's fd, where the two calls would resolve the whole path twice
// (an open of the link and then one of the eight components it leads to:
// BenchmarkResolveDir). Any failure of that open, and a recording root
// (whose snapshot needs what each call records), take the two calls.
func (r *Root) ResolveDir(p string) (real string, d *Dir, dirErr, err error) {
	cp, err := clean(p)
	if err != nil || r.recorder() != nil {
		return r.resolveThenOpen(p)
	}
	fd, err := r.open(cp, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return r.resolveThenOpen(p)
	}
	real, err = fdPath(fd)
	if err == nil && !r.live {
		var ok bool
		if real, ok = realPrefix(r.real, real); !ok {
			err = errors.New("outside the root")
		}
	}
	if err != nil {
		unix.Close(fd)
		return r.resolveThenOpen(p)
	}
	d, dirErr = r.listDir(real, real, fd, nil)
	return real, d, dirErr, nil
}

func (r *Root) resolveThenOpen(p string) (real string, d *Dir, dirErr, err error) {
	if real, err = r.Resolve(p); err != nil {
		return "", nil, nil, err
	}
	d, dirErr = r.OpenDir(real)
	return real, d, dirErr, nil
}

// Names is the directory's listing, sorted; the caller must not change it.
func (d *Dir) Names() []string { return d.names }

// Path is the directory's host path.
func (d *Dir) Path() string { return d.path }

// Close closes the directory's fd.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// entry returns the listing's entry called name.
func (d *Dir) entry(name string) (dirent, bool) {
	i := sort.Search(len(d.entries), func(i int) bool { return d.entries[i].name >= name })
	if i < len(d.entries) && d.entries[i].name == name {
		return d.entries[i], true
	}
	return dirent{}, false
}

// validName: one path component that names an entry of the directory.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}

// ReadFileLimit is Root.ReadFileLimit of the entry name: the same bytes,
// the same errors (with the joined host path) and the same refusals.
func (d *Dir) ReadFileLimit(name string, limit int64) ([]byte, error) {
	return d.readFile(name, limit, false)
}

// ReadAttr is ReadFileLimit of a sysfs attribute, a text file whose show()
// method fills its whole buffer at the first read(2)
// (Documentation/filesystems/sysfs.rst, "Reading/Writing Attribute Data";
// fs/sysfs/file.c sysfs_kf_seq_show calls show once, into a page, and
// seq_read_iter copies that one record): on sysfs, a first read that
// returns less than it asked for returned the whole attribute, and the
// read that would return 0 is spared. Elsewhere (a capture's copy), and
// for sysfs binary attributes such as config, whose read method a driver
// writes, read ReadFileLimit.
func (d *Dir) ReadAttr(name string, limit int64) ([]byte, error) {
	return d.readFile(name, limit, true)
}

func (d *Dir) readFile(name string, limit int64, attr bool) ([]byte, error) {
	e, listed := d.entry(name)
	if d.fd < 0 || !validName(name) || !listed || e.typ == unix.DT_LNK {
		// No fd, a name that is not one entry, an entry that came after
		// the listing, or a link: the root resolves it.
		return d.r.ReadFileLimit(path.Join(d.path, name), limit)
	}
	fd, st, err := d.openRegular(name, e.typ)
	if errors.Is(err, errFollow) {
		return d.r.ReadFileLimit(path.Join(d.path, name), limit)
	}
	if d.r.recorder() != nil {
		d.r.record(path.Join(d.path, name), recFile)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path.Join(d.path, name), Err: err}
	}
	defer unix.Close(fd)
	var b []byte
	if attr && d.sysfs {
		b, err = readAttrFD(fd, limit)
	} else {
		b, err = readFD(fd, st.Size, limit)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path.Join(d.path, name), Err: err}
	}
	return b, nil
}

// errFollow: the entry is a symlink, for the root to follow.
var errFollow = errors.New("a symlink: resolved by the root")

// openRegular opens the entry name for reading when it is a regular file,
// by the rules of Root.openRegular:
//
//   - on a kernel tree (the directory's fd is on sysfs, procfs or
//     cgroupfs, by fstatfs), directly, as openKernelAttr opens the live
//     host's attributes and for the same reasons: these file systems make
//     no device node, FIFO or socket (fs/kernfs, fs/proc), and a single
//     name looked up in the directory stays on its file system unless
//     something is mounted on that very name, which only root can do;
//     fstat checks after the open that it is a regular file. This holds
//     for a tree's kernel mounts as for the live host's (a pod's /host/sys
//     is the host's sysfs);
//   - in a closed directory (closedDir: on a local disk or tmpfs, owned
//     by root or by this process's user, and writable by no one else),
//     an entry the listing called a regular file (d_type DT_REG) is
//     opened directly too, with the same flags and the same fstat after.
//     The listing cannot have gone stale under us: replacing an entry
//     (rename, unlink, mknod, mkfifo) needs write permission on the
//     directory (fs/namei.c, may_delete and may_create), which only root
//     and the owner have, and an inode never changes its type. What
//     could stand at the name instead is a mount, which RESOLVE_NO_XDEV
//     refuses. This is every tree this tool unpacks and most trees a
//     user copies;
//   - elsewhere, an O_PATH open of the name, fstat, and a reopen of that
//     very inode through /proc/self/fd (reopenRegular): the entry the
//     listing called a file may be anything by now, and only an O_PATH
//     open looks at it without opening it. The reopen is half the cost
//     of a read (BenchmarkDirReadFileOpen's dir-file and closed-file).
//
// A symlink is errFollow on all three: O_NOFOLLOW makes it ELOOP (a
// direct open) or an O_PATH fd of the link itself.
func (d *Dir) openRegular(name string, typ uint8) (fd int, st unix.Stat_t, err error) {
	if !d.fsKnown {
		var sfs unix.Statfs_t
		if unix.Fstatfs(d.fd, &sfs) == nil {
			d.kern = kernelFS[int64(sfs.Type)]
			d.sysfs = sfs.Type == unix.SYSFS_MAGIC
			if localFS[int64(sfs.Type)] {
				var dst unix.Stat_t
				d.closed = unix.Fstat(d.fd, &dst) == nil && closedDir(dst, unix.Geteuid())
			}
		}
		d.fsKnown = true
	}
	if (d.kern || d.closed && typ == unix.DT_REG) && !noOpenat2 && openat2Works() {
		// The directory's file system was checked once, above, and the
		// kernel's trees hold no device node, FIFO or socket; a closed
		// directory's entry is still the regular file it was listed as.
		// What else can stand at the name is a mount over it (runc
		// bind-mounts /dev/null over /proc/kcore; lxcfs puts FUSE files
		// over /proc/meminfo): RESOLVE_NO_XDEV refuses to cross into it
		// before anything is opened, and that name takes the O_PATH
		// path below.
		const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC | unix.O_NOFOLLOW
		how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
		for {
			fd, err = unix.Openat2(d.fd, name, &how)
			if err != unix.EINTR && err != unix.EAGAIN {
				break
			}
		}
		switch {
		case err == unix.ELOOP:
			return -1, st, errFollow
		case err == nil:
			// RESOLVE_NO_XDEV kept the open on the directory's mount,
			// whose file system was checked: fstat says the rest.
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				unix.Close(fd)
				if err == nil {
					err = ErrNotRegular
				}
				return -1, st, err
			}
			return fd, st, nil
		case err != unix.EXDEV && err != unix.ENOSYS:
			return -1, st, err
		}
	}
	pfd, err := openatRetry(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return -1, st, err
	}
	defer unix.Close(pfd)
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, st, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return -1, st, errFollow
	}
	return reopenStat(pfd, st)
}

// localFS are the file systems whose directories may be closed
// (closedDir): local disks and tmpfs, which keep a directory's owner and
// mode as the kernel checks them (statfs(2) magic numbers,
// include/uapi/linux/magic.h). Network and FUSE file systems are not
// among them: their servers decide what an entry is when it is opened.
var localFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // ext2, ext3 and ext4 share it
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
}

// closedDir: a directory that only root and the user euid can change. A
// directory's group and other write bits are the only way anyone else gets
// to write it: with a POSIX ACL the group bits are the ACL's mask, which
// bounds every named user's and group's entry (acl(5)).
func closedDir(st unix.Stat_t, euid int) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o022 == 0 &&
		(st.Uid == 0 || int64(st.Uid) == int64(euid))
}

func openatRetry(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Readlink is Root.Readlink of the entry name. A link in the listing is
// read with one readlinkat(2) of the name relative to the directory's fd,
// which opens nothing and, the name being one component, reads that
// directory's own entry; anything else (an error, a name not listed, a
// manifest link) takes the root's way, so the answers are the same.
func (d *Dir) Readlink(name string) (string, error) {
	if e, ok := d.entry(name); d.fd >= 0 && validName(name) && ok && e.typ == unix.DT_LNK {
		if t, err := d.readlink(name); err == nil {
			if d.r.recorder() != nil {
				d.r.record(path.Join(d.path, name), recLink)
			}
			return t, nil
		}
	}
	return d.r.Readlink(path.Join(d.path, name))
}

// readlink reads the link entry name once per run of questions about it.
func (d *Dir) readlink(name string) (string, error) {
	if d.link.name == name {
		return d.link.target, nil
	}
	t, err := readlinkat(d.fd, name)
	if err == nil {
		d.link.name, d.link.target = name, t
	}
	return t, err
}

// readDirEntries lists a directory fd with each entry's type, sorted by
// name, at most maxDirEntries entries.
func readDirEntries(fd int) ([]dirent, error) {
	bp := direntBufs.Get().(*[8192]byte)
	defer direntBufs.Put(bp)
	buf := bp[:]
	var out []dirent
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		if out, err = parseDirents(buf[:n], out); err != nil {
			return nil, err
		}
		if len(out) > maxDirEntries {
			return nil, fmt.Errorf("more than %d entries", maxDirEntries)
		}
	}
	slices.SortFunc(out, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// direntBufs are getdents64 buffers: a device's directory is listed once
// per scan, by each of the scan's workers, and a fresh 8 KiB each time is
// two pages to fault in and zero.
var direntBufs = sync.Pool{New: func() any { return new([8192]byte) }}

// parseDirents appends the entries of a getdents64(2) buffer, leaving out
// "." and "..". The layout is struct linux_dirent64
// (include/linux/dirent.h): d_ino u64, d_off s64, d_reclen u16, d_type
// u8, then the NUL-terminated name, each record d_reclen bytes.
func parseDirents(buf []byte, out []dirent) ([]dirent, error) {
	const (
		offIno    = unsafe.Offsetof(unix.Dirent{}.Ino)
		offReclen = unsafe.Offsetof(unix.Dirent{}.Reclen)
		offType   = unsafe.Offsetof(unix.Dirent{}.Type)
		offName   = unsafe.Offsetof(unix.Dirent{}.Name)
	)
	// The names are cut from one copy of the buffer, not copied one by
	// one: a device's directory holds about 35.
	all := string(buf)
	for at := 0; at < len(buf); {
		rec := buf[at:]
		if len(rec) < int(offName) {
			return out, errors.New("getdents64: a record cut short")
		}
		reclen := int(*(*uint16)(unsafe.Pointer(&rec[offReclen])))
		if reclen < int(offName) || reclen > len(rec) {
			return out, fmt.Errorf("getdents64: record length %d of %d bytes left", reclen, len(rec))
		}
		ino := *(*uint64)(unsafe.Pointer(&rec[offIno]))
		name := all[at+int(offName) : at+reclen]
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		// ino 0 is an entry the file system left empty; unix.ParseDirent
		// skips it too.
		if ino != 0 && name != "." && name != ".." && name != "" {
			out = append(out, dirent{name: name, typ: rec[offType]})
		}
		at += reclen
	}
	return out, nil
}

// StatResolve is Root.Stat of the entry name and, when that is a
// directory, Root.Resolve of it (resolved is "" when Resolve fails or it
// is not one): where a link such as a device's driver leads, and what is
// there. On a tree, Stat's first step, an O_PATH open of the link, an
// fstat and a readlink, is one readlinkat(2) of the name in the open
// directory (the same entry, which it reads without opening anything),
// and its walk goes on from the link's target as Stat's own would.
func (d *Dir) StatResolve(name string) (n Node, resolved string, err error) {
	full := path.Join(d.path, name)
	n, err = d.stat(name, full)
	if err != nil {
		return n, "", err
	}
	if n.Type == TypeDir {
		if hp, err := d.r.Resolve(full); err == nil {
			resolved = hp
		}
	}
	return n, resolved, nil
}

// stat is Root.Stat(full) of the entry name.
func (d *Dir) stat(name, full string) (Node, error) {
	e, listed := d.entry(name)
	if d.r.live || d.fd < 0 || !validName(name) || !listed || e.typ != unix.DT_LNK || d.r.recorder() != nil {
		// The live root's Stat is one stat(2); a snapshot's recording
		// needs Stat's nodes, the link's among them.
		return d.r.Stat(full)
	}
	t, err := d.readlink(name)
	if err != nil {
		return d.r.Stat(full)
	}
	if !strings.HasPrefix(t, "/") {
		t = path.Join(d.path, t)
	}
	return d.r.statWalk(path.Clean(t), 1)
}
