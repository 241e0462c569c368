package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/helper"
	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/trim"
)

// The commands that speak to the Kubernetes API, or read its objects,
// link client-go, k8s.io/api and the DRA libraries: about 30 MB of code
// whose package initialisation every start of a binary pays (page faults
// over the whole image as ~1,500 inits run). They live in a second
// binary, accel-doctor-kube (cmd/accel-doctor-kube: this CLI plus
// internal/kubecli's Extension). The commands that speak the kubelet's
// gRPC APIs (the device plugin, its mock and tester, and layer 6's calls
// on the kubelet's sockets) link gRPC, protobuf and Prometheus' client:
// about 1.5 ms and 4 MiB on every start (internal/kubeletrpc's doc). They
// live in a third, accel-doctor-kubelet (internal/kubeletcli's Extension),
// which accel-doctor-kube includes. So accel-doctor, the node diagnosis,
// starts in a few milliseconds. accel-doctor runs the other two for their
// commands, found beside its own executable (never on PATH: a root tool
// runs only what root could have put there, internal/helper): the user types
// `accel-doctor cluster` or `accel-doctor plugin serve` either way.
const (
	KubeBinary    = "accel-doctor-kube"
	KubeletBinary = "accel-doctor-kubelet"
)

// KubeletCommands are the commands accel-doctor-kubelet adds, with their
// short help, which accel-doctor lists and hands over.
var KubeletCommands = []struct{ Name, Short string }{
	{"plugin", "Kubernetes device plugins: a generic plugin (serve), a mock with planted failures (mock), a kubelet-side tester (test) (in accel-doctor-kubelet)"},
}

// KubeCommands are the commands accel-doctor-kube adds, with their short
// help, which accel-doctor lists and hands over.
var KubeCommands = []struct{ Name, Short string }{
	{"lint", "Check Kubernetes manifests for accelerator mistakes, offline (in accel-doctor-kube)"},
	{"cluster", "The fleet through the API server: capacity, advertising, plugin pods, Pending pods (in accel-doctor-kube)"},
	{"agent", "DaemonSet mode: periodic check, node condition, metrics (WRITES its node's status; in accel-doctor-kube)"},
	{"claim", "Why a DRA ResourceClaim is not allocated (in accel-doctor-kube)"},
	{"dra", "DRA across the fleet: slices, drivers, pending claims (in accel-doctor-kube)"},
}

// Extension is what accel-doctor-kubelet or accel-doctor-kube adds to
// this CLI.
type Extension struct {
	// Binary is the binary it makes: KubeletBinary or KubeBinary.
	Binary string
	// KubeletRPC makes layer 6's calls in this process (grpccall).
	KubeletRPC kubeletrpc.Caller
	// Commands are its commands (named as in KubeCommands).
	Commands func(g *Globals) []*cobra.Command
	// DRA is plugin mock --dra and plugin test --dra.
	DRA *DRAPlugin
}

// DRAPlugin is how the plugin command reaches the DRA mock and tester:
// each Add adds the DRA flags (--dra among them) to the command and
// returns whether --dra was given and what runs it, with the values of
// the flags the command's two sides share.
type DRAPlugin struct {
	MockHelp, TestHelp string
	Modes              []string
	AddMockFlags       func(cmd *cobra.Command) (given func() bool, run func(ctx context.Context, g *Globals, m MockFlags) error)
	AddTestFlags       func(cmd *cobra.Command) (given func() bool, run func(ctx context.Context, g *Globals, t TestFlags) error)
}

// MockFlags are plugin mock's flags that --dra takes too.
type MockFlags struct {
	Mode      string
	Devices   int
	Error     string // "": the mock's own
	LogFormat string
	Debug     bool
}

// TestFlags are plugin test's flags that --dra takes too.
type TestFlags struct {
	Timeout            time.Duration
	Verbose            bool
	CDISpecDirs        []string // nil: the default directories
	DevicePluginSocket string
	Samples            int // 0: the tester's own
}

// TakeCancel says the running command ends by itself on SIGTERM or SIGINT
// (its context is cancelled, the cause Interrupted) and cleans up what it
// made; the run then exits 128+N (Run).
func TakeCancel() { takeCancel() }

// TakeStop says SIGTERM and SIGINT are the running command's normal stop
// (its context is cancelled): a daemon's, which cleans up and exits with
// its own status (Run).
func TakeStop() { takeStop() }

// wantsKube: a command line accel-doctor-kube must run (plugin mock --dra,
// plugin test --dra) that accel-doctor's own plugin command would refuse.
func wantsKube(args []string) bool {
	// The global flags (--root DIR) may come before the command.
	i := slices.Index(args, "plugin")
	if i < 0 {
		return false
	}
	return slices.ContainsFunc(args[i+1:], func(a string) bool { return a == "--dra" || a == "--dra=true" })
}

// Globals are what the commands share (globals), for the commands of an
// Extension.
type Globals = globals

// Ext is the binary's Extension (nil in accel-doctor).
func (g *globals) Ext() *Extension { return g.ext }

// hasKube: this binary is accel-doctor-kube, with every command.
func (g *globals) hasKube() bool { return g.ext != nil && g.ext.Binary == KubeBinary }

// hasDRA: this binary runs plugin mock/test --dra (accel-doctor-kube).
func (g *globals) hasDRA() bool { return g.ext != nil && g.ext.DRA != nil }

