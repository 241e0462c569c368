package cli

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// heldBack are codes a reader's catalog proposes that no command reports,
// so explain does not list them; each says why. TestExplainKnowsEveryCode
// fails when one is reported after all (then it belongs in explain) or is
// gone.
var heldBack = map[string]string{
	"PCI_CONFIG_NOT_READABLE": "internal/iommu proposes it; layer 1 shows an unreadable config space in its evidence instead",
	"RUNTIME_LSM_CONFINED":    "internal/runtime proposes it; the container's LSM label is shown, not judged (diagnose's appliedCodesEmitted)",
}

// declaredCodes are the finding codes the repository's code declares,
// read from the source (not through any list a catalog exports, so that
// a family nobody added to explain is found): the value of every Code:
// field of a composite literal (a string, or a constant of the package or
// of another: Code: LintClean, Code: probe.CodeNoNodes), and every
// constant named Code... or code... whose value has a code's shape.
func declaredCodes(t *testing.T) map[string]string {
	t.Helper()
	shape := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)
	constName := regexp.MustCompile(`^[Cc]ode[A-Z0-9]`)
	str := func(e ast.Expr) (string, bool) {
		l, ok := e.(*ast.BasicLit)
		if !ok || l.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(l.Value)
		return s, err == nil && shape.MatchString(s)
	}
	type file struct {
		path, pkg string
		f         *ast.File
	}
	var files []file
	consts := map[string]map[string]string{} // package name -> constant -> code
	for _, dir := range []string{"..", "../../cmd"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
			if err != nil {
				return err
			}
			pkg := f.Name.Name
			files = append(files, file{p, pkg, f})
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := str(vs.Values[i]); ok {
								if consts[pkg] == nil {
									consts[pkg] = map[string]string{}
								}
								consts[pkg][name.Name] = s
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]string{}
	for _, f := range files {
		for name, s := range consts[f.pkg] {
			if constName.MatchString(name) {
				out[s] = f.path
			}
		}
		ast.Inspect(f.f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Code" {
				return true
			}
			switch v := kv.Value.(type) {
			case *ast.BasicLit:
				if s, ok := str(v); ok {
					out[s] = f.path
				}
			case *ast.Ident:
				if s, ok := consts[f.pkg][v.Name]; ok {
					out[s] = f.path
				}
			case *ast.SelectorExpr:
				if x, ok := v.X.(*ast.Ident); ok {
					if s, ok := consts[x.Name][v.Sel.Name]; ok {
						out[s] = f.path
					}
				}
			}
			return true
		})
	}
	if len(out) < 100 {
		t.Fatalf("only %d codes found in the source: the scan is wrong", len(out))
	}
	return out
}

