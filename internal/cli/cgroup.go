package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/opencontainers/cgroups/devices/config"
	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cgroup"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func newCgroupCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cgroup",
		Short: "The cgroup device policy of a process or cgroup",
	}
	cmd.AddCommand(newCgroupEvalCmd(g))
	return cmd
}

// evalRow is one line of the decision table.
type evalRow struct {
	Subject   string `json:"subject"` // node path or rule
	Device    string `json:"device"`  // "c 195:0"
	Read      string `json:"r"`
	Write     string `json:"w"`
	ReadWrite string `json:"rw"`
	Mknod     string `json:"m"`
	DecidedBy string `json:"decided_by"`
	Note      string `json:"note,omitempty"`
}

func verdictWord(d cgroup.Decision) string {
	switch {
	case !d.Known:
		return "?"
	case d.Allowed:
		return "allow"
	}
	return "DENY"
}

func evalDevice(p *cgroup.Policy, subject string, dev cgroup.DeviceRef) evalRow {
	res := p.Evaluate(dev, cgroup.AccessRead|cgroup.AccessWrite|cgroup.AccessMknod)
	rw := p.Evaluate(dev, cgroup.AccessRead|cgroup.AccessWrite).Whole.Combined
	row := evalRow{Subject: subject, Device: fmt.Sprintf("%c %d:%d", dev.Type, dev.Major, dev.Minor), ReadWrite: verdictWord(rw)}
	var by, notes []string
	for _, a := range res.Each {
		w := verdictWord(a.Combined)
		switch a.Access {
		case cgroup.AccessRead:
			row.Read = w
		case cgroup.AccessWrite:
			row.Write = w
		case cgroup.AccessMknod:
			row.Mknod = w
		}
		if !a.Combined.Known {
			notes = appendUnique(notes, a.Combined.Reason)
		}
	}
	by = appendUnique(by, rw.DecidedBy)
	row.DecidedBy = strings.Join(by, "; ")
	row.Note = strings.Join(notes, "; ")
	return row
}

