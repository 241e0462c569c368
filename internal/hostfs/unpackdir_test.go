package hostfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// snapshotArchive is a small valid snapshot.
func snapshotArchive(extra ...*tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	js := `{"format":2}`
	tw.WriteHeader(&tar.Header{Name: ".accel-doctor/snapshot.json", Typeflag: tar.TypeReg, Size: int64(len(js)), Mode: 0o444})
	tw.Write([]byte(js))
	for _, h := range extra {
		tw.WriteHeader(h)
		if h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return tgz(buf.Bytes())
}

// TestUnpackDirNamedForItsOwner: the directory is 0700 and named for this
// process (PID, start time, PID namespace), which is what lets a later run
// tell a dead owner's directory from a live one's.
func TestUnpackDirNamedForItsOwner(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	r, cleanup, err := OpenSnapshot(bytes.NewReader(snapshotArchive()))
	if err != nil {
		t.Fatal(err)
	}
	id, ok := parseDirName(filepath.Base(r.Dir()))
	me := selfID()
	if !ok || id.pid != os.Getpid() || id.start != me.start || id.pidns != me.pidns || me.start == 0 || me.pidns == 0 {
		t.Errorf("%s: owner %+v, want %+v", r.Dir(), id, me)
	}
	if filepath.Dir(r.Dir()) != os.Getenv("TMPDIR") {
		t.Errorf("unpacked in %s, want $TMPDIR", filepath.Dir(r.Dir()))
	}
	fi, err := os.Stat(r.Dir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	cleanup()
	cleanup() // idempotent
	if _, err := os.Stat(r.Dir()); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s: %v", r.Dir(), err)
	}
}

// TestSweepRemovesOnlyDeadOwnersDirectories: a sweep removes our prefix's
// directories whose owner has exited or whose PID now belongs to a process
// started at another time, and nothing else: not a live owner's, not one
// from another PID namespace, not a link (nor what it points at), not a
// file, not another user's, not a name without an owner.
func TestSweepRemovesOnlyDeadOwnersDirectories(t *testing.T) {
	me := selfID()
	if me.start == 0 || me.pidns == 0 {
		t.Skip("no /proc/self/stat or PID namespace to name owners by")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	liveStart, err := procStart("/proc", live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	name := func(pid int, start, ns uint64) string {
		return fmt.Sprintf("%s%d-%d-%d-x%d", unpackPrefix, pid, start, ns, start+uint64(pid))
	}
	mk := func(n string) string {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "sub", "f"), []byte("x"), 0o644)
		return p
	}
	gone := []string{
		mk(name(dead.Process.Pid, 12345, me.pidns)),       // exited (its start time cannot match)
		mk(name(os.Getpid(), me.start+1, me.pidns)),       // our PID, another process's start: a reused PID
		mk(name(live.Process.Pid, liveStart-1, me.pidns)), // same
	}
	kept := []string{
		mk(name(os.Getpid(), me.start, me.pidns)),       // ours
		mk(name(live.Process.Pid, liveStart, me.pidns)), // a live owner
		mk(name(dead.Process.Pid, 12345, me.pidns+1)),   // another PID namespace: cannot judge
		mk(name(dead.Process.Pid, 0, me.pidns)),         // unknown start time
		mk(unpackPrefix + "1234567890"),                 // the old naming, no owner in it
		mk("other-" + name(dead.Process.Pid, 1, me.pidns)),
	}
	link := filepath.Join(dir, name(dead.Process.Pid, 999, me.pidns))
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name(dead.Process.Pid, 998, me.pidns))
	os.WriteFile(file, nil, 0o644)
	kept = append(kept, link, file)
	if os.Geteuid() == 0 {
		other := mk(name(dead.Process.Pid, 997, me.pidns))
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, other)
	}
	sweepStale(dir, "/proc")
	for _, p := range gone {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("kept %s: %v", filepath.Base(p), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("removed %s: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("the sweep followed a link: %v", err)
	}
}

// TestStopUnpacking removes the live unpack directories and makes no new
// one: an OpenSnapshot after it fails and leaves nothing (a process
// exiting on a signal cannot have an unpack start behind its cleanup).
func TestStopUnpacking(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	defer func() {
		unpacked.mu.Lock()
		unpacked.stopped = false
		unpacked.mu.Unlock()
	}()
	r, _, err := OpenSnapshot(bytes.NewReader(snapshotArchive()))
	if err != nil {
		t.Fatal(err)
	}
	StopUnpacking()
	if _, err := os.Stat(r.Dir()); !os.IsNotExist(err) {
		t.Errorf("%s survived StopUnpacking: %v", r.Dir(), err)
	}
	if _, _, err := OpenSnapshot(bytes.NewReader(snapshotArchive())); !errors.Is(err, errStopped) {
		t.Errorf("OpenSnapshot after StopUnpacking: %v, want errStopped", err)
	}
	if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestRemoveUnpacked removes every live unpack directory, is idempotent,
// and stops an unpack in progress, whose directory is gone afterwards too.
func TestRemoveUnpacked(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	r1, c1, err := OpenSnapshot(bytes.NewReader(snapshotArchive()))
	if err != nil {
		t.Fatal(err)
	}
	r2, c2, err := OpenSnapshot(bytes.NewReader(snapshotArchive(&tar.Header{Name: "sys/x", Typeflag: tar.TypeReg, Size: 5})))
	if err != nil {
		t.Fatal(err)
	}
	// An unpack that is still reading when RemoveUnpacked comes.
	pr, pw := io.Pipe()
	type result struct {
		err error
	}
	done := make(chan result)
	go func() {
		_, _, err := OpenSnapshot(pr)
		done <- result{err}
	}()
	arch := snapshotArchive(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 1}, &tar.Header{Name: "b", Typeflag: tar.TypeReg, Size: 1})
	pw.Write(arch[:len(arch)/2])
	// Its directory exists: it is made before the first byte is read.
	if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) != 3 {
		t.Fatalf("unpack directories: %v", ents)
	}
	RemoveUnpacked()
	RemoveUnpacked()
	go func() { pw.Write(arch[len(arch)/2:]); pw.Close() }()
	res := <-done
	for _, d := range []string{r1.Dir(), r2.Dir()} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s survived RemoveUnpacked: %v", d, err)
		}
	}
	if res.err == nil {
		t.Error("an unpack under way when RemoveUnpacked came succeeded")
	}
	if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
	if _, err := r2.ReadFile("/sys/x"); err == nil {
		t.Error("a root reads a removed snapshot")
	}
	c1()
	c2()
}