// explain is the whole catalog: every code the repository declares,
// each once, in every family (check's and those of the commands outside
// it: plugin test, lint, cluster, claim, dra), but the held-back ones.
func TestExplainKnowsEveryCode(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range allCodes() {
		if listed[c.Code] {
			t.Errorf("%s is in two catalogs", c.Code)
		}
		listed[c.Code] = true
	}
	declared := declaredCodes(t)
	var missing []string
	for code, file := range declared {
		if !listed[code] && heldBack[code] == "" {
			missing = append(missing, code+" ("+file+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s is declared but explain does not list it", m)
	}
	for code := range listed {
		if _, ok := declared[code]; !ok {
			t.Errorf("explain lists %s, which the source scan does not find: the scan misses a way codes are declared", code)
		}
	}
	for code := range heldBack {
		if listed[code] {
			t.Errorf("%s is held back but explain lists it: drop it from heldBack", code)
		}
		if _, ok := declared[code]; !ok {
			t.Errorf("%s is held back but declared nowhere: drop it from heldBack", code)
		}
	}
}

// accel-doctor answers explain for the codes of every command, those of
// accel-doctor-kube's and accel-doctor-kubelet's too, itself: no other
// binary is beside this test's.
func TestExplainAnswersWithoutOtherBinaries(t *testing.T) {
	for _, code := range []string{"lint_clean", "CLUSTER_NODE_OK", "CLAIM_ALLOCATED", "DRA_FLEET_OK", "DRA_PLUGIN_CONTRACT_OK", "PLUGIN_REGISTERED", "KUBELET_PLUGIN_SOCKET_STALE", "CHECK_CRASHED"} {
		out, stderr, exit := run(t, "explain", code)
		layer := "  (layer 6 (Kubernetes))\n"
		if code == "CHECK_CRASHED" {
			layer = "  (any layer)\n"
		}
		if exit != 0 || !strings.HasPrefix(out, strings.ToUpper(code)+layer) {
			t.Errorf("explain %s: exit %d, %q%s", code, exit, out, stderr)
		}
	}
	for _, c := range allCodes() {
		if out, _, exit := run(t, "explain", c.Code); exit != 0 || !strings.HasPrefix(out, c.Code+"  (") {
			t.Errorf("explain %s: exit %d, %q", c.Code, exit, out)
		}
	}
	out, _, exit := run(t, "explain")
	if exit != 0 || strings.Contains(out, KubeBinary) {
		t.Errorf("explain: exit %d, and it sends the reader to %s:\n%s", exit, KubeBinary, out[max(0, len(out)-300):])
	}
	// The long form of a DRA plugin code is made from its title.
	if out, _, _ := run(t, "explain", "DRA_PLUGIN_NOT_REGISTERED"); !strings.Contains(out, "Reported by `plugin test --dra` (status FAIL)") {
		t.Errorf("explain DRA_PLUGIN_NOT_REGISTERED:\n%s", out)
	}
}

type explainedJSON struct {
	Code        string `json:"code"`
	Layer       *int   `json:"layer"`
	Status      string `json:"status"`
	Summary     string `json:"summary"`
	Explain     string `json:"explain"`
	Remediation string `json:"remediation"`
}

// -o json is an array of every code with the report's field names.
func TestExplainJSON(t *testing.T) {
	out, stderr, exit := run(t, "explain", "-o", "json")
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	var got []explainedJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out[:min(len(out), 500)])
	}
	all := allCodes()
	if len(got) != len(all) {
		t.Fatalf("%d codes, explain has %d", len(got), len(all))
	}
	for i, c := range got {
		if c.Code != all[i].Code || c.Summary == "" || c.Explain == "" {
			t.Errorf("%d: %+v, want %s with summary and explain", i, c, all[i].Code)
		}
		if c.Layer == nil && c.Code != "CHECK_CRASHED" || c.Layer != nil && (*c.Layer < 1 || *c.Layer > len(report.Layers)) {
			t.Errorf("%s: layer %v", c.Code, c.Layer)
		}
	}
	out, _, exit = run(t, "explain", "--output=json", "lint_privileged_gpu")
	got = nil
	if err := json.Unmarshal([]byte(out), &got); err != nil || exit != 0 || len(got) != 1 {
		t.Fatalf("explain -o json LINT_PRIVILEGED_GPU: exit %d, %v: %s", exit, err, out)
	}
	if c := got[0]; c.Code != "LINT_PRIVILEGED_GPU" || c.Layer == nil || *c.Layer != 6 || c.Status != "WARN" || c.Remediation == "" {
		t.Errorf("explain -o json LINT_PRIVILEGED_GPU: %+v", c)
	}
	// docs/report-schema.md's sample is this output.
	doc, err := os.ReadFile("../../docs/report-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "`accel-doctor explain -o json PLUGIN_DEVICE_ID_INVALID`:\n\n```json\n"
	_, sample, _ := strings.Cut(string(doc), head)
	sample, _, _ = strings.Cut(sample, "```")
	if out, _, _ := run(t, "explain", "-o", "json", "PLUGIN_DEVICE_ID_INVALID"); sample == "" || out != sample {
		t.Errorf("docs/report-schema.md's sample of explain -o json is not its output:\n%s\nwant:\n%s", sample, out)
	}
	// Check's codes have no status of their own: none is made up.
	out, _, _ = run(t, "explain", "-o", "json", "CGROUP_DEVICE_DENIED")
	if strings.Contains(out, `"status"`) || !strings.Contains(out, `"layer": 4`) {
		t.Errorf("explain -o json CGROUP_DEVICE_DENIED:\n%s", out)
	}
}

// -o markdown: a table row and a section for every code.
func TestExplainMarkdown(t *testing.T) {
	out, stderr, exit := run(t, "explain", "-o", "markdown")
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	for _, c := range allCodes() {
		if !strings.Contains(out, "\n| [`"+c.Code+"`](#"+strings.ToLower(c.Code)+") | ") || !strings.Contains(out, "\n### "+c.Code+"\n") {
			t.Errorf("%s: no row or no section", c.Code)
		}
	}
	out, _, _ = run(t, "explain", "-o", "md", "LINT_CLEAN", "CHECK_CRASHED")
	want := "| code | layer | status | summary |\n|---|---|---|---|\n| [`LINT_CLEAN`](#lint_clean) | 6 | PASS | no lint rule fired on this workload |\n| [`CHECK_CRASHED`](#check_crashed) | any | - | a check stopped with an internal error |\n\n### LINT_CLEAN\n\nLayer 6 (Kubernetes), PASS: no lint rule fired on this workload.\n\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "\n### CHECK_CRASHED\n\nAny layer: a check stopped") {
		t.Errorf("explain -o md LINT_CLEAN CHECK_CRASHED:\n%s", out)
	}
}

