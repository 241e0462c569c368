// Package testbin builds the product's binaries for tests that run them as
// processes, once for every test binary of a `go test` run and again only
// when a source changed.
//
// go test runs the test binaries of several packages side by side, each
// with its own 10-minute -timeout. A test binary that builds the product
// itself pays, inside that timeout, for every package the product needs;
// when several do it at once on a cold build cache, each compiles the same
// packages beside the others. Here the binaries go to one directory per
// checkout and build settings, in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache, as the go build cache), and a lock file
// lets one test binary build while the others wait for its result. go
// build finds an output that is up to date by the build ID it carries and
// neither links nor writes it again (cmd/go/internal/work/buildid.go,
// useCache), so a run with nothing changed costs go build's hashing of the
// sources, and a run that changed one package relinks in place.
//
// Nothing in the directory is a test's garbage: it is a cache, like the go
// build cache, kept so that the next run reuses it (remove
// $XDG_CACHE_HOME/accel-doctor-test to reclaim it).
package testbin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options says which binaries to build and how.
type Options struct {
	// Release builds as the README does: CGO_ENABLED=0, -trimpath,
	// -tags=grpcnotrace, -ldflags=-s -w (static and stripped). -trimpath
	// changes every package's build, so a release build compiles each
	// package again beside what go test compiled: only tests of the
	// shipped build itself need it.
	Release bool
	// Static sets CGO_ENABLED=0 without the rest of Release: a binary that
	// runs in an empty root (a container, a chroot). Where the run's own
	// CGO_ENABLED is 0, as in .ci/run, it reuses go test's compiled
	// packages; elsewhere the packages that import net or os/user (and
	// theirs) are compiled again without cgo.
	Static bool
	// Version is stamped with -X into internal/cli.Version (link time only).
	Version string
	// Packages to build, relative to the repository root; default the
	// three product binaries (Product).
	Packages []string
}

// Product is the three product binaries, side by side as they ship.
var Product = []string{"./cmd/accel-doctor", "./cmd/accel-doctor-kubelet", "./cmd/accel-doctor-kube"}

// Margin is what a build leaves of its caller's deadline, for the caller to
// say what happened before go test's timeout would.
const Margin = 30 * time.Second

var (
	mu    sync.Mutex
	built = map[string]string{} // key -> directory, in this process
)

// Build builds the binaries o names from the repository at repo and
// returns the directory that holds them. ctx bounds the wait for another
// test binary's build and the build itself; a build that does not finish
// in it is stopped (its process group killed) and returns an error that
// says so.
func Build(ctx context.Context, repo string, o Options) (string, error) {
	abs, err := filepath.Abs(repo)
	if err != nil {
		return "", err
	}
	pkgs := o.Packages
	if len(pkgs) == 0 {
		pkgs = Product
	}
	args := []string{"build"}
	env := os.Environ()
	ld := ""
	if o.Release {
		args = append(args, "-trimpath", "-tags=grpcnotrace")
		ld = "-s -w"
	}
	if o.Release || o.Static {
		env = append(env, "CGO_ENABLED=0")
	}
	if o.Version != "" {
		ld = strings.TrimSpace(ld + " -X github.com/accel-doctor/accel-doctor/internal/cli.Version=" + o.Version)
	}
	if ld != "" {
		args = append(args, "-ldflags="+ld)
	}
	// The key holds whatever makes two builds differ but the sources,
	// which go build itself compares.
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%q\n%q\ncgo=%s goflags=%s\n", abs, args, pkgs, cgoEnabled(env), os.Getenv("GOFLAGS"))
	key := hex.EncodeToString(h.Sum(nil))[:16]

	mu.Lock()
	defer mu.Unlock()
	if d, ok := built[key]; ok {
		return d, nil
	}
	base, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return "", fmt.Errorf("waiting for another test binary's build in %s: %w", dir, err)
	}
	defer unlock()
	args = append(args, "-o", dir+"/")
	args = append(args, pkgs...)
	start := time.Now()
	if out, err := run(ctx, abs, env, args); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("go %s did not finish in %v: stopped (the go build cache keeps what it compiled; the next run goes on from there)\n%s",
				strings.Join(args, " "), time.Since(start).Round(time.Second), out)
		}
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	built[key] = dir
	return dir, nil
}

// CacheDir is where the builds are kept: accel-doctor-test in the user's
// cache directory, or in the temporary directory where there is none.
func CacheDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		c = filepath.Join(os.TempDir(), fmt.Sprintf("accel-doctor-test-cache-%d", os.Getuid()))
	}
	return filepath.Join(c, "accel-doctor-test"), nil
}

func cgoEnabled(env []string) string {
	v := ""
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, "CGO_ENABLED="); ok {
			v = s // the last one wins, as in os/exec
		}
	}
	return v
}

// run runs the go command in its own process group, killed with this
// process (Pdeathsig) and, as a group, when ctx ends: a test binary that
// go test stops leaves no go build behind.
func run(ctx context.Context, dir string, env, args []string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig follows the thread that forked: keep it until the wait.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	return []byte(out.String()), err
}

// lock takes an exclusive flock on path, polling so that ctx can end the
// wait (flock itself cannot be interrupted but by a signal).
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Dir is Build for a test: bounded by the test binary's deadline less
// Margin, and fatal to the test when the binaries cannot be built.
func Dir(tb testing.TB, repo string, o Options) string {
	tb.Helper()
	ctx := context.Background()
	if d, ok := deadline(tb); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-Margin))
		defer cancel()
	}
	dir, err := Build(ctx, repo, o)
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

func deadline(tb testing.TB) (time.Time, bool) {
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		return t.Deadline()
	}
	return time.Time{}, false
}
