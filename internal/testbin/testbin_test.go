package testbin

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tool builds this package's command once, for the tests that need a
// second process (the lock is between processes).
func tool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testbin")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/testbin").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// module writes a one-command module to build, in place of the repository.
func module(t *testing.T, msg string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module example.com/hello\n\ngo 1.22\n",
		"cmd/hello/main.go": "package main\n\nfunc main() { println(" + strconv.Quote(msg) + ") }\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// A second run with nothing changed finds the binary go build left and
// writes nothing; a change is built into the same directory.
func TestBuildIsReusedBetweenRuns(t *testing.T) {
	bin := tool(t)
	cache := t.TempDir()
	repo := module(t, "one")
	build := func() string {
		t.Helper()
		cmd := exec.Command(bin, "./cmd/hello")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "GOFLAGS=", "GOTOOLCHAIN=local")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("testbin: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	dir := build()
	if !strings.HasPrefix(dir, filepath.Join(cache, "accel-doctor-test")+"/") {
		t.Fatalf("built in %s, want under %s", dir, cache)
	}
	first := inode(t, filepath.Join(dir, "hello"))
	if again := build(); again != dir || inode(t, filepath.Join(dir, "hello")) != first {
		t.Errorf("a run with nothing changed wrote the binary again (%s)", again)
	}
	os.WriteFile(filepath.Join(repo, "cmd/hello/main.go"), []byte("package main\n\nfunc main() { println(\"two\") }\n"), 0o644)
	if again := build(); again != dir || inode(t, filepath.Join(dir, "hello")) == first {
		t.Errorf("a changed source was not built again into %s (%s)", dir, again)
	}
	out, _ := exec.Command(filepath.Join(dir, "hello")).CombinedOutput()
	if strings.TrimSpace(string(out)) != "two" {
		t.Errorf("the binary says %q, want two", out)
	}
}

// fakeGo puts a `go` first on PATH that logs its start and end, with its
// pid, and sleeps for secs in between.
func fakeGo(t *testing.T, secs int) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	script := "#!/bin/sh\necho start $$ >> " + log + "\nsleep " + strconv.Itoa(secs) + "\necho end $$ >> " + log + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log
}

// Two test binaries asking at once: one builds, the other waits for it
// (one go build at a time, never two side by side).
func TestBuildWaitsForAnotherProcess(t *testing.T) {
	bin := tool(t)
	log := fakeGo(t, 1)
	cache := t.TempDir()
	repo := module(t, "one")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			cmd := exec.Command(bin, "./cmd/hello")
			cmd.Dir = repo
			cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
			errs[i] = cmd.Run()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(log)
	lines := strings.Fields(string(b))
	// start A, end A, start B, end B.
	if len(lines) != 8 || lines[0] != "start" || lines[2] != "end" || lines[1] != lines[3] || lines[4] != "start" || lines[6] != "end" || lines[5] != lines[7] {
		t.Errorf("the two builds overlapped or did not both run:\n%s", b)
	}
}

// A build that does not finish before the caller's deadline is stopped,
// its whole process group with it, and the error says so.
func TestBuildStopsAtTheDeadline(t *testing.T) {
	log := fakeGo(t, 60)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Build(ctx, module(t, "one"), Options{Packages: []string{"./cmd/hello"}})
	if err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Fatalf("Build: %v, want a build stopped at the deadline", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Build returned after %v", took)
	}
	b, _ := os.ReadFile(log)
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] != "start" {
		t.Fatalf("fake go log %q", b)
	}
	pid, _ := strconv.Atoi(f[1])
	// The script's sleep was in the same process group: both are gone.
	for i := 0; ; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		if i == 50 {
			t.Fatalf("the stopped go (pid %d) still runs", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, _ := exec.Command("pgrep", "-f", "sleep 60$").Output(); len(out) > 0 {
		// Another test's sleep 60 is not ours only if its group differs.
		for _, p := range strings.Fields(string(out)) {
			n, _ := strconv.Atoi(p)
			if g, err := syscall.Getpgid(n); err == nil && g == pid {
				t.Errorf("the build's child %d was left running", n)
			}
		}
	}
}

// The key separates what makes two builds differ: the settings, the
// packages, the version, the environment's CGO_ENABLED.
func TestOptionsBuildApart(t *testing.T) {
	// With cgo on, Static is a build of its own.
	t.Setenv("CGO_ENABLED", "1")
	log := fakeGo(t, 0)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	repo := module(t, "one")
	dirs := map[string]bool{}
	for _, o := range []Options{
		{Packages: []string{"./cmd/hello"}},
		{Packages: []string{"./cmd/hello"}, Static: true},
		{Packages: []string{"./cmd/hello"}, Release: true},
		{Packages: []string{"./cmd/hello"}, Version: "x"},
		{Packages: []string{"./cmd/hello", "./cmd/other"}},
	} {
		d, err := Build(context.Background(), repo, o)
		if err != nil {
			t.Fatal(err)
		}
		dirs[d] = true
		// The same options again, in this process: not built again.
		if again, err := Build(context.Background(), repo, o); err != nil || again != d {
			t.Errorf("%+v: %s then %s (%v)", o, d, again, err)
		}
	}
	if len(dirs) != 5 {
		t.Errorf("%d directories for 5 different builds", len(dirs))
	}
	b, _ := os.ReadFile(log)
	if n := strings.Count(string(b), "start"); n != 5 {
		t.Errorf("go ran %d times for 5 builds asked twice each", n)
	}
}

// Where the environment already says CGO_ENABLED=0 (as .ci/run does),
// Static is go test's own build: one directory, one go run.
func TestStaticIsDefaultWithoutCgo(t *testing.T) {
	t.Setenv("CGO_ENABLED", "0")
	log := fakeGo(t, 0)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	repo := module(t, "one")
	a, err := Build(context.Background(), repo, Options{Packages: []string{"./cmd/hello"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(context.Background(), repo, Options{Packages: []string{"./cmd/hello"}, Static: true})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("CGO_ENABLED=0: default build in %s, Static in %s", a, b)
	}
	out, _ := os.ReadFile(log)
	if n := strings.Count(string(out), "start"); n != 1 {
		t.Errorf("go ran %d times for one build asked twice", n)
	}
}
