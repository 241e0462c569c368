package hostfs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A replayed snapshot is unpacked to a temporary directory that must not
// outlive the run. A clean exit removes it (the cleanup OpenSnapshot
// returns); a signal or a panic, where deferred calls do not run, removes
// it through RemoveUnpacked; a SIGKILL (Kubernetes after the grace period,
// the OOM killer) runs nothing, so every OpenSnapshot also sweeps the
// directories whose owner is dead. The owner is in the name:
//
//	accel-doctor-snapshot-<pid>-<start>-<pidns>-<random>
//
// start is the process's start time (field 22 of /proc/PID/stat, clock
// ticks after boot), so a PID reused by another process does not keep a
// dead owner's directory alive, nor does a live owner's directory look
// dead; pidns is the inode of the owner's PID namespace, so that a process
// in another namespace sharing the directory (a hostPath /tmp) is never
// judged by PIDs it cannot see.

// unpackPrefix starts the name of every unpack directory.
const unpackPrefix = "accel-doctor-snapshot-"

// ErrNotSnapshot is an archive without MetaPath: a .tar.gz that is not an
// accel-doctor snapshot must not replay as a host.
var ErrNotSnapshot = errors.New("not an accel-doctor snapshot: the archive has no " + MetaPath)

// errStopped is an unpack that RemoveUnpacked stopped.
var errStopped = errors.New("snapshot: unpacking stopped: the unpacked snapshots are being removed")

// unpacked is the process-wide registry of live unpack directories.
var unpacked struct {
	mu   sync.Mutex
	dirs map[*unpackDir]bool
	// stopped: StopUnpacking came; no directory is made after it.
	stopped bool
}

type unpackDir struct {
	path string
	stop atomic.Bool // tells an unpack in progress to stop
	busy sync.Mutex  // held while unpacking
	once sync.Once
}

// remove deletes the directory, once. An unpack in progress is told to
// stop, and waited for a moment only: one blocked on its input (a slow
// pipe) must not hold up a signal handler. Creating anything in a removed
// directory fails (the unpack works through an fd of it), and the unpack
// removes whatever it made in between when it sees the stop.
func (d *unpackDir) remove() {
	d.once.Do(func() {
		unpacked.mu.Lock()
		delete(unpacked.dirs, d)
		unpacked.mu.Unlock()
		d.stop.Store(true)
		locked := false
		for i := 0; i < 20 && !locked; i++ {
			if locked = d.busy.TryLock(); !locked {
				time.Sleep(time.Millisecond)
			}
		}
		removeAll(d.path)
		if locked {
			d.busy.Unlock()
		}
	})
}

// removeAll retries: an unpack that has not yet seen the stop may create
// one more entry while the tree is being removed (ENOTEMPTY).
func removeAll(p string) {
	for i := 0; i < 10; i++ {
		if os.RemoveAll(p) == nil {
			return
		}
	}
}

// RemoveUnpacked removes every snapshot directory this process unpacked
// and has not removed yet. It is idempotent and safe to call from any
// goroutine at any time: from a signal handler's goroutine while another
// still unpacks (that unpack stops at its next entry; it is waited for 20
// ms at most), or from a deferred panic handler. It takes no lock that is
// held while anything but a map update or the mkdir of a new directory
// runs. Roots opened on those directories read nothing afterwards
// (ENOENT).
func RemoveUnpacked() {
	unpacked.mu.Lock()
	dirs := make([]*unpackDir, 0, len(unpacked.dirs))
	for d := range unpacked.dirs {
		dirs = append(dirs, d)
	}
	unpacked.mu.Unlock()
	for _, d := range dirs {
		d.remove()
	}
}

// StopUnpacking is RemoveUnpacked for a process that is about to exit (on
// a signal): no unpack directory is made after it (OpenSnapshot fails), so
// that an unpack that had not made its directory yet when the others were
// removed cannot leave one behind.
func StopUnpacking() {
	unpacked.mu.Lock()
	unpacked.stopped = true
	unpacked.mu.Unlock()
	RemoveUnpacked()
}

// identity is what names this process's unpack directories.
type identity struct {
	pid   int
	start uint64 // 0: unknown
	pidns uint64 // 0: unknown
}

