package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/opencontainers/cgroups/devices/config"

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

// Spec says what to run under which device rules.
type Spec struct {
	Version Version // "" means Auto
	Default Default // "" means DefaultDeny
	// Rules are the --allow and --deny rules in flag order; RulesHelp
	// says how they are read (cgroup.DeviceRules).
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
	// StopGrace is how long the command has to exit after it was passed
	// the signal that stopped the sandbox (0: DefaultStopGrace).
	StopGrace time.Duration
}

// DefaultStopGrace is how long a command gets to exit after the sandbox
// passed it the signal that stopped it, before everything in the cgroup
// is killed. A handler that flushes its output and removes its files
// needs well under a second; 5 s leave room for a loaded host and still
// end a ^C promptly, within the 10 s docker stop gives and the 30 s of a
// pod's default termination grace period, which bound the whole of
// accel-doctor's run.
const DefaultStopGrace = 5 * time.Second

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
// failing or killed, ctx cancelled (the command is passed the signal that
// cancelled it and given spec.StopGrace to exit, then it and everything
// else in the cgroup is killed: stopOnCancel), and accel-doctor itself
// being killed, which a
// reaper process started before the cgroup handles. Stale sandbox cgroups
// whose owner is dead are removed first. The sandbox ends when the command
// exits: whatever it left running in the cgroup is killed. The result is
// returned, as far as it got, together with any error; a cleanup error is
// joined to it. Needs root (cgroup writes, BPF program load).
func Run(ctx context.Context, spec Spec) (res *Result, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sb, err := prepare(spec)
	if err != nil {
		return nil, err
	}
	res = sb.result()
	for _, e := range Sweep(sb.mounts) {
		res.Warnings = append(res.Warnings, "sweep of stale sandbox cgroups: "+e.Error())
	}
	var items []probeItem
	var pr *prober
	if len(spec.Command) == 0 {
		items = probeItems(spec.Nodes, sb.accesses)
	}
	if sb.version == V2 && len(items) > 0 {
		// Started before the cgroup exists, so that its start-up overlaps
		// the set-up.
		if pr, err = startProber(sb.self); err != nil {
			return nil, err
		}
		defer pr.abort()
	}
	// The reaper exists before the cgroup does, so there is no moment at
	// which a SIGKILL of this process could leave the cgroup behind.
	rp, err := startReaper(sb.self, sb.dir, sb.version == V2)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sb.remove(rp)) }()
	if err := sb.create(res); err != nil {
		return res, err
	}
	if len(spec.Command) > 0 {
		return res, sb.runCommand(ctx, res)
	}
	return res, runProbes(ctx, res, pr, sb.dir, sb.version, items)
}

// session is one run of the sandbox, from its plan to its removal.
type session struct {
	spec     Spec
	version  Version
	dir      string // the transient cgroup: <top of the hierarchy>/<NamePrefix>...
	self     string // this binary, re-run for the helpers (trampoline.go)
	cmdPath  string // spec.Command[0] resolved in PATH
	accesses []probe.Access
	mounts   *cgroup.Mounts
	root     *hostfs.Root
	rules    *cgroup.DeviceRules
	warnings []string
	v1Writes []V1Write         // v1 only
	program  *ebpf.ProgramSpec // v2 only
	link     link.Link         // v2: holds the attached program
}

// prepare checks spec and plans the sandbox; it changes nothing.
func prepare(spec Spec) (*session, error) {
	sb := &session{spec: spec}
	if err := sb.checkSpec(); err != nil {
		return nil, err
	}
	var err error
	if sb.rules, sb.warnings, err = policy(sb.spec.Default, spec.Rules); err != nil {
		return nil, err
	}
	if sb.root, err = liveRoot(); err != nil {
		return nil, err
	}
	if sb.mounts, err = cgroup.ReadMounts(sb.root); err != nil {
		return nil, err
	}
	version, parent, err := pickVersion(spec.Version, sb.mounts)
	if err != nil {
		return nil, err
	}
	sb.version = version
	if version == V1 {
		sb.v1Writes = v1Plan(sb.spec.Default, spec.Rules)
	} else if sb.program, err = DeviceProgramSpec(sb.rules); err != nil {
		return nil, err
	}
	if sb.self, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("find own binary for the sandbox trampoline: %w", err)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	sb.dir = filepath.Join(parent, fmt.Sprintf("%s%d-%s", NamePrefix, os.Getpid(), hex.EncodeToString(rnd[:])))
	return sb, nil
}

