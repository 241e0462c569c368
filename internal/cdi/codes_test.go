package cdi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// declaredKinds are the Kind constants of facts.go.
func declaredKinds(t *testing.T) []Kind {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "facts.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Kind
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Kind" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				k, _ := strconv.Unquote(lit.Value)
				out = append(out, Kind(k))
			}
		}
	}
	if len(out) < 30 {
		t.Fatalf("found only %d kinds in facts.go: the parse is wrong", len(out))
	}
	return out
}

// TestEveryKindHasOneCode: facts become findings by kind
// alone, so every kind is in exactly one catalog entry.
func TestEveryKindHasOneCode(t *testing.T) {
	owner := map[Kind]string{}
	codes := map[string]bool{}
	for _, c := range Codes {
		if codes[c.Code] {
			t.Errorf("code %s twice", c.Code)
		}
		codes[c.Code] = true
		switch c.Status {
		case "PASS":
			if c.Remediation != "" {
				t.Errorf("%s: a PASS code with a remediation", c.Code)
			}
		case "WARN", "FAIL", "NOT_RUN":
			if c.Remediation == "" {
				t.Errorf("%s: %s without a remediation", c.Code, c.Status)
			}
		default:
			t.Errorf("%s: status %q", c.Code, c.Status)
		}
		if c.Title == "" || len(c.Explain) < 80 || len(c.Kinds) == 0 {
			t.Errorf("%s: title, explanation or kinds missing", c.Code)
		}
		if strings.ToUpper(c.Code) != c.Code {
			t.Errorf("%s: codes are upper case", c.Code)
		}
		for _, k := range c.Kinds {
			if o, ok := owner[k]; ok {
				t.Errorf("kind %s in %s and %s", k, o, c.Code)
			}
			owner[k] = c.Code
		}
	}
	declared := map[Kind]bool{}
	for _, k := range declaredKinds(t) {
		declared[k] = true
		if _, ok := owner[k]; !ok {
			t.Errorf("kind %s has no code", k)
		}
	}
	for k := range owner {
		if !declared[k] {
			t.Errorf("a code lists kind %s, which facts.go does not declare", k)
		}
	}
}

// TestLibraryNeverReadsTheHost: the CDI library's functions that open
// host files (ReadSpec, the cache, the default cache, spec writing) are
// not called outside tests: bytes come from hostfs, so --root and
// snapshots hold.
func TestLibraryNeverReadsTheHost(t *testing.T) {
	banned := map[string]bool{"ReadSpec": true, "NewCache": true, "GetDefaultCache": true, "Configure": true,
		"Refresh": true, "InjectDevices": true, "GetErrors": true, "WithSpecDirs": true, "WithAutoRefresh": true}
	files, _ := filepath.Glob("*.go")
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "tags.cncf.io/container-device-interface/pkg/cdi" {
				local = "cdi"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && (banned[sel.Sel.Name] || sel.Sel.Name == "Cache") {
				t.Errorf("%s: %s.%s reads the host itself: read through hostfs and use ParseSpec", fset.Position(sel.Pos()), local, sel.Sel.Name)
			}
			return true
		})
	}
}
