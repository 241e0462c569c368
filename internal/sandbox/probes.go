package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/probe"
)

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
				it.Type, it.Major, it.Minor = nodeNumbers(n)
			}
			items = append(items, it)
		}
	}
	return items
}

// nodeNumbers is the type ('c', 'b', or 0 when path is no device node)
// and numbers of a node.
func nodeNumbers(path string) (typ byte, major, minor uint32) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0, 0, 0
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = 'c'
	case unix.S_IFBLK:
		typ = 'b'
	}
	return typ, unix.Major(st.Rdev), unix.Minor(st.Rdev)
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
