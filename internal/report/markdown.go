package report

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown renders the report for a bug report or a wiki page: the
// verdict first, a table per layer, and the details of every finding that is
// not a PASS.
func WriteMarkdown(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	ew.printf("# accel-doctor %s\n\n", r.Command)
	ew.printf("- source: %s\n", mdEscape(r.Source))
	ew.printf("- **verdict: %s**: %s\n", r.Verdict.Status, mdEscape(r.Verdict.Summary))
	ew.printf("- %s\n", countsLine(r.Verdict.Counts))
	if len(r.Devices) > 0 {
		ew.printf("\n## Accelerators\n\n| address | device | driver | NUMA |\n|---|---|---|---|\n")
		for _, d := range r.Devices {
			numa := "-"
			if d.NUMANode != nil {
				numa = fmt.Sprint(*d.NUMANode)
			}
			ew.printf("| %s | %s | %s | %s |\n", d.ID, mdEscape(d.Description), mdEscape(d.Driver), numa)
		}
	}
	layers, m := byLayer(r)
	for _, l := range layers {
		ew.printf("\n## Layer %d: %s\n\n| status | subject | finding | code |\n|---|---|---|---|\n", int(l), l.Name())
		var details []Finding
		for _, f := range m[l] {
			ew.printf("| %s | `%s` | %s | `%s` |\n", f.Status, f.Subject, mdEscape(f.Summary), f.Code)
			if f.Status != Pass {
				details = append(details, f)
			}
		}
		for _, f := range details {
			ew.printf("\n**%s `%s`** %s: %s\n\n", f.Status, f.Code, mdEscape(f.Subject), mdEscape(f.Summary))
			if f.Reason != "" {
				ew.printf("- not run because: %s\n", mdEscape(f.Reason))
			}
			for _, e := range f.Evidence {
				ew.printf("- evidence: `%s`\n", strings.ReplaceAll(evidenceLine(e), "`", "'"))
			}
			if f.Remediation != "" {
				ew.printf("- fix: %s\n", mdEscape(f.Remediation))
			}
		}
	}
	return ew.err
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
