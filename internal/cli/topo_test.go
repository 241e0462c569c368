package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/topo"
)

var updateTopo = flag.Bool("update-topo", false, "rewrite the topo golden files in testdata/golden/topo")

const topoGolden = "../../testdata/golden/topo"

// topoOf builds the report models of a fixture as the command does, the
// checks' marks included, named as the golden files name it (the source
// of a --root run holds the absolute path).
func topoOf(t *testing.T, host string) (*report.Topology, *report.AffinityMatrix) {
	t.Helper()
	// As the command reads them: the matrix with the local CPUs, the
	// tree without.
	root := hostfs.MustNew(hosts + host)
	src := "fixture " + host
	tree, inv, chk, err := checkedTopo(root, topo.Options{}, src)
	if err != nil {
		t.Fatal(err)
	}
	mtree, _, mchk, err := checkedTopo(root, topo.Options{LocalCPUs: true}, src)
	if err != nil {
		t.Fatal(err)
	}
	return TopologyReport(tree, inv, src, chk), MatrixReport(mtree, src, mchk)
}

func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join(topoGolden, name)
	if *updateTopo {
		if err := os.MkdirAll(topoGolden, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test ./internal/cli -run TopoGolden -update-topo writes it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (go test ./internal/cli -run TopoGolden -update-topo rewrites it); got:\n%s", p, got)
	}
}

// TestTopoGolden: the tree of three fixtures in every format, and their
// matrices, as topo draws them after its checks. nvidia-h100x8 (two NUMA
// nodes, nine root complexes, the roles told by the chain: 64-byte config
// spaces) is healthy; demo-h100x8-faults, the same host with the demo's
// faults, has a GPU that fails (0000:ab:00.0, its /dev/nvidia5 missing)
// and one that warns (0000:5d:00.0, its link at x8 of x16);
// gpu4-switch-noacs (whole config spaces, one IOMMU group for the
// switch's ports and GPUs) is healthy.
func TestTopoGolden(t *testing.T) {
	for _, c := range []struct {
		host string
	}{
		{"nvidia-h100x8"},
		{"demo-h100x8-faults"},
		{"gpu4-switch-noacs"},
	} {
		t.Run(c.host, func(t *testing.T) {
			tp, m := topoOf(t, c.host)
			for _, f := range []struct {
				ext   string
				write func(*bytes.Buffer) error
			}{
				{"txt", func(b *bytes.Buffer) error { return report.WriteTopologyText(b, tp) }},
				{"mmd", func(b *bytes.Buffer) error { return report.WriteTopologyMermaid(b, tp) }},
				{"dot", func(b *bytes.Buffer) error { return report.WriteTopologyDOT(b, tp) }},
				{"md", func(b *bytes.Buffer) error { return report.WriteTopologyMarkdown(b, tp) }},
				{"json", func(b *bytes.Buffer) error { return report.WriteJSONValue(b, tp) }},
				{"matrix.txt", func(b *bytes.Buffer) error { return report.WriteMatrixText(b, m) }},
				{"matrix.md", func(b *bytes.Buffer) error { return report.WriteMatrixMarkdown(b, m) }},
				{"matrix.json", func(b *bytes.Buffer) error { return report.WriteJSONValue(b, m) }},
			} {
				var b bytes.Buffer
				if err := f.write(&b); err != nil {
					t.Fatal(err)
				}
				goldenFile(t, c.host+"."+f.ext, b.Bytes())
			}
		})
	}
}

// TestTopoOutputFormats: topo takes mermaid and dot, the other commands
// still do not; -o is checked before any work (a root that does not exist
// is not even opened); --matrix refuses the diagram formats.
func TestTopoOutputFormats(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"topo", "--root", hosts + "gpu4-switch-noacs", "-o", "mermaid"}, 0, ""},
		{[]string{"topo", "--root", hosts + "gpu4-switch-noacs", "-o", "dot"}, 0, ""},
		{[]string{"topo", "--root", hosts + "gpu4-switch-noacs", "-o", "md"}, 0, ""},
		{[]string{"topo", "--root", hosts + "gpu4-switch-noacs", "--matrix", "-o", "json"}, 0, ""},
		{[]string{"topo", "--snapshot", "demo", "--matrix"}, 0, ""},
		{[]string{"topo", "--root", "/nonexistent/dir", "-o", "yaml"}, 2, `unknown output "yaml" (want text, json, markdown, mermaid, dot)`},
		{[]string{"topo", "--root", "/nonexistent/dir", "--matrix", "-o", "dot"}, 2, "--matrix prints text, json or markdown"},
		{[]string{"topo", "--root", "/nonexistent/dir"}, 2, "/nonexistent/dir"},
		{[]string{"pci", "--root", hosts + "gpu4-switch-noacs", "-o", "mermaid"}, 2, `unknown output "mermaid" (want text, json, markdown)`},
		{[]string{"check", "--root", "/nonexistent/dir", "-o", "dot"}, 2, `unknown output "dot" (want text, json, markdown)`},
		{[]string{"topo", "--root", hosts + "gpu4-switch-noacs", "--snapshot", "demo"}, 2, "--root and --snapshot"},
	} {
		out, stderr, code := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.err)
		}
		if c.code == 0 && out == "" {
			t.Errorf("%v: no output", c.args)
		}
	}
	out, _, _ := run(t, "topo", "--root", hosts+"gpu4-switch-noacs", "--matrix", "-o", "json")
	var m report.AffinityMatrix
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Devices) != 5 || m.Classes[0][1] != "PIX" || m.Classes[0][4] != "PHB" {
		t.Errorf("matrix %+v", m)
	}
}

