package lint

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

func lintFile(t *testing.T, p string) *Result {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return Lint([]Input{{Name: filepath.Base(p), Data: b}})
}

func lintString(s string) *Result { return Lint([]Input{{Name: "test.yaml", Data: []byte(s)}}) }

// judged are the codes of the findings that are not PASS.
func judged(r *Result) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Status != report.Pass {
			out = append(out, f.Code)
		}
	}
	return out
}

// Each planted manifest (testdata/planted/CODE.yaml) is flagged with its
// code, once, at the catalog's status, and with nothing else; every code
// but the ones only a generated input can plant has its manifest.
func TestPlantedManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/planted/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatal("no planted manifests", err)
	}
	planted := map[string]bool{}
	for _, p := range files {
		code := strings.TrimSuffix(filepath.Base(p), ".yaml")
		planted[code] = true
		t.Run(code, func(t *testing.T) {
			c, ok := Lookup(code)
			if !ok {
				t.Fatalf("%s is not a code", code)
			}
			r := lintFile(t, p)
			if got := judged(r); !slices.Equal(got, []string{code}) {
				t.Fatalf("findings %v, want exactly [%s]:\n%s", got, code, dump(r))
			}
			for _, f := range r.Findings {
				if f.Code == code && string(f.Status) != c.Status {
					t.Errorf("status %s, catalog says %s", f.Status, c.Status)
				}
				if f.Code == code && len(f.Evidence) == 0 {
					t.Error("no evidence")
				}
			}
		})
	}
	for _, c := range Codes {
		if !planted[c.Code] && c.Code != CodeClean && c.Code != CodeDocumentTooLarge && !strings.HasPrefix(c.Code, "LINT_CLUSTER_") {
			t.Errorf("%s has no planted manifest in testdata/planted", c.Code)
		}
	}
}

// The clean manifests, written the way the guides and vendors write them,
// are flagged with nothing: one PASS per workload.
func TestCleanManifests(t *testing.T) {
	files, _ := filepath.Glob("testdata/clean/*")
	if len(files) == 0 {
		t.Fatal("no clean manifests")
	}
	for _, p := range files {
		t.Run(filepath.Base(p), func(t *testing.T) {
			r := lintFile(t, p)
			if got := judged(r); len(got) > 0 {
				t.Fatalf("flagged %v:\n%s", got, dump(r))
			}
			if r.Workloads == 0 || len(r.Findings) != r.Workloads {
				t.Fatalf("%d workloads, %d findings: want one LINT_CLEAN each", r.Workloads, len(r.Findings))
			}
		})
	}
}

// Evidence names the object, the container's field path and the source
// line, as the API server's field errors do.
func TestEvidenceNamesFieldAndSource(t *testing.T) {
	r := lintFile(t, "testdata/planted/LINT_EXTENDED_REQUEST_WITHOUT_LIMIT.yaml")
	f := r.Findings[0]
	if f.Subject != "Deployment serving/inference" {
		t.Errorf("subject %q", f.Subject)
	}
	want := []report.Evidence{
		{Path: "source", Value: "LINT_EXTENDED_REQUEST_WITHOUT_LIMIT.yaml, document 1, line 1"},
		{Path: "spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]", Value: "1"},
		{Path: "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]", Value: "(absent)"},
	}
	if !slices.Equal(f.Evidence, want) {
		t.Errorf("evidence %v, want %v", f.Evidence, want)
	}
}

