package kubecli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/lint"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

const lintData = "../lint/testdata/"

func TestLintExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	configMap := write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
	empty := write("empty.yaml", "# nothing\n")
	config := write("config.yaml", "resources: []\n")
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"planted mistakes FAIL", []string{"lint", "-f", lintData + "planted"}, 1},
		{"clean manifests", []string{"lint", "-f", lintData + "clean"}, 0},
		{"a WARN alone", []string{"lint", "-f", lintData + "planted/LINT_PRIVILEGED_GPU.yaml"}, 0},
		{"recursive", []string{"lint", "-R", "-f", lintData}, 1},
		{"a directory with no manifest at its top", []string{"lint", "-f", lintData}, 2},
		{"only kinds lint does not read", []string{"lint", "-f", configMap}, 2},
		{"nothing in the input", []string{"lint", "-f", empty}, 2},
		{"only a document that is no object", []string{"lint", "-f", config}, 2},
		{"a document that is no object beside clean manifests", []string{"lint", "-f", config, "-f", lintData + "clean"}, 0},
		{"no -f", []string{"lint"}, 2},
		{"a missing file", []string{"lint", "-f", filepath.Join(dir, "absent.yaml")}, 2},
		{"stdin twice", []string{"lint", "-f", "-", "-f", "-"}, 2},
		{"unknown output", []string{"lint", "-f", configMap, "-o", "yaml"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, stderr, code := run(t, c.args...); code != c.code {
				t.Errorf("exit %d, want %d: %s", code, c.code, stderr)
			}
		})
	}
}

// The JSON report of the planted manifests holds each planted code, and
// the clean ones' holds only LINT_CLEAN; markdown renders the same report.
func TestLintReport(t *testing.T) {
	out, _, code := run(t, "lint", "-f", lintData+"planted", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range rep.Findings {
		got[f.Code] = true
		if f.Layer != report.LayerKube || f.Check != lint.CheckID {
			t.Errorf("%s: layer %d, check %q", f.Code, f.Layer, f.Check)
		}
	}
	files, _ := filepath.Glob(lintData + "planted/*.yaml")
	for _, p := range files {
		if c := strings.TrimSuffix(filepath.Base(p), ".yaml"); !got[c] {
			t.Errorf("the report lacks %s", c)
		}
	}
	if rep.Command != "lint" || rep.Verdict.Status != report.Fail {
		t.Errorf("command %q verdict %s", rep.Command, rep.Verdict.Status)
	}

	out, _, code = run(t, "lint", "-f", lintData+"clean", "-o", "markdown")
	if code != 0 || !strings.Contains(out, "| PASS |") || strings.Contains(out, "| WARN |") || strings.Contains(out, "| FAIL |") {
		t.Errorf("exit %d, markdown:\n%s", code, out)
	}
}

func TestLintStdin(t *testing.T) {
	f, err := os.Open(lintData + "planted/LINT_EXTENDED_REQUEST_NOT_LIMIT.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	out, stderr, code := run(t, "lint", "-f", "-")
	if code != 1 || !strings.Contains(out, lint.CodeRequestNotLimit) || !strings.Contains(out, "-, document 1") {
		t.Errorf("exit %d: %s%s", code, out, stderr)
	}
}

func TestExplainLintCode(t *testing.T) {
	out, _, code := run(t, "explain", "lint_hostpath_device_node")
	if code != 0 || !strings.Contains(out, "LINT_HOSTPATH_DEVICE_NODE  (layer 6 (Kubernetes))") || !strings.Contains(out, "What to do:") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// `lint -f deploy/ -R` over the repository's own manifests: exit 0, no
// FAIL or WARN, every workload LINT_CLEAN, the objects lint does not
// judge in one line, the plugin's config (no apiVersion, no kind) noted
// as no Kubernetes object. The same tree with a broken manifest added
// fails on it.
func TestLintRepositoryDeployTree(t *testing.T) {
	const deploy = "../../deploy"
	out, stderr, code := run(t, "lint", "-f", deploy, "-R", "-o", "json")
	if code != 0 {
		t.Fatalf("lint -f deploy/ -R: exit %d\n%s%s", code, out, stderr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	clean, notJudged, notObjects := 0, 0, 0
	for _, f := range rep.Findings {
		switch f.Code {
		case lint.CodeClean:
			clean++
		case lint.CodeKindSkipped:
			notJudged++
		case lint.CodeNotAnObject:
			notObjects++
			if !strings.Contains(f.Evidence[0].Value, "plugin/plugin.yaml document 1") {
				t.Errorf("the note names %q, want deploy/plugin/plugin.yaml", f.Evidence[0].Value)
			}
		default:
			t.Errorf("%s %s %s: %s", f.Status, f.Code, f.Subject, f.Summary)
		}
	}
	// The agent, the plugin, the check Job, the gated Pod.
	if clean != 4 || notJudged != 1 || notObjects != 1 {
		t.Errorf("%d clean, %d not-judged findings, %d not-an-object: want 4, 1, 1\n%s", clean, notJudged, notObjects, out)
	}

	text, _, code := run(t, "lint", "-f", deploy, "-R")
	if code != 0 || strings.Count(text, lint.CodeKindSkipped) != 1 || !strings.Contains(text, "not judged: ") || strings.Contains(text, "FAIL ") {
		t.Errorf("text: exit %d:\n%s", code, text)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec: {template: {spec: {containers: [{name: a, image: x, resources: {limits: {example.com/gpu: lots}}}]}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = run(t, "lint", "-f", deploy, "-R", "-f", dir, "-o", "json")
	if code != 1 || !strings.Contains(out, lint.CodeDocumentMalformed) || !strings.Contains(out, "broken.yaml, document 1") {
		t.Errorf("with a broken manifest: exit %d, want 1 with %s:\n%s", code, lint.CodeDocumentMalformed, out)
	}
}
