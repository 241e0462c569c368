package runtime

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

const secretSpec = `{
  "ociVersion": "1.2.0",
  "process": {"args": ["/bin/sh", "-c", "curl -H 'token: argS3cret'"], "env": ["PATH=/bin", "HF_TOKEN=envS3cret"], "cwd": "/"},
  "hooks": {
    "prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "--token=hookArgS3cret", "prestart"], "env": ["KEY=hookEnvS3cret"]}],
    "createRuntime": [{"path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "create-symlinks", "--link", "x::y"]}]
  },
  "annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=0"},
  "linux": {"resources": {"devices": [{"allow": false, "access": "rwm"}, {"allow": true, "type": "c", "major": 195, "minor": 0, "access": "rw"}]},
            "devices": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}]},
  "futureField": {"kept": true}
}`

// Every place a token lives is redacted; everything a check judges stays.
func TestRedactHidesValuesKeepsKeys(t *testing.T) {
	out := Redact([]byte(secretSpec))
	if out == nil {
		t.Fatal("a valid spec was dropped")
	}
	for _, s := range []string{"argS3cret", "envS3cret", "hookArgS3cret", "hookEnvS3cret", "create-symlinks"} {
		if bytes.Contains(out, []byte(s)) {
			t.Errorf("%q survives redaction", s)
		}
	}
	s, err := ParseSpec(out, "redacted")
	if err != nil {
		t.Fatal(err)
	}
	if s.Process.Args[0] != "/bin/sh" || len(s.Process.Args) != 3 || s.Process.Env[1] != "HF_TOKEN="+Redacted {
		t.Errorf("process %+v", s.Process)
	}
	if h := s.Hooks.Prestart[0]; h.Path != "/usr/bin/nvidia-container-runtime-hook" || h.Args[0] != "nvidia-container-runtime-hook" || h.Env[0] != "KEY="+Redacted {
		t.Errorf("hook %+v", h)
	}
	if s.Annotations["cdi.k8s.io/gpu"] != "nvidia.com/gpu=0" || len(s.Linux.Resources.Devices) != 2 || s.Linux.Devices[0].Major != 195 {
		t.Errorf("judged fields changed: %+v", s.Linux)
	}
	var doc map[string]any
	json.Unmarshal(out, &doc)
	if doc["futureField"] == nil {
		t.Error("a field the spec types do not know was dropped")
	}
	if Redact([]byte("{not json")) != nil {
		t.Error("an unparsable file would travel unredacted")
	}
}

// A snapshot of a root holding the spec keeps only the redacted form.
func TestSnapshotKeepsRedactedSpec(t *testing.T) {
	dir := t.TempDir()
	p := "/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/config.json"
	testutil.WriteTree(t, dir, map[string]string{p: secretSpec}, nil, "")
	root := hostfs.MustNew(dir)
	rec := root.Record()
	if _, err := ReadSpec(root, p); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	b, err := os.ReadFile(filepath.Join(snap.Dir(), p))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "S3cret") {
		t.Errorf("the snapshot holds a secret:\n%s", b)
	}
	if _, err := ReadSpec(snap, p); err != nil {
		t.Errorf("the redacted spec does not parse: %v", err)
	}
}

func FuzzRedact(f *testing.F) {
	f.Add([]byte(secretSpec))
	f.Add([]byte(`{"process":{"args":"x","env":[1,null,{}]},"hooks":{"prestart":"y","poststop":[1,{"args":[2]}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := Redact(b)
		if out != nil && !json.Valid(out) {
			t.Fatalf("Redact made invalid JSON from %q", b)
		}
	})
}
