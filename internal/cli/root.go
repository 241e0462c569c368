package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Version is set at build time with -ldflags "-X .../cli.Version=...".
var Version = "dev"

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// usageErr marks an error as a usage error (exit 2).
func usageErr(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

// globals are what the commands share: the values of the flags several
// take (--root of those that read a host, -o/--output) and the run's
// writers.
type globals struct {
	root    string
	rootSet bool // --root given on the command line
	output  string
	stdout  io.Writer
	stderr  io.Writer
	// ext is accel-doctor-kubelet's or accel-doctor-kube's Extension;
	// nil in accel-doctor. Stand-ins hand the commands a binary does not
	// have to the one that has them.
	ext *Extension
}

// Main runs the command line and returns the exit code: 0 no FAIL, 1 a
// FAIL, 2 a usage or internal error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return mainWith(ctx, args, stdout, stderr, nil)
}

func mainWith(ctx context.Context, args []string, stdout, stderr io.Writer, ext *Extension) int {
	g := &globals{stdout: stdout, stderr: stderr, ext: ext}
	if !g.hasDRA() && wantsKube(args) {
		return exitCode(stderr, g.runKube(ctx, args))
	}
	cmd := newRootFor(g, args)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	setFlagOutput(cmd, stderr)
	return exitCode(stderr, cmd.ExecuteContext(ctx))
}

