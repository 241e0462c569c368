package lint

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated section of docs/lint.md")

// The rule table of docs/lint.md is generated from Codes (go test
// ./internal/lint -run TestDocs -update); this test fails when it drifts.
func TestDocsRules(t *testing.T) {
	const p = "../../docs/lint.md"
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	begin, end := "<!-- rules (generated) -->\n", "<!-- /rules -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q ... %q", p, begin, end)
	}
	doc = doc[:i+len(begin)] + rulesSection() + doc[j:]
	if *update {
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != string(b) {
		t.Error("docs/lint.md's rule table is stale: go test ./internal/lint -run TestDocs -update")
	}
}

func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

func rulesSection() string {
	var b strings.Builder
	b.WriteString("| code | status | what it finds |\n|---|---|---|\n")
	for _, c := range Codes {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", c.Code, strings.ToLower(c.Code), c.Status, cell(c.Title))
	}
	for _, c := range Codes {
		fmt.Fprintf(&b, "\n### %s\n\n%s: %s.\n\n%s\n", c.Code, c.Status, cell(c.Title), cell(c.Explain))
		if c.Remediation != "" {
			fmt.Fprintf(&b, "\nWhat to do: %s\n", cell(c.Remediation))
		}
	}
	b.WriteString("\n")
	return b.String()
}
