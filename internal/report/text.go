package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// TextOptions shape the text renderer.
type TextOptions struct {
	Color    bool // ANSI colours; the CLI sets it only on a terminal without NO_COLOR
	Problems bool // leave out PASS lines
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiGrey   = "\x1b[90m"
)

func (s Status) colour() string {
	switch s {
	case Pass:
		return ansiGreen
	case Warn:
		return ansiYellow
	case Fail:
		return ansiRed
	}
	return ansiGrey
}

// group is the findings of one subject within one layer.
type group struct {
	title    string
	findings []Finding
}

// groupsOf groups a layer's findings by device (a device's nodes join its
// group) and subject: host first, then devices by address, then the rest in
// the order they came.
func groupsOf(r *Report, fs []Finding) []group {
	owner := map[string]string{}
	titles := map[string]string{"host": "host"}
	for _, d := range r.Devices {
		owner[d.ID] = d.ID
		for _, n := range d.Nodes {
			if _, taken := owner[n]; !taken {
				owner[n] = d.ID
			}
		}
		titles[d.ID] = deviceTitle(d)
	}
	idx := map[string]int{}
	var gs []group
	for _, f := range fs {
		key := f.Subject
		if o, ok := owner[key]; ok {
			key = o
		}
		i, ok := idx[key]
		if !ok {
			t := titles[key]
			if t == "" {
				t = key
			}
			i = len(gs)
			idx[key] = i
			gs = append(gs, group{title: t})
		}
		gs[i].findings = append(gs[i].findings, f)
	}
	rank := func(g group) int {
		switch {
		case g.title == "host":
			return 0
		case len(g.findings) > 0 && owner[g.findings[0].Subject] != "":
			return 1
		}
		return 2
	}
	sort.SliceStable(gs, func(i, j int) bool {
		ri, rj := rank(gs[i]), rank(gs[j])
		if ri != rj {
			return ri < rj
		}
		if ri == 1 {
			return gs[i].title < gs[j].title
		}
		return false
	})
	return gs
}

func deviceTitle(d Device) string {
	t := d.ID
	if d.Description != "" {
		t += "  " + d.Description
	}
	var attrs []string
	if d.Driver != "" {
		attrs = append(attrs, "driver "+d.Driver)
	} else {
		attrs = append(attrs, "no driver")
	}
	if d.NUMANode != nil && *d.NUMANode >= 0 {
		attrs = append(attrs, fmt.Sprintf("NUMA %d", *d.NUMANode))
	}
	return t + "  (" + strings.Join(attrs, ", ") + ")"
}

// byLayer splits findings by layer, in layer order.
func byLayer(r *Report) ([]Layer, map[Layer][]Finding) {
	m := map[Layer][]Finding{}
	for _, f := range r.Findings {
		m[f.Layer] = append(m[f.Layer], f)
	}
	var ls []Layer
	for _, l := range Layers {
		if _, ok := m[l]; ok {
			ls = append(ls, l)
		}
	}
	return ls, m
}