var selfID = sync.OnceValue(func() identity {
	id := identity{pid: os.Getpid()}
	// /proc must be ours: its "self" must be this PID.
	if start, err := procStart("/proc", id.pid); err == nil {
		id.start = start
	}
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) == nil {
		id.pidns = st.Ino
	}
	return id
})

// procStart reads a process's start time from PROC/PID/stat.
func procStart(proc string, pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseStatStart(b)
}

// parseStatStart takes field 22 (starttime) of /proc/PID/stat. comm (field
// 2) may hold spaces and parentheses: the fields after it start after the
// last ')' (fs/proc/array.c do_task_stat).
func parseStatStart(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): starttime, field 22, is f[19].
	if len(f) < 20 {
		return 0, errors.New("stat: too few fields")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// dirName is the MkdirTemp pattern of this process's unpack directories.
func (id identity) dirName() string {
	return fmt.Sprintf("%s%d-%d-%d-*", unpackPrefix, id.pid, id.start, id.pidns)
}

// parseDirName reads the owner out of an unpack directory's name.
func parseDirName(name string) (identity, bool) {
	rest, ok := strings.CutPrefix(name, unpackPrefix)
	if !ok {
		return identity{}, false
	}
	f := strings.SplitN(rest, "-", 4)
	if len(f) != 4 {
		return identity{}, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	ns, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return identity{}, false
	}
	return identity{pid: pid, start: start, pidns: ns}, true
}

// ownerDead reports whether the owner of a directory named for id has
// exited. Anything uncertain (an unknown start time or namespace, another
// PID namespace, an unreadable /proc) counts as alive: a sweep only ever
// removes what is certainly stale.
func ownerDead(me, id identity, proc string) bool {
	if id.start == 0 || id.pidns == 0 || me.pidns == 0 || me.start == 0 || id.pidns != me.pidns {
		return false
	}
	if id.pid == me.pid && id.start == me.start {
		return false
	}
	start, err := procStart(proc, id.pid)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	return err == nil && start != id.start
}

// sweepStale removes, in dir, the unpack directories of dead owners: only
// names with our prefix and an owner in them, only directories (never a
// link: Lstat) owned by our uid; RemoveAll never follows a link inside.
func sweepStale(dir, proc string) {
	me := selfID()
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	uid := uint32(os.Geteuid())
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			id, ok := parseDirName(name)
			if !ok {
				continue
			}
			p := filepath.Join(dir, name)
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uid {
				continue
			}
			if ownerDead(me, id, proc) {
				os.RemoveAll(p)
			}
		}
		if err != nil {
			return
		}
	}
}

// unpackParent is where a snapshot is unpacked: $TMPDIR when it is set (the
// user chose), else /dev/shm when it is a writable tmpfs that can take the
// largest unpack and still keep half of itself free (a container's 64 MiB
// /dev/shm belongs to its workload: NCCL and PyTorch's DataLoader use it),
// else the system default. A tmpfs saves the disk writes: unpacking the
// demo's 1,200 entries on a disk-backed /tmp and removing them cost 0.4 s.
func unpackParent(lim unpackLimits) string {
	if os.Getenv("TMPDIR") != "" {
		return os.TempDir()
	}
	if shmFits("/dev/shm", lim) {
		return "/dev/shm"
	}
	return os.TempDir()
}

func shmFits(dir string, lim unpackLimits) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil || st.Type != unix.TMPFS_MAGIC || unix.Access(dir, unix.W_OK) != nil {
		return false
	}
	return roomFor(&st, lim)
}

// roomFor reports whether a file system with statfs st takes the largest
// unpack with half of it left over, and has the inodes for it.
func roomFor(st *unix.Statfs_t, lim unpackLimits) bool {
	bs := uint64(st.Bsize)
	size, free := st.Blocks*bs, st.Bavail*bs
	if free < uint64(lim.writeBytes)+size/2 {
		return false
	}
	// f_files 0: no inode limit (tmpfs mounted with nr_inodes=0).
	return st.Files == 0 || st.Ffree >= uint64(lim.entries)
}