// The rules' edges: what fires and what must not, one document each.
func TestRuleEdges(t *testing.T) {
	pod := func(spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n" + spec
	}
	gpu := "    resources: {limits: {nvidia.com/gpu: 1}}\n"
	tol := "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"limit only is fine", pod(tol + "  containers:\n  - name: a\n    image: x\n" + gpu), nil},
		{"requests equal limits", pod(tol + "  containers:\n  - name: a\n    image: x\n    resources: {requests: {nvidia.com/gpu: 2}, limits: {nvidia.com/gpu: \"2\"}}\n"), nil},
		{"native resources may overcommit", pod("  containers:\n  - name: a\n    image: x\n    resources: {requests: {cpu: 1, memory: 1Gi}}\n"), nil},
		{"hugepages are not extended", pod("  containers:\n  - name: a\n    image: x\n    resources: {requests: {hugepages-2Mi: 2Mi, memory: 1Gi}, limits: {hugepages-2Mi: 2Mi, memory: 1Gi}}\n"), nil},
		{"any extended resource needs its limit", pod("  containers:\n  - name: a\n    image: x\n    resources: {requests: {example.com/foo: 1}}\n"), []string{CodeRequestWithoutLimit}},
		{"fractional request and limit", pod("  containers:\n  - name: a\n    image: x\n    resources: {requests: {example.com/foo: 0.5}, limits: {example.com/foo: 0.5}}\n"), []string{CodeNotInteger, CodeNotInteger}},
		{"toleration of every taint", pod("  tolerations: [{operator: Exists}]\n  containers:\n  - name: a\n    image: x\n" + gpu), nil},
		{"toleration with a value", pod("  tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present}]\n  containers:\n  - name: a\n    image: x\n" + gpu), nil},
		{"NoExecute toleration does not cover NoSchedule", pod("  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoExecute}]\n  containers:\n  - name: a\n    image: x\n" + gpu), []string{CodeNoToleration}},
		{"MIG resource needs the toleration too", pod("  containers:\n  - name: a\n    image: x\n    resources: {limits: {nvidia.com/mig-1g.10gb: 1}}\n"), []string{CodeNoToleration}},
		{"NVIDIA NIC resource is not a GPU", pod("  containers:\n  - name: a\n    image: x\n    resources: {limits: {nvidia.com/rdma_shared_device_a: 1}}\n"), nil},
		{"any */gpu is a GPU for privileged", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {privileged: true}\n    resources: {limits: {example.com/gpu: 1}}\n"), []string{CodePrivilegedGPU}},
		{"neuron is an accelerator", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {privileged: true}\n    resources: {limits: {aws.amazon.com/neuroncore: 2}}\n"), []string{CodePrivilegedGPU}},
		{"privileged without GPU is not this linter's", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {privileged: true}\n"), nil},
		{"NVIDIA_VISIBLE_DEVICES with a GPU request", pod(tol + "  containers:\n  - name: a\n    image: x\n    env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]\n" + gpu), nil},
		{"NVIDIA_VISIBLE_DEVICES=none", pod("  containers:\n  - name: a\n    image: x\n    env: [{name: NVIDIA_VISIBLE_DEVICES, value: none}]\n"), nil},
		{"NVIDIA_VISIBLE_DEVICES by index", pod("  containers:\n  - name: a\n    image: x\n    env: [{name: NVIDIA_VISIBLE_DEVICES, value: \"0,1\"}]\n"), []string{CodeVisibleDevicesNoGPU}},
		{"NVIDIA_VISIBLE_DEVICES from a ConfigMap cannot be known", pod("  containers:\n  - name: a\n    image: x\n    env: [{name: NVIDIA_VISIBLE_DEVICES, valueFrom: {configMapKeyRef: {name: c, key: k}}}]\n"), nil},
		{"NVIDIA_VISIBLE_DEVICES beside a DRA claim", pod("  resourceClaims: [{name: g, resourceClaimName: c}]\n  containers:\n  - name: a\n    image: x\n    env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]\n    resources: {claims: [{name: g}]}\n"), nil},
		{"NVIDIA_VISIBLE_DEVICES in an ephemeral container", pod("  containers:\n  - name: a\n    image: x\n  ephemeralContainers:\n  - name: d\n    image: x\n    env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]\n"), []string{CodeVisibleDevicesNoGPU}},
		{"runtime class with GPU", pod("  runtimeClassName: nvidia\n" + tol + "  containers:\n  - name: a\n    image: x\n" + gpu), nil},
		{"runtime class, every container void", pod("  runtimeClassName: nvidia-cdi\n  containers:\n  - name: a\n    image: x\n    env: [{name: NVIDIA_VISIBLE_DEVICES, value: void}]\n"), nil},
		{"runtime class with a DRA claim", pod("  runtimeClassName: nvidia\n  resourceClaims: [{name: g, resourceClaimName: c}]\n  containers:\n  - name: a\n    image: x\n    resources: {claims: [{name: g}]}\n"), nil},
		{"other runtime class", pod("  runtimeClassName: kata\n  containers:\n  - name: a\n    image: x\n"), nil},
		{"DRA claim of another vendor beside the plugin", pod(tol+"  resourceClaims: [{name: nic, resourceClaimName: nic}]\n  containers:\n  - name: a\n    image: x\n"+gpu) +
			"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: nic}\nspec: {devices: {requests: [{name: req, exactly: {deviceClassName: nic.example.com}}]}}\n", nil},
		{"DRA claim via firstAvailable", pod(tol+"  resourceClaims: [{name: g, resourceClaimName: g}]\n  containers:\n  - name: a\n    image: x\n"+gpu) +
			"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: g}\nspec: {devices: {requests: [{name: req, firstAvailable: [{name: big, deviceClassName: mig.nvidia.com}]}]}}\n", []string{CodePluginAndDRA}},
		{"DRA claim not in the input", pod(tol + "  resourceClaims: [{name: g, resourceClaimName: elsewhere}]\n  containers:\n  - name: a\n    image: x\n" + gpu), nil},
		{"claim in another namespace", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\nspec:\n" + tol + "  resourceClaims: [{name: g, resourceClaimName: g}]\n  containers:\n  - name: a\n    image: x\n" + gpu +
			"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: g, namespace: b}\nspec: {devices: {requests: [{name: req, exactly: {deviceClassName: gpu.nvidia.com}}]}}\n", nil},
		{"read-only /dev is for inspection", pod("  containers:\n  - name: a\n    image: x\n    volumeMounts: [{name: d, mountPath: /host/dev, readOnly: true}]\n  volumes: [{name: d, hostPath: {path: /dev}}]\n"), nil},
		{"/dev/ is /dev", pod("  containers:\n  - name: a\n    image: x\n    volumeMounts: [{name: d, mountPath: /host/dev}]\n  volumes: [{name: d, hostPath: {path: /dev/}}]\n"), []string{CodeHostPathDevWritable}},
		{"privileged container with a device hostPath", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {privileged: true}\n    volumeMounts: [{name: d, mountPath: /dev/kfd}]\n  volumes: [{name: d, hostPath: {path: /dev/kfd}}]\n"), nil},
		{"/dev/log is not a device", pod("  containers:\n  - name: a\n    image: x\n    volumeMounts: [{name: d, mountPath: /dev/log}]\n  volumes: [{name: d, hostPath: {path: /dev/log}}]\n"), nil},
		{"hostPath volume no container mounts", pod("  containers:\n  - name: a\n    image: x\n  volumes: [{name: d, hostPath: {path: /dev/nvidia0}}]\n"), nil},
		{"/dev/nvidiactl in an init container", pod("  initContainers:\n  - name: i\n    image: x\n    volumeMounts: [{name: d, mountPath: /dev/nvidiactl}]\n  containers:\n  - name: a\n    image: x\n  volumes: [{name: d, hostPath: {path: /dev/nvidiactl}}]\n"), []string{CodeHostPathDevice}},
		{"/dev/vfio by hostPath: both rules", pod("  containers:\n  - name: a\n    image: x\n    volumeMounts: [{name: d, mountPath: /dev/vfio}]\n  volumes: [{name: d, hostPath: {path: /dev/vfio}}]\n"), []string{CodeHostPathDevice, CodeVFIOWithoutIPCLock}},
		{"VFIO with IPC_LOCK beside drop ALL", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {capabilities: {drop: [ALL], add: [IPC_LOCK]}}\n    resources: {limits: {example.com/vfio: 1}}\n"), nil},
		{"VFIO with CAP_IPC_LOCK", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {capabilities: {add: [CAP_IPC_LOCK]}}\n    resources: {limits: {example.com/vfio: 1}}\n"), nil},
		{"VFIO with add ALL and drop ALL", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {capabilities: {drop: [ALL], add: [ALL]}}\n    resources: {limits: {example.com/vfio: 1}}\n"), []string{CodeVFIOWithoutIPCLock}},
		{"VFIO with IPC_LOCK added and dropped", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {capabilities: {drop: [IPC_LOCK], add: [IPC_LOCK]}}\n    resources: {limits: {example.com/vfio: 1}}\n"), []string{CodeVFIOWithoutIPCLock}},
		{"VFIO in a privileged container", pod("  containers:\n  - name: a\n    image: x\n    securityContext: {privileged: true}\n    resources: {limits: {example.com/vfio: 1}}\n"), nil},
		{"drop ALL is fine for NVIDIA", pod(tol + "  containers:\n  - name: a\n    image: x\n    securityContext: {capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}, readOnlyRootFilesystem: true}\n" + gpu), nil},
		{"old apiVersion is skipped", "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: d}\n", []string{CodeKindSkipped}},
		{"a custom resource with its own items", "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\nitems: {a: 1}\n", []string{CodeKindSkipped}},
		{"empty documents are not counted", "---\n# nothing\n---\n\n---\n" + pod("  containers: [{name: a, image: x}]\n"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lintString(tc.doc)
			if got := judged(r); !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v:\n%s", got, tc.want, dump(r))
			}
		})
	}
}

// Lists, JSON streams and the CronJob's nesting are read; a document's
// index and line are counted from 1, without the empty documents.
func TestDocumentsAndLines(t *testing.T) {
	in := "# header\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec: {containers: [{name: a, image: x}]}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s}\n---\nkind: Pod\nspec: [\n"
	r := lintString(in)
	if r.Documents != 3 || r.Workloads != 1 || r.Skipped != 2 || r.Malformed != 1 {
		t.Fatalf("documents %d workloads %d skipped %d malformed %d:\n%s", r.Documents, r.Workloads, r.Skipped, r.Malformed, dump(r))
	}
	var malformed, skipped report.Finding
	for _, f := range r.Findings {
		switch f.Code {
		case CodeDocumentMalformed:
			malformed = f
		case CodeKindSkipped:
			skipped = f
		}
	}
	// The ConfigMap and the List's Service: counted together, by document.
	if skipped.Summary != "not judged: 2 objects (ConfigMap, Service)" || len(skipped.Evidence) != 1 || skipped.Evidence[0].Value != "test.yaml documents 1, 2" {
		t.Errorf("not judged: %q, evidence %v", skipped.Summary, skipped.Evidence)
	}
	// The bad document is the third; its flow sequence opens on line 20
	// and the parser stops at the end of the input, line 21.
	if !strings.HasPrefix(malformed.Subject, "test.yaml, document 3") || !regexp.MustCompile(`^line 2[01]: `).MatchString(malformed.Summary) {
		t.Errorf("malformed finding %q: %q", malformed.Subject, malformed.Summary)
	}

	js := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"a","image":"x"}]}}
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"a","image":"x","resources":{"requests":{"example.com/x":"1"}}}]}}
{"apiVersion": oops}`
	r = lintString(js)
	if got := judged(r); !slices.Equal(got, []string{CodeRequestWithoutLimit, CodeDocumentMalformed}) {
		t.Fatalf("JSON stream: %v\n%s", got, dump(r))
	}
	if f := r.Findings[2]; !strings.Contains(f.Subject, "document 3") || !strings.HasPrefix(f.Summary, "line 3:") {
		t.Errorf("JSON error %q: %q", f.Subject, f.Summary)
	}
}

// Bad input is a finding, never a panic or a hang.
func TestMalformedInputs(t *testing.T) {
	var bomb strings.Builder
	bomb.WriteString("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 'b'; i <= 'i'; i++ {
		fmt.Fprintf(&bomb, "%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	huge := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  a: \"" + strings.Repeat("x", MaxDocumentBytes) + "\"\n"
	for _, tc := range []struct {
		name, in string
		want     string
	}{
		{"truncated", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: \"p\n", CodeDocumentMalformed},
		{"garbage bytes", "\x00\xff\xfe\x01garbage: [\x00", CodeDocumentMalformed},
		{"tab indentation", "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: p\n", CodeDocumentMalformed},
		{"a scalar", "just a string\n", CodeDocumentMalformed},
		{"a sequence", "- a\n- b\n", CodeDocumentMalformed},
		{"no kind", "apiVersion: v1\nmetadata: {name: p}\n", CodeDocumentMalformed},
		{"no apiVersion", "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x}]}\n", CodeDocumentMalformed},
		{"kind misspelt", "apiVersion: v1\nKind: Pod\nmetadata: {name: p}\n", CodeDocumentMalformed},
		{"both misspelt", "apiversion: v1\nKind: Pod\nmetadata: {name: p}\n", CodeDocumentMalformed},
		{"empty kind", "kind: \"\"\nresources: []\n", CodeDocumentMalformed},
		{"wrong type", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: two}\n", CodeDocumentMalformed},
		{"bad quantity", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, resources: {limits: {nvidia.com/gpu: lots}}}]}\n", CodeDocumentMalformed},
		{"items not a list", "apiVersion: v1\nkind: List\nitems: {a: 1}\n", CodeDocumentMalformed},
		{"alias bomb", bomb.String(), CodeDocumentMalformed},
		{"huge document", huge, CodeDocumentTooLarge},
		{"deep nesting", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), CodeDocumentMalformed},
		{"deep YAML nesting", "a: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n", CodeDocumentMalformed},
		{"nested lists", "kind: List\nitems:\n- kind: List\n  items:\n  - kind: List\n    items:\n    - kind: List\n      items:\n      - kind: List\n        items: []\n", CodeDocumentMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lintString(tc.in)
			if got := judged(r); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("findings %v, want [%s]:\n%s", got, tc.want, dump(r))
			}
		})
	}
}

func TestReadInputBound(t *testing.T) {
	if _, err := ReadInput("big", bytes.NewReader(make([]byte, MaxInputBytes+1))); err == nil || !strings.Contains(err.Error(), "64 MiB") {
		t.Errorf("an input over the bound: %v", err)
	}
	in, err := ReadInput("ok", strings.NewReader("kind: Pod\n"))
	if err != nil || string(in.Data) != "kind: Pod\n" {
		t.Errorf("%q %v", in.Data, err)
	}
}

// Every code is unique, has its title, explanation, status and, unless
// PASS, a fix; every finding Lint makes carries a catalogued code.
func TestCatalog(t *testing.T) {
	code := regexp.MustCompile(`^LINT_[A-Z0-9_]+$`)
	seen := map[string]bool{}
	for _, c := range Codes {
		if !code.MatchString(c.Code) || seen[c.Code] {
			t.Errorf("%q: not a LINT_ code, or twice", c.Code)
		}
		seen[c.Code] = true
		if c.Title == "" || len(strings.Fields(c.Explain)) < 30 {
			t.Errorf("%s: title or explanation missing", c.Code)
		}
		switch report.Status(c.Status) {
		case report.Pass:
		case report.Warn, report.Fail, report.NotRun:
			if c.Remediation == "" {
				t.Errorf("%s: no fix", c.Code)
			}
		default:
			t.Errorf("%s: status %q", c.Code, c.Status)
		}
		// The status is decided in the explanation: a WARN says why it
		// is not a FAIL.
		if c.Status == string(report.Warn) && !strings.Contains(c.Explain, "WARN") {
			t.Errorf("%s: a WARN whose explanation does not say why", c.Code)
		}
	}
}

func dump(r *Result) string {
	var b strings.Builder
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "  %s %s %s: %s %v\n", f.Status, f.Code, f.Subject, f.Summary, f.Evidence)
	}
	return b.String()
}

// Objects lint does not judge are one finding however many there are: a
// count by kind, and where they are; nothing FAILs over them.
func TestNotJudgedCountedOnce(t *testing.T) {
	in := "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: a}\n" +
		"---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b}\n"
	r := Lint([]Input{{Name: "rbac.yaml", Data: []byte(in)}, {Name: "kustomization.yaml", Data: []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [rbac.yaml]\n")},
		{Name: "pod.yaml", Data: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x}]}\n")}})
	if got := judged(r); !slices.Equal(got, []string{CodeKindSkipped}) {
		t.Fatalf("findings %v, want one %s:\n%s", got, CodeKindSkipped, dump(r))
	}
	f := r.Findings[len(r.Findings)-1]
	if f.Summary != "not judged: 4 objects (ClusterRole, Kustomization, ServiceAccount x2)" || f.Status != report.NotRun || f.Reason == "" {
		t.Errorf("%s %s: %q (reason %q)", f.Status, f.Code, f.Summary, f.Reason)
	}
	if want := []report.Evidence{{Path: "sources", Value: "rbac.yaml documents 1, 2, 3; kustomization.yaml document 1"}}; !slices.Equal(f.Evidence, want) {
		t.Errorf("evidence %v, want %v", f.Evidence, want)
	}
	if r.Skipped != 4 || r.Workloads != 1 || r.Findings[0].Code != CodeClean {
		t.Errorf("skipped %d, workloads %d:\n%s", r.Skipped, r.Workloads, dump(r))
	}
}

// A mapping with neither apiVersion nor kind (a tool's config beside the
// manifests) is skipped with one NOT_RUN note, not a FAIL, and counted
// apart from the objects not judged; with a workload beside it the verdict
// is the workload's.
func TestNotAnObjectIsSkipped(t *testing.T) {
	r := Lint([]Input{
		{Name: "plugin.yaml", Data: []byte("# a plugin's config\nresources: []\n")},
		{Name: "values.yaml", Data: []byte("replicas: 2\n---\n{}\n")},
		{Name: "pod.yaml", Data: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x}]}\n")},
	})
	if got := judged(r); !slices.Equal(got, []string{CodeNotAnObject}) {
		t.Fatalf("findings %v, want one %s:\n%s", got, CodeNotAnObject, dump(r))
	}
	f := r.Findings[len(r.Findings)-1]
	if f.Summary != "skipped: 3 documents with no apiVersion and no kind, not a Kubernetes object" || f.Reason == "" ||
		!slices.Equal(f.Evidence, []report.Evidence{{Path: "sources", Value: "plugin.yaml document 1; values.yaml documents 1, 2"}}) {
		t.Errorf("%q, reason %q, evidence %v", f.Summary, f.Reason, f.Evidence)
	}
	if r.NotObjects != 3 || r.Skipped != 0 || r.Malformed != 0 || r.Documents != 4 {
		t.Errorf("not objects %d, skipped %d, malformed %d, documents %d", r.NotObjects, r.Skipped, r.Malformed, r.Documents)
	}
	rep := &report.Report{Layers: []report.Layer{report.LayerKube}, Findings: r.Findings}
	rep.Decide()
	if rep.Verdict.Status != report.Pass {
		t.Errorf("verdict %s: %s", rep.Verdict.Status, rep.Verdict.Summary)
	}
}