func (g *globals) Render(r *report.Report, verbose bool) error { return g.render(r, verbose) }
func (g *globals) RenderTable(t *report.Table, jsonDoc any) error {
	return g.renderTable(t, jsonDoc)
}
func (g *globals) AddOutputFlag(cmd *cobra.Command, formats ...string) {
	g.addOutputFlag(cmd, formats...)
}

// AddRootFlag gives a command that reads a host its --root.
func (g *globals) AddRootFlag(cmd *cobra.Command) { g.addRootFlag(cmd) }
func (g *globals) Stdout() io.Writer              { return g.stdout }
func (g *globals) Stderr() io.Writer              { return g.stderr }
func (g *globals) Output() string                 { return g.output }
func (g *globals) RootDir() string                { return g.root }
func (g *globals) RootSet() bool                  { return g.rootSet }

// UsageErr is a usage error (exit 2).
func UsageErr(format string, a ...any) error { return usageErr(format, a...) }

// ExitErr ends a command with code.
func ExitErr(code int, err error) error { return &exitError{code: code, err: err} }

// MainWith is Main with an Extension (accel-doctor-kube's).
func MainWith(ctx context.Context, args []string, stdout, stderr io.Writer, ext *Extension) int {
	return mainWith(ctx, args, stdout, stderr, ext)
}

// handOver makes the stand-ins for the commands of the other binaries
// that this one does not have (have: the names of its own).
func handOver(g *globals, have map[string]bool) []*cobra.Command {
	var out []*cobra.Command
	add := func(name, short, binary string) {
		if have[name] {
			return
		}
		out = append(out, &cobra.Command{
			Use: name, Short: short,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return g.runOther(cmd.Context(), binary, append([]string{name}, args...))
			},
		})
	}
	for _, c := range KubeCommands {
		add(c.Name, c.Short, KubeBinary)
	}
	for _, c := range KubeletCommands {
		add(c.Name, c.Short, KubeletBinary)
	}
	return out
}

// findBinary finds another of accel-doctor's binaries: beside this
// executable (or in $ACCEL_DOCTOR_HELPER_DIR), never on PATH, and only
// one that nobody but root or this user could have changed
// (internal/helper).
func findBinary(name string) (string, error) {
	p, err := helper.Find(name)
	if err == nil {
		return p, nil
	}
	if errors.Is(err, helper.ErrUntrusted) {
		return "", usageErr("this command is in %s: %v", name, err)
	}
	why := "it links the Kubernetes client"
	if name == KubeletBinary {
		why = "it links gRPC and the kubelet's APIs"
	}
	dir, _ := helper.Dir()
	return "", usageErr("this command is in %s (%s), which is not beside this binary (in %s; accel-doctor does not look on PATH): build it with `CGO_ENABLED=0 go build -tags=grpcnotrace -o %s ./cmd/%s`", name, why, dir, filepath.Join(dir, name), name)
}

// runKube runs accel-doctor-kube with args.
func (g *globals) runKube(ctx context.Context, args []string) error {
	return g.runOther(ctx, KubeBinary, args)
}

// runOther runs another of the binaries with args (and --root, when the
// command that hands over took it). From a real command line it replaces this process (exec), so
// that signals, the exit status and the terminal are the other binary's;
// in tests (writers that are not the process's own) it runs it as a
// child.
func (g *globals) runOther(ctx context.Context, binary string, args []string) error {
	p, err := findBinary(binary)
	if err != nil {
		return err
	}
	if g.rootSet {
		args = append([]string{"--root", g.root}, args...)
	}
	if g.stdout == io.Writer(os.Stdout) && g.stderr == io.Writer(os.Stderr) {
		return syscall.Exec(p, append([]string{otherArgv0(p)}, args...), os.Environ())
	}
	// A signal is passed on to the child, which ends as it would have
	// ended had it been exec'd; its exit status is the run's.
	takeStop()
	c := exec.CommandContext(ctx, p, args...)
	c.Cancel = func() error { return c.Process.Signal(signalOf(ctx)) }
	c.Args[0] = otherArgv0(p)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, g.stdout, g.stderr
	err = c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal()) // what a shell shows
		}
		return &exitError{code: code, err: nil}
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", p, err)
	}
	return nil
}

// kubeletRPC is the Caller of layer 6's calls: the Extension's, in this
// process; in accel-doctor, accel-doctor-kubelet's kubelet-rpc command,
// looked for only when there is a socket to call.
func (g *globals) kubeletRPC() kubeletrpc.Caller {
	if g.ext != nil && g.ext.KubeletRPC != nil {
		return g.ext.KubeletRPC
	}
	return kubeletrpc.Exec{Find: func() (string, error) {
		p, err := helper.Find(KubeletBinary)
		if err != nil {
			if errors.Is(err, helper.ErrUntrusted) {
				return "", err
			}
			dir, _ := helper.Dir()
			return "", &kubeletrpc.HelperMissingError{Name: KubeletBinary, Dir: dir, Purpose: "makes the calls on the kubelet's sockets"}
		}
		return p, nil
	}}
}

// ExitFor is the error of a report's exit (nil for 0; verdictExit).
func ExitFor(rep *report.Report) error { return verdictExit(rep.ExitCode(), rep.Verdict.Summary) }

// TrimImageLater drops the process's clean pages of its own executable
// now and again after start-up (internal/trim): for long-running commands.
func TrimImageLater() { trim.Later() }
