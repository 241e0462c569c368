package deploytest

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// Everything the documented builds write into the checkout is ignored by
// git: a newcomer who follows the README is left with a clean `git status`.
func TestDocumentedBuildsAreIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	if err := exec.Command("git", "-C", repoRoot, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	build := regexp.MustCompile("go build ([^`#\n]*)")
	var outputs []string
	for _, doc := range []string{"README.md", "deploy/README.md", "e2e/README.md"} {
		b, err := os.ReadFile(repoRoot + "/" + doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range build.FindAllStringSubmatch(string(b), -1) {
			args := strings.Fields(m[1])
			out, pkgs := "", []string{}
			for i := 0; i < len(args); i++ {
				switch a := args[i]; {
				case a == "-o" && i+1 < len(args):
					out = args[i+1]
					i++
				case strings.HasPrefix(a, "./cmd/"):
					pkgs = append(pkgs, path.Base(a))
				}
			}
			switch {
			case out == "":
				continue // the go command's default: the current directory
			case strings.HasSuffix(out, "/") || out == ".":
				for _, p := range pkgs {
					outputs = append(outputs, path.Join(out, p))
				}
			default:
				outputs = append(outputs, out)
			}
		}
	}
	if len(outputs) < 5 {
		t.Fatalf("found only %v in the docs' go build lines: the pattern is wrong", outputs)
	}
	for _, o := range outputs {
		if err := exec.Command("git", "-C", repoRoot, "check-ignore", "-q", "--no-index", o).Run(); err != nil {
			t.Errorf("%s, which a documented go build writes, is not ignored by .gitignore", o)
		}
	}
}
