package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLint: any bytes give findings of catalogued codes, and never a panic
// or a hang; the document count covers every finding's document.
func FuzzLint(f *testing.F) {
	for _, dir := range []string{"testdata/planted", "testdata/clean"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("---\n--- {kind: List, items: [{kind: Pod, apiVersion: v1}]}\n...\n"))
	f.Add([]byte(`{"kind":"Pod"}[1]{"kind":`))
	f.Add([]byte("a: &a [1]\nb: [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := Lint([]Input{{Name: "fuzz", Data: b}})
		for _, fd := range r.Findings {
			c, ok := Lookup(fd.Code)
			if !ok || string(fd.Status) != c.Status || fd.Check != CheckID {
				t.Fatalf("finding %+v: not as catalogued", fd)
			}
		}
		if r.Workloads+r.Malformed > 0 && r.Documents == 0 {
			t.Fatalf("%d workloads, %d malformed from 0 documents", r.Workloads, r.Malformed)
		}
		if r.Workloads > len(r.Findings) {
			t.Fatalf("%d workloads but %d findings: each workload has at least one", r.Workloads, len(r.Findings))
		}
	})
}

// BenchmarkLint1000 lints 1,000 documents: Deployments, Jobs and Pods
// with GPUs, tolerations, env and volumes, a tenth of them flagged.
func BenchmarkLint1000(b *testing.B) {
	var docs []string
	for _, name := range []string{"clean/gpu-job.yaml", "clean/device-plugin-daemonset.yaml", "clean/validator-pod.yaml", "planted/LINT_HOSTPATH_DEVICE_NODE.yaml", "planted/LINT_EXTENDED_REQUEST_NOT_LIMIT.yaml"} {
		d, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, string(d))
	}
	var in strings.Builder
	for i := range 1000 {
		d := docs[0]
		switch {
		case i%20 == 0:
			d = docs[3+i/20%2]
		case i%3 == 1:
			d = docs[1]
		case i%3 == 2:
			d = docs[2]
		}
		in.WriteString("---\n")
		in.WriteString(d)
	}
	data := []byte(in.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := Lint([]Input{{Name: "bench.yaml", Data: data}})
		if r.Workloads != 1000 {
			b.Fatalf("%d workloads", r.Workloads)
		}
	}
}
