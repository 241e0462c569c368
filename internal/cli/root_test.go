package cli

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// describe is a command tree as a user meets it: every command's path,
// usage line, flags (name, shorthand, default, usage) and whether it runs.
func describe(c *cobra.Command) string {
	var sb strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		sb.WriteString(c.CommandPath() + " | " + c.Use + " | runs=" + boolText(c.Runnable()) + "\n")
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			sb.WriteString("  --" + f.Name + " -" + f.Shorthand + " =" + f.DefValue + " " + f.Usage + "\n")
		})
		cs := c.Commands()
		slices.SortFunc(cs, func(a, b *cobra.Command) int { return strings.Compare(a.Name(), b.Name()) })
		for _, s := range cs {
			walk(s)
		}
	}
	walk(c)
	return sb.String()
}

func boolText(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestRootForBuildsTheCommandAsked: a command line that names one of
// accel-doctor's commands gets a root with that command alone, and that
// command is the whole tree's, flags and subcommands alike; every other
// line gets the whole tree; and every command of the whole tree is in
// nodeCommands under its name or is a stand-in (handOver) or cobra's own.
func TestRootForBuildsTheCommandAsked(t *testing.T) {
	g := func() *globals { return &globals{stdout: io.Discard, stderr: io.Discard} }
	full := newRoot(g())
	known := map[string]bool{"help": true, "completion": true}
	for _, c := range handOver(g(), nil) {
		known[c.Name()] = true
	}
	for _, c := range nodeCommands {
		known[c.name] = true
		for _, args := range [][]string{{c.name}, {"--root", "/x", c.name, "--help"}, {"--root=/x", c.name}} {
			lazy := newRootFor(g(), args)
			if n := len(lazy.Commands()); n != 1 {
				t.Errorf("%q: a root with %d commands, want 1", args, n)
				continue
			}
			got, _, err := lazy.Find(args)
			want, _, werr := full.Find(args)
			if err != nil || werr != nil || got.Name() != c.name {
				t.Fatalf("%q: found %q (%v); the whole tree %q (%v)", args, got.Name(), err, want.Name(), werr)
			}
			if d, w := describe(got), describe(want); d != w {
				t.Errorf("%q: the command differs from the whole tree's:\n%s\nwant\n%s", args, d, w)
			}
		}
	}
	for _, c := range full.Commands() {
		if !known[c.Name()] {
			t.Errorf("the tree's command %q is not in nodeCommands", c.Name())
		}
	}
	for _, args := range [][]string{nil, {"help"}, {"help", "check"}, {"--version"}, {"-h"}, {"chek"}, {"--root"}, {"__complete", "to"}, {"plugin", "serve"}} {
		if n, want := len(newRootFor(g(), args).Commands()), len(full.Commands()); n != want {
			t.Errorf("%q: a root with %d commands, want the whole tree's %d", args, n, want)
		}
	}
}
