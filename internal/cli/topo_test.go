package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/topo"
)

var updateTopo = flag.Bool("update-topo", false, "rewrite the topo golden files in testdata/golden/topo")

const topoGolden = "../../testdata/golden/topo"

// topoOf builds the report models of a fixture, named as the golden files
// name it (the source of a --root run holds the absolute path).
func topoOf(t *testing.T, host string, failing ...string) (*report.Topology, *report.AffinityMatrix) {
	t.Helper()
	// As the command reads them: the matrix with the local CPUs, the
	// tree without.
	root := hostfs.MustNew(hosts + host)
	tree, inv, err := topo.Read(root, topo.Options{Failing: failing})
	if err != nil {
		t.Fatal(err)
	}
	mtree, _, err := topo.Read(root, topo.Options{Failing: failing, LocalCPUs: true})
	if err != nil {
		t.Fatal(err)
	}
	src := "fixture " + host
	return TopologyReport(tree, inv, src), MatrixReport(mtree, src)
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

// TestTopoGolden: the tree of two fixtures in every format, and their
// matrices. nvidia-h100x8 (two NUMA nodes, nine root complexes, the
// roles told by the chain: 64-byte config spaces) is drawn with GPU 3
// (0000:5d:00.0) failing; gpu4-switch-noacs (whole config spaces, one
// IOMMU group for the switch's ports and GPUs) without.
func TestTopoGolden(t *testing.T) {
	for _, c := range []struct {
		host    string
		failing []string
	}{
		{"nvidia-h100x8", []string{"0000:5d:00.0", "/dev/nvidia5"}},
		{"gpu4-switch-noacs", nil},
	} {
		t.Run(c.host, func(t *testing.T) {
			tp, m := topoOf(t, c.host, c.failing...)
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

// TestTopoMarksFailing: the failing GPU is marked in every drawing, the
// other GPUs are not.
func TestTopoMarksFailing(t *testing.T) {
	tp, m := topoOf(t, "nvidia-h100x8", "0000:5d:00.0")
	var text, mmd, dot bytes.Buffer
	if err := report.WriteTopologyText(&text, tp); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteTopologyMermaid(&mmd, tp); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteTopologyDOT(&dot, tp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "0000:5d:00.0  [FAIL GPU]") || strings.Count(text.String(), "[FAIL") != 1 {
		t.Errorf("text marks:\n%s", text.String())
	}
	if !strings.Contains(mmd.String(), "class fn_0000_5d_00_0 failing") {
		t.Errorf("mermaid lacks the failing class")
	}
	if strings.Count(dot.String(), `penwidth=4`) != 1 || !strings.Contains(dot.String(), `fn_0000_5d_00_0 [label="0000:5d:00.0 [FAIL GPU]`) {
		t.Errorf("dot marks the failing GPU %d times", strings.Count(dot.String(), `penwidth=4`))
	}
	if d := m.Devices[3]; d.Address != "0000:5d:00.0" || !d.Failing || m.Devices[2].Failing {
		t.Errorf("matrix devices %+v", m.Devices[2:4])
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
	tp, _ := topoOf(t, "nvidia-h100x8", "0000:5d:00.0")
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