// TestKilledOwnersDirectoryIsSwept: a process killed with SIGKILL while it
// holds an unpacked snapshot leaves its directory; the next OpenSnapshot
// removes it.
func TestKilledOwnersDirectoryIsSwept(t *testing.T) {
	if os.Getenv("HOSTFS_TEST_HOLD_SNAPSHOT") != "" {
		_, _, err := OpenSnapshot(bytes.NewReader(snapshotArchive()))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("unpacked")
		select {}
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledOwnersDirectoryIsSwept$")
	cmd.Env = append(os.Environ(), "HOSTFS_TEST_HOLD_SNAPSHOT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 64)
	n, _ := out.Read(line)
	if !strings.Contains(string(line[:n]), "unpacked") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the helper said %q", line[:n])
	}
	ents, _ := os.ReadDir(tmp)
	if len(ents) != 1 {
		t.Fatalf("the helper's unpack: %v", ents)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(tmp, ents[0].Name())); err != nil {
		t.Fatalf("SIGKILL should leave the directory for the sweep: %v", err)
	}
	_, cleanup, err := OpenSnapshot(bytes.NewReader(snapshotArchive()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if _, err := os.Stat(filepath.Join(tmp, ents[0].Name())); !os.IsNotExist(err) {
		t.Errorf("the killed owner's directory survived the sweep: %v", err)
	}
}

// TestShmOnlyWithRoomToSpare: /dev/shm takes an unpack only when the
// largest one fits with half of it left, and the inodes for it: a
// container's 64 MiB /dev/shm is its workload's.
func TestShmOnlyWithRoomToSpare(t *testing.T) {
	fs := func(size, free, files, ffree uint64) *unix.Statfs_t {
		return &unix.Statfs_t{Bsize: 4096, Blocks: size / 4096, Bavail: free / 4096, Files: files, Ffree: ffree}
	}
	for name, c := range map[string]struct {
		st   *unix.Statfs_t
		want bool
	}{
		"container 64 MiB, empty": {fs(64<<20, 64<<20, 0, 0), false},
		"host 16 GiB":             {fs(16<<30, 16<<30, 0, 0), true},
		"host 16 GiB, half used":  {fs(16<<30, 8<<30, 0, 0), false},
		"no inodes left":          {fs(16<<30, 16<<30, 1<<20, 100), false},
		"inodes enough":           {fs(16<<30, 16<<30, 1<<20, 1<<19), true},
	} {
		if got := roomFor(c.st, defaultLimits); got != c.want {
			t.Errorf("%s: roomFor = %v, want %v", name, got, c.want)
		}
	}
}

func TestParseStatStart(t *testing.T) {
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n"
	if got, err := parseStatStart([]byte(line)); err != nil || got != 987654 {
		t.Errorf("start = %d, %v; want 987654", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x"} {
		if _, err := parseStatStart([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseStatStart asserts of the /proc/PID/stat start-time reader:
//   - what it gives is field 22, counted from the last ')' (comm, field
//     2, may hold blanks and parentheses), and is a decimal number;
//   - so whatever pid and comm come before, even a comm of ") (" and
//     blanks, the start time read is the same;
//   - a line the kernel could write with a start time parses back to it
//     (round trip);
//   - a stat without ')' or with too few fields is an error, never a
//     panic.
func FuzzParseStatStart(f *testing.F) {
	f.Add([]byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n"))
	f.Add([]byte("1 (x) S 1 2"))
	f.Add([]byte("1 (x"))
	f.Add([]byte(""))
	for _, b := range testutil.CorpusSeeds(f, "procfs/fixtures.ttar", func(p string) bool {
		return strings.HasSuffix(p, "/stat") && strings.Contains(p, "/proc/") && !strings.Contains(p, "/proc/fs/") && p != "fixtures/proc/stat"
	}) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		start, err := parseStatStart(b)
		i := bytes.LastIndexByte(b, ')')
		if err != nil {
			if i >= 0 {
				if fs := strings.Fields(string(b[i+1:])); len(fs) >= 20 && digitsOnly(fs[19]) && len(fs[19]) < 20 {
					t.Fatalf("%q: field 22 %q refused: %v", b, fs[19], err)
				}
			}
			return
		}
		fs := strings.Fields(string(b[i+1:]))
		if len(fs) < 20 || !digitsOnly(fs[19]) {
			t.Fatalf("%q: start %d from no decimal field 22", b, start)
		}
		other := append([]byte("7 (x) y) ( z)"), b[i+1:]...)
		if again, err := parseStatStart(other); err != nil || again != start {
			t.Fatalf("%q: another comm gives %d, %v, not %d", b, again, err, start)
		}
		line := fmt.Sprintf("1 (a b) S%s %d 0 0\n", strings.Repeat(" 0", 18), start)
		if back, err := parseStatStart([]byte(line)); err != nil || back != start {
			t.Fatalf("start %d, in %q, parsed back as %d, %v", start, line, back, err)
		}
	})
}

func digitsOnly(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func FuzzParseDirName(f *testing.F) {
	f.Add(unpackPrefix + "1-2-3-abc")
	f.Add(unpackPrefix + "-1--")
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := parseDirName(s)
		if ok && (id.pid <= 0 || !strings.HasPrefix(s, unpackPrefix)) {
			t.Fatalf("%q -> %+v", s, id)
		}
	})
}
