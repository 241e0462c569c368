package deviceplugin

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// umaskChild names the test a child process runs under umask 000 (the
// umask is the process's: set in this test binary it would change every
// other test's files).
const umaskChild = "ACCEL_DOCTOR_TEST_UMASK000"

// runUnderUmask000 runs test name of this binary in a child process
// whose umask is 000, with env added, and fails with its output when it
// fails.
func runUnderUmask000(t *testing.T, name string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), umaskChild+"="+name), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s under umask 000: %v\n%s", name, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s under umask 000 did not run:\n%s", name, out)
	}
}

// inUmaskChild: this process is the child of runUnderUmask000 for the
// test; it sets its umask to 000. Outside the child the test itself is
// skipped (its parent test runs it).
func inUmaskChild(t *testing.T) {
	t.Helper()
	if os.Getenv(umaskChild) != t.Name() {
		t.Skipf("run by its parent test in a child process under umask 000")
	}
	syscall.Umask(0)
}

func TestListenUnixModeUnderUmask000(t *testing.T) {
	runUnderUmask000(t, "TestListenUnixChild")
}

// Under umask 000, bind(2) alone makes a socket 0777: ListenUnix's is
// 0600 and listening when its path appears, leaves nothing else in the
// directory, answers a connection, refuses a path that exists (leaving
// it as it was) or that no socket address holds, and on Close removes
// its path, but not a file another process put there since.
func TestListenUnixChild(t *testing.T) {
	inUmaskChild(t)
	dir := shortDir(t)
	p := filepath.Join(dir, "a.sock")
	l, err := ListenUnix(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != SocketMode {
		t.Errorf("%s: mode %v, want a socket with %v", p, fi.Mode(), SocketMode)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %v, want the socket alone", ents)
	}
	if got := l.Addr().String(); got != p {
		t.Errorf("Addr %q, want %q", got, p)
	}
	// A connection, as the kubelet's: dialled by path, answered.
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	c, err := net.DialTimeout("unix", p, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", p, err)
	}
	b := make([]byte, 1)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(b); err != nil || b[0] != 'x' {
		t.Errorf("read %q, %v", b, err)
	}
	c.Close()

	// The path exists: an error, the file untouched.
	if _, err := ListenUnix(context.Background(), p); !errors.Is(err, fs.ErrExist) {
		t.Errorf("ListenUnix over an existing socket: %v, want fs.ErrExist", err)
	}
	if st, err := os.Lstat(p); err != nil || !os.SameFile(st, fi) {
		t.Errorf("the socket at %s changed: %v", p, err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, %s: %v, want it removed", p, err)
	}

	// Removed and made again by someone else: Close leaves theirs.
	l, err = ListenUnix(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	if err := os.WriteFile(p, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if b, err := os.ReadFile(p); err != nil || string(b) != "theirs" {
		t.Errorf("Close removed or changed another's file at %s: %q, %v", p, b, err)
	}
	os.Remove(p)

	// Paths no unix socket address holds: the path itself, and one that
	// fits where the name it is first bound at does not.
	long := filepath.Join(dir, strings.Repeat("l", maxSunPath-len(dir)))
	if _, err := ListenUnix(context.Background(), long); err == nil || !strings.Contains(err.Error(), "longer than a unix socket address holds") {
		t.Errorf("ListenUnix of %d bytes: %v", len(long), err)
	}
	// 100 bytes: DIR/s fits, DIR/.accel-doctor-N/.s does not, whatever
	// the number N MkdirTemp picks.
	deep := filepath.Join(dir, strings.Repeat("d", 100-len(dir)-1))
	if err := os.Mkdir(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnix(context.Background(), filepath.Join(deep, "s")); err == nil || !strings.Contains(err.Error(), "give a shorter directory") {
		t.Errorf("ListenUnix where the first name is too long: %v", err)
	}
	if ents, _ := os.ReadDir(deep); len(ents) != 0 {
		t.Errorf("left in %s: %v", deep, ents)
	}
	// No directory: an error naming the path.
	if _, err := ListenUnix(context.Background(), filepath.Join(dir, "absent", "s")); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("ListenUnix in a missing directory: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != filepath.Base(deep) {
		t.Errorf("left in %s: %v", dir, ents)
	}
}

func TestListenUnixRefusesOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check connects as another user (65534)")
	}
	// A directory anyone may enter, so that only the sockets' own modes
	// decide; made here, since the child ends as another user.
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	runUnderUmask000(t, "TestListenUnixRefusesOthersChild", "ACCEL_DOCTOR_TEST_DIR="+dir)
}

// Another user cannot connect to a socket of ListenUnix (made under
// umask 000 in a directory anyone may enter) and can to the same made
// with plain bind(2) under that umask: the mode is what keeps them out.
func TestListenUnixRefusesOthersChild(t *testing.T) {
	inUmaskChild(t)
	dir := os.Getenv("ACCEL_DOCTOR_TEST_DIR")
	ours := filepath.Join(dir, "ours.sock")
	l, err := ListenUnix(context.Background(), ours)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	plain := filepath.Join(dir, "plain.sock")
	pl, err := net.Listen("unix", plain)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if fi, err := os.Lstat(plain); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("plain bind under umask 000: %v, %v; want 0777", fi.Mode(), err)
	}
	// Every thread of the process (syscall.Setresuid applies to all,
	// Go 1.16); this child ends here.
	if err := syscall.Setgroups(nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setresgid(65534, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setresuid(65534, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("unix", ours, time.Second); err == nil {
		c.Close()
		t.Errorf("uid 65534 connected to %s", ours)
	} else if !errors.Is(err, syscall.EACCES) {
		t.Errorf("uid 65534 dialling %s: %v, want EACCES", ours, err)
	}
	c, err := net.DialTimeout("unix", plain, time.Second)
	if err != nil {
		t.Fatalf("uid 65534 cannot dial the 0777 socket either (%v): the check proves nothing", err)
	}
	c.Close()
}
