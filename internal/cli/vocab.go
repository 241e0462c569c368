package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A Term is a flag of the command line's vocabulary: one name with one
// meaning in every command that takes it. A command defines the flag with
// Flag, which writes its help as the term's meaning followed by what the
// flag does in that command, so that the name cannot mean something else
// in another command. The test of the vocabulary (internal/kubecli) walks
// every binary's command tree and fails on a flag with a term's name that
// was not defined from its term, on a name two commands share that is not
// a term, and on a synonym shown as a flag.
type Term struct {
	Name      string
	Shorthand string
	// Means is what the value is; every command's help for the flag
	// starts with it.
	Means string
	// Synonyms are names a user might reach for, or that an older release
	// used, for the same thing: none is a visible flag of any command (an
	// old name stays, hidden, as a deprecated alias: Alias).
	Synonyms []string
}

// Vocabulary is every term. The kubectl and kubelet names win where they
// exist (-f/--filename, -n/--namespace, --kubeconfig, --context,
// --container for a container's name in a pod); a name beside another of
// ours says whose it is (--kubelet-root-dir is the kubelet's --root-dir,
// which beside --root, the host's root, would read as the same thing).
var Vocabulary = []Term{
	// The host and what is read of it.
	{Name: "root", Means: "read the host through this directory (/host in a pod)", Synonyms: []string{"host-root", "rootfs", "chroot"}},
	{Name: "snapshot", Means: "read a snapshot archive instead of the host ('demo': the built-in scenario)", Synonyms: []string{"archive", "from-snapshot"}},
	{Name: "device", Means: "only these PCI functions (0000:17:00.0, 17:00.0, or nvidia-smi's 00000000:17:00.0)", Synonyms: []string{"bdf", "pci", "pci-device", "gpu"}},
	{Name: "device-node", Means: "a device node (e.g. /dev/nvidia0; repeatable)", Synonyms: []string{"devnode", "dev-node", "node-path"}},
	{Name: "pid", Means: "a process (its PID on the host)", Synonyms: []string{"process"}},
	{Name: "cgroup", Means: "a cgroup path (e.g. /kubepods.slice/...), in every hierarchy", Synonyms: []string{"cgroup-path"}},
	{Name: "oci-spec", Means: "a container's OCI config.json (host path)", Synonyms: []string{"spec", "config-json", "bundle"}},
	{Name: "container", Means: "the container's name in the pod", Synonyms: []string{"container-name"}},
	{Name: "container-id", Means: "a container (its ID, an ID prefix or the PID of one of its processes)"},
	{Name: "cdi-spec-dir", Means: "a CDI spec directory", Synonyms: []string{"spec-dir", "cdi-dir", "cdi-spec-dirs", "cdi-root"}},
	{Name: "runtime", Means: "judge against this container runtime only"},
	{Name: "kubelet-root-dir", Means: "the kubelet's --root-dir on the host (default /var/lib/kubelet)", Synonyms: []string{"root-dir", "kubelet-root"}},

	// Reports.
	{Name: "output", Shorthand: "o", Means: "output format", Synonyms: []string{"format", "output-format"}},
	{Name: "verbose", Shorthand: "v", Means: "text output: list everything, what passed too"},
	{Name: "filename", Shorthand: "f", Means: "the file ('-': standard input or output)", Synonyms: []string{"file", "manifest"}},

	// The API server, as kubectl reaches it.
	{Name: "kubeconfig", Means: "path to the kubeconfig file", Synonyms: []string{"kube-config"}},
	{Name: "context", Means: "the kubeconfig context to use", Synonyms: []string{"kube-context"}},
	{Name: "namespace", Shorthand: "n", Means: "the namespace", Synonyms: []string{"ns"}},
	{Name: "node-name", Means: "the node's name", Synonyms: []string{"node", "hostname", "hostname-override"}},

	// The kubelet's plugin directories and sockets.
	{Name: "device-plugin-dir", Means: "the kubelet's device-plugins directory, where kubelet.sock is", Synonyms: []string{"kubelet-dir", "device-plugins-dir", "device-plugin-path"}},
	{Name: "device-plugin-socket", Means: "a device plugin's socket", Synonyms: []string{"socket", "plugin-socket"}},
	{Name: "plugins-registry", Means: "the kubelet's plugin registration directory (plugins_registry)", Synonyms: []string{"registry-dir", "plugins-registry-dir", "registration-dir"}},
	{Name: "plugin-data-dir", Means: "the DRA driver's data directory, where dra.sock is made", Synonyms: []string{"plugin-dir", "driver-dir"}},
	{Name: "dra", Means: "a DRA driver instead of a device plugin"},
	{Name: "driver", Means: "the DRA driver's name", Synonyms: []string{"driver-name"}},

	// Daemons, mocks and testers.
	{Name: "metrics-address", Means: "serve Prometheus metrics on this address, /metrics", Synonyms: []string{"listen", "metrics-addr", "metrics-bind-address"}},
	{Name: "interval", Means: "the period", Synonyms: []string{"period", "every"}},
	{Name: "log-format", Means: "log format on stderr: text or json"},
	{Name: "debug", Means: "log every call"},
	{Name: "error", Means: "the error text the planted failure answers", Synonyms: []string{"prepare-error", "allocate-error"}},
	{Name: "samples", Means: "how many calls are timed for p50/p99", Synonyms: []string{"allocate-samples"}},
}

