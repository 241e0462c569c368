package hostfs

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bothResolvers runs f with openat2 and with the fallback that kernels
// without it (before 5.6, or seccomp profiles that refuse it) take.
func bothResolvers(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", func(t *testing.T) {
		if !openat2Works() {
			t.Skip("this kernel has no openat2 with RESOLVE_IN_ROOT")
		}
		f(t)
	})
	t.Run("fallback", func(t *testing.T) {
		noOpenat2 = true
		defer func() { noOpenat2 = false }()
		f(t)
	})
}

// hostileRoot makes a root beside an "outside" directory holding a secret,
// with every kind of link that would leave the root if it were followed
// on the machine running the test.
func hostileRoot(t *testing.T) (root, outside string) {
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	tree(t, outside, map[string]string{"secret": "outside\n", "d/secret": "outside\n"})
	tree(t, root, map[string]string{
		"etc/hostname":          "inside\n",
		"d/secret":              "inside\n",
		"up":                    "->../../../../../../../../..",
		"slash":                 "->/",
		"abs-outside":           "->" + outside, // the host path of the outside dir
		"climb-outside":         "->../outside/secret",
		"sys/deep/climb":        "->../../../outside",
		"sys/class/drm/card0":   "->../../deep",
		"sys/bus/pci/devices/x": "->../../../../../../sys/deep",
	})
	return root, outside
}

// TestConfinementInTheKernel: absolute and climbing links resolve inside
// the root for every path operation, as chroot would; none reaches the
// directory beside it.
func TestConfinementInTheKernel(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		dir, outside := hostileRoot(t)
		r := MustNew(dir)
		for _, p := range []string{"/up/etc/hostname", "/slash/etc/hostname", "/up/up/slash/etc/hostname"} {
			if v, err := r.ReadString(p); err != nil || v != "inside" {
				t.Errorf("ReadString(%s) = %q, %v; want the root's own file", p, v, err)
			}
			if b, unmap, err := r.MapFile(p, 1<<20); err != nil || string(b) != "inside\n" {
				t.Errorf("MapFile(%s) = %q, %v", p, b, err)
			} else {
				unmap()
			}
		}
		// The outside directory's host path means nothing inside the root,
		// and climbing out of it lands on the root's own tree.
		for _, p := range []string{"/abs-outside/secret", "/climb-outside", "/sys/deep/climb/secret", "/up/outside/secret"} {
			if b, err := r.ReadFile(p); err == nil {
				t.Errorf("ReadFile(%s) = %q: read outside the root", p, b)
			}
			if r.Exists(p) {
				t.Errorf("Exists(%s): the outside file is visible", p)
			}
			if _, err := r.Stat(p); err == nil {
				t.Errorf("Stat(%s) found the outside file", p)
			}
		}
		if got, err := r.Resolve("/sys/bus/pci/devices/x"); err != nil || got != "/sys/deep" {
			t.Errorf("Resolve = %q, %v; want /sys/deep", got, err)
		}
		if got, err := r.Resolve("/up/up"); err != nil || got != "/" {
			t.Errorf("Resolve(/up/up) = %q, %v; want /", got, err)
		}
		if names, err := r.ReadDir("/slash"); err != nil || strings.Join(names, ",") != "abs-outside,climb-outside,d,etc,slash,sys,up" {
			t.Errorf("ReadDir(/slash) = %v, %v; want the root's own listing", names, err)
		}
		if names, err := r.ReadDir("/sys/class/drm/card0"); err != nil || strings.Join(names, ",") != "climb" {
			t.Errorf("ReadDir through a link = %v, %v", names, err)
		}
		if got, err := r.Glob("/up/*/hostname"); err != nil || len(got) != 1 || got[0] != "/up/etc/hostname" {
			t.Errorf("Glob = %v, %v", got, err)
		}
		fd, err := r.OpenDirFD("/slash")
		if err != nil {
			t.Fatal(err)
		}
		var st, want unix.Stat_t
		unix.Fstat(fd, &st)
		unix.Close(fd)
		unix.Stat(dir, &want)
		if st.Ino != want.Ino || st.Dev != want.Dev {
			t.Error("OpenDirFD(/slash) is not the root directory")
		}
		if n, err := r.Lstat("/slash"); err != nil || n.Type != TypeSymlink || n.Target != "/" {
			t.Errorf("Lstat(/slash) = %+v, %v", n, err)
		}
		if l, err := r.Readlink("/abs-outside"); err != nil || l != outside {
			t.Errorf("Readlink = %q, %v; want the target as written", l, err)
		}
		if _, err := r.Readlink("/etc/hostname"); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Readlink of a file: %v, want EINVAL", err)
		}
	})
}

