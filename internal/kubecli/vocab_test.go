package kubecli

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/kubeletcli"
)

// commandFlags is one command of a tree and every flag it takes, its own
// and those it inherits.
type commandFlags struct {
	cmd   *cobra.Command
	flags []*pflag.Flag
}

// commandsOf is every command of a tree by its path below the root ("" is
// the root, "plugin test"), with its flags. Cobra's help flag, added to
// every command when it runs, is left out.
func commandsOf(root *cobra.Command) map[string]commandFlags {
	out := map[string]commandFlags{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimSpace(strings.TrimPrefix(c.CommandPath(), root.CommandPath()))
		var fs []*pflag.Flag
		seen := map[string]bool{}
		for _, set := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
			set.VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" && !seen[f.Name] {
					seen[f.Name] = true
					fs = append(fs, f)
				}
			})
		}
		out[path] = commandFlags{c, fs}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return out
}

// standIn: a command this binary hands over to another (cli's handOver):
// it parses no flags of its own.
func standIn(c *cobra.Command) bool { return c.DisableFlagParsing }

// alias: a deprecated old name (cli.Alias), hidden.
func alias(f *pflag.Flag) bool { return f.Deprecated != "" }

func fromVocabulary(f *pflag.Flag) bool {
	v := f.Annotations[cli.VocabularyAnnotation]
	return len(v) == 1 && v[0] == f.Name
}

// The commands that read a host (through --root), and those that do not.
// Every runnable command is in one list: a new one must say which it is.
var (
	readsHost = []string{"check", "snapshot", "pci", "topo", "iommu", "cgroup eval", "container", "cdi validate", "cdi check",
		"plugin serve", "plugin test", "agent", "kubelet-rpc"}
	readsNoHost = []string{"explain", "probe", "sandbox", "lint", "cluster", "claim", "dra", "plugin mock"}
)