// WriteText renders the report for a person at a terminal: one line per
// check and subject, grouped by layer and device, aligned like
// virt-host-validate, with evidence and the fix under every line that is
// not a PASS.
func WriteText(w io.Writer, r *Report, o TextOptions) error {
	ew := &errWriter{w: w}
	paint := func(code, s string) string {
		if !o.Color {
			return s
		}
		return code + s + ansiReset
	}
	ew.printf("%s\n", paint(ansiBold, fmt.Sprintf("accel-doctor %s: %s", r.Command, r.Source)))
	switch {
	case len(r.Devices) > 0:
		ew.printf("accelerators: %s\n", summarizeDevices(r.Devices))
	case len(r.Layers) == 0 || slices.Contains(r.Layers, LayerPCI):
		ew.printf("accelerators: none found\n")
	}
	// The conclusion first: at 2 a.m. the verdict and the problems matter
	// before the full listing.
	var problems []Finding
	for _, f := range r.Findings {
		if f.Status == Fail || f.Status == Warn {
			problems = append(problems, f)
		}
	}
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].Status != problems[j].Status {
			return problems[i].Status == Fail
		}
		return problems[i].Layer < problems[j].Layer
	})
	if len(problems) > 0 {
		ew.printf("%s\n", paint(ansiBold+r.Verdict.Status.colour(), fmt.Sprintf("Verdict: %s: %s", r.Verdict.Status, r.Verdict.Summary)))
		for _, f := range problems {
			line := f.Summary
			if f.Subject != "host" && !strings.Contains(line, f.Subject) {
				line = f.Subject + ": " + line
			}
			ew.printf("  %s %-28s layer %d  %s\n", paint(f.Status.colour(), fmt.Sprintf("%-4s", f.Status)), f.Code, int(f.Layer), line)
		}
	}
	ids := map[string]bool{"host": true}
	for _, d := range r.Devices {
		ids[d.ID] = true
	}
	width := 0
	for _, f := range r.Findings {
		n := len(f.Summary)
		if !ids[f.Subject] {
			n += len(f.Subject) + 2
		}
		if n > width {
			width = n
		}
	}
	if width > 76 {
		width = 76
	}
	layers, m := byLayer(r)
	for _, l := range layers {
		fs := m[l]
		if o.Problems && allPass(fs) {
			continue
		}
		ew.printf("\n%s\n", paint(ansiBold, fmt.Sprintf("Layer %d: %s", int(l), l.Name())))
		for _, g := range groupsOf(r, fs) {
			if o.Problems && allPass(g.findings) {
				continue
			}
			ew.printf("  %s\n", g.title)
			for _, f := range g.findings {
				if o.Problems && f.Status == Pass {
					continue
				}
				line := f.Summary
				if f.Subject != "host" && !strings.HasPrefix(g.title, f.Subject) && !strings.Contains(line, f.Subject) {
					line = f.Subject + ": " + line
				}
				st := paint(f.Status.colour(), fmt.Sprintf("%-7s", f.Status))
				ew.printf("    %-*s : %s %s\n", width, line, st, paint(ansiGrey, f.Code))
				if f.Status == Pass {
					continue
				}
				if f.Reason != "" {
					ew.printf("        why not run: %s\n", f.Reason)
				}
				for _, e := range f.Evidence {
					ew.printf("        %s\n", evidenceLine(e))
				}
				if f.Remediation != "" {
					ew.printf("        fix: %s\n", f.Remediation)
				}
			}
		}
	}
	ew.printf("\n%s\n", paint(ansiBold+r.Verdict.Status.colour(), fmt.Sprintf("Verdict: %s: %s", r.Verdict.Status, r.Verdict.Summary)))
	ew.printf("%s\n", countsLine(r.Verdict.Counts))
	if !o.Problems && r.Verdict.Counts[Pass] > 0 && r.Verdict.Counts[Pass] < len(r.Findings) {
		ew.printf("(--problems leaves out the checks that passed; accel-doctor explain CODE says more)\n")
	}
	return ew.err
}

func allPass(fs []Finding) bool {
	for _, f := range fs {
		if f.Status != Pass {
			return false
		}
	}
	return true
}

func evidenceLine(e Evidence) string {
	v := strings.ReplaceAll(strings.TrimRight(e.Value, "\n"), "\n", "\n          ")
	if e.Path == "" {
		return v
	}
	return e.Path + ": " + v
}

func countsLine(c map[Status]int) string {
	return fmt.Sprintf("%d PASS, %d WARN, %d FAIL, %d NOT_RUN", c[Pass], c[Warn], c[Fail], c[NotRun])
}

// summarizeDevices says "8 x NVIDIA GH100 [H100 SXM5 80GB]" rather than
// listing eight identical lines.
func summarizeDevices(ds []Device) string {
	var order []string
	n := map[string]int{}
	for _, d := range ds {
		k := d.Description
		if k == "" {
			k = d.ID
		}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		if n[k] > 1 {
			parts[i] = fmt.Sprintf("%d x %s", n[k], k)
		} else {
			parts[i] = k
		}
	}
	return strings.Join(parts, ", ")
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err != nil {
		return
	}
	_, e.err = fmt.Fprintf(e.w, format, a...)
}
