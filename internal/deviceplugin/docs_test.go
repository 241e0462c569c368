package deviceplugin

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/device-plugin.md")

// The mode, code and kubelet tables of docs/device-plugin.md are
// generated from ModeDocs, Codes and KubeletMirrors (go test ./internal/deviceplugin -run TestDocs
// -update); this test fails when they drift.
func TestDocsTables(t *testing.T) {
	p := filepath.Join(repoRoot(t), "docs/device-plugin.md")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	doc = replaceSection(t, doc, "modes", modesTable())
	doc = replaceSection(t, doc, "codes", codesTable())
	doc = replaceSection(t, doc, "kubelet", kubeletTable())
	if *update {
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != string(b) {
		t.Error("docs/device-plugin.md's generated tables are stale: go test ./internal/deviceplugin -run TestDocs -update")
	}
}

func replaceSection(t *testing.T, doc, name, body string) string {
	begin, end := "<!-- "+name+" (generated) -->\n", "<!-- /"+name+" -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/device-plugin.md lacks the markers %q ... %q", begin, end)
	}
	return doc[:i+len(begin)] + body + doc[j:]
}

func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

func modesTable() string {
	var b strings.Builder
	b.WriteString("| mode | what the mock does | the symptom in a cluster | `plugin test` finds |\n|---|---|---|---|\n")
	for _, d := range ModeDocs {
		codes := "nothing"
		if len(d.Codes) > 0 {
			codes = "`" + strings.Join(d.Codes, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Mode, cell(d.Does), cell(d.Symptom), codes)
	}
	return b.String()
}

func codesTable() string {
	var b strings.Builder
	for _, c := range Codes {
		fmt.Fprintf(&b, "### %s (%s)\n\n%s.\n\n%s\n", c.Code, c.Status, strings.ToUpper(c.Title[:1])+c.Title[1:], strings.Join(strings.Fields(c.Explain), " "))
		if c.Remediation != "" {
			fmt.Fprintf(&b, "\nWhat to do: %s\n", c.Remediation)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// kubeletTable is "What the kubelet does": each row a behaviour of the
// device manager, the functions that have it (grouped by file), and the
// check of `plugin test` that mirrors it, with its codes.
func kubeletTable() string {
	var b strings.Builder
	b.WriteString("| the kubelet's device manager | where (kubernetes/kubernetes) | `plugin test` | codes |\n|---|---|---|---|\n")
	for _, m := range KubeletMirrors {
		var files []string
		funcs := map[string][]string{}
		for _, f := range m.Kubelet {
			if _, ok := funcs[f.File]; !ok {
				files = append(files, f.File)
			}
			funcs[f.File] = append(funcs[f.File], "`"+f.Func+"`")
		}
		var where []string
		for _, f := range files {
			where = append(where, strings.Join(funcs[f], ", ")+" in `"+f+"`")
		}
		if len(where) == 0 {
			where = []string{"none"}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", cell(m.Does), strings.Join(where, "; "), cell(m.Check), strings.Join(m.Codes, "`, `"))
	}
	return b.String()
}

// Every code `plugin test` reports is in the kubelet table of
// docs/device-plugin.md (read from the file, not from KubeletMirrors),
// once, and the table names no code that does not exist; every row
// names the kubelet's functions but the NOT_RUN one.
func TestKubeletTableNamesEveryCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs/device-plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, "<!-- kubelet (generated) -->"), strings.Index(doc, "<!-- /kubelet -->")
	if i < 0 || j < i {
		t.Fatal("docs/device-plugin.md has no kubelet table")
	}
	if k := strings.Index(doc, "## `plugin test`"); k < 0 || k > i || strings.Contains(doc[k+1:i], "\n## ") {
		t.Error("the kubelet table is not in the section `plugin test`")
	}
	table := doc[i:j]
	inTable := map[string]int{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 4 || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "|---") {
			continue
		}
		last := cells[len(cells)-1]
		if last == "codes |" {
			continue // the header
		}
		for _, c := range strings.Split(strings.TrimSuffix(last, " |"), ", ") {
			inTable[strings.Trim(c, "`")]++
		}
		if !strings.Contains(last, "`"+CodeNotRun+"`") && !strings.Contains(cells[1], "`pkg/") {
			t.Errorf("a row names no kubelet file: %s", line)
		}
	}
	for _, c := range Codes {
		if inTable[c.Code] != 1 {
			t.Errorf("%s is in the kubelet table %d times, want once", c.Code, inTable[c.Code])
		}
	}
	for c := range inTable {
		if _, ok := CodeOf(c); !ok {
			t.Errorf("the kubelet table names %q, which is no code", c)
		}
	}
}