// KubeconfigDefault is where the commands that reach the API server as
// kubectl does find their kubeconfig without --kubeconfig.
const KubeconfigDefault = " (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config)"

// VocabularyAnnotation marks, on a flag, the term it was defined from.
const VocabularyAnnotation = "accel-doctor/vocabulary"

// LookupTerm is the term named name.
func LookupTerm(name string) (Term, bool) {
	for _, t := range Vocabulary {
		if t.Name == name {
			return t, true
		}
	}
	return Term{}, false
}

// FlagDef is a term's flag about to be defined on a flag set.
type FlagDef struct {
	fs    *pflag.FlagSet
	term  Term
	usage string
}

// Flag starts the definition of the term name's flag on fs; its help is
// the term's meaning followed by detail (what it does here; "" for
// nothing more). A name that is not a term is a programming error.
func Flag(fs *pflag.FlagSet, name, detail string) FlagDef {
	t, ok := LookupTerm(name)
	if !ok {
		panic(fmt.Sprintf("flag --%s is not in the vocabulary (internal/cli/vocab.go)", name))
	}
	return FlagDef{fs: fs, term: t, usage: t.Means + detail}
}

func (d FlagDef) done() *pflag.Flag {
	d.fs.SetAnnotation(d.term.Name, VocabularyAnnotation, []string{d.term.Name})
	return d.fs.Lookup(d.term.Name)
}

func (d FlagDef) String(p *string, def string) *pflag.Flag {
	d.fs.StringVarP(p, d.term.Name, d.term.Shorthand, def, d.usage)
	return d.done()
}

func (d FlagDef) StringSlice(p *[]string, def []string) *pflag.Flag {
	d.fs.StringSliceVarP(p, d.term.Name, d.term.Shorthand, def, d.usage)
	return d.done()
}

func (d FlagDef) StringArray(p *[]string, def []string) *pflag.Flag {
	d.fs.StringArrayVarP(p, d.term.Name, d.term.Shorthand, def, d.usage)
	return d.done()
}

func (d FlagDef) Int(p *int, def int) *pflag.Flag {
	d.fs.IntVarP(p, d.term.Name, d.term.Shorthand, def, d.usage)
	return d.done()
}

func (d FlagDef) Bool(p *bool, def bool) *pflag.Flag {
	d.fs.BoolVarP(p, d.term.Name, d.term.Shorthand, def, d.usage)
	return d.done()
}

func (d FlagDef) Duration(p *time.Duration, def time.Duration) *pflag.Flag {
	d.fs.DurationVarP(p, d.term.Name, d.term.Shorthand, def, d.usage)
	return d.done()
}

// Alias keeps old, a name an earlier release used, as a hidden and
// deprecated name of fs's flag name: it sets name's value (and marks name
// given, for the checks that ask), it is not in the help, and each use
// prints pflag's deprecation note on stderr (the flag sets' output:
// setFlagOutput). oldShorthand is the old name's shorthand, if it had one;
// why, if not "", says more than "use --name instead".
func Alias(fs *pflag.FlagSet, old, oldShorthand, name, why string) {
	to := fs.Lookup(name)
	if to == nil {
		panic(fmt.Sprintf("alias --%s: no flag --%s", old, name))
	}
	a := fs.VarPF(aliasValue{to}, old, oldShorthand, to.Usage)
	a.NoOptDefVal = to.NoOptDefVal
	msg := "use --" + name + " instead"
	if why != "" {
		msg += " (" + why + ")"
	}
	fs.MarkDeprecated(old, msg) // hides it too
}

// aliasValue sets the flag it stands for.
type aliasValue struct{ to *pflag.Flag }

func (a aliasValue) String() string { return a.to.Value.String() }
func (a aliasValue) Type() string   { return a.to.Value.Type() }
func (a aliasValue) Set(s string) error {
	if err := a.to.Value.Set(s); err != nil {
		return err
	}
	a.to.Changed = true
	return nil
}

// setFlagOutput sends what pflag prints while it parses a command's flags
// (the deprecation notes of Alias and MarkShorthandDeprecated) to w, the
// run's stderr: cobra would print them on the command's output, stdout,
// into a report or an archive written there.
func setFlagOutput(c *cobra.Command, w io.Writer) {
	c.Flags().SetOutput(w)
	for _, s := range c.Commands() {
		setFlagOutput(s, w)
	}
}
