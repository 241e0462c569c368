package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// KubeletDir is the directory the kubelet's device manager serves
// kubelet.sock in, dials plugins in and keeps its checkpoint in. Inside the
// test binary's mount namespace it is the current test's Kubelet.Dir.
var KubeletDir = filepath.Clean(pluginapi.DevicePluginPath)

const (
	// envParentNS, set in the re-executed test binary, holds the mount
	// namespace of the process that started it (readlink of
	// /proc/self/ns/mnt): the child refuses to mount anything unless its
	// own differs.
	envParentNS = "ACCEL_DOCTOR_E2E_PARENT_MNTNS"
	// envScratch names an empty directory the parent made for the child's
	// tmpfs (the overlay's upper layer); the parent removes it.
	envScratch = "ACCEL_DOCTOR_E2E_SCRATCH"
)

// notRun says why the tests cannot run here ("" when they can); Start skips
// with it.
var notRun string

// inNamespace is true in the re-executed test binary once KubeletDir is a
// private mount point of its own.
var inNamespace bool

// Main is the TestMain of a package whose tests use Start:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// As root it runs the test binary again, with the same arguments, in a new
// mount namespace, and exits with its status; the child makes KubeletDir a
// mount point of its own and runs the tests. Elsewhere the tests run in
// place and each Start skips, saying why.
func Main(m *testing.M) {
	switch {
	case os.Getenv(envParentNS) != "":
		if err := privateKubeletDir(); err != nil {
			// The namespace was asked for and could not be made
			// safe: that is a failure of the run, not a skip.
			fmt.Fprintf(os.Stderr, "harness: %v\nFAIL\n", err)
			os.Exit(1)
		}
		inNamespace = true
		os.Exit(m.Run())
	case os.Geteuid() != 0:
		notRun = "needs root: the kubelet's device manager runs in a private mount namespace over " + KubeletDir
		os.Exit(m.Run())
	}
	code, err := runInNamespace()
	if err != nil {
		notRun = fmt.Sprintf("cannot run the tests in a private mount namespace: %v", err)
		os.Exit(m.Run())
	}
	os.Exit(code)
}

// runInNamespace starts this test binary again in a new mount namespace and
// returns its exit status. An error means the child could not be started
// (no CAP_SYS_ADMIN, say, in a container), and the tests have not run.
func runInNamespace() (int, error) {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return 0, err
	}
	scratch, err := os.MkdirTemp("", "accel-doctor-e2e-mnt-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(scratch)

	// Pdeathsig belongs to the thread that forks: keep this goroutine on
	// one thread so that the child dies with this process, whatever kills
	// it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envParentNS+"="+ns, envScratch+"="+scratch)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// With CLONE_NEWNS the runtime also makes / MS_REC|MS_PRIVATE
		// in the child before exec (syscall/exec_linux.go), as
		// unshare(1) does; privateKubeletDir does it again, to say so.
		Unshareflags: syscall.CLONE_NEWNS,
		Pdeathsig:    syscall.SIGKILL,
	}
	// The go command's -timeout sends SIGQUIT for a stack dump; the child
	// holds the stacks worth seeing, and its own -test.timeout (the same
	// flag) normally fires first.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Fprintf(os.Stderr, "harness: the test binary in the mount namespace was killed by %v\nFAIL\n", ws.Signal())
			return 1, nil
		}
		return ee.ExitCode(), nil
	default:
		fmt.Fprintf(os.Stderr, "harness: waiting for the test binary in the mount namespace: %v\nFAIL\n", err)
		return 1, nil
	}
}

// privateKubeletDir runs in the re-executed test binary: it checks that the
// mount namespace is its own, and makes KubeletDir a directory that Start can
// bind-mount over without writing to the host.
func privateKubeletDir() error {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	if ns == os.Getenv(envParentNS) {
		return fmt.Errorf("still in the mount namespace %s of the parent: refusing to mount over %s", ns, KubeletDir)
	}
	// Systemd mounts / shared; a mount under a shared / would propagate
	// to the host's namespace (mount_namespaces(7), "Shared subtrees").
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / rprivate: %w", err)
	}
	if fi, err := os.Stat(KubeletDir); err == nil && fi.IsDir() {
		// A node: its directory is covered by each test's bind
		// mount, in this namespace only, and never written.
		return nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Not a node: the directory has to exist to be a mount point, and
	// making it on the host is not ours to do. Cover its nearest existing
	// ancestor (normally /var/lib) with an overlay of itself whose upper
	// layer is a tmpfs of this namespace, and make the path there: every
	// other entry of the ancestor stays visible, read through (mounts
	// below it show the directories under them; nothing here needs them).
	anc := filepath.Dir(KubeletDir)
	for {
		if fi, err := os.Stat(anc); err == nil && fi.IsDir() {
			break
		}
		anc = filepath.Dir(anc)
	}
	if anc == "/" {
		return fmt.Errorf("no ancestor of %s but / exists: refusing to overlay /", KubeletDir)
	}
	if strings.ContainsAny(anc, ",:\\") {
		return fmt.Errorf("%s cannot be an overlay lowerdir", anc)
	}
	scratch := os.Getenv(envScratch)
	if scratch == "" {
		return fmt.Errorf("%s is not set", envScratch)
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", scratch, err)
	}
	upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", anc, upper, work)
	if err := unix.Mount("overlay", anc, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay on %s (%s): %w", anc, opts, err)
	}
	return os.MkdirAll(KubeletDir, 0o750)
}

// bindKubeletDir makes dir visible at KubeletDir until the test ends.
func bindKubeletDir(t testing.TB, dir string) {
	t.Helper()
	if !inNamespace {
		t.Fatal("harness: not in the test binary's private mount namespace: the package's TestMain must call harness.Main")
	}
	if err := unix.Mount(dir, KubeletDir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", dir, KubeletDir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(KubeletDir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", KubeletDir, err)
		}
	})
}