// TestLoopsAreELOOP: link loops fail with ELOOP under both resolvers.
func TestLoopsAreELOOP(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		dir := t.TempDir()
		tree(t, dir, map[string]string{"a": "->b", "b": "->a", "self": "->self/x"})
		r := MustNew(dir)
		for _, p := range []string{"/a", "/self", "/a/x"} {
			if _, err := r.ReadFile(p); !errors.Is(err, syscall.ELOOP) {
				t.Errorf("ReadFile(%s): %v, want ELOOP", p, err)
			}
			if _, err := r.Resolve(p); !errors.Is(err, syscall.ELOOP) {
				t.Errorf("Resolve(%s): %v, want ELOOP", p, err)
			}
		}
	})
}

// TestSwappedDirectoryNeverLeaks: a directory of the tree is swapped, over
// and over, for a link to a directory outside the root while readers read
// through it. A resolution done in user space and then opened by path can
// be raced into reading the outside file; the kernel's cannot.
func TestSwappedDirectoryNeverLeaks(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		dir, outside := hostileRoot(t)
		r := MustNew(dir)
		real, link := filepath.Join(dir, "d"), filepath.Join(dir, "d-link")
		if err := os.Symlink(filepath.Join(outside, "d"), link); err != nil {
			t.Fatal(err)
		}
		// A first read while d is the directory (a resolver that caches
		// what it resolved would reuse it).
		if v, err := r.ReadString("/d/secret"); err != nil || v != "inside" {
			t.Fatalf("/d/secret = %q, %v", v, err)
		}
		for i := 0; i < 2; i++ {
			if err := unix.Renameat2(unix.AT_FDCWD, real, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
			}
		}
		var done atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				// d is the real directory, then the link, then the
				// directory again: an exchange is atomic, d always exists.
				unix.Renameat2(unix.AT_FDCWD, real, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			}
		}()
		leaks := 0
		for i := 0; i < 3000; i++ {
			if b, err := r.ReadFile("/d/secret"); err == nil && string(b) == "outside\n" {
				leaks++
			}
		}
		done.Store(true)
		wg.Wait()
		if leaks > 0 {
			t.Errorf("%d of 3000 reads of /d/secret read the file outside the root", leaks)
		}
	})
}

// nodes makes what must never be opened where a file is expected: a FIFO,
// a socket, a char node of a harmless driver (1:3, /dev/null's) that shows
// an open would be seen, and one of a major no driver has (240, "local/
// experimental use" in Documentation/admin-guide/devices.txt), whose open
// would fail with ENXIO.
func nodes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{"fifo": filepath.Join(dir, "fifo"), "socket": filepath.Join(dir, "socket")}
	if err := unix.Mkfifo(out["fifo"], 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", out["socket"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if os.Geteuid() == 0 {
		for name, dev := range map[string]uint64{"null": unix.Mkdev(1, 3), "nodriver": unix.Mkdev(240, 0)} {
			p := filepath.Join(dir, name)
			if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(dev)); err != nil {
				t.Logf("mknod %s: %v (char nodes left out)", p, err)
				continue
			}
			out[name] = p
		}
	}
	return out
}

// watch reports IN_OPEN events on dir's children.
type watch struct{ fd int }

func newWatch(t *testing.T, dir string) *watch {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	return &watch{fd}
}

