package enter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/helper"
	"github.com/accel-doctor/accel-doctor/internal/probe"
)

// Options configure Probe.
type Options struct {
	// HelperPath is the CUDA/NVML helper on the host; "" looks for
	// probe.HelperName beside this executable. It is opened here, before
	// entering, and run from that fd inside.
	HelperPath    string
	HelperTimeout time.Duration
	NoLibraries   bool
	// Timeout bounds the whole probe (2 minutes when 0).
	Timeout time.Duration
	// Nodes are container paths to open beside those the probe's scan
	// finds (the nodes the container was given, whatever their names).
	Nodes []string
}

// The aspects of the container's process that the probe reproduces, or
// says it could not.
const (
	AspectMount    = "mount namespace"
	AspectRoot     = "root directory"
	AspectPID      = "PID namespace"
	AspectUser     = "user namespace"
	AspectCgroup   = "cgroup"
	AspectIDs      = "uid, gid and groups"
	AspectCaps     = "capabilities"
	AspectNNP      = "no_new_privs"
	AspectSeccomp  = "seccomp"
	AspectLSM      = "LSM label"
	AspectEnv      = "environment"
	defaultTimeout = 2 * time.Minute
)

// Aspect is one part of the container process's context: whether the
// probe ran with it, how, and what differs.
type Aspect struct {
	Name       string `json:"name"`
	Reproduced bool   `json:"reproduced"`
	// Decisive: the aspect decides whether an open or ioctl succeeds
	// and can be reproduced (root, user namespace, ids, capabilities, the
	// device-deciding cgroups). Seccomp and the LSM label decide too but
	// cannot be reproduced; they are reported, not counted.
	Decisive bool   `json:"decisive"`
	How      string `json:"how,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Result is a probe made as the container's process.
type Result struct {
	PID     int           `json:"pid"`
	Aspects []Aspect      `json:"aspects"`
	Probe   *probe.Report `json:"probe"`
	// Stderr is the tail of the child's stderr, for a failure.
	Stderr string `json:"stderr,omitempty"`
}

// Reproduced reports whether every decisive aspect was reproduced: the
// probe's errnos are then those the container's process gets, seccomp
// and LSM aside (see Aspect.Decisive).
func (r *Result) Reproduced() bool {
	for _, a := range r.Aspects {
		if a.Decisive && !a.Reproduced {
			return false
		}
	}
	return true
}

// FlagHelp is what the help of `container --probe` must say: what the
// probe changes on the host and what it cannot reproduce.
const FlagHelp = `run the functional probe as the container's own process would, from the host:
in its mount namespace and root, PID namespace, cgroups, a replica of its user
namespace, with its uid, gid, groups, capabilities, no_new_privs and
environment (not its seccomp filters or LSM label: the report says so).
This WRITES TO THE HOST's cgroup tree for the life of the probe: a child
process of accel-doctor joins each of the container's cgroups (cgroup2:
clone3 CLONE_INTO_CGROUP; v1: its PID written to cgroup.procs) and counts
against the container's limits until it exits. Nothing is written into the
container: accel-doctor and accel-doctor-cuda run from fds opened on the host.`

// ErrNeedsRoot: Probe was called without root.
var ErrNeedsRoot = errors.New("container --probe needs root: it joins the container's namespaces and cgroups")

// ErrGone: the process is not there, or ended while it was read.
var ErrGone = errors.New("the process is gone")

// Probe runs the functional probe (internal/probe Run) as the process
// pid would, from the host: in its root and mount namespace, its PID
// namespace, its cgroups, its user namespace (a replica, see doc.go), its
// uid, gid, groups, capabilities and no_new_privs, with its environment.
// It needs root in the initial user namespace. What it changes on the
// host is listed in doc.go.
func Probe(ctx context.Context, pid int, opt Options) (*Result, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNeedsRoot
	}
	if opt.Timeout <= 0 {
		opt.Timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	t, err := openTarget(pid, opt)
	if err != nil {
		return nil, err
	}
	defer t.close()
	return t.run(ctx, opt)
}

// target is everything taken from the host before entering.
type target struct {
	pid     int
	pidfd   int
	status  *Status
	uidMap  []IDMap
	gidMap  []IDMap
	ownUser bool // the target has a user namespace of its own
	ownMnt  bool
	ownPID  bool
	env     []string
	lsm     string
	cgroups []cgroupDir
	files   []*os.File // closed by close
	exe     *os.File
	root    *os.File
	mnt     *os.File
	pidns   *os.File
	helper  *os.File
	// helperPath and helperRefused: the host's helper that was not
	// opened, and why.
	helperPath, helperRefused string
	cgfd                      *os.File // the cgroup2 directory, for CLONE_INTO_CGROUP
	aspects                   []Aspect
}

func (t *target) close() {
	for _, f := range t.files {
		f.Close()
	}
	if t.pidfd >= 0 {
		unix.Close(t.pidfd)
	}
}

func (t *target) open(p string, flags int) (*os.File, error) {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	t.files = append(t.files, f)
	return f, nil
}

// openTarget reads the target's facts and opens every handle the child
// needs, then checks that the process is still the one whose PID was
// given: a pidfd taken first and still alive after the last open means
// the PID was not reused in between.
func openTarget(pid int, opt Options) (*target, error) {
	t := &target{pid: pid, pidfd: -1}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("no process %d: %w", pid, ErrGone)
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	t.pidfd = fd
	ok := false
	defer func() {
		if !ok {
			t.close()
		}
	}()
	proc := "/proc/" + strconv.Itoa(pid)
	read := func(name string) ([]byte, error) {
		b, err := readLimited(proc+"/"+name, 1<<20)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	b, err := read("status")
	if err != nil {
		return nil, err
	}
	if t.status, err = ParseStatus(b); err != nil {
		return nil, fmt.Errorf("%s/status: %w", proc, err)
	}
	for _, m := range []struct {
		name string
		dst  *[]IDMap
	}{{"uid_map", &t.uidMap}, {"gid_map", &t.gidMap}} {
		b, err := read(m.name)
		if err != nil {
			return nil, err
		}
		if *m.dst, err = ParseIDMap(b); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", proc, m.name, err)
		}
	}
	for _, ns := range []struct {
		name string
		dst  *bool
	}{{"user", &t.ownUser}, {"mnt", &t.ownMnt}, {"pid", &t.ownPID}} {
		same, err := sameNamespace(proc+"/ns/"+ns.name, "/proc/self/ns/"+ns.name)
		if err != nil {
			return nil, err
		}
		*ns.dst = !same
	}
	if b, err = read("environ"); err != nil {
		return nil, err
	}
	t.env = ParseEnviron(b)
	if b, err := read("attr/current"); err == nil {
		t.lsm = strings.TrimRight(string(b), "\x00\n")
	}
	if b, err = read("cgroup"); err != nil {
		return nil, err
	}
	lines, err := ParseCgroupFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s/cgroup: %w", proc, err)
	}
	mi, err := readLimited("/proc/self/mountinfo", 4<<20)
	if err != nil {
		return nil, err
	}
	if t.cgroups, err = placeCgroups(lines, mi); err != nil {
		return nil, err
	}

	if t.exe, err = t.open("/proc/self/exe", unix.O_RDONLY); err != nil {
		return nil, err
	}
	if t.root, err = t.open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY); err != nil {
		return nil, err
	}
	if t.mnt, err = t.open(proc+"/ns/mnt", unix.O_RDONLY); err != nil {
		return nil, err
	}
	if t.ownPID {
		if t.pidns, err = t.open(proc+"/ns/pid", unix.O_RDONLY); err != nil {
			return nil, err
		}
	}
	if !opt.NoLibraries {
		hp := opt.HelperPath
		if hp == "" {
			if dir, err := helper.Dir(); err == nil {
				hp = filepath.Join(dir, probe.HelperName)
			}
		}
		if hp != "" {
			if err := helper.Check(hp); errors.Is(err, helper.ErrUntrusted) {
				t.helperPath, t.helperRefused = hp, err.Error()
			} else if h, err := t.open(hp, unix.O_RDONLY); err == nil {
				t.helper = h
			}
		}
	}
	for i := range t.cgroups {
		c := &t.cgroups[i]
		if c.V2 && c.Err == nil {
			if t.cgfd, err = t.open(c.Dir, unix.O_RDONLY|unix.O_DIRECTORY); err != nil {
				c.Err = err
			}
		}
	}
	if err := unix.PidfdSendSignal(t.pidfd, 0, nil, 0); err != nil {
		return nil, fmt.Errorf("process %d ended while it was being read: %w: %w", pid, ErrGone, err)
	}
	ok = true
	return t, nil
}

func readLimited(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read %s: longer than %d bytes", p, limit)
	}
	return b, nil
}

func sameNamespace(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, &os.PathError{Op: "stat", Path: a, Err: err}
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, &os.PathError{Op: "stat", Path: b, Err: err}
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// credentials are the target's identity in the ids of the namespace the
// child will be in: the container's own ids through its maps (the
// replica has the same maps), or the host's when it shares ours.
func (t *target) credentials() (Credentials, error) {
	s := t.status
	c := Credentials{Inh: s.CapInh, Prm: s.CapPrm, Eff: s.CapEff, Bnd: s.CapBnd, Amb: s.CapAmb, NoNewPrivs: s.NoNewPrivs}
	c.UID, c.GID = s.UID[1], s.GID[1]
	c.Groups = append([]uint32(nil), s.Groups...)
	if !t.ownUser {
		return c, nil
	}
	var ok bool
	if c.UID, ok = ToInside(t.uidMap, s.UID[1]); !ok {
		return c, fmt.Errorf("uid %d is not mapped in the container's user namespace", s.UID[1])
	}
	if c.GID, ok = ToInside(t.gidMap, s.GID[1]); !ok {
		return c, fmt.Errorf("gid %d is not mapped in the container's user namespace", s.GID[1])
	}
	for i, g := range s.Groups {
		if c.Groups[i], ok = ToInside(t.gidMap, g); !ok {
			return c, fmt.Errorf("group %d is not mapped in the container's user namespace", g)
		}
	}
	return c, nil
}

func (t *target) run(ctx context.Context, opt Options) (*Result, error) {
	res := &Result{PID: t.pid}
	creds, err := t.credentials()
	if err != nil {
		return nil, err
	}
	req := request{MountFD: -1, HelperFD: -1, HelperTimeout: opt.HelperTimeout, NoLibraries: opt.NoLibraries, Creds: creds, Timeout: opt.Timeout, Nodes: opt.Nodes}
	// The child's descriptors (see child.go): 3 exe, 4 request, 5 root,
	// then the optional ones.
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer reqR.Close()
	defer reqW.Close()
	extra := []*os.File{t.exe, reqR, t.root}
	// ExtraFiles[i] is the child's fd 3+i.
	if !t.ownUser {
		req.MountFD = 3 + len(extra)
		extra = append(extra, t.mnt)
	}
	if t.helperRefused != "" {
		req.HelperPath, req.HelperRefused = t.helperPath, t.helperRefused
	}
	if t.helper != nil {
		req.HelperFD = 3 + len(extra)
		req.HelperPath = t.helper.Name()
		extra = append(extra, t.helper)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer outR.Close()

	// No SysProcAttr.Pdeathsig: Go's child checks getppid() after setting
	// it and kills itself when it differs from the parent's PID, which it
	// always does from inside another PID namespace (the parent is not
	// visible there: getppid() is 0). The child sets it itself.
	sys := &syscall.SysProcAttr{}
	if t.ownUser {
		sys.Cloneflags = syscall.CLONE_NEWUSER
		sys.GidMappingsEnableSetgroups = true
		for _, m := range t.uidMap {
			sys.UidMappings = append(sys.UidMappings, syscall.SysProcIDMap{ContainerID: int(m.Inside), HostID: int(m.Outside), Size: int(m.Size)})
		}
		for _, m := range t.gidMap {
			sys.GidMappings = append(sys.GidMappings, syscall.SysProcIDMap{ContainerID: int(m.Inside), HostID: int(m.Outside), Size: int(m.Size)})
		}
		// The child starts with every capability in its new namespace,
		// but as host root's uid, which the replica's map need not map:
		// execve would then drop them all (a non-root exec without file
		// capabilities, security/commoncap.c). Raised as ambient
		// capabilities they survive the exec, for the chroot, the uid
		// change and the capset that give the child the container's own
		// set (applyCredentials), which clears the ambient set first.
		last, err := lastCap()
		if err != nil {
			return nil, err
		}
		for c := uintptr(0); c <= last; c++ {
			sys.AmbientCaps = append(sys.AmbientCaps, c)
		}
	}
	if t.cgfd != nil {
		sys.UseCgroupFD = true
		sys.CgroupFD = int(t.cgfd.Fd())
	}
	// A process group of its own, which the CUDA helper it starts joins:
	// killed as a group, the child cannot leave the helper running in the
	// container (it would be reparented to the container's init).
	sys.Setpgid = true
	env := append(append([]string{}, t.env...), roleEnv+"="+roleProbe)
	cmd := &exec.Cmd{
		Path:        "/proc/self/fd/3", // the child's fd 3: t.exe
		Args:        []string{"accel-doctor-enter"},
		Env:         env,
		ExtraFiles:  extra,
		Stdout:      outW,
		SysProcAttr: sys,
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 16 << 10}

	// The child is forked from one OS thread that first joins the
	// target's PID namespace (setns(CLONE_NEWPID) changes only the
	// namespace of the thread's future children, kernel/pid_namespace.c
	// pidns_install), so that the child is a process of the container's
	// PID namespace and the container's /proc shows it. The thread is
	// never handed back to the scheduler (the goroutine ends locked),
	// and it waits for the child: Pdeathsig follows the thread that
	// forked.
	type outcome struct {
		res childResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		var o outcome
		defer func() { done <- o }()
		if t.pidns != nil {
			if err := unix.Setns(int(t.pidns.Fd()), unix.CLONE_NEWPID); err != nil {
				o.err = fmt.Errorf("setns into the container's PID namespace: %w", err)
				return
			}
		}
		if err := cmd.Start(); err != nil {
			outW.Close()
			o.err = fmt.Errorf("start the probe child: %w", err)
			return
		}
		outW.Close()
		kill := func() {
			// The group is the child's and its helper's alone; its ID
			// stays theirs while any of them lives (a PID is not reused
			// while it names a group).
			unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
			cmd.Process.Kill()
		}
		stop := context.AfterFunc(ctx, kill)
		defer stop()
		joinErr := t.joinV1(cmd.Process.Pid)
		if joinErr != nil {
			kill()
			cmd.Wait()
			o.err = joinErr
			return
		}
		if err := json.NewEncoder(reqW).Encode(req); err != nil {
			kill()
		}
		reqW.Close()
		b, rerr := io.ReadAll(io.LimitReader(outR, 64<<20))
		werr := cmd.Wait()
		if ctx.Err() != nil {
			o.err = fmt.Errorf("the probe did not finish within %s", opt.Timeout)
			return
		}
		if rerr != nil {
			o.err = fmt.Errorf("read the probe's result: %w", rerr)
			return
		}
		if err := json.Unmarshal(b, &o.res); err != nil {
			o.err = fmt.Errorf("the probe child gave no result (%v; %v)", werr, err)
			return
		}
		if o.res.Error != "" {
			o.err = errors.New(o.res.Error)
		}
	}()
	o := <-done
	res.Stderr = stderr.String()
	if o.err != nil {
		if s := strings.TrimSpace(res.Stderr); s != "" {
			return nil, fmt.Errorf("%w (child stderr: %s)", o.err, lastLine(s))
		}
		return nil, o.err
	}
	res.Probe = o.res.Probe
	res.Aspects = append(res.Aspects, t.hostAspects()...)
	res.Aspects = append(res.Aspects, o.res.Aspects...)
	res.Aspects = append(res.Aspects, t.credAspects(creds, o.res.Probe)...)
	return res, nil
}

// lastCap is the highest capability this kernel knows.
func lastCap() (uintptr, error) {
	b, err := readLimited("/proc/sys/kernel/cap_last_cap", 64)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 63 {
		return 0, fmt.Errorf("/proc/sys/kernel/cap_last_cap: %q", b)
	}
	return uintptr(n), nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// joinV1 moves the child (a process this package started) into each of
// the target's v1 hierarchies by writing its PID to cgroup.procs
// (kernel/cgroup/cgroup-v1.c); cgroup v1 has no way to start a process in
// a cgroup. The child waits for its request until this is done. A
// hierarchy that decides device access and cannot be joined stops the
// probe: its answer would be another cgroup's.
func (t *target) joinV1(pid int) error {
	for i := range t.cgroups {
		c := &t.cgroups[i]
		if c.V2 || c.Err != nil {
			if c.Err != nil && c.decidesDevices() {
				return fmt.Errorf("the container's %s cgroup: %w", c.Name(), c.Err)
			}
			continue
		}
		procs := filepath.Join(c.Dir, "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
			c.Err = fmt.Errorf("join %s: %w", procs, err)
			if c.decidesDevices() {
				return c.Err
			}
		}
	}
	return nil
}

func (t *target) hostAspects() []Aspect {
	var out []Aspect
	if t.ownPID {
		out = append(out, Aspect{Name: AspectPID, Reproduced: true, How: "forked from a thread that joined the container's PID namespace (setns CLONE_NEWPID)"})
	} else {
		out = append(out, Aspect{Name: AspectPID, Reproduced: true, How: "the container shares the host's PID namespace"})
	}
	if t.ownUser {
		out = append(out, Aspect{Name: AspectUser, Reproduced: true, Decisive: true,
			How:  "a new user namespace with the container's uid_map and gid_map (clone CLONE_NEWUSER)",
			Note: "a replica, not the container's own namespace: joining one (setns CLONE_NEWUSER) needs a single-threaded caller (kernel/user_namespace.c userns_install), which a Go process never is. Permission checks of files and devices depend on the ids and on which of them the namespace maps (capable_wrt_inode_uidgid), both the same in the replica; what differs is ownership of the container's other namespaces, which no open or ioctl consults"})
	} else {
		out = append(out, Aspect{Name: AspectUser, Reproduced: true, Decisive: true, How: "the container shares the host's user namespace"})
	}
	for _, c := range t.cgroups {
		a := Aspect{Name: AspectCgroup + " " + c.Name(), Reproduced: c.Err == nil, Decisive: c.decidesDevices()}
		switch {
		case c.Err != nil:
			a.Note = c.Err.Error()
			if c.decidesDevices() {
				a.Note += " (this hierarchy decides device access)"
			}
		case c.V2:
			a.How = "started in " + c.Dir + " (clone3 CLONE_INTO_CGROUP)"
		default:
			a.How = "moved into " + c.Dir + " (cgroup.procs) before its first step"
		}
		out = append(out, a)
	}
	out = append(out, Aspect{Name: AspectEnv, Reproduced: true, How: fmt.Sprintf("the %d variables of /proc/PID/environ (the init process's, as execve gave them), passed to the probe and its helper, never printed", len(t.env))})
	seccomp := Aspect{Name: AspectSeccomp, Reproduced: t.status.Seccomp <= 0, How: "none"}
	if t.status.Seccomp > 0 {
		seccomp.How = ""
		seccomp.Note = fmt.Sprintf("the container runs in seccomp mode %d; its filters cannot be read without stopping its process under ptrace (PTRACE_SECCOMP_GET_FILTER), so the probe ran without them: a syscall its filter refuses (openat, ioctl, mmap) would fail inside and not here (checkpoint 3 reads the spec's profile)", t.status.Seccomp)
	}
	out = append(out, seccomp)
	lsm := Aspect{Name: AspectLSM, Reproduced: t.lsm == "" || t.lsm == "unconfined", How: "none"}
	if !lsm.Reproduced {
		lsm.How = ""
		lsm.Note = fmt.Sprintf("the container's label %q was not taken: an AppArmor or SELinux denial (EACCES) inside would not show here", t.lsm)
	}
	out = append(out, lsm)
	return out
}

// credAspects compares what the child's thread read back from the kernel
// with what was asked.
func (t *target) credAspects(c Credentials, r *probe.Report) []Aspect {
	ids := Aspect{Name: AspectIDs, Decisive: true, How: fmt.Sprintf("setresuid %d, setresgid %d, setgroups %v on the probing thread", c.UID, c.GID, c.Groups)}
	caps := Aspect{Name: AspectCaps, Decisive: true, How: fmt.Sprintf("bounding set %016x, capset eff %016x prm %016x inh %016x, ambient %016x", c.Bnd, c.Eff, c.Prm, c.Inh, c.Amb)}
	nnp := Aspect{Name: AspectNNP, How: fmt.Sprintf("%v", c.NoNewPrivs)}
	if r == nil {
		return []Aspect{ids, caps, nnp}
	}
	p := r.Process
	ids.Reproduced = uint32(p.UID) == c.UID && uint32(p.GID) == c.GID
	if !ids.Reproduced {
		ids.Note = fmt.Sprintf("read back uid %d gid %d", p.UID, p.GID)
	}
	want := fmt.Sprintf("%016x", c.Eff)
	// Both bounding sets hold only the capabilities this kernel knows
	// (/proc/PID/status prints the kernel's mask; the read-back stops at
	// the first PR_CAPBSET_READ that fails).
	caps.Reproduced = p.CapEff == want && p.CapBnd == fmt.Sprintf("%016x", c.Bnd)
	if !caps.Reproduced {
		caps.Note = fmt.Sprintf("read back CapEff %s CapBnd %s", p.CapEff, p.CapBnd)
	}
	nnp.Reproduced = p.NoNewPrivs == c.NoNewPrivs
	return []Aspect{ids, caps, nnp}
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	q := p
	if len(q) > l.n {
		q = q[:l.n]
	}
	l.n -= len(q)
	l.w.Write(q)
	return len(p), nil
}
