package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/opencontainers/cgroups/devices/config"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/probe"
)

// The sandbox is the one part of accel-doctor that writes to the host: it
// creates a cgroup, writes device rules or attaches a BPF program, runs a
// process in it and removes it all again. It acts on the running kernel,
// so it reads through a live hostfs root and writes cgroup files with os
// directly (hostfs is read-only by design).

// Version selects the cgroup mechanism the sandbox uses.
type Version string

const (
	// Auto uses v1 when the v1 devices controller is mounted (a v1
	// or hybrid host, where container runtimes use it too), else v2.
	Auto Version = "auto"
	// V1 writes devices.allow/devices.deny in a v1 devices cgroup.
	V1 Version = "v1"
	// V2 attaches a generated BPF_PROG_TYPE_CGROUP_DEVICE program to
	// a cgroup2 directory.
	V2 Version = "v2"
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

// Spec says what to run under which device rules.
type Spec struct {
	Version Version // "" means Auto
	Default Default // "" means DefaultDeny
	// Rules are the --allow and --deny rules in flag order; see
	// DeviceInstructions for how they are read.
	Rules []config.Rule
	// Command runs inside the cgroup when not empty; Command[0] is looked up
	// in PATH.
	Command []string
	// Nodes are probed inside the cgroup (and outside it, as the baseline)
	// when Command is empty.
	Nodes []string
	// Accesses are probed on each node; nil means r, w and m.
	Accesses []probe.Access
	// Stdin, Stdout and Stderr are the command's; nil means /dev/null.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Program identifies the v2 program the sandbox attached.
type Program struct {
	ID           uint32 `json:"id"`
	Tag          string `json:"tag"`
	Name         string `json:"name"`
	Instructions int    `json:"instructions"`
}

// Probe is one node and access, probed outside and inside.
type Probe struct {
	Node     string        `json:"node"`
	Access   probe.Access  `json:"access"`
	Baseline probe.Result  `json:"baseline"`
	InCgroup probe.Result  `json:"in_cgroup"`
	Verdict  probe.Verdict `json:"verdict"`
}

// Result is what the sandbox applied and observed.
type Result struct {
	Version Version `json:"version"`
	// Cgroup is the transient cgroup's directory; it no longer exists when
	// Run returns without a cleanup error.
	Cgroup  string        `json:"cgroup"`
	Default Default       `json:"default"`
	Rules   []config.Rule `json:"-"`
	// RuleLines are Rules as the flags read: "allow c 195:* rw", "deny a".
	RuleLines []string `json:"rules"`
	// V1Writes are the lines written, in order, and V1List is devices.list
	// read back after them. In a default-allow cgroup the list shows
	// "a *:* rwm" and hides the deny lines (security/device_cgroup.c
	// devcgroup_seq_show): only a probe shows them.
	V1Writes []V1Write `json:"v1_writes,omitempty"`
	V1List   []string  `json:"v1_list,omitempty"`
	// Program is the attached v2 program.
	Program  *Program `json:"program,omitempty"`
	Warnings []string `json:"warnings,omitempty"`

	// Ran is true when Command was started. ExitCode is its exit status, or
	// -1 when a signal ended it (Signal names it).
	Ran      bool   `json:"ran"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Probes are filled when Command is empty.
	Probes []Probe `json:"probes,omitempty"`
}

// liveRoot reads the running host.
var liveRoot = sync.OnceValues(func() (*hostfs.Root, error) { return hostfs.New("/") })

// Run creates a transient cgroup holding exactly spec's device rules,
// runs spec.Command in it (or probes spec.Nodes from inside it), and
// removes the cgroup and its program on every exit path: the command
// failing or killed, ctx cancelled (the command and everything else in the
// cgroup is killed first), and accel-doctor itself being killed, which a
// reaper process started before the cgroup handles. Stale sandbox cgroups
// whose owner is dead are removed first. The sandbox ends when the command
// exits: whatever it left running in the cgroup is killed. The result is
// returned, as far as it got, together with any error; a cleanup error is
// joined to it. Needs root (cgroup writes, BPF program load).
func Run(ctx context.Context, spec Spec) (res *Result, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec.Default == "" {
		spec.Default = DefaultDeny
	}
	if _, err := ParseDefault(string(spec.Default)); err != nil {
		return nil, err
	}
	if len(spec.Rules) > maxRules {
		return nil, fmt.Errorf("%d rules: at most %d", len(spec.Rules), maxRules)
	}
	for _, r := range spec.Rules {
		if err := validateRule(r); err != nil {
			return nil, err
		}
	}
	accs := spec.Accesses
	if accs == nil {
		accs = []probe.Access{probe.Read, probe.Write, probe.Mknod}
	}
	for _, a := range accs {
		if _, err := probe.ParseAccess(string(a)); err != nil {
			return nil, err
		}
	}
	var cmdPath string
	if len(spec.Command) > 0 {
		if cmdPath, err = exec.LookPath(spec.Command[0]); err != nil {
			return nil, err
		}
	}

	root, err := liveRoot()
	if err != nil {
		return nil, err
	}
	mounts, err := cgroup.ReadMounts(root)
	if err != nil {
		return nil, err
	}
	version, parent, err := pickVersion(spec.Version, mounts)
	if err != nil {
		return nil, err
	}
	res = &Result{Version: version, Default: spec.Default, Rules: spec.Rules}
	for _, r := range spec.Rules {
		res.RuleLines = append(res.RuleLines, RuleString(r))
	}

	var progSpec *ebpf.ProgramSpec
	if version == V1 {
		res.V1Writes, res.Warnings, err = v1Plan(spec.Default, spec.Rules)
	} else {
		progSpec, err = DeviceProgramSpec(spec.Default == DefaultAllow, spec.Rules)
	}
	if err != nil {
		return nil, err
	}

	for _, e := range Sweep(mounts) {
		res.Warnings = append(res.Warnings, "sweep of stale sandbox cgroups: "+e.Error())
	}

	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary for the sandbox trampoline: %w", err)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-%s", NamePrefix, os.Getpid(), hex.EncodeToString(rnd[:])))
	res.Cgroup = dir

	var items []probeItem
	var prober *prober
	if len(spec.Command) == 0 {
		items = probeItems(spec.Nodes, accs)
		if version == V2 && len(items) > 0 {
			if prober, err = startProber(self); err != nil {
				return nil, err
			}
			defer prober.abort()
		}
	}
	// The reaper exists before the cgroup does, so there is no moment at
	// which a SIGKILL of this process could leave the cgroup behind.
	rp, err := startReaper(self, dir, version == V2)
	if err != nil {
		return nil, err
	}
	var lnk link.Link
	defer func() {
		if lnk != nil {
			// Closing the link detaches the program (a bpf_link lives as long
			// as its last fd); removing the cgroup would detach it too.
			lnk.Close()
		}
		cerr := destroy(dir, version == V2)
		rp.finish(cerr == nil)
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("sandbox cleanup (the reaper retries): %w", cerr))
		}
	}()

	if err := os.Mkdir(dir, 0o755); err != nil {
		return res, fmt.Errorf("create sandbox cgroup: %w", err)
	}
	if version == V1 {
		for _, w := range res.V1Writes {
			p := filepath.Join(dir, w.File)
			if err := os.WriteFile(p, []byte(w.Line), 0); err != nil {
				return res, fmt.Errorf("write %q to %s: %w", w.Line, p, err)
			}
		}
		b, err := root.ReadFile(filepath.Join(dir, "devices.list"))
		if err != nil {
			return res, err
		}
		res.V1List = lines(b)
		if spec.Default == DefaultAllow && len(res.V1List) == 1 && res.V1List[0] == "a *:* rwm" &&
			slices.ContainsFunc(spec.Rules, func(r config.Rule) bool { return !r.Allow }) {
			res.Warnings = append(res.Warnings, `cgroup v1: devices.list reads "a *:* rwm" in a default-allow cgroup and does not show the deny rules (security/device_cgroup.c devcgroup_seq_show); only a probe shows their effect`)
		}
	} else {
		prog, err := ebpf.NewProgram(progSpec)
		if err != nil {
			return res, fmt.Errorf("load device program: %w", err)
		}
		lnk, err = link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: ebpf.AttachCGroupDevice, Program: prog})
		if err != nil {
			prog.Close()
			return res, fmt.Errorf("attach device program to %s: %w", dir, err)
		}
		res.Program = &Program{Name: ProgramName, Instructions: len(progSpec.Instructions)}
		if info, err := prog.Info(); err == nil {
			id, _ := info.ID()
			res.Program.ID, res.Program.Tag = uint32(id), info.Tag
		}
		// The link holds the program now.
		prog.Close()
	}

	if len(spec.Command) > 0 {
		return res, runCommand(ctx, res, self, dir, version, cmdPath, spec)
	}
	err = runProbes(ctx, res, prober, dir, version, items)
	return res, err
}

func lines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// pickVersion resolves the version and the directory the sandbox
// cgroup is made in: the top of the hierarchy as this process's mount
// shows it.
func pickVersion(v Version, m *cgroup.Mounts) (Version, string, error) {
	switch v {
	case "", Auto:
		if m.DevicesV1 != "" {
			return V1, m.DevicesV1, nil
		}
		if m.Unified != "" {
			return V2, m.Unified, nil
		}
		return "", "", errors.New("neither a cgroup v1 devices hierarchy nor cgroup2 is mounted")
	case V1:
		if m.DevicesV1 == "" {
			return "", "", errors.New("the cgroup v1 devices controller is not mounted")
		}
		return V1, m.DevicesV1, nil
	case V2:
		if m.Unified == "" {
			return "", "", errors.New("no cgroup2 hierarchy is mounted")
		}
		return V2, m.Unified, nil
	}
	return "", "", fmt.Errorf("sandbox version %q: want auto, v1 or v2", v)
}

// killOnCancel kills everything in dir, and proc itself, when ctx
// is done before stop is called. proc is killed by pid as well because a
// v1 trampoline may not have joined the cgroup yet: killed by the cgroup
// alone it could join a moment later and start the command after all.
func killOnCancel(ctx context.Context, dir string, v2 bool, proc *os.Process) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			proc.Kill()
			killAll(dir, v2)
		case <-done:
		}
	}()
	return func() { close(done); wg.Wait() }
}

func runCommand(ctx context.Context, res *Result, self, dir string, v Version, cmdPath string, spec Spec) error {
	var cmd *exec.Cmd
	var status *os.File // read end of the v1 trampoline's status pipe
	env := cleanEnv(os.Environ())
	if v == V2 {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", dir, err)
		}
		defer unix.Close(fd)
		cmd = &exec.Cmd{Path: cmdPath, Args: spec.Command, Env: env}
		// clone3 CLONE_INTO_CGROUP: the child is in the cgroup from its
		// first instruction (kernel/fork.c cgroup_can_fork).
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer r.Close()
		status = r
		cmd = &exec.Cmd{Path: self, Args: append([]string{self, cmdPath}, spec.Command[1:]...),
			Env: append(env, roleEnv+"="+roleExec, procsEnv+"="+filepath.Join(dir, "cgroup.procs"),
				arg0Env+"="+spec.Command[0]),
			ExtraFiles: []*os.File{w}}
		defer w.Close()
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s in the sandbox: %w", spec.Command[0], err)
	}
	stop := killOnCancel(ctx, dir, v == V2, cmd.Process)
	defer stop()
	if status != nil {
		cmd.ExtraFiles[0].Close()
		// EOF with nothing written: the trampoline joined the cgroup and
		// exec'd the command (the pipe is close-on-exec there).
		msg, _ := io.ReadAll(status)
		if len(msg) > 0 {
			cmd.Wait()
			return fmt.Errorf("sandbox trampoline: %s", msg)
		}
	}
	res.Ran = true
	werr := cmd.Wait()
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = unix.SignalName(ws.Signal())
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sandbox interrupted: %w", context.Cause(ctx))
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return werr
	}
	return nil
}

// probeRequest is what the probe trampoline reads on stdin.
type probeRequest struct {
	Probes []probeItem `json:"probes"`
}

type probeItem struct {
	Path   string       `json:"path"`
	Access probe.Access `json:"access"`
	// For mknod: the node's type and numbers as found outside.
	Type  byte   `json:"type,omitempty"`
	Major uint32 `json:"major,omitempty"`
	Minor uint32 `json:"minor,omitempty"`
}

// probeReply is what it writes on stdout.
type probeReply struct {
	ProcCgroup string         `json:"proc_cgroup"`
	Results    []probe.Result `json:"results"`
	Error      string         `json:"error,omitempty"`
}

func doProbe(it probeItem) probe.Result {
	if it.Access != probe.Mknod {
		return probe.OpenNode(it.Path, it.Access)
	}
	if it.Type == 0 {
		r := probe.Result{Path: it.Path, Access: probe.Mknod, Errno: unix.ENOENT, ErrnoName: "ENOENT",
			Class: probe.NotPresent, Message: "no device node to take a type and number from"}
		return r
	}
	r := probe.MknodNode("", it.Type, it.Major, it.Minor)
	return r
}

// probeItems lists the probes to make: every access on every node.
// For mknod the node's type and numbers are taken from the node itself.
func probeItems(nodes []string, accs []probe.Access) []probeItem {
	var items []probeItem
	for _, n := range nodes {
		for _, a := range accs {
			it := probeItem{Path: n, Access: a}
			if a == probe.Mknod {
				var st unix.Stat_t
				if err := unix.Stat(n, &st); err == nil {
					switch st.Mode & unix.S_IFMT {
					case unix.S_IFCHR:
						it.Type = 'c'
					case unix.S_IFBLK:
						it.Type = 'b'
					}
					it.Major, it.Minor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
				}
			}
			items = append(items, it)
		}
	}
	return items
}

// runProbes probes every item inside the cgroup and, at the same
// time, outside it (the baseline), and fills res.Probes.
//
// On v1 the probes run in this process, on one OS thread that moves itself
// into the cgroup through its "tasks" file (cgroup v1 places threads, not
// processes: Documentation/admin-guide/cgroup-v1/cgroups.rst) and is never
// handed back to the Go scheduler: the runtime ends a thread whose
// goroutine exits while locked to it. No process is started, which is most
// of the cost of a probe.
//
// cgroup2 places only whole processes (outside threaded subtrees, which
// would change the type of the cgroup accel-doctor lives in), so on v2 the
// probe trampoline, started early, is moved into the cgroup and answers in
// JSON on a pipe.
func runProbes(ctx context.Context, res *Result, prober *prober, dir string, v Version, items []probeItem) error {
	if len(items) == 0 {
		return nil
	}
	inside := make(chan probeReply, 1)
	if v == V1 {
		go probeOnThread(inside, items, filepath.Join(dir, "tasks"))
	} else {
		go func() { inside <- prober.probe(ctx, dir, items) }()
	}
	base := make([]probe.Result, len(items))
	for i, it := range items {
		base[i] = doProbe(it)
	}
	rep := <-inside
	if ctx.Err() != nil {
		return fmt.Errorf("sandbox interrupted: %w", context.Cause(ctx))
	}
	if rep.Error != "" {
		return fmt.Errorf("probe in the sandbox: %s", rep.Error)
	}
	// Refuse results from a thread that is not in the sandbox.
	if !strings.Contains(rep.ProcCgroup, "/"+filepath.Base(dir)+"\n") {
		return fmt.Errorf("probe thread was not in the sandbox cgroup (/proc/thread-self/cgroup: %q)", rep.ProcCgroup)
	}
	if len(rep.Results) != len(items) {
		return fmt.Errorf("probe in the sandbox: %d results for %d probes", len(rep.Results), len(items))
	}
	for i, it := range items {
		res.Probes = append(res.Probes, Probe{Node: it.Path, Access: it.Access,
			Baseline: base[i], InCgroup: rep.Results[i], Verdict: probe.Compare(base[i], rep.Results[i])})
	}
	return nil
}

// probeOnThread locks its goroutine to a thread that is not the
// process's main thread, probes from it, and lets the thread die with the
// goroutine. The main thread cannot exit: the Go runtime parks it instead
// (runtime/proc.go mexit), which would leave it in the sandbox cgroup for
// good. While this goroutine holds the main thread locked, a goroutine it
// starts runs on another thread.
func probeOnThread(out chan<- probeReply, items []probeItem, tasks string) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			probeOnThread(out, items, tasks)
		}()
		<-done
		runtime.UnlockOSThread() // the main thread never joined the cgroup
		return
	}
	// Never unlocked: the thread ends with this goroutine.
	out <- probeHere(items, tasks)
}

// probeHere runs the probes on the calling thread, which the caller
// has locked, after moving it into the v1 cgroup whose tasks file is given
// ("" when the thread is already inside).
func probeHere(items []probeItem, tasks string) probeReply {
	var rep probeReply
	if tasks != "" {
		if err := os.WriteFile(tasks, []byte("0"), 0); err != nil {
			rep.Error = fmt.Sprintf("join %s: %v", tasks, err)
			return rep
		}
	}
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.ProcCgroup = string(b)
	for _, it := range items {
		rep.Results = append(rep.Results, doProbe(it))
	}
	return rep
}

// prober is the probe trampoline for cgroup2. It is started before
// the cgroup exists, so that its start-up overlaps the set-up, waits for
// its request on stdin, and is moved into the cgroup by pid just before
// the request is sent.
type prober struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   bytes.Buffer
}

func startProber(self string) (*prober, error) {
	p := &prober{}
	p.cmd = &exec.Cmd{Path: self, Args: []string{self},
		Env:    append(cleanEnv(os.Environ()), roleEnv+"="+roleProbe),
		Stdout: &p.out, Stderr: os.Stderr}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the probe: %w", err)
	}
	return p, nil
}

// abort ends a prober that was not used: on EOF it exits without probing.
func (p *prober) abort() {
	if p != nil && p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
		p.cmd.Wait()
	}
}

// probe moves the prober into dir, sends it the probes and reads its reply.
func (p *prober) probe(ctx context.Context, dir string, items []probeItem) probeReply {
	fail := func(err error) probeReply { p.abort(); return probeReply{Error: err.Error()} }
	in, err := json.Marshal(probeRequest{Probes: items})
	if err != nil {
		return fail(err)
	}
	procs := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(p.cmd.Process.Pid)), 0); err != nil {
		return fail(fmt.Errorf("move the probe into %s: %w", procs, err))
	}
	stop := killOnCancel(ctx, dir, true, p.cmd.Process)
	_, werr := p.stdin.Write(in)
	p.stdin.Close()
	p.stdin = nil
	if err := p.cmd.Wait(); werr == nil {
		werr = err
	}
	stop()
	var rep probeReply
	if err := json.Unmarshal(p.out.Bytes(), &rep); err != nil {
		return probeReply{Error: fmt.Sprintf("bad reply (%v): %v", werr, err)}
	}
	if rep.Error == "" && werr != nil {
		rep.Error = werr.Error()
	}
	return rep
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
