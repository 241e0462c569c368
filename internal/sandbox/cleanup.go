package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
)

// NamePrefix starts the name of every cgroup the sandbox creates:
// accel-doctor-sandbox-<owner pid>-<random hex>. Nothing else is ever
// touched by the sandbox's cleanup.
const NamePrefix = "accel-doctor-sandbox-"

// owner parses a sandbox cgroup's name,
// accel-doctor-sandbox-<owner pid>-<16 hex digits>, and returns the owner.
// Anything else is not a sandbox (and never touched). Hand-written rather
// than a regexp so that no command pays for compiling one at start-up.
func ownerPid(name string) (pid int, ok bool) {
	rest, found := strings.CutPrefix(name, NamePrefix)
	if !found {
		return 0, false
	}
	num, hex, found := strings.Cut(rest, "-")
	if !found || len(hex) != 16 || num == "" || len(num) > 10 {
		return 0, false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, false
		}
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	pid, err := strconv.Atoi(num)
	return pid, err == nil
}

// reaper is the handle on the reaper process.
type reaper struct {
	w   *os.File
	cmd *exec.Cmd
}

func startReaper(self, dir string, v2 bool) (*reaper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := &exec.Cmd{Path: self, Args: []string{self},
		Env: append(cleanEnv(os.Environ()), roleEnv+"="+roleReaper, dirEnv+"="+dir,
			v2Env+"="+strconv.FormatBool(v2)),
		ExtraFiles: []*os.File{r},
		// Its own session: a signal to our process group (^C) spares it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start sandbox reaper: %w", err)
	}
	// Collect its exit status so it does not linger as a zombie.
	go cmd.Wait()
	return &reaper{w: w, cmd: cmd}, nil
}

// finish tells the reaper the cleanup is done (or, with ok false, leaves it
// to the reaper) and lets it exit.
func (r *reaper) finish(ok bool) {
	if ok {
		r.w.Write([]byte(reaperDone))
	}
	r.w.Close()
}

// killAll sends SIGKILL to every process in dir. On cgroup2,
// cgroup.kill (kernel 5.14) does it atomically; elsewhere the pids are read
// and killed in a loop by destroy.
func killAll(dir string, v2 bool) {
	if v2 {
		if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil {
			return
		}
	}
	owner := -1
	if pid, ok := ownerPid(filepath.Base(dir)); ok {
		owner = pid
	}
	for _, pid := range cgroupPids(dir) {
		// The owner's pid is listed while its v1 probing thread is inside;
		// the sandbox never kills accel-doctor itself.
		if pid != owner && pid != os.Getpid() {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

func cgroupPids(dir string) []int {
	root, err := liveRoot()
	if err != nil {
		return nil
	}
	b, err := root.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// destroy kills what is left in dir and removes it, retrying for a
// bounded time: a process may fork while it is being killed, and a cgroup
// stays busy for a moment after its last task exits.
func destroy(dir string, v2 bool) error {
	if _, ok := ownerPid(filepath.Base(dir)); !ok {
		return fmt.Errorf("refusing to remove %s: not a sandbox cgroup", dir)
	}
	var err error
	delay := time.Millisecond
	for deadline := time.Now().Add(5 * time.Second); ; {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		killAll(dir, v2)
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
	return fmt.Errorf("rmdir %s: %w (tasks left: %v)", dir, err, cgroupPids(dir))
}

// Sweep removes sandbox cgroups left by an accel-doctor that died
// with its reaper (both hierarchies): only directories named
// accel-doctor-sandbox-<pid>-<hex> whose pid no longer exists. A live
// owner's cgroup is never touched. It returns the errors it met.
func Sweep(m *cgroup.Mounts) []error {
	root, err := liveRoot()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, h := range []struct {
		dir string
		v2  bool
	}{{m.DevicesV1, false}, {m.Unified, true}} {
		if h.dir == "" {
			continue
		}
		names, err := root.ReadDir(h.dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			// Only directories can have this name in a cgroup file system.
			pid, ok := ownerPid(name)
			if !ok || pid == os.Getpid() {
				continue
			}
			if unix.Kill(pid, 0) != unix.ESRCH {
				continue // owner alive (or not ours to judge)
			}
			if err := destroy(filepath.Join(h.dir, name), h.v2); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}
