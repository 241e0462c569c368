package dramock

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/dra.md")

// docs/dra.md's mode and code tables are generated from ModeDocs and Codes
// (go test ./internal/dramock -run TestDocs -update); this fails when they
// drift.
func TestDocsTables(t *testing.T) {
	p := filepath.Join("..", "..", "docs", "dra.md")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	doc := section(t, string(b), "modes", modesTable())
	doc = section(t, doc, "codes", codesTable())
	if *update {
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != string(b) {
		t.Error("docs/dra.md's generated tables are stale: go test ./internal/dramock -run TestDocs -update")
	}
}

func section(t *testing.T, doc, name, body string) string {
	begin, end := "<!-- "+name+" (generated) -->\n", "<!-- /"+name+" -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/dra.md lacks the markers %q ... %q", begin, end)
	}
	return doc[:i+len(begin)] + body + doc[j:]
}

func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

func modesTable() string {
	var b strings.Builder
	b.WriteString("| mode | what the mock does | the symptom | `plugin test --dra` finds |\n|---|---|---|---|\n")
	for _, d := range ModeDocs {
		codes := "nothing (needs the API server)"
		if len(d.Codes) > 0 {
			codes = "`" + strings.Join(d.Codes, "`, `") + "`"
		}
		if d.Mode == ModeHealthy {
			codes = "`" + CodeContractOK + "` (PASS)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Mode, cell(d.Does), cell(d.Symptom), codes)
	}
	return b.String()
}

func codesTable() string {
	var b strings.Builder
	b.WriteString("| code | status | meaning | what to do |\n|---|---|---|---|\n")
	for _, c := range Codes {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", c.Code, c.Status, cell(c.Title), cell(c.Remediation))
	}
	return b.String()
}
