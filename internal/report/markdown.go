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
			ew.printf("| %s | %s | %s | %s |\n", mdEscape(d.ID), mdEscape(d.Description), mdEscape(d.Driver), numa)
		}
	}
	layers, m := byLayer(r)
	for _, l := range layers {
		ew.printf("\n## Layer %d: %s\n\n| status | subject | finding | code |\n|---|---|---|---|\n", int(l), l.Name())
		var details []Finding
		for _, f := range m[l] {
			ew.printf("| %s | `%s` | %s | `%s` |\n", f.Status, mdCode(f.Subject), mdEscape(f.Summary), f.Code)
			if f.Status != Pass {
				details = append(details, f)
			}
		}
		for _, f := range details {
			ew.printf("\n**%s `%s`** %s: %s\n\n", f.Status, f.Code, mdEscape(f.Subject), mdEscape(f.Summary))
			if f.Reason != "" {
				ew.printf("- not run because: %s\n", mdEscape(f.Reason))
			}
			if c := f.CausedBy; c != nil {
				ew.printf("- follows from: `%s` %s\n", c.Code, mdEscape(c.Subject))
			}
			for _, e := range f.Evidence {
				ew.printf("- evidence: `%s`\n", mdCode(evidenceLine(e)))
			}
			if f.Remediation != "" {
				ew.printf("- fix: %s\n", mdOurs(f.Remediation))
			}
		}
	}
	return ew.err
}

// mdEscape makes host-supplied text safe in a table cell or a line:
// control characters escaped (see escape.go), pipes and Markdown's
// inline markup characters backslashed.
func mdEscape(s string) string {
	s = safeLine(s)
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\|`*_[]<>#", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mdOurs is for accel-doctor's own Markdown (a remediation's `commands`):
// one line, control characters escaped, pipes backslashed.
func mdOurs(s string) string { return strings.ReplaceAll(safeLine(s), "|", `\|`) }

// mdCode makes text safe inside a `code span`: one line, control
// characters escaped, no backtick to end the span early, no pipe to end a
// table cell.
func mdCode(s string) string {
	s = strings.ReplaceAll(safeLine(s), "`", "'")
	return strings.ReplaceAll(s, "|", "\\|")
}