// newUnpackDir sweeps stale directories and makes (0700, by MkdirTemp) and
// registers a new one.
func newUnpackDir(lim unpackLimits) (*unpackDir, error) {
	parent := unpackParent(lim)
	for _, d := range uniq("/dev/shm", os.TempDir(), parent) {
		sweepStale(d, "/proc")
	}
	// Made and registered in one step: RemoveUnpacked, from a signal
	// handler, sees either no directory or a registered one.
	unpacked.mu.Lock()
	defer unpacked.mu.Unlock()
	if unpacked.stopped {
		return nil, errStopped
	}
	p, err := os.MkdirTemp(parent, selfID().dirName())
	if err != nil {
		return nil, err
	}
	d := &unpackDir{path: p}
	if unpacked.dirs == nil {
		unpacked.dirs = map[*unpackDir]bool{}
	}
	unpacked.dirs[d] = true
	return d, nil
}

func uniq(ss ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// UnpackSnapshot unpacks a snapshot archive into dir, refusing entries
// that would land outside it or be written through a link, special files,
// sparse files, and archives past any bound (LimitError). It checks only
// the tar: OpenSnapshot also wants the snapshot's description.
func UnpackSnapshot(r io.Reader, dir string) error {
	return unpackInto(r, dir, defaultLimits, nil)
}

func unpackInto(r io.Reader, dir string, lim unpackLimits, stop *atomic.Bool) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("snapshot: %w", &os.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(fd)
	return unpack(r, fd, lim, stop)
}

// OpenSnapshot unpacks a snapshot into a new temporary directory and opens
// it as a Root. Call cleanup to remove the directory (RemoveUnpacked
// removes it too). An archive without a snapshot description is
// ErrNotSnapshot.
func OpenSnapshot(r io.Reader) (root *Root, cleanup func(), err error) {
	return openSnapshot(r, defaultLimits)
}

func openSnapshot(r io.Reader, lim unpackLimits) (*Root, func(), error) {
	d, err := newUnpackDir(lim)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	d.busy.Lock()
	err = unpackInto(r, d.path, lim, &d.stop)
	d.busy.Unlock()
	if d.stop.Load() {
		// RemoveUnpacked came while we unpacked: remove what we made since.
		removeAll(d.path)
		return nil, nil, errStopped
	}
	if err != nil {
		d.remove()
		return nil, nil, err
	}
	root, err := New(d.path)
	if err == nil {
		_, err = root.snapshotMeta()
	}
	if err != nil {
		d.remove()
		return nil, nil, err
	}
	return root, d.remove, nil
}

// snapshotMeta reads and checks the root's snapshot description.
func (r *Root) snapshotMeta() (SnapshotMeta, error) {
	var m SnapshotMeta
	b, err := r.ReadFile(MetaPath)
	if errors.Is(err, os.ErrNotExist) {
		return m, ErrNotSnapshot
	}
	if err != nil {
		return m, fmt.Errorf("snapshot: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("snapshot: %s: %w", MetaPath, err)
	}
	if m.Format < 1 {
		return m, fmt.Errorf("snapshot: %s: format %d (want 1 or later)", MetaPath, m.Format)
	}
	return m, nil
}

// OpenSnapshotFile opens the snapshot archive at path. Only a regular file
// is opened: a FIFO given as --snapshot would block open(2) until a writer
// came, a device would run its driver's open. The path is opened O_PATH
// (no open of its inode at all), fstat'ed, and only a regular file is
// reopened for reading, through /proc/self/fd: the inode checked is the
// inode read. An archive larger than the bound on compressed bytes is
// refused before a byte of it is read.
// Errors start with the path.
func OpenSnapshotFile(path string) (*Root, func(), error) {
	f, err := openRegularFile(path, defaultLimits.archiveBytes, "archive bytes (compressed)")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	root, cleanup, err := OpenSnapshot(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return root, cleanup, nil
}

// openRegularFile opens a regular file for reading, refusing anything
// else without opening it, and files over limit bytes (a LimitError on
// bound). Errors start with the path.
func openRegularFile(path string, limit int64, bound string) (*os.File, error) {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(pfd)
	fd, st, err := reopenRegular(pfd)
	if errors.Is(err, ErrNotRegular) {
		return nil, fmt.Errorf("%s: a %s, not a regular file", path, nodeFromStat(path, &st).Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Size > limit {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", path, &LimitError{Bound: bound, Limit: limit})
	}
	return os.NewFile(uintptr(fd), path), nil
}