// TestTopoDOTRendersWithGraphviz renders a fixture's DOT with Graphviz
// (Debian's graphviz package; .ci/run installs it) and checks that dot
// accepts it without a warning and draws every box: each function's
// address is the title of a node in the SVG. TOPO_PNG=FILE also writes a
// PNG to look at.
func TestTopoDOTRendersWithGraphviz(t *testing.T) {
	dotBin, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz's dot is not installed (apt-get install graphviz; .ci/run installs it)")
	}
	tp, _ := topoOf(t, "demo-h100x8-faults")
	var src bytes.Buffer
	if err := report.WriteTopologyDOT(&src, tp); err != nil {
		t.Fatal(err)
	}
	render := func(format string) []byte {
		cmd := exec.Command(dotBin, "-T"+format)
		cmd.Stdin = bytes.NewReader(src.Bytes())
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("dot -T%s: %v: %s", format, err, errb.String())
		}
		if errb.Len() > 0 {
			t.Errorf("dot -T%s warns: %s", format, errb.String())
		}
		return out.Bytes()
	}
	svg := string(render("svg"))
	var ids []string
	var walk func(n *report.TopoNode)
	walk = func(n *report.TopoNode) {
		ids = append(ids, n.ID)
		for i := range n.Children {
			walk(&n.Children[i])
		}
	}
	for i := range tp.RootComplexes {
		walk(&tp.RootComplexes[i])
	}
	for _, id := range ids {
		if !strings.Contains(svg, ">"+id) {
			t.Errorf("%s is not drawn", id)
		}
	}
	if n := strings.Count(svg, `class="node"`); n != len(ids) {
		t.Errorf("%d boxes drawn, want %d", n, len(ids))
	}
	if n := strings.Count(svg, `class="cluster"`); n != 2+len(tp.IOMMUGroups) {
		t.Errorf("%d clusters, want 2 NUMA nodes and %d groups", n, len(tp.IOMMUGroups))
	}
	png := render("png")
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("dot -Tpng wrote no PNG (%d bytes)", len(png))
	}
	if p := os.Getenv("TOPO_PNG"); p != "" {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// demoGPUs are the demo's GPUs and the mark its checks give each: GPU5's
// /dev/nvidia5 is missing (DEVNODE_MISSING, a FAIL), GPU3's link trained
// at x8 of x16 (PCI_LINK_DEGRADED, a WARN); the other six are healthy.
var demoGPUs = map[string]string{
	"0000:18:00.0": "", "0000:2a:00.0": "", "0000:3a:00.0": "", "0000:5d:00.0": "WARN",
	"0000:9a:00.0": "", "0000:ab:00.0": "FAIL", "0000:ba:00.0": "", "0000:db:00.0": "",
}

// demoBox is the box id both diagram languages give a function.
func demoBox(bdf string) string { return "fn_" + strings.NewReplacer(":", "_", ".", "_").Replace(bdf) }

// TestTopoMarksTheDemosFailingGPUs: topo runs check's layers 1-3 on the
// demo and every renderer marks the GPU a check failed on as failing,
// the one a check warned on as warning, and neither the other six; each
// drawing's legend says what the marks are. --check=false marks none and
// says so.
func TestTopoMarksTheDemosFailingGPUs(t *testing.T) {
	// marksOf reads each GPU's mark from one format's output.
	type marksOf func(t *testing.T, out string) map[string]string
	lineMarks := func(prefix func(bdf string) string, fail, warn string) marksOf {
		return func(t *testing.T, out string) map[string]string {
			got := map[string]string{}
			for bdf := range demoGPUs {
				var line string
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, prefix(bdf)) {
						line = l
						break
					}
				}
				switch {
				case line == "":
					t.Errorf("no line for %s", bdf)
				case strings.Contains(line, fail):
					got[bdf] = "FAIL"
				case strings.Contains(line, warn):
					got[bdf] = "WARN"
				default:
					got[bdf] = ""
				}
			}
			return got
		}
	}
	text := lineMarks(func(b string) string { return b + "  [" }, "[FAIL GPU]", "[WARN GPU]")
	dot := lineMarks(func(b string) string { return demoBox(b) + " [label=" }, `color="#c62828"`, `color="#ef6c00"`)
	matrix := lineMarks(func(b string) string { return ": " + b + " " }, "[FAIL]", "[WARN]")
	matrixMD := lineMarks(func(b string) string { return ": " + b + " " }, `\[FAIL\]`, `\[WARN\]`)
	// Mermaid marks by class lines: "class a,b failing".
	mermaid := func(t *testing.T, out string) map[string]string {
		got := map[string]string{}
		for bdf := range demoGPUs {
			got[bdf] = ""
		}
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) != 3 || f[0] != "class" || f[2] != "failing" && f[2] != "warning" {
				continue
			}
			for bdf := range demoGPUs {
				if slices.Contains(strings.Split(f[1], ","), demoBox(bdf)) {
					got[bdf] = map[string]string{"failing": "FAIL", "warning": "WARN"}[f[2]]
				}
			}
		}
		if !strings.Contains(out, "classDef failing stroke:#c62828") || !strings.Contains(out, "classDef warning stroke:#ef6c00") {
			t.Error("the failing and warning classes are not defined")
		}
		return got
	}
	treeJSON := func(t *testing.T, out string) map[string]string {
		var tp report.Topology
		if err := json.Unmarshal([]byte(out), &tp); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		var walk func(ns []report.TopoNode)
		walk = func(ns []report.TopoNode) {
			for _, n := range ns {
				if _, ok := demoGPUs[n.ID]; ok {
					got[n.ID] = map[[2]bool]string{{true, false}: "FAIL", {false, true}: "WARN", {false, false}: ""}[[2]bool{n.Failing, n.Warning}]
				}
				walk(n.Children)
			}
		}
		walk(tp.RootComplexes)
		return got
	}
	matrixJSON := func(t *testing.T, out string) map[string]string {
		var m report.AffinityMatrix
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, d := range m.Devices {
			if _, ok := demoGPUs[d.Address]; ok {
				got[d.Address] = map[[2]bool]string{{true, false}: "FAIL", {false, true}: "WARN", {false, false}: ""}[[2]bool{d.Failing, d.Warning}]
			}
		}
		return got
	}
	const textLegend = "[FAIL]: a check failed on the function; [WARN]: a check warned on it"
	const outlines = "red outline: a check failed on the function"
	for _, c := range []struct {
		args   []string
		marks  marksOf
		legend string
	}{
		{[]string{"-o", "text"}, text, textLegend},
		{[]string{"-o", "dot"}, dot, outlines + "   orange outline: a check warned on it (accel-doctor topo lists the findings)"},
		{[]string{"-o", "mermaid"}, mermaid, ""},
		{[]string{"-o", "markdown"}, mermaid, "- " + outlines + "; orange outline: a check warned on it"},
		{[]string{"-o", "json"}, treeJSON, ""},
		{[]string{"--matrix"}, matrix, "[FAIL]: a check failed on the device; [WARN]: a check warned on it"},
		{[]string{"--matrix", "-o", "markdown"}, matrixMD, `\[FAIL\]: a check failed on the device; \[WARN\]: a check warned on it`},
		{[]string{"--matrix", "-o", "json"}, matrixJSON, ""},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"topo", "--snapshot", "demo"}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := c.marks(t, out); !maps.Equal(got, demoGPUs) {
				t.Errorf("marks %v, want %v", got, demoGPUs)
			}
			if !strings.Contains(out, c.legend) {
				t.Errorf("no legend %q:\n%s", c.legend, out)
			}
			// The notes name the findings behind the marks; a diagram,
			// which has none, names the command that does.
			if f := c.args[len(c.args)-1]; f != "mermaid" && f != "dot" {
				plain := strings.ReplaceAll(out, `\_`, "_")
				if !strings.Contains(plain, "FAIL DEVNODE_MISSING /dev/nvidia5") || !strings.Contains(plain, "WARN PCI_LINK_DEGRADED 0000:5d:00.0") ||
					!strings.Contains(out, "accel-doctor check --layer pci,driver,devnode") {
					t.Errorf("the notes lack the findings:\n%s", out)
				}
			}
			if c.args[len(c.args)-1] == "json" && !strings.Contains(out, `"checked": true`) {
				t.Error(`no "checked": true`)
			}
			off, _, code := run(t, append([]string{"topo", "--snapshot", "demo", "--check=false"}, c.args...)...)
			if code != 0 {
				t.Fatalf("--check=false: exit %d", code)
			}
			none := map[string]string{}
			for bdf := range demoGPUs {
				none[bdf] = ""
			}
			if got := c.marks(t, off); !maps.Equal(got, none) {
				t.Errorf("--check=false marks %v", got)
			}
			if c.legend != "" && !strings.Contains(off, "not checked (--check=false)") {
				t.Errorf("--check=false: the legend does not say nothing is marked:\n%s", off)
			}
			if c.args[len(c.args)-1] == "json" && !strings.Contains(off, `"checked": false`) {
				t.Error(`--check=false: no "checked": false`)
			}
		})
	}
}