// An unknown code or format is a usage error (exit 2); a code that is a
// typo or a part of one is suggested.
func TestExplainUnknownCode(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want []string // in the error, in order
	}{
		{"LINT_PRIVILEGD_GPU", []string{`unknown code "LINT_PRIVILEGD_GPU": did you mean LINT_PRIVILEGED_GPU?`}},
		{"lint-privileged-gpu", []string{"did you mean LINT_PRIVILEGED_GPU?"}},
		{"CGROUP_DENIED", []string{"did you mean", "CGROUP_DEVICE_DENIED"}},
		{"plugin_no_device", []string{"did you mean PLUGIN_NO_DEVICES"}},
		{"NOTHING_LIKE_ANY", []string{`unknown code "NOTHING_LIKE_ANY" (accel-doctor explain lists them all)`}},
	} {
		out, stderr, exit := run(t, "explain", "LINT_CLEAN", c.arg)
		if exit != 2 || out != "" {
			t.Errorf("explain %s: exit %d, stdout %q", c.arg, exit, out)
		}
		rest := stderr
		for _, w := range c.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("explain %s: %q lacks %q", c.arg, stderr, w)
				break
			}
			rest = rest[i+len(w):]
		}
		if c.arg == "NOTHING_LIKE_ANY" && strings.Contains(stderr, "did you mean") {
			t.Errorf("explain %s suggests: %q", c.arg, stderr)
		}
	}
	if _, stderr, exit := run(t, "explain", "-o", "yaml"); exit != 2 || !strings.Contains(stderr, `unknown output "yaml"`) {
		t.Errorf("explain -o yaml: exit %d, %q", exit, stderr)
	}
}

func TestNearCodes(t *testing.T) {
	all := allCodes()
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"LINT_CLEAN", []string{"LINT_CLEAN"}},
		{"CGROUP_DEVICE_DENY", []string{"CGROUP_DEVICE_DENIED"}},
		{"X", nil},
		{"", nil},
	} {
		got := nearCodes(all, c.in)
		if len(got) > 3 || len(c.want) == 0 && len(got) != 0 || len(c.want) > 0 && (len(got) == 0 || got[0] != c.want[0]) {
			t.Errorf("nearCodes(%q) = %v, want first %v", c.in, got, c.want)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d", d)
	}
	if got := nearCodes(all, "DEVICE"); len(got) != 3 {
		t.Errorf("nearCodes(DEVICE), a word of many codes: %v, want three", got)
	}
}

// The command lines accel-doctor hands to accel-doctor-kube before its
// own commands see them: plugin mock/test with --dra, global flags first
// or not; nothing else.
func TestWantsKube(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"plugin", "mock", "--dra", "--driver", "x"}, true},
		{[]string{"--root", "/host", "plugin", "test", "--dra=true"}, true},
		{[]string{"plugin", "mock", "--mode", "healthy"}, false},
		{[]string{"check", "--dra"}, false},
		{[]string{"plugin"}, false},
	} {
		if got := wantsKube(c.args); got != c.want {
			t.Errorf("%q: %v, want %v", c.args, got, c.want)
		}
	}
}
