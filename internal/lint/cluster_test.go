package lint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kjson "sigs.k8s.io/json"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// fixtureCluster decodes testdata/cluster/objects.yaml, the cluster that
// e2e/lint creates in a real API server, into what lint --cluster reads.
func fixtureCluster(t *testing.T) *Cluster {
	t.Helper()
	b, err := os.ReadFile("testdata/cluster/objects.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Server: "https://fixture"}
	for _, d := range splitDocuments(b) {
		j, ok, err := toJSON(d)
		if err != nil || !ok {
			t.Fatalf("document %d: %v", d.Index, err)
		}
		var tm typeMeta
		if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
			t.Fatal(err)
		}
		strict := func(v any) {
			if strictErrs, err := kjson.UnmarshalStrict(j, v); err != nil || len(strictErrs) > 0 {
				t.Fatalf("%s: %v %v", tm.Kind, err, strictErrs)
			}
		}
		switch tm.Kind {
		case "RuntimeClass":
			var o nodev1.RuntimeClass
			strict(&o)
			c.RuntimeClasses = append(c.RuntimeClasses, o.Name)
		case "DeviceClass":
			var o resourcev1.DeviceClass
			strict(&o)
			c.DeviceClasses = append(c.DeviceClasses, o.Name)
		case "Node":
			var o corev1.Node
			strict(&o)
			c.Nodes = append(c.Nodes, o)
		default:
			t.Fatalf("kind %s in the fixture", tm.Kind)
		}
	}
	return c
}

func lintWith(t *testing.T, p string, c *Cluster) *Result {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return LintWith([]Input{{Name: filepath.Base(p), Data: b}}, c)
}

// Each planted manifest of testdata/planted-cluster is flagged with its
// code and nothing else against the fixture cluster, and offline with no
// cluster code at all; every cluster code has one.
func TestPlantedClusterManifests(t *testing.T) {
	files, _ := filepath.Glob("testdata/planted-cluster/*.yaml")
	planted := map[string]bool{}
	for _, p := range files {
		code := strings.TrimSuffix(filepath.Base(p), ".yaml")
		planted[code] = true
		t.Run(code, func(t *testing.T) {
			c, ok := Lookup(code)
			if !ok {
				t.Fatalf("%s is not a code", code)
			}
			r := lintWith(t, p, fixtureCluster(t))
			if got := judged(r); !slices.Equal(got, []string{code}) {
				t.Fatalf("findings %v, want exactly [%s]:\n%s", got, code, dump(r))
			}
			for _, f := range r.Findings {
				if f.Code == code && (string(f.Status) != c.Status || len(f.Evidence) < 2) {
					t.Errorf("status %s (catalog %s), evidence %v", f.Status, c.Status, f.Evidence)
				}
			}
			for _, f := range lintWith(t, p, nil).Findings {
				if strings.HasPrefix(f.Code, "LINT_CLUSTER_") {
					t.Errorf("offline: %s %s", f.Code, f.Summary)
				}
			}
		})
	}
	for _, c := range Codes {
		if strings.HasPrefix(c.Code, "LINT_CLUSTER_") && !planted[c.Code] {
			t.Errorf("%s has no planted manifest in testdata/planted-cluster", c.Code)
		}
	}
}

// The clean manifests stay clean against a cluster that has what they ask
// for; the offline toleration guess is replaced by the nodes' real taints
// (gpu-job.yaml tolerates nvidia.com/gpu, which gpu-a carries).
func TestCleanManifestsAgainstCluster(t *testing.T) {
	files, _ := filepath.Glob("testdata/clean/*")
	for _, p := range files {
		t.Run(filepath.Base(p), func(t *testing.T) {
			r := lintWith(t, p, fixtureCluster(t))
			if got := judged(r); len(got) > 0 {
				t.Fatalf("flagged %v:\n%s", got, dump(r))
			}
		})
	}
}

// When the API server cannot be read, each cluster rule that had
// something to judge is NOT_RUN with the LIST's error, never a pass, and
// the offline toleration guess is made again.
func TestClusterRulesNotRunWhenUnread(t *testing.T) {
	down := errors.New(`Get "https://fixture/api/v1/nodes": connection refused`)
	forbidden := errors.New(`deviceclasses.resource.k8s.io is forbidden: User "dev" cannot list resource "deviceclasses"`)
	c := &Cluster{Server: "https://fixture", RuntimeClassesErr: down, DeviceClassesErr: forbidden, NodesErr: down}
	files, _ := filepath.Glob("testdata/planted-cluster/*.yaml")
	for _, p := range files {
		code := strings.TrimSuffix(filepath.Base(p), ".yaml")
		t.Run(code, func(t *testing.T) {
			r := lintWith(t, p, c)
			var nr *report.Finding
			for i, f := range r.Findings {
				if strings.HasPrefix(f.Code, "LINT_CLUSTER_") && f.Status != report.NotRun {
					t.Errorf("%s %s with nothing read", f.Status, f.Code)
				}
				if f.Code == code {
					nr = &r.Findings[i]
				}
			}
			if nr == nil || nr.Status != report.NotRun || !strings.Contains(nr.Reason, "list ") ||
				!(strings.Contains(nr.Reason, down.Error()) || strings.Contains(nr.Reason, forbidden.Error())) {
				t.Fatalf("want %s NOT_RUN with the LIST's error as reason:\n%s", code, dump(r))
			}
			if code == CodeClusterTaintNotTolerated && !slices.Contains(judged(r), CodeNoToleration) {
				t.Errorf("nodes unread: the offline %s guess should be made:\n%s", CodeNoToleration, dump(r))
			}
		})
	}
}