// checkSpec fills spec's defaults and rejects what cannot run: a bad
// default, access or command. The rules are checked by policy.
func (sb *session) checkSpec() error {
	if sb.spec.Default == "" {
		sb.spec.Default = DefaultDeny
	}
	if _, err := ParseDefault(string(sb.spec.Default)); err != nil {
		return err
	}
	sb.accesses = sb.spec.Accesses
	if sb.accesses == nil {
		sb.accesses = []probe.Access{probe.Read, probe.Write, probe.Mknod}
	}
	for _, a := range sb.accesses {
		if _, err := probe.ParseAccess(string(a)); err != nil {
			return err
		}
	}
	if len(sb.spec.Command) > 0 {
		var err error
		if sb.cmdPath, err = exec.LookPath(sb.spec.Command[0]); err != nil {
			return err
		}
	}
	return nil
}

// result is what is known before anything is created.
func (sb *session) result() *Result {
	res := &Result{Version: sb.version, Cgroup: sb.dir, Default: sb.spec.Default, Rules: sb.spec.Rules,
		V1Writes: sb.v1Writes, Warnings: slices.Clone(sb.warnings)}
	for _, r := range sb.spec.Rules {
		res.RuleLines = append(res.RuleLines, RuleString(r))
	}
	return res
}

// create makes the cgroup and gives it the rules.
func (sb *session) create(res *Result) error {
	if err := os.Mkdir(sb.dir, 0o755); err != nil {
		return fmt.Errorf("create sandbox cgroup: %w", err)
	}
	if sb.version == V1 {
		return sb.writeV1(res)
	}
	return sb.attachV2(res)
}

// writeV1 writes the plan to the v1 devices files and reads back the list.
func (sb *session) writeV1(res *Result) error {
	for _, w := range sb.v1Writes {
		p := filepath.Join(sb.dir, w.File)
		if err := os.WriteFile(p, []byte(w.Line), 0); err != nil {
			return fmt.Errorf("write %q to %s: %w", w.Line, p, err)
		}
	}
	b, err := sb.root.ReadFile(filepath.Join(sb.dir, "devices.list"))
	if err != nil {
		return err
	}
	res.V1List = lines(b)
	res.Warnings = append(res.Warnings, v1ListWarnings(sb.rules, res.V1List)...)
	return nil
}

// v1ListWarnings compares devices.list, read back, with the policy the
// rules describe.
func v1ListWarnings(s *cgroup.DeviceRules, list []string) []string {
	allowAll := []string{"a *:* rwm"}
	switch {
	case s.DefaultAllow && !slices.Equal(list, allowAll):
		return []string{fmt.Sprintf("cgroup v1: devices.list reads %q, but a default-allow cgroup shows %q", list, allowAll)}
	case s.DefaultAllow && len(s.Exceptions) > 0:
		return []string{`cgroup v1: devices.list reads "a *:* rwm" in a default-allow cgroup and does not show the deny rules (security/device_cgroup.c devcgroup_seq_show); only a probe shows their effect`}
	case s.DefaultAllow:
		return nil
	}
	var want []string
	for _, x := range s.Exceptions {
		want = append(want, x.String())
	}
	if slices.Equal(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(list))) {
		return nil
	}
	return []string{fmt.Sprintf("cgroup v1: devices.list reads %q, but the rules describe %q", list, want)}
}

// attachV2 loads the generated program and attaches it to the cgroup.
func (sb *session) attachV2(res *Result) error {
	prog, err := ebpf.NewProgram(sb.program)
	if err != nil {
		return fmt.Errorf("load device program: %w", err)
	}
	// The link holds the program once attached.
	defer prog.Close()
	sb.link, err = link.AttachCgroup(link.CgroupOptions{Path: sb.dir, Attach: ebpf.AttachCGroupDevice, Program: prog})
	if err != nil {
		return fmt.Errorf("attach device program to %s: %w", sb.dir, err)
	}
	res.Program = &Program{Name: ProgramName, Instructions: len(sb.program.Instructions)}
	if info, err := prog.Info(); err == nil {
		id, _ := info.ID()
		res.Program.ID, res.Program.Tag = uint32(id), info.Tag
	}
	return nil
}

// remove detaches the program, removes the cgroup and lets the reaper go
// (or, when the removal failed, leaves it to the reaper).
func (sb *session) remove(rp *reaper) error {
	if sb.link != nil {
		// Closing the link detaches the program (a bpf_link lives as long
		// as its last fd); removing the cgroup would detach it too.
		sb.link.Close()
	}
	err := destroy(sb.dir, sb.version == V2)
	rp.finish(err == nil)
	if err != nil {
		return fmt.Errorf("sandbox cleanup (the reaper retries): %w", err)
	}
	return nil
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
