package demo

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

var update = flag.Bool("update", false, "rewrite demo.tar.gz from the fixture tree")

const tree = "../../testdata/hosts/demo-h100x8-faults"

func TestDemoArchiveIsCurrent(t *testing.T) {
	if _, err := os.Stat(tree); err != nil {
		t.Fatalf("the demo's fixture tree is missing: %v", err)
	}
	var buf bytes.Buffer
	if err := hostfs.WriteTreeArchive(tree, &buf, Meta); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("demo.tar.gz", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(buf.Bytes(), Archive()) {
		t.Fatalf("demo.tar.gz is stale: run go test ./internal/demo -update")
	}
	root, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(Archive()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	m, ok := root.ReadSnapshotMeta()
	if !ok || !m.Tree || m.Format != hostfs.TreeFormat || m.Source != "built-in demo" || m.Files == 0 || m.Nodes != root.Manifest().Len() {
		t.Errorf("the demo's description: %+v, %v", m, ok)
	}
	if strings.Contains(Description, "testdata") || strings.Contains(m.Source, "testdata") {
		t.Errorf("the demo names a repository path: %q, %q", Description, m.Source)
	}
	if root.Manifest().Len() == 0 {
		t.Error("the demo has no device manifest")
	}
	if _, err := root.Stat(filepath.Join("/dev", "nvidia0")); err != nil {
		t.Errorf("demo /dev/nvidia0: %v", err)
	}
}