// opened drains the events and returns the names opened.
func (w *watch) opened() []string {
	var names []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if err != nil || n <= 0 {
			return names
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			if ev.Mask&unix.IN_OPEN != 0 {
				names = append(names, name)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// TestNothingButAFileIsOpened: a FIFO, a socket or a device node where a
// regular file was expected is ErrNotRegular and never opened: inotify sees
// no IN_OPEN from ReadFile, MapFile, WriteSnapshot or OpenSnapshotFile, on
// a tree and on the live root, while it does see a real open of the same
// nodes (so the watch works), and not an O_PATH one (the kernel fact the
// readers rely on: include/linux/fsnotify.h fsnotify_file skips FMODE_PATH
// files, set by fs/open.c do_dentry_open before any f_op->open).
func TestNothingButAFileIsOpened(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "dev")
	if err := os.Mkdir(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	ns := nodes(t, dev)
	w := newWatch(t, dev)

	// The kernel, first: an O_PATH open raises nothing; a real one does.
	for name, p := range ns {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("O_PATH open of %s: %v", name, err)
		}
		unix.Close(fd)
	}
	if got := w.opened(); len(got) != 0 {
		t.Fatalf("this kernel reports O_PATH opens as IN_OPEN: %v", got)
	}
	if p, ok := ns["null"]; ok {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Skipf("opening a char node in %s: %v (a nodev mount?)", dev, err)
		}
		unix.Close(fd)
	}
	fd, _ := unix.Open(ns["fifo"], unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(fd)
	if got := w.opened(); len(got) == 0 {
		t.Fatal("the watch sees no open at all: this test could not tell")
	}

	for _, tc := range []struct {
		name string
		root *Root
		dev  string // the nodes' directory as a host path of root
	}{
		{"tree", MustNew(dir), "/dev"},
		{"live", MustNew("/"), dev},
	} {
		rec := tc.root.Record()
		for name := range ns {
			p := tc.dev + "/" + name
			if _, err := tc.root.ReadFile(p); !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: ReadFile(%s): %v, want ErrNotRegular", tc.name, name, err)
			}
			if _, err := tc.root.ReadString(p); !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: ReadString(%s): %v", tc.name, name, err)
			}
			if _, _, err := tc.root.MapFile(p, 1<<20); !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: MapFile(%s): %v, want ErrNotRegular", tc.name, name, err)
			}
			if _, err := tc.root.ReadDir(p); !errors.Is(err, unix.ENOTDIR) {
				t.Errorf("%s: ReadDir(%s): %v, want ENOTDIR", tc.name, name, err)
			}
			if _, err := tc.root.OpenDirFD(p); !errors.Is(err, unix.ENOTDIR) {
				t.Errorf("%s: OpenDirFD(%s): %v, want ENOTDIR", tc.name, name, err)
			}
			tc.root.Lstat(p)
			tc.root.Exists(p)
		}
		// The snapshot reads again what the readers touched.
		if _, err := tc.root.WriteSnapshot(rec, &strings.Builder{}, "test"); err != nil {
			t.Errorf("%s: WriteSnapshot: %v", tc.name, err)
		}
	}
	for name, p := range ns {
		if _, _, err := OpenSnapshotFile(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("OpenSnapshotFile(%s): %v, want a refusal", name, err)
		}
	}
	if got := w.opened(); len(got) != 0 {
		t.Errorf("opened where a file was expected: %v", got)
	}
}

// TestStatInProcessResolvesInTheProcessRoot: through a live procfs, a path
// is resolved inside the process's own root, as the process sees it: its
// absolute links stay in it. The process is chrooted into a directory
// whose /dev/link points at /target: the answer is its /target, not the
// test machine's.
func TestStatInProcessResolvesInTheProcessRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox to run in a chroot")
	}
	dir := t.TempDir()
	tree(t, dir, map[string]string{"target": "in the chroot", "dev/link": "->/target", "dev/up": "->../../../../target"})
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/busybox", "sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir}
	cmd.Path = "/busybox"
	if err := cmd.Start(); err != nil {
		t.Skipf("starting a chrooted process: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var want unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "target"), &want); err != nil {
		t.Fatal(err)
	}
	bothResolvers(t, func(t *testing.T) {
		r := MustNew("/")
		for _, p := range []string{"/dev/link", "/dev/up", "/target"} {
			n, err := r.StatInProcess(cmd.Process.Pid, p)
			if err != nil || n.Type != TypeRegular {
				t.Errorf("StatInProcess(%s) = %+v, %v; want the chroot's /target", p, n, err)
			}
		}
		if _, err := r.StatInProcess(cmd.Process.Pid, "/dev/absent"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("absent: %v", err)
		}
	})
}