func appendUnique(s []string, v string) []string {
	if v == "" {
		return s
	}
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// ruleDevices turns a query rule into the devices to evaluate: a wildcard
// minor is sampled over minors 0-255 (a v2 program is a function of one
// device number, so only sampling can answer for a range).
func ruleDevices(r config.Rule) ([]cgroup.DeviceRef, error) {
	if r.Type == config.WildcardDevice || r.Major == config.Wildcard {
		return nil, fmt.Errorf("--rule needs a type (c or b) and a major; got %q", r.CgroupString())
	}
	if r.Minor != config.Wildcard {
		return []cgroup.DeviceRef{{Type: byte(r.Type), Major: uint32(r.Major), Minor: uint32(r.Minor)}}, nil
	}
	var out []cgroup.DeviceRef
	for m := uint32(0); m < 256; m++ {
		out = append(out, cgroup.DeviceRef{Type: byte(r.Type), Major: uint32(r.Major), Minor: m})
	}
	return out, nil
}

func newCgroupEvalCmd(g *globals) *cobra.Command {
	var (
		pid      int
		cg       string
		devs     []string
		rules    []string
		snapshot string
	)
	cmd := &cobra.Command{
		Use:   "eval (--pid PID | --cgroup PATH) [--device-node NODE]... [--rule 'c 195:* rw']...",
		Short: "Decision table: may this process or cgroup open each node, and which rule decides (read-only)",
		Long: `eval reads the effective device policy of a process or cgroup — the v1
devices.list of its devices cgroup and the BPF_CGROUP_DEVICE programs in
effect on its cgroup2 directory (read back and run in accel-doctor's own
interpreter; needs root) — and prints, for every accelerator node (or the
--device-node nodes, or the devices a --rule names), whether r, w, one rw open and
mknod are allowed, and the line or program instruction that decided.
'?' means undecided (a default-allow v1 cgroup hides its denies; programs
unreadable without root): use 'accel-doctor sandbox' to measure instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (pid > 0) == (cg != "") {
				return usageErr("cgroup eval needs exactly one of --pid or --cgroup")
			}
			root, _, cleanup, err := g.openHost(snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			target := cgroup.Target{PID: pid, Cgroup: cg}
			p, err := readTargetPolicy(root, target)
			if err != nil {
				return err
			}
			rows, err := evalRows(root, p, devs, rules)
			if err != nil {
				return err
			}
			if rows == nil {
				rows = []evalRow{}
			}
			return g.renderTable(evalTable(target, p, rows), map[string]any{"target": target.String(), "mode": p.Mounts.Mode.String(),
				"v1_cgroup": p.V1Path, "v2_cgroup": p.V2Path, "rows": rows})
		},
	}
	f := cmd.Flags()
	g.addRootFlag(cmd)
	Flag(f, "pid", ": judge its cgroups").Int(&pid, 0)
	Flag(f, "cgroup", ": judge it").String(&cg, "")
	Flag(f, "device-node", ": judge it").StringArray(&devs, nil)
	Alias(f, "device", "", "device-node", "--device is a PCI function in check and iommu")
	f.StringArrayVar(&rules, "rule", nil, "a device class to judge, in devices.allow syntax: 'c 195:* rw' (repeatable)")
	Flag(f, "snapshot", "").String(&snapshot, "")
	g.addOutputFlag(cmd)
	return cmd
}

// readTargetPolicy reads a target's policy; a target that does not exist
// is a usage error, not a table of undecided rows.
func readTargetPolicy(root *hostfs.Root, target cgroup.Target) (*cgroup.Policy, error) {
	p, err := cgroup.ReadPolicy(root, target)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageErr("%s: %v", target, err)
		}
		return nil, err
	}
	if missingTarget(p) {
		return nil, usageErr("%s: no such cgroup in any hierarchy (%v; %v)", target, p.V1Err, p.V2Err)
	}
	return p, nil
}

// missingTarget: every hierarchy that applies says the target's directory
// does not exist.
func missingTarget(p *cgroup.Policy) bool {
	n, missing := 0, 0
	for _, part := range []struct {
		applies bool
		err     error
	}{{p.V1Applies, p.V1Err}, {p.V2Applies, p.V2Err}} {
		if part.applies {
			n++
			if part.err != nil && errors.Is(part.err, fs.ErrNotExist) {
				missing++
			}
		}
	}
	return n > 0 && missing == n
}

// evalRows decides the --device-node nodes, the --rule devices, or with neither
// every accelerator node of the host.
func evalRows(root *hostfs.Root, p *cgroup.Policy, devs, rules []string) ([]evalRow, error) {
	var rows []evalRow
	for _, d := range devs {
		n, err := root.Stat(d)
		if err != nil {
			return nil, usageErr("--device-node %s: %v", d, err)
		}
		if n.Type != hostfs.TypeChar && n.Type != hostfs.TypeBlock {
			return nil, usageErr("--device-node %s is a %s, not a device node", d, n.Type)
		}
		typ := byte('c')
		if n.Type == hostfs.TypeBlock {
			typ = 'b'
		}
		rows = append(rows, evalDevice(p, d, cgroup.DeviceRef{Type: typ, Major: n.Major, Minor: n.Minor}))
	}
	for _, s := range rules {
		r, err := cgroup.ParseRuleFlag(s, true)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		ds, err := ruleDevices(r)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		rows = append(rows, summarizeRule(p, s, r, ds))
	}
	if len(devs) > 0 || len(rules) > 0 {
		return rows, nil
	}
	env := diagnose.NewEnv(root, diagnose.Options{})
	for _, n := range env.ExpectedNodes() {
		st := env.NodeState(n.Path)
		switch {
		case st.Exists && st.IsChar():
			rows = append(rows, evalDevice(p, n.Path, cgroup.DeviceRef{Type: 'c', Major: st.Node.Major, Minor: st.Node.Minor}))
		case n.DevKnown:
			row := evalDevice(p, n.Path, cgroup.DeviceRef{Type: 'c', Major: n.Major, Minor: n.Minor})
			row.Note = strings.TrimPrefix(row.Note+"; node absent on the host", "; ")
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// evalTable is the decision table: the target and where it lives first,
// then one row per node or rule.
func evalTable(target cgroup.Target, p *cgroup.Policy, rows []evalRow) *report.Table {
	head := fmt.Sprintf("%s: cgroup %s", target, p.Mounts.Mode)
	if p.V1Applies {
		head += "; devices " + p.V1Path
	}
	if p.V2Applies {
		head += "; cgroup2 " + p.V2Path
		if p.V2 != nil {
			head += fmt.Sprintf(" (%d device program(s))", len(p.V2.Programs))
		}
	}
	t := &report.Table{Title: []string{head}}
	if len(rows) == 0 {
		t.Notes = []string{"no accelerator node on this host; name nodes with --device-node or devices with --rule"}
		return t
	}
	// The target's own devices.list decides most lines: name it once.
	short := func(s string) string { return s }
	if p.V1 != nil && len(p.V1.Levels) > 0 {
		list := p.V1.Levels[0].ListPath()
		t.Title = append(t.Title, fmt.Sprintf("%q below is %s", "list", list))
		short = func(s string) string { return strings.ReplaceAll(s, list+": ", "list: ") }
	}
	t.Header = []string{"NODE", "DEVICE", "R", "W", "RW", "M", "DECIDED BY"}
	for _, r := range rows {
		by := short(r.DecidedBy)
		if r.Note != "" {
			by = strings.TrimPrefix(by+"; "+r.Note, "; ")
		}
		t.Rows = append(t.Rows, []string{r.Subject, r.Device, r.Read, r.Write, r.ReadWrite, r.Mknod, by})
	}
	return t
}

// summarizeRule evaluates every device of a query rule and reports whether
// the rule's accesses are allowed for all of them.
func summarizeRule(p *cgroup.Policy, s string, r config.Rule, ds []cgroup.DeviceRef) evalRow {
	acc, _ := cgroup.ParseAccess(string(r.Permissions))
	row := evalRow{Subject: "rule " + s, Device: fmt.Sprintf("%c %s", r.Type, majMin(r))}
	denied, unknown := 0, 0
	var by, notes []string
	for _, d := range ds {
		e := evalDevice(p, "", d)
		res := p.Evaluate(d, acc).Whole.Combined
		switch {
		case !res.Known:
			unknown++
			notes = appendUnique(notes, res.Reason)
		case !res.Allowed:
			denied++
		}
		by = appendUnique(by, res.DecidedBy)
		if len(ds) == 1 {
			row.Read, row.Write, row.ReadWrite, row.Mknod = e.Read, e.Write, e.ReadWrite, e.Mknod
		}
	}
	if len(ds) > 1 {
		word := "allow"
		switch {
		case unknown > 0:
			word = "?"
		case denied == len(ds):
			word = "DENY"
		case denied > 0:
			word = fmt.Sprintf("DENY %d/%d", denied, len(ds))
		}
		row.Read, row.Write, row.ReadWrite, row.Mknod = "", "", word+" ("+string(r.Permissions)+")", ""
		notes = append(notes, fmt.Sprintf("minors 0-255 sampled for %s", r.Permissions))
	}
	if len(by) > 3 {
		by = append(by[:3], fmt.Sprintf("and %d more", len(by)-3))
	}
	row.DecidedBy = strings.Join(by, "; ")
	row.Note = strings.Join(notes, "; ")
	return row
}

func majMin(r config.Rule) string {
	f := func(v int64) string {
		if v == config.Wildcard {
			return "*"
		}
		return fmt.Sprint(v)
	}
	return f(r.Major) + ":" + f(r.Minor)
}
