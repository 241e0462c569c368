package report

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// hostileTopology has names a hostile pci.ids in a snapshot could give:
// quotes and brackets that end a label, markup, DOT's label escapes and a
// terminal escape sequence.
func hostileTopology() *Topology {
	g := 7
	evil := "evil\" ]; x [label=\"pwn\"] <b>bold</b> \\N #quot; `tick` \x1b[2J end"
	return &Topology{Source: "snap\x1b]0;title\x07", RootComplexes: []TopoNode{{ID: "pci0000:00", Kind: TopoHostBridge,
		Children: []TopoNode{
			{ID: "0000:00:01.0", Kind: TopoRootPort, Name: evil, IDs: "8086:352a", IOMMUGroup: &g, Children: []TopoNode{
				{ID: "0000:01:00.0", Kind: TopoEndpoint, Name: evil, Accelerator: "gpu", Failing: true, IOMMUGroup: &g, Interfaces: []string{"eth\"0"}},
			}},
		}}}}
}

func TestTopologyRenderersEscapeHostText(t *testing.T) {
	tp := hostileTopology()
	var text, mmd, dot bytes.Buffer
	for _, w := range []struct {
		b *bytes.Buffer
		f func(*bytes.Buffer) error
	}{
		{&text, func(b *bytes.Buffer) error { return WriteTopologyText(b, tp) }},
		{&mmd, func(b *bytes.Buffer) error { return WriteTopologyMermaid(b, tp) }},
		{&dot, func(b *bytes.Buffer) error { return WriteTopologyDOT(b, tp) }},
	} {
		if err := w.f(w.b); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(w.b.String(), "\x1b\x07") {
			t.Errorf("a control character got through:\n%q", w.b.String())
		}
	}
	for _, l := range strings.Split(mmd.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "fn_") && strings.Contains(l, "[") {
			label := strings.ReplaceAll(strings.SplitN(l, `["`, 2)[1], "<br/>", " ")
			if strings.Count(l, `"`) != 2 || strings.ContainsAny(label, "<>`") {
				t.Errorf("mermaid label not contained: %s", l)
			}
			if strings.Contains(l, "<b>") || strings.Contains(l, "</b>") {
				t.Errorf("markup got through: %s", l)
			}
		}
	}
	if !strings.Contains(mmd.String(), "class fn_0000_01_00_0 accel") || !strings.Contains(mmd.String(), "class fn_0000_01_00_0 failing") {
		t.Errorf("mermaid classes:\n%s", mmd.String())
	}
	if !strings.Contains(text.String(), `0000:01:00.0  [FAIL GPU]  endpoint  evil" ]`) {
		t.Errorf("text:\n%s", text.String())
	}
	dotBin, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz's dot is not installed: the DOT output is not parsed (apt-get install graphviz)")
	}
	cmd := exec.Command(dotBin, "-Tsvg")
	cmd.Stdin = &dot
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Fatalf("dot: %v %s\n%s", err, errb.String(), dot.String())
	}
	// Three boxes, no node named x: the quotes stayed inside the labels.
	if n := strings.Count(out.String(), `class="node"`); n != 3 {
		t.Errorf("%d boxes, want 3:\n%s", n, dot.String())
	}
}

// unescapedQuotes counts the quotes of a DOT line that are not escaped
// by an odd run of backslashes.
func unescapedQuotes(l string) int {
	n, bs := 0, 0
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case '\\':
			bs++
			continue
		case '"':
			if bs%2 == 0 {
				n++
			}
		}
		bs = 0
	}
	return n
}

// FuzzTopologyDiagrams: whatever a host names its devices, each box stays
// one line, its Mermaid label two quotes, its DOT attributes balanced
// quotes, and no control character reaches the output.
func FuzzTopologyDiagrams(f *testing.F) {
	f.Add("NVIDIA GH100", "eth0")
	f.Add("evil\" ]; x [label=\"pwn\"] \\", "a\nb")
	f.Add("\x1b[2J#quot;<br/>`", "\\\"")
	f.Fuzz(func(t *testing.T, name, iface string) {
		tp := &Topology{Source: name, RootComplexes: []TopoNode{{ID: "pci0000:00", Kind: TopoHostBridge, Children: []TopoNode{
			{ID: "0000:00:01.0", Kind: TopoEndpoint, Name: name, Driver: iface, Interfaces: []string{iface}, NIC: true}}}}}
		var mmd, dot bytes.Buffer
		if err := WriteTopologyMermaid(&mmd, tp); err != nil {
			t.Fatal(err)
		}
		if err := WriteTopologyDOT(&dot, tp); err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{mmd.String(), dot.String()} {
			for _, r := range out {
				if r < 0x20 && r != '\n' || r == 0x7f {
					t.Fatalf("control character %q in %q", r, out)
				}
			}
		}
		boxes := 0
		for _, l := range strings.Split(mmd.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "fn_0000_00_01_0[") {
				boxes++
				if strings.Count(l, `"`) != 2 {
					t.Fatalf("mermaid label: %s", l)
				}
			}
		}
		for _, l := range strings.Split(dot.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "fn_0000_00_01_0 [") {
				boxes++
			}
			if unescapedQuotes(l)%2 != 0 {
				t.Fatalf("dot line: %s", l)
			}
		}
		if boxes != 2 {
			t.Fatalf("%d boxes:\n%s\n%s", boxes, mmd.String(), dot.String())
		}
	})
}
