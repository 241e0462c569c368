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
	Color bool // ANSI colours; the CLI sets it only on a terminal without NO_COLOR
	// Verbose lists every finding, PASS included. Without it the report
	// shows the problems (FAIL, WARN, NOT_RUN) with their evidence, then one
	// line per device that had none.
	Verbose bool
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
	owner := r.Owners()
	titles := map[string]string{"host": "host"}
	for _, d := range r.Devices {
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

// WriteText renders the report for a person at a terminal: the verdict
// and the problems first (at 2 a.m. they matter before the full listing),
// then the problems' evidence and fixes layer by layer and device by device,
// aligned like virt-host-validate, then one line per healthy device. With
// Verbose every PASS is listed in place instead. Everything that came from
// the host is printed with its control characters escaped.
func WriteText(w io.Writer, r *Report, o TextOptions) error {
	t := &textWriter{errWriter: errWriter{w: w}, r: r, o: o}
	t.header()
	t.problemList()
	t.layers()
	if !o.Verbose {
		t.healthy()
	}
	t.printf("\n%s\n", t.paint(ansiBold+r.Verdict.Status.colour(), verdictLine(r)))
	t.printf("%s\n", countsLine(r.Verdict.Counts))
	if !o.Verbose && r.Verdict.Counts[Pass] > 0 {
		t.printf("(--verbose lists every check that passed; accel-doctor explain CODE says more)\n")
	}
	return t.err
}

type textWriter struct {
	errWriter
	r     *Report
	o     TextOptions
	width int
}

func (t *textWriter) paint(code, s string) string {
	if !t.o.Color {
		return s
	}
	return code + s + ansiReset
}

func verdictLine(r *Report) string {
	return fmt.Sprintf("Verdict: %s: %s", r.Verdict.Status, safeLine(r.Verdict.Summary))
}

func (t *textWriter) header() {
	r := t.r
	t.printf("%s\n", t.paint(ansiBold, fmt.Sprintf("accel-doctor %s: %s", r.Command, safeLine(r.Source))))
	label := "accelerators"
	if r.Command == "container" {
		label = "host devices behind its nodes"
	}
	switch {
	case len(r.Devices) > 0:
		t.printf("%s: %s\n", label, safeLine(summarizeDevices(r.Devices)))
	case len(r.Layers) == 0 || slices.Contains(r.Layers, LayerPCI):
		t.printf("%s: none found\n", label)
	}
}

// problemList prints the verdict and one line per FAIL and WARN.
func (t *textWriter) problemList() {
	var problems []*Finding
	for i := range t.r.Findings {
		if f := &t.r.Findings[i]; f.Status == Fail || f.Status == Warn {
			problems = append(problems, f)
		}
	}
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].Status != problems[j].Status {
			return problems[i].Status == Fail
		}
		return problems[i].Layer < problems[j].Layer
	})
	t.printf("%s\n", t.paint(ansiBold+t.r.Verdict.Status.colour(), verdictLine(t.r)))
	// A consequence is listed under its cause, indented, when its cause is
	// listed too; the rest keep their order.
	causes := t.r.Causes()
	index := map[*Finding]int{}
	for i := range t.r.Findings {
		index[&t.r.Findings[i]] = i
	}
	idx := make([]int, len(problems))
	listed := map[int]bool{}
	for k := range problems {
		idx[k] = index[problems[k]]
		listed[idx[k]] = true
	}
	under := map[int][]int{}
	var top []int
	for _, i := range idx {
		if c := causes[i]; c >= 0 && listed[c] && rootOf(causes, i) != i {
			under[c] = append(under[c], i)
		} else {
			top = append(top, i)
		}
	}
	// A cause stands where its worst consequence would: a WARN that
	// FAILs follow from is listed among the FAILs, first.
	var worst func(i int, seen map[int]bool) Status
	worst = func(i int, seen map[int]bool) Status {
		w := t.r.Findings[i].Status
		seen[i] = true
		for _, j := range under[i] {
			if !seen[j] {
				if s := worst(j, seen); s.Worse(w) {
					w = s
				}
			}
		}
		return w
	}
	eff := map[int]Status{}
	for _, i := range top {
		eff[i] = worst(i, map[int]bool{})
	}
	sort.SliceStable(top, func(a, b int) bool {
		fa, fb := t.r.Findings[top[a]], t.r.Findings[top[b]]
		if eff[top[a]] != eff[top[b]] {
			return eff[top[a]].Worse(eff[top[b]])
		}
		if fa.Layer != fb.Layer {
			return fa.Layer < fb.Layer
		}
		return len(under[top[a]]) > 0 && len(under[top[b]]) == 0
	})
	printed := map[int]bool{}
	var show func(i, depth int)
	show = func(i, depth int) {
		if printed[i] {
			return
		}
		printed[i] = true
		f := t.r.Findings[i]
		line := f.Summary
		if f.Subject != "host" && !strings.Contains(line, f.Subject) {
			line = f.Subject + ": " + line
		}
		pad := strings.Repeat("  ", depth)
		t.printf("  %s%s %-*s layer %d  %s\n", pad, t.paint(f.Status.colour(), fmt.Sprintf("%-4s", f.Status)), max(28-2*depth, 0), f.Code, int(f.Layer), safeLine(line))
		for _, j := range under[i] {
			show(j, depth+1)
		}
	}
	for _, i := range top {
		show(i, 0)
	}
	for _, i := range idx { // a cycle of causes none of which is on top
		show(i, 0)
	}
}

