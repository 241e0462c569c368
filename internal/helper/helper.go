// Package helper finds accel-doctor's other binaries, which it runs, often
// as root: accel-doctor-kube and accel-doctor-kubelet (the commands that
// link the Kubernetes client and gRPC) and accel-doctor-cuda (the NVML and
// CUDA steps of the probe). A root tool runs only code that nobody but
// root could have put there, so a helper is looked for in one place only,
// beside the running executable (or in $ACCEL_DOCTOR_HELPER_DIR when that
// is set), never on PATH, and it is run only when Check accepts it.
//
// Check demands of the helper, of the directory it was found in and of
// every directory above either (after symbolic links) what a root tool
// must demand of code it runs: owned by root, by the user running
// accel-doctor, or by the owner of the running executable (who controls
// this run already); and writable by nobody else: no write bit for
// others, and none for the group unless the group is root's. A directory
// that others may write to but that has the sticky bit (/tmp) is accepted:
// there others can neither rename nor remove what they do not own, and
// what they own is refused by the owner test. It is written here because
// no Go library makes this test (os/exec.LookPath takes any executable).
package helper

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// EnvDir names a directory to look for the helpers in instead of beside
// the running executable (a test, or an install that keeps them apart).
const EnvDir = "ACCEL_DOCTOR_HELPER_DIR"

// NotFoundError: the helper Name is not in Dir.
type NotFoundError struct {
	Name, Dir string
	Err       error
}

func (e *NotFoundError) Error() string {
	if e.Dir == "" {
		return fmt.Sprintf("%s cannot be looked for: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("%s is not in %s (%v)", e.Name, e.Dir, e.Err)
}
func (e *NotFoundError) Unwrap() error { return e.Err }

// UntrustedError: the file at Path is not run, because of Why.
type UntrustedError struct {
	Path string
	Why  string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s is not run: %s (a helper that accel-doctor runs must be owned by root or by the user running it, in directories likewise, and writable by nobody else)", e.Path, e.Why)
}

// ErrUntrusted matches every *UntrustedError (errors.Is).
var ErrUntrusted = errors.New("untrusted helper")

func (e *UntrustedError) Is(target error) bool { return target == ErrUntrusted }

// Dir is the directory the helpers are looked for in: $ACCEL_DOCTOR_HELPER_DIR,
// or the running executable's.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Dir(exe), nil
}

// Find is the path of the helper name in Dir, checked by Check: a
// *NotFoundError when it is not there, an *UntrustedError when it may not
// be run.
func Find(name string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", &NotFoundError{Name: name, Err: err}
	}
	p := filepath.Join(dir, name)
	fi, err := os.Stat(p)
	if err != nil {
		return "", &NotFoundError{Name: name, Dir: dir, Err: err}
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", &NotFoundError{Name: name, Dir: dir, Err: fmt.Errorf("%s is not an executable file (%s)", p, fi.Mode())}
	}
	if err := Check(p); err != nil {
		return "", err
	}
	return p, nil
}

// Check returns an *UntrustedError when the executable at p may not be
// run by accel-doctor (the package's doc says what it demands), or the
// error of reading it.
func Check(p string) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	owners := trustedOwners()
	// The directory the file was named in, and the file itself, after
	// symbolic links: whoever can change either can change what runs.
	linkDir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if err := checkOne(abs, real, owners, false); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, d := range []string{linkDir, filepath.Dir(real)} {
		for {
			if !seen[d] {
				seen[d] = true
				if err := checkOne(abs, d, owners, true); err != nil {
					return err
				}
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return nil
}

func checkOne(named, p string, owners map[uint32]bool, dir bool) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &UntrustedError{Path: named, Why: "its owner cannot be read"}
	}
	what := "it"
	if p != named {
		what = p
		if dir {
			what = "its directory " + p
		}
	}
	if !owners[st.Uid] {
		return &UntrustedError{Path: named, Why: fmt.Sprintf("%s is owned by uid %d", what, st.Uid)}
	}
	m := fi.Mode()
	if dir && m&fs.ModeSticky != 0 {
		return nil
	}
	if m&0o002 != 0 {
		return &UntrustedError{Path: named, Why: fmt.Sprintf("%s is writable by every user (%s)", what, m)}
	}
	if m&0o020 != 0 && st.Gid != 0 {
		return &UntrustedError{Path: named, Why: fmt.Sprintf("%s is writable by group %d (%s)", what, st.Gid, m)}
	}
	return nil
}

// trustedOwners: root, this process's real and effective users, and the
// owner of the running executable.
func trustedOwners() map[uint32]bool {
	o := map[uint32]bool{0: true, uint32(os.Getuid()): true, uint32(os.Geteuid()): true}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				o[st.Uid] = true
			}
		}
	}
	return o
}