// TestStatInProcessUnderARootWithLiveProcfs: a root whose /proc is a real
// procfs (a host mounted at /host in a pod) follows /proc/PID/root through
// the kernel in StatInProcess and nowhere else (ReadFile through it is
// ELOOP: RESOLVE_NO_MAGICLINKS), and reads /proc/self; one whose /proc is
// a captured tree reads the tree.
func TestStatInProcessUnderARootWithLiveProcfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting procfs needs root")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := withProcMounted(t, dir, func() error {
		r := MustNew(dir)
		n, err := r.StatInProcess(os.Getpid(), "/dev/null")
		if err == nil && (n.Type != TypeChar || n.Major != 1 || n.Minor != 3) {
			err = errors.New("not /dev/null: " + n.Type.String())
		}
		// /proc/self is a plain link (a PID as text), read as readers
		// read it; a magic link is never followed by a reader.
		if _, rerr := r.ReadFile("/proc/self/status"); err == nil && rerr != nil {
			err = rerr
		}
		if _, rerr := r.ReadFile("/proc/self/root/etc/hostname"); err == nil && !errors.Is(rerr, unix.ELOOP) {
			err = errors.New("a reader followed /proc/self/root")
		}
		return err
	})
	if err != nil {
		t.Errorf("StatInProcess through the root's live /proc: %v", err)
	}
	// The same tree without a procfs: /proc/PID/root is what the tree has.
	tree(t, dir, map[string]string{"proc/42/root/dev/x": "captured"})
	n, err := MustNew(dir).StatInProcess(42, "/dev/x")
	if err != nil || n.Type != TypeRegular {
		t.Errorf("captured /proc/42/root: %+v, %v", n, err)
	}
}

// withProcMounted runs fn on a thread of its own in a private mount
// namespace where a procfs is mounted on dir/proc (which must exist): the
// mounts never show outside, and the thread dies with its goroutine. It
// skips the test where such a namespace cannot be made, and where fn
// returns an errSkip; otherwise it returns fn's error.
func withProcMounted(t *testing.T, dir string, fn func() error) error {
	t.Helper()
	// Set up process-wide state before the thread leaves our namespace.
	procSelfFD()
	openat2Works()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- errSkip{err}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- errSkip{err}
			return
		}
		if err := unix.Mount("proc", filepath.Join(dir, "proc"), "proc", 0, ""); err != nil {
			errc <- errSkip{err}
			return
		}
		errc <- fn()
	}()
	err := <-errc
	var s errSkip
	if errors.As(err, &s) {
		t.Skipf("a private mount namespace: %v", s.err)
	}
	return err
}

type errSkip struct{ err error }

func (e errSkip) Error() string { return e.err.Error() }

// TestOpenSnapshotFileRefusesWhatIsNotAFile: --snapshot naming a FIFO, a
// directory, a device or a link to a FIFO is refused at once, never
// opened (a FIFO would block open until a writer came).
func TestOpenSnapshotFileRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	ns := nodes(t, dir)
	ns["dir"] = dir
	ns["link to fifo"] = filepath.Join(dir, "link")
	if err := os.Symlink(ns["fifo"], ns["link to fifo"]); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for name, p := range ns {
			_, _, err := OpenSnapshotFile(p)
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v, want 'not a regular file'", name, err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang guard, not a speed goal
		t.Fatal("OpenSnapshotFile blocked")
	}
	if _, _, err := OpenSnapshotFile(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent: %v", err)
	}
}
