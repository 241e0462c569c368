package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
)

var errFailFound = errors.New("at least one check failed")

func newExplainCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "explain [CODE...]",
		Short: "Print the long form of finding codes (all of them with no argument)",
		RunE: func(cmd *cobra.Command, args []string) error {
			codes := diagnose.Codes()
			if len(args) > 0 {
				codes = codes[:0:0]
				for _, a := range args {
					c, ok := diagnose.LookupCode(strings.ToUpper(a))
					if !ok {
						return usageErr("unknown code %q (accel-doctor explain lists them all)", a)
					}
					codes = append(codes, c)
				}
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
