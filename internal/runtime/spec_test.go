package runtime

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	specs "github.com/opencontainers/runtime-spec/specs-go"

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

// What Redact keeps is what ParseSpec reads: a key in another case is the
// same field (its values are hidden too), numbers past 2^53 survive as
// written (Docker's --ulimit memlock=-1 is RLIMIT_MEMLOCK 2^64-1), and a
// document with a key twice, or trailing data, is not kept at all.
func TestRedactKeepsWhatParseSpecReads(t *testing.T) {
	in := `{"PROCESS":{"Args":["/bin/sh","-c","argS3cret"],"ENV":["TOKEN=envS3cret"],` +
		`"rlimits":[{"type":"RLIMIT_MEMLOCK","hard":18446744073709551615,"soft":18446744073709551615}]},` +
		`"Hooks":{"prestart":[{"path":"/h","ARGS":["h","hookS3cret"]}]},` +
		`"linux":{"resources":{"devices":[{"allow":true,"type":"c","major":9007199254740993,"access":"rw"}]}}}`
	out := Redact([]byte(in))
	if out == nil || bytes.Contains(out, []byte("S3cret")) {
		t.Fatalf("redacted:\n%s", out)
	}
	s, err := ParseSpec(out, "redacted")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Process.Rlimits; len(r) != 1 || r[0].Hard != 1<<64-1 || r[0].Soft != 1<<64-1 {
		t.Errorf("rlimits %+v", r)
	}
	if d := s.Linux.Resources.Devices; len(d) != 1 || *d[0].Major != 9007199254740993 {
		t.Errorf("device rules %+v", d)
	}
	if s.Process.Args[0] != "/bin/sh" || s.Process.Env[0] != "TOKEN="+Redacted || s.Hooks.Prestart[0].Args[1] != Redacted {
		t.Errorf("process %+v hooks %+v", s.Process, s.Hooks)
	}
	for _, bad := range []string{
		`{"process":{"env":["A=1"]},"process":{"cwd":"/"}}`,
		`{"process":{"env":["A=1"]},"Process":{"cwd":"/"}}`,
		`{"process":{"env":["A=1"],"ENV":["B=2"]}}`,
		`{"annotations":{"a":"1","A":"2"}}`,
		`{"linux":{"devices":[{"path":"/dev/x","pAth":"/dev/y"}]}}`,
		`{"ociVersion":"1.0.2"} {}`,
	} {
		if out := Redact([]byte(bad)); out != nil {
			t.Errorf("%s kept as %s", bad, out)
		}
	}
	// The same key in two objects is no duplicate.
	if Redact([]byte(`{"process":{"env":["A=1"],"user":{"uid":0}},"hooks":{"prestart":[{"env":["B=2"]},{"env":["C=3"]}]}}`)) == nil {
		t.Error("a spec without a key twice was not kept")
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

// redactedSpec is s as Redact leaves it: every argument after args[0] and
// every environment value of the process and of each hook hidden.
func redactedSpec(s specs.Spec) specs.Spec {
	args := func(a []string) []string {
		out := slices.Clone(a)
		for i := 1; i < len(out); i++ {
			out[i] = Redacted
		}
		return out
	}
	env := func(e []string) []string {
		out := slices.Clone(e)
		for i, v := range out {
			name, _, _ := strings.Cut(v, "=")
			out[i] = name + "=" + Redacted
		}
		return out
	}
	if s.Process != nil {
		p := *s.Process
		p.Args, p.Env = args(p.Args), env(p.Env)
		if p.CommandLine != "" {
			p.CommandLine = Redacted
		}
		s.Process = &p
	}
	if s.Hooks != nil {
		h := *s.Hooks
		for _, list := range []*[]specs.Hook{&h.Prestart, &h.CreateRuntime, &h.CreateContainer, &h.StartContainer, &h.Poststart, &h.Poststop} {
			hooks := slices.Clone(*list)
			for i := range hooks {
				hooks[i].Args, hooks[i].Env = args(hooks[i].Args), env(hooks[i].Env)
			}
			*list = hooks
		}
		s.Hooks = &h
	}
	return s
}

// FuzzParseSpec asserts of the config.json parser, on real configs and
// whatever the fuzzer makes of them:
//   - garbage is an error that names the file, with no spec, never a panic;
//   - a spec that parses, written back as JSON, parses to the same spec
//     (round trip);
//   - what a snapshot keeps of the file (Redact) parses too, to the same
//     spec but for the hidden values: no argument or environment value
//     that ParseSpec reads survives, and every other field (devices,
//     rules, rlimits, annotations, mounts, namespaces) is kept as read;
//     only a document with a key twice is not kept at all.
func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(secretSpec))
	f.Add([]byte(`{"ociVersion":"1.0.2","process":{"args":"sh"}}`))
	f.Add([]byte(`{"linux":{"resources":{"devices":[{"allow":true,"major":-1}]}}}`))
	f.Add([]byte("{not json"))
	f.Add([]byte(`{"PROCESS":{"Env":["TOKEN=s3cret"],"rlimits":[{"type":"RLIMIT_MEMLOCK","hard":18446744073709551615,"soft":18446744073709551615}]},"process":{}}`))
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "hosts", "*", "run", "containerd", "*", "*", "*", "config.json"))
	for _, p := range paths[:min(1, len(paths))] {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range testutil.CorpusSeeds(f, "intel-device-plugins/oci-config-crio-fpga.json", nil) {
		f.Add(b)
	}
	eq := cmpopts.EquateEmpty()
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b, "config.json")
		if err != nil {
			if s != nil || !strings.HasPrefix(err.Error(), "config.json: ") {
				t.Fatalf("spec %v, error %v", s, err)
			}
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("a parsed spec does not encode: %v", err)
		}
		again, err := ParseSpec(out, "again")
		if err != nil {
			t.Fatalf("%s, written back as %s: %v", b, out, err)
		}
		if d := cmp.Diff(s, again, eq); d != "" {
			t.Fatalf("round trip (-first +again):\n%s", d)
		}
		red := Redact(b)
		if red == nil {
			if !duplicateKey(b) {
				t.Fatalf("a spec that parses, without a key twice, was not kept: %s", b)
			}
			return
		}
		kept, err := ParseSpec(red, "redacted")
		if err != nil {
			t.Fatalf("%s, redacted as %s: %v", b, red, err)
		}
		if d := cmp.Diff(redactedSpec(*s), *kept, eq); d != "" {
			t.Fatalf("%s, redacted as %s (-want +kept):\n%s", b, red, d)
		}
	})
}