// shown reports whether a finding gets its own line.
func (t *textWriter) shown(f Finding) bool { return t.o.Verbose || f.Status != Pass }

func (t *textWriter) layers() {
	ids := map[string]bool{"host": true}
	for _, d := range t.r.Devices {
		ids[d.ID] = true
	}
	for _, f := range t.r.Findings {
		n := len(f.Summary)
		if !ids[f.Subject] {
			n += len(f.Subject) + 2
		}
		if t.shown(f) && n > t.width {
			t.width = n
		}
	}
	t.width = min(t.width, 76)
	layers, m := byLayer(t.r)
	for _, l := range layers {
		if !slices.ContainsFunc(m[l], t.shown) {
			continue
		}
		t.printf("\n%s\n", t.paint(ansiBold, fmt.Sprintf("Layer %d: %s", int(l), l.Name())))
		for _, g := range groupsOf(t.r, m[l]) {
			if !slices.ContainsFunc(g.findings, t.shown) {
				continue
			}
			t.printf("  %s\n", safeLine(g.title))
			for _, f := range g.findings {
				if t.shown(f) {
					t.finding(g, f)
				}
			}
		}
	}
}

func (t *textWriter) finding(g group, f Finding) {
	line := f.Summary
	if f.Subject != "host" && !strings.HasPrefix(g.title, f.Subject) && !strings.Contains(line, f.Subject) {
		line = f.Subject + ": " + line
	}
	st := t.paint(f.Status.colour(), fmt.Sprintf("%-7s", f.Status))
	t.printf("    %-*s : %s %s\n", t.width, safeLine(line), st, t.paint(ansiGrey, f.Code))
	if f.Status == Pass {
		return
	}
	if f.Reason != "" {
		t.printf("        why not run: %s\n", safeLine(f.Reason))
	}
	if c := f.CausedBy; c != nil {
		t.printf("        follows from: %s %s\n", c.Code, safeLine(c.Subject))
	}
	for _, e := range f.Evidence {
		t.printf("        %s\n", evidenceLine(e))
	}
	if f.Remediation != "" {
		t.printf("        fix: %s\n", safeLine(f.Remediation))
	}
}

// healthy prints one line per device none of whose findings is a problem,
// and one for the host's own passing checks.
func (t *textWriter) healthy() {
	type tally struct{ pass, other int }
	per := map[string]*tally{}
	owner := t.r.Owners()
	for _, f := range t.r.Findings {
		id, ok := owner[f.Subject]
		if !ok {
			id = "host"
		}
		if per[id] == nil {
			per[id] = &tally{}
		}
		if f.Status == Pass {
			per[id].pass++
		} else {
			per[id].other++
		}
	}
	var lines []string
	for _, d := range t.r.Devices {
		if c := per[d.ID]; c != nil && c.other == 0 {
			lines = append(lines, fmt.Sprintf("%s: %d check(s) PASS", deviceTitle(d), c.pass))
		}
	}
	if c := per["host"]; c != nil && c.pass > 0 {
		lines = append(lines, fmt.Sprintf("host: %d other check(s) PASS", c.pass))
	}
	if len(lines) == 0 {
		return
	}
	t.printf("\n%s\n", t.paint(ansiBold, "Healthy"))
	for _, l := range lines {
		t.printf("  %s\n", safeLine(l))
	}
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
	v := strings.ReplaceAll(safeBlock(strings.TrimRight(e.Value, "\n")), "\n", "\n          ")
	if e.Path == "" {
		return v
	}
	return safeLine(e.Path) + ": " + v
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
