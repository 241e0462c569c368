package helper

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const nobody = 65534

func exe(t *testing.T, p string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

func asRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("planting files owned by another user needs root")
	}
}

// Each way another user could change what runs is refused, and says which.
func TestCheckRefuses(t *testing.T) {
	asRoot(t)
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, dir string) string
		want  string
	}{
		{"owned by nobody", func(t *testing.T, d string) string {
			p := exe(t, filepath.Join(d, "h"), 0o755)
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return p
		}, "it is owned by uid 65534"},
		{"writable by every user", func(t *testing.T, d string) string {
			return exe(t, filepath.Join(d, "h"), 0o757)
		}, "it is writable by every user"},
		{"writable by a group not root's", func(t *testing.T, d string) string {
			p := exe(t, filepath.Join(d, "h"), 0o775)
			if err := os.Chown(p, 0, nobody); err != nil {
				t.Fatal(err)
			}
			return p
		}, "it is writable by group 65534"},
		{"in a directory owned by nobody", func(t *testing.T, d string) string {
			sub := filepath.Join(d, "bin")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			p := exe(t, filepath.Join(sub, "h"), 0o755)
			if err := os.Chown(sub, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return p
		}, "its directory " + "DIR/bin is owned by uid 65534"},
		{"in a directory every user may write to", func(t *testing.T, d string) string {
			sub := filepath.Join(d, "bin")
			if err := os.Mkdir(sub, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(sub, 0o777); err != nil {
				t.Fatal(err)
			}
			return exe(t, filepath.Join(sub, "h"), 0o755)
		}, "its directory DIR/bin is writable by every user"},
		{"a link to a file owned by nobody", func(t *testing.T, d string) string {
			other := filepath.Join(d, "other")
			if err := os.Mkdir(other, 0o755); err != nil {
				t.Fatal(err)
			}
			target := exe(t, filepath.Join(other, "real"), 0o755)
			if err := os.Chown(target, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "h")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "DIR/other/real is owned by uid 65534"},
		{"a link into a directory owned by nobody", func(t *testing.T, d string) string {
			other := filepath.Join(d, "other")
			if err := os.Mkdir(other, 0o755); err != nil {
				t.Fatal(err)
			}
			target := exe(t, filepath.Join(other, "real"), 0o755)
			if err := os.Chown(other, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "h")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "its directory DIR/other is owned by uid 65534"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			p := c.plant(t, d)
			err := Check(p)
			var ue *UntrustedError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUntrusted) {
				t.Fatalf("Check(%s) = %v, want an UntrustedError", p, err)
			}
			real, _ := filepath.EvalSymlinks(d)
			if want := strings.ReplaceAll(c.want, "DIR", real); !strings.Contains(ue.Why, want) {
				t.Errorf("why %q, want %q", ue.Why, want)
			}
		})
	}
}

// What root installs, and a build of the user's own, run; so does one in
// a sticky directory such as /tmp, where others cannot replace it.
func TestCheckAccepts(t *testing.T) {
	d := t.TempDir()
	if err := Check(exe(t, filepath.Join(d, "h"), 0o755)); err != nil {
		t.Errorf("own file in own directory: %v", err)
	}
	// The test binary is the running executable: its owner is trusted.
	self, _ := os.Executable()
	if err := Check(self); err != nil {
		t.Errorf("the running executable: %v", err)
	}
	if fi, err := os.Stat("/tmp"); err == nil && fi.Mode()&fs.ModeSticky != 0 && fi.Mode()&0o002 != 0 {
		f, err := os.CreateTemp("/tmp", "helper-sticky-")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Cleanup(func() { os.Remove(f.Name()) })
		if err := os.Chmod(f.Name(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := Check(f.Name()); err != nil {
			t.Errorf("own file in the sticky /tmp: %v", err)
		}
	}
	if os.Getuid() == 0 {
		// Group-writable by root's group: only root writes to it.
		p := exe(t, filepath.Join(d, "g"), 0o775)
		if err := os.Chown(p, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := Check(p); err != nil {
			t.Errorf("group-writable by gid 0: %v", err)
		}
	}
}

// The input it cannot read: a path that is not there, a link loop.
func TestCheckUnreadable(t *testing.T) {
	d := t.TempDir()
	if err := Check(filepath.Join(d, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	loop := filepath.Join(d, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	if err := Check(loop); err == nil || errors.Is(err, ErrUntrusted) {
		t.Errorf("a link to itself: %v, want the error of reading it", err)
	}
}

// Find looks in one place: $ACCEL_DOCTOR_HELPER_DIR, else beside the
// running executable; never on PATH.
func TestFindLooksInOnePlace(t *testing.T) {
	onPath := t.TempDir()
	exe(t, filepath.Join(onPath, "accel-doctor-x"), 0o755)
	t.Setenv("PATH", onPath+":"+os.Getenv("PATH"))
	t.Setenv(EnvDir, "")
	_, err := Find("accel-doctor-x")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("a helper only on PATH: %v, want NotFoundError", err)
	}
	self, _ := os.Executable()
	if nf.Dir != filepath.Dir(self) {
		t.Errorf("looked in %s, want %s", nf.Dir, filepath.Dir(self))
	}

	dir := t.TempDir()
	want := exe(t, filepath.Join(dir, "accel-doctor-x"), 0o755)
	t.Setenv(EnvDir, dir)
	if p, err := Find("accel-doctor-x"); err != nil || p != want {
		t.Errorf("Find in %s = %q, %v", EnvDir, p, err)
	}
	exe(t, filepath.Join(dir, "not-exec"), 0o644)
	if _, err := Find("not-exec"); !errors.As(err, &nf) {
		t.Errorf("a file without x: %v, want NotFoundError", err)
	}
}
