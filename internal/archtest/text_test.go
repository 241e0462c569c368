package archtest

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// processWords are words about how the product was made, which mean
// nothing to a user or a reader of the code: an issue's number, a part of
// one, who was to decide.
var processWords = regexp.MustCompile(`(?i)\bthe lead\b|\bissue [0-9]+|\bpart [0-9]+\b|\bthe issue'?s?\b|\(issue:|closing note`)

// The repository's text (code, comments, docs, manifests, scripts) speaks
// of the product only.
func TestTextSpeaksOfTheProduct(t *testing.T) {
	self, _ := filepath.Abs("text_test.go")
	n := 0
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || p == "../../testdata/hosts" {
				return filepath.SkipDir // host trees are captured data
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".md", ".yaml", ".yml", ".sh", ".json", ".toml", "":
		default:
			return nil
		}
		if abs, _ := filepath.Abs(p); abs == self {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			return nil // unreadable or binary
		}
		n++
		for i, line := range strings.Split(string(b), "\n") {
			if m := processWords.FindString(line); m != "" {
				t.Errorf("%s:%d speaks of the process (%q): %s", strings.TrimPrefix(p, "../../"), i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 200 {
		t.Fatalf("only %d files read: the walk is wrong", n)
	}
}
