package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/catalog"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// explained is one code as explain prints it; its JSON names follow a
// report's findings (docs/report-schema.md).
type explained struct {
	Code  string       `json:"code"`
	Layer report.Layer `json:"layer,omitempty"` // 0: any layer
	// Status is the catalog's (internal/catalog's codes); check's codes
	// have none: the check decides each finding's.
	Status      string `json:"status,omitempty"`
	Summary     string `json:"summary"`
	Explain     string `json:"explain"`
	Remediation string `json:"remediation,omitempty"`
}

// allCodes is every code a command reports, sorted: check's catalog
// (diagnose.Codes) and those of the commands outside it
// (internal/catalog: plugin test, plugin test --dra, lint, cluster, claim,
// dra), which every binary links, so that each binary's explain is the
// whole catalog.
func allCodes() []explained {
	var all []explained
	for _, c := range diagnose.Codes() {
		all = append(all, explained{Code: c.Code, Layer: c.Layer, Summary: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	add := func(c catalog.Code) {
		all = append(all, explained{Code: c.Code, Layer: report.LayerKube, Status: c.Status, Summary: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	for _, cs := range [][]catalog.Code{catalog.Plugin, catalog.Lint, catalog.Cluster, catalog.Claim, catalog.Fleet} {
		for _, c := range cs {
			add(c)
		}
	}
	for _, c := range catalog.DRAPlugin {
		// plugin test --dra's codes carry their meaning in the title
		// (docs/dra.md has them as a table).
		c.Explain = c.Title + ". Reported by `plugin test --dra` (status " + c.Status + "); docs/dra.md lists every code."
		add(c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Code < all[j].Code })
	return all
}

// nearCodes are the codes a mistyped one may have meant, nearest first,
// at most three: those a few edits from it, and those that hold each of
// its words (CGROUP_DENIED: CGROUP_DEVICE_DENIED).
func nearCodes(all []explained, code string) []string {
	type near struct {
		code string
		d    int
	}
	var out []near
	words := strings.FieldsFunc(code, func(r rune) bool { return r == '_' || r == '-' })
	for _, c := range all {
		d := editDistance(code, c.Code)
		if d <= max(2, len(code)/6) || len(words) > 0 && containsWords(c.Code, words) {
			out = append(out, near{c.Code, d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].d < out[j].d })
	var names []string
	for i := 0; i < len(out) && i < 3; i++ {
		names = append(names, out[i].code)
	}
	return names
}

// containsWords: every word is one of code's (its parts between '_').
func containsWords(code string, words []string) bool {
	have := strings.Split(code, "_")
	for _, w := range words {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// editDistance is the Levenshtein distance of a and b (bytes: codes are
// ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// unknownCode is explain's usage error for a code no catalog has.
func unknownCode(all []explained, code string) error {
	near := nearCodes(all, code)
	if len(near) == 0 {
		return usageErr("unknown code %q (accel-doctor explain lists them all)", code)
	}
	alt := near[len(near)-1]
	if len(near) > 1 {
		alt = strings.Join(near[:len(near)-1], ", ") + " or " + alt
	}
	return usageErr("unknown code %q: did you mean %s? (accel-doctor explain lists them all)", code, alt)
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
	cmd := &cobra.Command{
		Use:   "explain [CODE...]",
		Short: "Print the long form of finding codes (all of them with no argument)",
		Long: `Print the long form of finding codes: what each means, how it is decided and
what to do. With no argument, every code of every command (check, container,
probe, cdi, iommu, plugin test, lint, cluster, claim, dra). -o json is an
array of {code, layer, status, summary, explain, remediation}
(docs/report-schema.md); -o markdown a table and a section per code.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			all := allCodes()
			codes := all
			if len(args) > 0 {
				codes = nil
				for _, a := range args {
					code := strings.ToUpper(a)
					i := slices.IndexFunc(all, func(c explained) bool { return c.Code == code })
					if i < 0 {
						return unknownCode(all, code)
					}
					codes = append(codes, all[i])
				}
			}
			switch g.output {
			case "json":
				return report.WriteJSONValue(g.stdout, codes)
			case "markdown":
				return writeExplainMarkdown(g.stdout, codes)
			}
			return writeExplainText(g.stdout, codes)
		},
	}
	g.addOutputFlag(cmd)
	return cmd
}

// layerText is a code's layer in words: "layer 6 (Kubernetes)".
func layerText(l report.Layer) string {
	if l == 0 {
		return "any layer"
	}
	return "layer " + l.String()
}

func writeExplainText(w io.Writer, codes []explained) error {
	var b strings.Builder
	for i, c := range codes {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s  (%s)\n  %s\n\n", c.Code, layerText(c.Layer), c.Summary)
		for _, l := range strings.Split(strings.TrimSpace(c.Explain), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
		if c.Remediation != "" {
			fmt.Fprintf(&b, "\n  What to do: %s\n", c.Remediation)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeExplainMarkdown writes a table of the codes, then a section each
// (the shape of docs/lint.md's rules); a status the catalog does not fix
// is "-" in the table, and not said in the section.
func writeExplainMarkdown(w io.Writer, codes []explained) error {
	cell := func(s string) string { return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`) }
	status := func(c explained) string {
		if c.Status == "" {
			return "-"
		}
		return cell(c.Status)
	}
	var b strings.Builder
	b.WriteString("| code | layer | status | summary |\n|---|---|---|---|\n")
	for _, c := range codes {
		layer := "any"
		if c.Layer != 0 {
			layer = fmt.Sprint(int(c.Layer))
		}
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s |\n", c.Code, strings.ToLower(c.Code), layer, status(c), cell(c.Summary))
	}
	for _, c := range codes {
		head := layerText(c.Layer)
		head = strings.ToUpper(head[:1]) + head[1:]
		if c.Status != "" {
			head += ", " + cell(c.Status)
		}
		fmt.Fprintf(&b, "\n### %s\n\n%s: %s.\n\n%s\n", c.Code, head, cell(c.Summary), cell(c.Explain))
		if c.Remediation != "" {
			fmt.Fprintf(&b, "\nWhat to do: %s\n", cell(c.Remediation))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