// exitCode is the exit status of a command's error, which it reports.
func exitCode(stderr io.Writer, err error) int {
	if signo, mode, ok := interrupted(); ok {
		// A signal ends the run (Run): the error it caused (a cancelled
		// context, an unpack stopped by the cleanup) is no news; one a
		// command's own cleanup met is.
		if err != nil && mode == stopByCancel && !interruptionOnly(err) {
			fmt.Fprintf(stderr, "accel-doctor: %v\n", err)
		}
		return 128 + signo
	}
	if err == nil {
		return 0
	}
	if isBrokenPipe(err) {
		return 128 + int(syscall.SIGPIPE) // what a shell shows for a reader that left
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.code == 2 {
			fmt.Fprintf(stderr, "accel-doctor: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "accel-doctor: %v\n", err)
	return 2
}

// newRoot is the whole command tree.
func newRoot(g *globals) *cobra.Command {
	root := newRootOnly(g)
	for _, c := range nodeCommands {
		root.AddCommand(c.make(g))
	}
	have := map[string]bool{}
	if g.ext != nil {
		for _, c := range g.ext.Commands(g) {
			root.AddCommand(c)
			have[c.Name()] = true
		}
	}
	root.AddCommand(handOver(g, have)...)
	return root
}

// nodeCommands are accel-doctor's own top-level commands, by name
// (TestRootForBuildsTheCommandAsked holds each name to its command's).
var nodeCommands = []struct {
	name string
	make func(*globals) *cobra.Command
}{
	{"check", newCheckCmd}, {"explain", newExplainCmd}, {"snapshot", newSnapshotCmd}, {"pci", newPCICmd},
	{"cgroup", newCgroupCmd}, {"sandbox", newSandboxCmd}, {"container", newContainerCmd}, {"cdi", newCDICmd},
	{"probe", newProbeCmd}, {"iommu", newIOMMUCmd}, {"topo", newTopoCmd},
}

// newRootFor is the command tree args need: in accel-doctor, when args
// name one of its own commands, the root with that command alone, which
// runs it as the whole tree would (the tree's other commands and their
// flags are a fifth of a short run's start: about 0.2 ms of topo's 5);
// otherwise (help, completion, a name it does not know, flags it must
// report, accel-doctor-kube's or -kubelet's commands) the whole tree.
func newRootFor(g *globals, args []string) *cobra.Command {
	if g.ext != nil {
		return newRoot(g)
	}
	name, ok := commandName(args)
	if !ok {
		return newRoot(g)
	}
	for _, c := range nodeCommands {
		if c.name == name {
			root := newRootOnly(g)
			root.AddCommand(c.make(g))
			return root
		}
	}
	return newRoot(g)
}

// commandName is the command args name before anything else: the first
// argument that is not --root or its value (the command's own flag, which
// may come before its name). ok is false when another flag comes first
// (the whole tree answers it).
func commandName(args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--root":
			i++ // its value
		case strings.HasPrefix(a, "--root="):
		case strings.HasPrefix(a, "-"):
			return "", false
		default:
			return a, true
		}
	}
	return "", false
}

// newRootOnly is the root command without its commands.
func newRootOnly(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "accel-doctor",
		Short: "Find why an accelerator is visible but unusable, layer by layer",
		Long: `accel-doctor finds why a GPU, NPU, video decoder, SmartNIC or VFIO device is
visible but unusable in a container or a Kubernetes pod, names the first layer
that broke, shows the evidence and says what to do.

Every diagnosis command is read-only. Only 'sandbox' writes to the host.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	setDisplayName(root, displayName())
	// -v is --verbose in every command; at the root it was cobra's
	// shorthand of --version, which it still is, with a note, for a release.
	root.Flags().BoolP("version", "v", false, "version for accel-doctor")
	root.Flags().MarkShorthandDeprecated("version", "use --version (-v is --verbose in every command)")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		g.rootSet = cmd.Flags().Changed("root")
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: 2, err: err}
	})
	return root
}

// addRootFlag gives a command that reads a host its --root (a command
// that reads none has no --root: TestVocabulary holds which is which). It
// may also come before the command's name (accel-doctor --root /host
// check), as the binaries hand it to each other: cobra parses every flag
// of a command line on the command it names.
func (g *globals) addRootFlag(cmd *cobra.Command) {
	Flag(cmd.Flags(), "root", "").String(&g.root, "/")
}

// refuseRoot gives a command that reads no host a hidden --root that
// says why it does not apply, for the commands a user may well point at
// a host root.
func (g *globals) refuseRoot(cmd *cobra.Command, why string) {
	Flag(cmd.Flags(), "root", "").String(&g.root, "/")
	cmd.Flags().MarkHidden("root")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if c.Flags().Changed("root") {
			return usageErr("--root does not apply to %s: %s", c.Name(), why)
		}
		return run(c, args)
	}
}

// The output formats. Every command that takes -o/--output takes these
// (topo adds its diagrams, mermaid and dot); -o is the format in every
// command (a file is a positional argument or -f/--filename).
var outputFormats = []string{"text", "json", "markdown"}

// addOutputFlag gives a command its -o/--output flag and checks the value
// before the command does any work: an unknown format is a usage error,
// not a report thrown away at the end. formats are the formats the
// command supports, outputFormats when none are given. Call it after
// RunE is set.
func (g *globals) addOutputFlag(cmd *cobra.Command, formats ...string) {
	if len(formats) == 0 {
		formats = outputFormats
	}
	Flag(cmd.Flags(), "output", ": "+strings.Join(formats, ", ")).String(&g.output, "text")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if g.output == "md" {
			g.output = "markdown"
		}
		if !slices.Contains(formats, g.output) {
			return usageErr("unknown output %q (want %s)", g.output, strings.Join(formats, ", "))
		}
		return run(c, args)
	}
}

// render writes a report in the chosen format.
func (g *globals) render(r *report.Report, verbose bool) error {
	switch g.output {
	case "json":
		return report.WriteJSON(g.stdout, r)
	case "markdown":
		return report.WriteMarkdown(g.stdout, r)
	}
	return report.WriteText(g.stdout, r, report.TextOptions{Color: colorWanted(g.stdout), Verbose: verbose})
}

// renderTable writes a table (pci, cgroup eval, sandbox) in the chosen
// format; json is the rows' own JSON document.
func (g *globals) renderTable(t *report.Table, jsonDoc any) error {
	return g.renderTableTo(g.stdout, t, jsonDoc)
}

func (g *globals) renderTableTo(w io.Writer, t *report.Table, jsonDoc any) error {
	switch g.output {
	case "json":
		return report.WriteJSONValue(w, jsonDoc)
	case "markdown":
		return report.WriteTableMarkdown(w, t)
	}
	return report.WriteTableText(w, t)
}

// colorWanted: colour only on a terminal, and never with NO_COLOR set
// (https://no-color.org).
func colorWanted(w io.Writer) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// parseLayers reads --layer values: numbers or names ("pci", "driver",
// "devnode", "cgroup", ...).
func parseLayers(vals []string) ([]report.Layer, error) {
	names := map[string]report.Layer{
		"pci": report.LayerPCI, "host": report.LayerPCI,
		"driver":  report.LayerDriver,
		"devnode": report.LayerDevNode, "nodes": report.LayerDevNode, "dev": report.LayerDevNode,
		"cgroup":  report.LayerCgroup,
		"runtime": report.LayerRuntime, "cdi": report.LayerRuntime,
		"kube": report.LayerKube, "kubernetes": report.LayerKube,
		"iommu": report.LayerIOMMU, "vfio": report.LayerIOMMU,
		"functional": report.LayerFunctional, "probe": report.LayerFunctional,
	}
	var out []report.Layer
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			if s == "" {
				continue
			}
			if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(report.Layers) {
				out = append(out, report.Layer(n))
				continue
			}
			l, ok := names[s]
			if !ok {
				return nil, usageErr("unknown layer %q", s)
			}
			out = append(out, l)
		}
	}
	return out, nil
}
