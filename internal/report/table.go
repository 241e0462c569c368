package report

import (
	"encoding/json"
	"io"
	"strings"
	"text/tabwriter"
)

// Table is a listing a command prints (the PCI inventory, a cgroup
// decision table, sandbox probes): lines before it, a header, rows, and
// lines after. Cells come from the host and are escaped like findings.
type Table struct {
	Title  []string
	Header []string
	Rows   [][]string
	Notes  []string
}

// WriteTableText aligns the table in columns separated by two spaces; an
// empty cell prints as "-".
func WriteTableText(w io.Writer, t *Table) error {
	ew := &errWriter{w: w}
	for _, l := range t.Title {
		ew.printf("%s\n", safeLine(l))
	}
	if len(t.Header) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		tew := &errWriter{w: tw}
		tew.printf("%s\n", strings.Join(t.Header, "\t"))
		for _, r := range t.Rows {
			cells := make([]string, len(r))
			for i, c := range r {
				cells[i] = dashIfEmpty(strings.ReplaceAll(safeLine(c), "\t", " "))
			}
			tew.printf("%s\n", strings.Join(cells, "\t"))
		}
		if ew.err == nil {
			ew.err = tew.err
		}
		if err := tw.Flush(); ew.err == nil {
			ew.err = err
		}
	}
	for _, l := range t.Notes {
		ew.printf("%s\n", safeLine(l))
	}
	return ew.err
}

// WriteTableMarkdown writes the title and notes as paragraphs and the rows
// as a Markdown table.
func WriteTableMarkdown(w io.Writer, t *Table) error {
	ew := &errWriter{w: w}
	for _, l := range t.Title {
		ew.printf("%s\n\n", mdEscape(l))
	}
	if len(t.Header) > 0 {
		ew.printf("| %s |\n|%s\n", strings.Join(t.Header, " | "), strings.Repeat("---|", len(t.Header)))
		for _, r := range t.Rows {
			cells := make([]string, len(r))
			for i, c := range r {
				cells[i] = dashIfEmpty(mdEscape(c))
			}
			ew.printf("| %s |\n", strings.Join(cells, " | "))
		}
	}
	for _, l := range t.Notes {
		ew.printf("\n%s\n", mdEscape(l))
	}
	return ew.err
}

// WriteJSONValue writes any document indented, as the report's JSON is.
func WriteJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
