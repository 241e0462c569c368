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

// The mode and code tables of docs/device-plugin.md are generated from
// ModeDocs and Codes (go test ./internal/deviceplugin -run TestDocs
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
