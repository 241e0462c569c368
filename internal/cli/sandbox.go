package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/opencontainers/cgroups/devices/config"
	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/sandbox"
)

// ruleList collects --allow and --deny into one slice, so that the order
// the user gave them in survives (pflag calls Set in argument order).
type ruleList struct {
	rules *[]config.Rule
	allow bool
}

func (r ruleList) String() string { return "" }
func (r ruleList) Type() string   { return "RULE" }
func (r ruleList) Set(s string) error {
	rule, err := cgroup.ParseRuleFlag(s, r.allow)
	if err != nil {
		return err
	}
	*r.rules = append(*r.rules, rule)
	return nil
}

func newSandboxCmd(g *globals) *cobra.Command {
	var (
		rules    []config.Rule
		v1, v2   bool
		def      string
		devices  []string
		accesses []string
	)
	cmd := &cobra.Command{
		Use:   "sandbox [--v1|--v2] [--allow RULE]... [--deny RULE]... [--default allow|deny] [--device-node NODE]... [-- CMD [ARGS]]",
		Short: "Run a command (or probe nodes) in a transient cgroup with exactly these device rules. WRITES to the host",
		Long: `sandbox WRITES TO THE HOST: it creates a transient cgroup named
accel-doctor-sandbox-<pid>-<random> (v1: in the devices controller; v2: a
cgroup2 directory with a BPF device program it generates and attaches),
runs CMD inside it, and removes the cgroup and its program on every exit
path: CMD failing, CMD killed, SIGINT/SIGTERM, and accel-doctor itself killed
(a reaper process started first cleans up). It touches no other cgroup,
except to remove stale sandboxes whose owner is dead. It needs root.

With no CMD it probes, from inside the cgroup and from outside it as a
baseline, every accelerator node of this host and each --device-node node:
open() for r and w, and mknod for m, and classifies the errno (EPERM: the
cgroup denies it; EACCES: file mode, nodev or LSM; ENXIO/ENODEV: allowed by
the cgroup, no driver behind the major; ENOENT: not present). A failure the
baseline shares is host-wide policy, not the cgroup's.

With CMD, the exit status is CMD's (128+N when signal N killed it).

SIGINT or SIGTERM N: the signal is passed on to CMD, which gets ` + sandbox.DefaultStopGrace.String() + ` to exit
(time for a handler to flush and remove its files; short enough that ^C
still ends the run promptly); then everything in the cgroup is killed, the
cgroup removed, and accel-doctor exits 128+N (130, 143). A ^C from the
terminal reached CMD already (it runs in accel-doctor's process group), so
it is not sent twice. A second signal ends accel-doctor at once: its reaper
kills CMD and removes the cgroup.

` + sandbox.RulesHelp,
		RunE: func(cmd *cobra.Command, args []string) error {
			// A signal cancels the context; sandbox.Run passes it on to the
			// command, kills what is left in the cgroup after the grace
			// period and removes it; the run then exits 128+N.
			takeCancel()
			if v1 && v2 {
				return usageErr("choose one of --v1 and --v2")
			}
			version := sandbox.Auto
			switch {
			case v1:
				version = sandbox.V1
			case v2:
				version = sandbox.V2
			}
			d, err := sandbox.ParseDefault(def)
			if err != nil {
				return usageErr("%v", err)
			}
			var accs []probe.Access
			for _, a := range accesses {
				pa, err := probe.ParseAccess(a)
				if err != nil {
					return usageErr("%v", err)
				}
				accs = append(accs, pa)
			}
			spec := sandbox.Spec{Version: version, Default: d, Rules: rules, Command: args, Accesses: accs,
				Stdin: os.Stdin, Stdout: g.stdout, Stderr: g.stderr}
			if len(args) == 0 {
				spec.Nodes = append(accelNodes(g), devices...)
				if len(spec.Nodes) == 0 {
					return usageErr("no accelerator node on this host and no --device-node: nothing to probe (name nodes with --device-node, or give a command after --)")
				}
			}
			res, err := sandbox.Run(cmd.Context(), spec)
			if err != nil && errors.Is(err, fs.ErrPermission) {
				err = fmt.Errorf("%w (the sandbox creates cgroups and, on v2, loads a BPF program: run it as root)", err)
			}
			// Report what was applied and observed; an error before the
			// cgroup held anything has nothing to show.
			if res != nil && (err == nil || res.Ran || len(res.Probes) > 0) {
				if rerr := renderSandbox(g, res); rerr != nil && err == nil {
					err = rerr
				}
			}
			if err != nil {
				return err
			}
			switch {
			case res.Ran && res.ExitCode >= 0 && res.ExitCode != 0:
				return &exitError{code: res.ExitCode, err: fmt.Errorf("command exited %d", res.ExitCode)}
			case res.Ran && res.ExitCode < 0:
				return &exitError{code: 128 + signalNumber(res.Signal), err: fmt.Errorf("command killed by %s", res.Signal)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(ruleList{&rules, true}, "allow", "allow RULE (repeatable; order matters)")
	f.Var(ruleList{&rules, false}, "deny", "deny RULE (repeatable; order matters)")
	f.BoolVar(&v1, "v1", false, "use the cgroup v1 devices controller")
	f.BoolVar(&v2, "v2", false, "use a cgroup2 BPF device program")
	f.StringVar(&def, "default", "deny", "what a device no rule matches gets: allow or deny")
	Flag(f, "device-node", ": probe it when no command is given").StringArray(&devices, nil)
	Alias(f, "device", "", "device-node", "--device is a PCI function in check and iommu")
	f.StringArrayVar(&accesses, "access", nil, "accesses to probe: r, w, rw, m (repeatable; default r, w, m)")
	g.addOutputFlag(cmd)
	g.refuseRoot(cmd, "it creates its cgroups on this host and probes this host's nodes")
	return cmd
}

// accelNodes are the accelerator nodes of the live host that exist.
func accelNodes(g *globals) []string {
	root, err := hostfs.New("/")
	if err != nil {
		return nil
	}
	env := diagnose.NewEnv(root, diagnose.Options{})
	var out []string
	for _, n := range env.ExpectedNodes() {
		if env.NodeState(n.Path).Exists {
			out = append(out, n.Path)
		}
	}
	return out
}

func renderSandbox(g *globals, res *sandbox.Result) error {
	w := g.stderr // with a command, its output owns stdout (JSON keeps it)
	if !res.Ran || g.output == "json" {
		w = g.stdout
	}
	return g.renderTableTo(w, sandboxTable(res), res)
}

// sandboxTable is what was applied (rules, writes, the program) above the
// probe table, and how the command ended below it.
func sandboxTable(res *sandbox.Result) *report.Table {
	t := &report.Table{Title: []string{fmt.Sprintf("sandbox: cgroup %s %s (removed), default %s", res.Version, res.Cgroup, res.Default)}}
	for _, r := range res.Rules {
		t.Title = append(t.Title, "  rule: "+sandbox.RuleString(r))
	}
	for _, l := range res.V1Writes {
		t.Title = append(t.Title, fmt.Sprintf("  wrote %s: %s", l.File, l.Line))
	}
	if len(res.V1List) > 0 {
		t.Title = append(t.Title, "  devices.list read back: "+strings.Join(res.V1List, "; "))
	}
	if p := res.Program; p != nil {
		t.Title = append(t.Title, fmt.Sprintf("  program: id %d tag %s name %s, %d instructions", p.ID, p.Tag, p.Name, p.Instructions))
	}
	for _, warn := range res.Warnings {
		t.Title = append(t.Title, "  warning: "+warn)
	}
	if len(res.Probes) > 0 {
		t.Header = []string{"NODE", "ACCESS", "OUTSIDE", "INSIDE", "CGROUP", "WHY"}
		for _, p := range res.Probes {
			t.Rows = append(t.Rows, []string{p.Node, string(p.Access), probeWord(p.Baseline), probeWord(p.InCgroup), string(p.Verdict.Decision), p.Verdict.Reason})
		}
	}
	switch {
	case res.Ran && res.ExitCode >= 0:
		t.Notes = append(t.Notes, fmt.Sprintf("command exited %d", res.ExitCode))
	case res.Ran:
		t.Notes = append(t.Notes, "command killed by "+res.Signal)
	}
	return t
}

func probeWord(r probe.Result) string {
	if r.Errno == 0 {
		return "ok"
	}
	return r.ErrnoName
}

func signalNumber(name string) int {
	for i := 1; i < 65; i++ {
		if strings.EqualFold(unixSignalName(i), name) {
			return i
		}
	}
	return 0
}

func unixSignalName(i int) string { return unix.SignalName(syscall.Signal(i)) }
