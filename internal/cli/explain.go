package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/plugincodes"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// allCodes is every code a command reports: check's catalog
// (diagnose.Codes) and those of the commands outside it, `plugin test`'s
// (internal/deviceplugin is a writer, which diagnose does not import).
func allCodes(g *globals) []diagnose.Code {
	all := diagnose.Codes()
	if g != nil && g.ext != nil {
		all = append(all, g.ext.Codes...)
	}
	for _, c := range plugincodes.Codes {
		all = append(all, diagnose.Code{Code: c.Code, Layer: report.LayerKube, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Code < all[j].Code })
	return all
}

func lookupCode(g *globals, code string) (diagnose.Code, bool) {
	if c, ok := diagnose.LookupCode(code); ok {
		return c, true
	}
	for _, c := range allCodes(g) {
		if c.Code == code {
			return c, true
		}
	}
	return diagnose.Code{}, false
}

var errFailFound = errors.New("at least one check failed")

// verdictExit is the exit of a run whose report says code (report.ExitCode):
// none for 0; 1 with "at least one check failed"; 2 with the verdict's
// summary (which says nothing could be judged, and why), or those words
// when there is none. Exit 2 was said as "at least one check failed" too,
// where no check had failed.
func verdictExit(code int, summary string) error {
	switch code {
	case 0:
		return nil
	case report.ExitUnknown:
		if summary == "" {
			summary = "nothing could be judged"
		}
		return &exitError{code: code, err: errors.New(summary)}
	}
	return &exitError{code: code, err: errFailFound}
}

func newExplainCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "explain [CODE...]",
		Short: "Print the long form of finding codes (all of them with no argument)",
		RunE: func(cmd *cobra.Command, args []string) error {
			codes := allCodes(g)
			if len(args) > 0 {
				codes = codes[:0:0]
				for _, a := range args {
					c, ok := lookupCode(g, strings.ToUpper(a))
					if !ok && !g.hasKube() && isKubeCode(strings.ToUpper(a)) {
						return g.runKube(cmd.Context(), append([]string{"explain"}, args...))
					}
					if !ok {
						return usageErr("unknown code %q (accel-doctor explain lists them all)", a)
					}
					codes = append(codes, c)
				}
			}
			if len(args) == 0 && !g.hasKube() {
				defer fmt.Fprintf(g.stdout, "\n(%s explain lists the codes of its commands too: %s)\n", KubeBinary, strings.Join(KubeCodePrefixes, ", "))
			}
			for i, c := range codes {
				if i > 0 {
					fmt.Fprintln(g.stdout)
				}
				layer := "any layer"
				if c.Layer != 0 {
					layer = "layer " + c.Layer.String()
				}
				fmt.Fprintf(g.stdout, "%s  (%s)\n  %s\n\n", c.Code, layer, c.Title)
				for _, l := range strings.Split(strings.TrimSpace(c.Explain), "\n") {
					fmt.Fprintf(g.stdout, "  %s\n", l)
				}
				if c.Remediation != "" {
					fmt.Fprintf(g.stdout, "\n  What to do: %s\n", c.Remediation)
				}
			}
			return nil
		},
	}
}