// A RuntimeClass or DeviceClass that the input itself creates counts as
// existing.
func TestClassesOfTheInputExist(t *testing.T) {
	b, _ := os.ReadFile("testdata/planted-cluster/LINT_CLUSTER_RUNTIMECLASS_MISSING.yaml")
	d, _ := os.ReadFile("testdata/planted-cluster/LINT_CLUSTER_DEVICECLASS_MISSING.yaml")
	in := []Input{
		{Name: "rc.yaml", Data: []byte("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: kata-qemu}\nhandler: kata\n")},
		{Name: "dc.yaml", Data: []byte("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.nvida.com}\n")},
		{Name: "a.yaml", Data: b}, {Name: "b.yaml", Data: d},
	}
	r := LintWith(in, fixtureCluster(t))
	for _, f := range r.Findings {
		if strings.HasPrefix(f.Code, "LINT_CLUSTER_") {
			t.Errorf("%s %s: %s", f.Status, f.Code, f.Summary)
		}
	}
}

// The DaemonSet controller's tolerations: a DaemonSet runs on a node
// tainted not-ready:NoSchedule (a node that just joined), a Pod does not.
func TestDaemonSetTolerationsAreImplied(t *testing.T) {
	c := fixtureCluster(t)
	for i := range c.Nodes {
		if c.Nodes[i].Name == "gpu-b" {
			c.Nodes[i].Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	const spec = `
      containers:
      - name: c
        image: busybox
        resources: {limits: {example.com/gpu: 1}}`
	ds := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:" + spec
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:" + strings.ReplaceAll(spec, "\n    ", "\n")
	if got := judged(LintWith([]Input{{Name: "ds.yaml", Data: []byte(ds)}}, c)); len(got) > 0 {
		t.Errorf("DaemonSet flagged %v", got)
	}
	if got := judged(LintWith([]Input{{Name: "pod.yaml", Data: []byte(pod)}}, c)); !slices.Equal(got, []string{CodeClusterTaintNotTolerated}) {
		t.Errorf("Pod: %v, want [%s]", got, CodeClusterTaintNotTolerated)
	}
}

// What a pod needs of an extended resource is what the scheduler counts:
// the containers' sum, the largest init container's if more, a sidecar
// added; a limit alone is the request.
func TestNeeds(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	gpu := func(n int64) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"sum", corev1.PodSpec{Containers: []corev1.Container{{Resources: gpu(1)}, {Resources: gpu(2)}}}, 3},
		{"init larger", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: gpu(4)}}, Containers: []corev1.Container{{Resources: gpu(1)}}}, 4},
		{"init smaller", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: gpu(1)}}, Containers: []corev1.Container{{Resources: gpu(2)}}}, 2},
		{"sidecar adds", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: gpu(1), RestartPolicy: &always}}, Containers: []corev1.Container{{Resources: gpu(2)}}}, 3},
	} {
		ns := needs(workload{spec: &tc.spec, specPath: "spec"})
		if len(ns) != 1 || ns[0].name != "example.com/gpu" || ns[0].q.Value() != tc.want {
			t.Errorf("%s: %+v, want example.com/gpu %d", tc.name, ns, tc.want)
		}
	}
}

// Too many for one node: the message says the most any node has.
func TestResourceMoreThanAnyNode(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: busybox, resources: {limits: {amd.com/gpu: 3}}}\n"
	r := LintWith([]Input{{Name: "p.yaml", Data: []byte(pod)}}, fixtureCluster(t))
	if got := judged(r); !slices.Equal(got, []string{CodeClusterResourceNotAdvertised}) || !strings.Contains(r.Findings[0].Summary, "the most is 2") {
		t.Errorf("%v:\n%s", got, dump(r))
	}
}

// BenchmarkLintWithCluster: the cluster rules over a large cluster's
// nodes (5,000, a tenth with GPUs and a taint), for a manifest with a
// selector, a GPU request and a claim template.
func BenchmarkLintWithCluster(b *testing.B) {
	c := &Cluster{Server: "bench", RuntimeClasses: []string{"nvidia"}, DeviceClasses: []string{"gpu.nvidia.com"}}
	for i := range 5000 {
		n := corev1.Node{}
		n.Name = "node-" + strconv.Itoa(i)
		n.Labels = map[string]string{"kubernetes.io/hostname": n.Name, "pool": "cpu"}
		n.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("32")}
		if i%10 == 0 {
			n.Labels["pool"] = "gpu"
			n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
			n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
		}
		c.Nodes = append(c.Nodes, n)
	}
	in := []Input{{Name: "w.yaml", Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      runtimeClassName: nvidia
      nodeSelector: {pool: gpu}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: c
        image: busybox
        resources: {limits: {nvidia.com/gpu: 2}}
`)}}
	for b.Loop() {
		if r := LintWith(in, c); len(judged(r)) != 0 {
			b.Fatalf("flagged %v", judged(r))
		}
	}
}