// TestVocabulary walks the whole command tree of accel-doctor-kube, which
// has every command, and fails on
//   - a flag whose name is a term of cli.Vocabulary but that was not
//     defined from it (its help would not start with the term's meaning,
//     and it could mean something else), and a name two commands share
//     that is not a term;
//   - one shorthand for two names;
//   - a synonym of a term shown as a flag (two names for one thing; an old
//     name is kept only hidden, as a deprecated alias);
//   - --root shown on a command that reads no host, or missing on one that
//     reads one.
//
// The trees of accel-doctor and accel-doctor-kubelet are subsets of it:
// each of their own commands is there, with the same flags.
func TestVocabulary(t *testing.T) {
	full := commandsOf(cli.Tree(Extension(), nil, nil))
	for bin, ext := range map[string]*cli.Extension{"accel-doctor": nil, cli.KubeletBinary: kubeletcli.Extension()} {
		for path, c := range commandsOf(cli.Tree(ext, nil, nil)) {
			if standIn(c.cmd) || c.cmd.Name() == "help" {
				continue
			}
			k, ok := full[path]
			if !ok {
				t.Errorf("%s %s: not in %s", bin, path, cli.KubeBinary)
				continue
			}
			for _, f := range c.flags {
				i := slices.IndexFunc(k.flags, func(g *pflag.Flag) bool { return g.Name == f.Name })
				if i < 0 {
					t.Errorf("%s %s --%s: %s %s has no such flag", bin, path, f.Name, cli.KubeBinary, path)
					continue
				}
				g := k.flags[i]
				if f.Shorthand != g.Shorthand || f.Value.Type() != g.Value.Type() || f.Hidden != g.Hidden || fromVocabulary(f) != fromVocabulary(g) {
					t.Errorf("%s %s --%s (-%s %s hidden %v) differs from %s's (-%s %s hidden %v)", bin, path, f.Name, f.Shorthand, f.Value.Type(), f.Hidden,
						cli.KubeBinary, g.Shorthand, g.Value.Type(), g.Hidden)
				}
			}
		}
	}

	var paths []string
	for p := range full {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	users := map[string][]string{}  // a visible flag's name: the commands that show it
	shorts := map[string][]string{} // a shorthand: "--name in command"
	for _, p := range paths {
		c := full[p]
		for _, f := range c.flags {
			term, isTerm := cli.LookupTerm(f.Name)
			switch {
			case alias(f):
				if !f.Hidden {
					t.Errorf("%s --%s: a deprecated alias shown in the help", p, f.Name)
				}
				continue
			case isTerm && !fromVocabulary(f):
				t.Errorf("%s --%s: the name is a term of the vocabulary (%q) but the flag was not defined from it (cli.Flag)", p, f.Name, term.Means)
			case isTerm && (f.Shorthand != term.Shorthand || !strings.HasPrefix(f.Usage, term.Means)):
				t.Errorf("%s --%s (-%s): %q is not the term's -%s %q", p, f.Name, f.Shorthand, f.Usage, term.Shorthand, term.Means)
			}
			if f.Hidden {
				continue
			}
			users[f.Name] = append(users[f.Name], p)
			if f.Shorthand != "" && f.ShorthandDeprecated == "" {
				shorts[f.Shorthand] = appendNew(shorts[f.Shorthand], "--"+f.Name)
			}
		}
	}
	for name, ps := range users {
		if _, ok := cli.LookupTerm(name); !ok && len(ps) > 1 && name != "version" {
			t.Errorf("--%s is shared by %s but is not a term of the vocabulary: its meaning is held nowhere", name, strings.Join(ps, ", "))
		}
	}
	for s, names := range shorts {
		if len(names) > 1 {
			t.Errorf("-%s is the shorthand of %s", s, strings.Join(names, " and "))
		}
	}
	for _, term := range cli.Vocabulary {
		for _, syn := range term.Synonyms {
			if _, ok := cli.LookupTerm(syn); ok {
				t.Errorf("%s is a synonym of --%s and a term itself", syn, term.Name)
			}
			if ps := users[syn]; len(ps) > 0 {
				t.Errorf("--%s (in %s) is another name for --%s (%s)", syn, strings.Join(ps, ", "), term.Name, term.Means)
			}
		}
	}

	// --root appears only where a host is read.
	hasRoot := func(c commandFlags) (visible bool) {
		for _, f := range c.flags {
			if f.Name == "root" && !f.Hidden {
				return true
			}
		}
		return false
	}
	for _, p := range paths {
		c := full[p]
		if !c.cmd.Runnable() || c.cmd.Name() == "help" {
			if p != "" && hasRoot(c) {
				t.Errorf("%q (it runs nothing) shows --root", p)
			}
			continue
		}
		switch {
		case slices.Contains(readsHost, p):
			if !hasRoot(c) {
				t.Errorf("%s reads a host and has no --root", p)
			}
		case slices.Contains(readsNoHost, p):
			if hasRoot(c) {
				t.Errorf("%s reads no host and shows --root", p)
			}
		default:
			t.Errorf("%s: say whether it reads a host (readsHost or readsNoHost)", p)
		}
	}
	if hasRoot(full[""]) {
		t.Errorf("the root command shows --root: it is a flag of the commands that read a host")
	}
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// TestDeprecatedAliases: every deprecated alias of the tree (cli.Alias)
// still sets its flag, marks that flag given, warns on stderr naming the
// new name, and stays out of the help.
func TestDeprecatedAliases(t *testing.T) {
	n := 0
	for path, c := range commandsOf(cli.Tree(Extension(), nil, nil)) {
		for _, f := range c.flags {
			if !alias(f) {
				continue
			}
			n++
			var stderr bytes.Buffer
			tree := cli.Tree(Extension(), nil, &stderr)
			cmd, _, err := tree.Find(strings.Fields(path))
			if err != nil {
				t.Fatal(err)
			}
			a := cmd.Flags().Lookup(f.Name)
			to := aliasTarget(t, cmd, a)
			val := sampleValue(a)
			arg := "--" + a.Name + "=" + val
			if a.NoOptDefVal != "" {
				arg = "--" + a.Name
			}
			if err := cmd.ParseFlags([]string{arg}); err != nil {
				t.Errorf("%s %s: %v", path, arg, err)
				continue
			}
			if !to.Changed || !strings.Contains(to.Value.String(), val) {
				t.Errorf("%s %s: --%s = %q (given %v), want %q", path, arg, to.Name, to.Value.String(), to.Changed, val)
			}
			if note := stderr.String(); !strings.Contains(note, "--"+a.Name+" has been deprecated") || !strings.Contains(note, "--"+to.Name) {
				t.Errorf("%s %s: stderr %q does not say it is deprecated for --%s", path, arg, note, to.Name)
			}
			if strings.Contains(cmd.UsageString(), "--"+a.Name+" ") {
				t.Errorf("%s: --%s is in the help", path, a.Name)
			}
		}
	}
	if n == 0 {
		t.Fatal("no deprecated alias found in the tree")
	}
}

// aliasTarget is the flag an alias sets: the one named in its note.
func aliasTarget(t *testing.T, cmd *cobra.Command, a *pflag.Flag) *pflag.Flag {
	t.Helper()
	rest, ok := strings.CutPrefix(a.Deprecated, "use --")
	name, _, _ := strings.Cut(rest, " ")
	to := cmd.Flags().Lookup(name)
	if !ok || to == nil {
		t.Fatalf("%s --%s: deprecation note %q names no flag", cmd.CommandPath(), a.Name, a.Deprecated)
	}
	return to
}

// sampleValue is a value a flag of a's type takes.
func sampleValue(a *pflag.Flag) string {
	switch a.Value.Type() {
	case "bool":
		return "true"
	case "int":
		return "7"
	case "duration":
		return "3s"
	}
	return fmt.Sprintf("/x-%s", a.Name)
}

// --root before a command's name is the command's own flag (cobra parses
// every flag on the command named): a command that reads no host refuses
// it there too, before doing anything.
func TestRootBeforeACommandThatReadsNoHost(t *testing.T) {
	for _, p := range readsNoHost {
		args := append([]string{"--root", "/host"}, strings.Fields(p)...)
		if _, stderr, code := run(t, args...); code != 2 || !strings.Contains(stderr, "--root") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}
