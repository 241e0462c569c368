package lint

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

const (
	lintData   = "../../internal/lint/testdata/"
	repoDeploy = "../../deploy"
)

// documents splits a YAML stream at its "---" lines.
func documents(t *testing.T, p string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(d, "")) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func kindOf(t *testing.T, d []byte) string {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(d, &tm); err != nil {
		t.Fatal(err)
	}
	return tm.Kind
}

func decode(t *testing.T, d []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(d, v); err != nil {
		t.Fatalf("%v:\n%s", err, d)
	}
}

// createFixture creates the cluster the unit tests read in the API server.
func createFixture(t *testing.T, ctx context.Context, c *apiserver.Cluster) {
	t.Helper()
	for _, d := range documents(t, lintData+"cluster/objects.yaml") {
		var err error
		switch k := kindOf(t, d); k {
		case "RuntimeClass":
			var o nodev1.RuntimeClass
			decode(t, d, &o)
			_, err = c.Client.NodeV1().RuntimeClasses().Create(ctx, &o, metav1.CreateOptions{})
		case "DeviceClass":
			var o resourcev1.DeviceClass
			decode(t, d, &o)
			_, err = c.Client.ResourceV1().DeviceClasses().Create(ctx, &o, metav1.CreateOptions{})
		case "Node":
			var o corev1.Node
			decode(t, d, &o)
			_, err = c.CreateNode(ctx, &o)
		default:
			t.Fatalf("kind %s in the fixture", k)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

type finding struct {
	Code, Status, Subject, Summary, Reason string
}

// lintCluster runs `accel-doctor lint --cluster --kubeconfig K -o json -f
// FILE...`.
func lintCluster(t *testing.T, ctx context.Context, bin, kubeconfig string, files ...string) ([]finding, int, string) {
	t.Helper()
	args := []string{"lint", "--cluster", "--kubeconfig", kubeconfig, "-o", "json"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	stdout, stderr, code := harness.Run(t, ctx, bin, args...)
	var rep struct{ Findings []finding }
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("lint %v: not JSON (%v), exit %d:\n%s%s", files, err, code, stdout, stderr)
	}
	return rep.Findings, code, stdout
}

// podOf makes a Pod of a workload document's pod template, in namespace
// default, for the scheduler to judge.
func podOf(t *testing.T, d []byte, name string) *corev1.Pod {
	t.Helper()
	var spec corev1.PodSpec
	switch kindOf(t, d) {
	case "Pod":
		var o corev1.Pod
		decode(t, d, &o)
		spec = o.Spec
	default: // Deployment, Job: spec.template
		var o struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(d, &o); err != nil {
			t.Fatal(err)
		}
		spec = o.Spec.Template.Spec
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: spec}
}

// unschedulable waits for the scheduler's PodScheduled=False message.
func unschedulable(t *testing.T, ctx context.Context, c *apiserver.Cluster, name string) string {
	t.Helper()
	var msg string
	_, err := apiserver.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			return false, errors.New("bound to " + p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				msg = cond.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: no scheduler verdict: %v", name, err)
	}
	return msg
}

// Each planted mistake is flagged with its code, at its catalog status,
// and nothing else; and the API server (admission) or the real scheduler
// refuses the pod for the reason the finding gives.
func TestLintClusterPlanted(t *testing.T) {
	c := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.EnsureNamespace(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	createFixture(t, ctx, c)
	bin := harness.AccelDoctor(t)

	status := map[string]string{
		"LINT_CLUSTER_RUNTIMECLASS_MISSING": "FAIL", "LINT_CLUSTER_DEVICECLASS_MISSING": "FAIL",
		"LINT_CLUSTER_NO_NODE_MATCHES": "WARN", "LINT_CLUSTER_RESOURCE_NOT_ADVERTISED": "WARN", "LINT_CLUSTER_TAINT_NOT_TOLERATED": "WARN",
	}
	// What the API server or the scheduler says of the pod (none for the
	// claim: without the controller-manager no claim is made of the
	// template, and the scheduler waits for it).
	says := map[string]string{
		"LINT_CLUSTER_RUNTIMECLASS_MISSING":    `RuntimeClass "kata-qemu" not found`,
		"LINT_CLUSTER_NO_NODE_MATCHES":         "didn't match Pod's node affinity/selector",
		"LINT_CLUSTER_RESOURCE_NOT_ADVERTISED": "Insufficient gpu.intel.com/i915",
		"LINT_CLUSTER_TAINT_NOT_TOLERATED":     "untolerated taint",
	}
	files, _ := filepath.Glob(lintData + "planted-cluster/*.yaml")
	if len(files) != len(status) {
		t.Fatalf("%d planted manifests, want %d", len(files), len(status))
	}
	for _, p := range files {
		code := strings.TrimSuffix(filepath.Base(p), ".yaml")
		t.Run(code, func(t *testing.T) {
			fs, exit, out := lintCluster(t, ctx, bin, c.Kubeconfig, p)
			var got []string
			for _, f := range fs {
				if f.Status != "PASS" {
					got = append(got, f.Code+" "+f.Status)
				}
			}
			if want := code + " " + status[code]; len(got) != 1 || got[0] != want {
				t.Fatalf("findings %v, want [%s]:\n%s", got, want, out)
			}
			if wantExit := map[string]int{"FAIL": 1, "WARN": 0}[status[code]]; exit != wantExit {
				t.Errorf("exit %d, want %d", exit, wantExit)
			}
			want, ok := says[code]
			if !ok {
				return
			}
			for _, d := range documents(t, p) {
				if k := kindOf(t, d); k != "Pod" && k != "Deployment" && k != "Job" {
					continue
				}
				name := strings.ToLower(strings.ReplaceAll(code, "_", "-"))
				_, err := c.Client.CoreV1().Pods("default").Create(ctx, podOf(t, d, name), metav1.CreateOptions{})
				var msg string
				switch {
				case err != nil:
					msg = err.Error()
				default:
					msg = unschedulable(t, ctx, c, name)
				}
				t.Logf("API server / scheduler: %s", msg)
				if !strings.Contains(msg, want) {
					t.Errorf("the API server or scheduler says %q, want it to say %q", msg, want)
				}
			}
		})
	}
}

// render is `kubectl kustomize DIR` (krusty, the library kubectl links),
// written to a file for lint.
func render(t *testing.T, dir string) string {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	b, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(dir)+".yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The manifests users apply (deploy/, deploy/plugin and deploy/examples,
// as kustomize renders them) are clean against a cluster that has the
// example plugin's GPUs: no cluster rule fires, nothing is NOT_RUN but
// the objects lint does not judge (every LIST was read), exit 0.
func TestLintClusterDeployClean(t *testing.T) {
	c := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createFixture(t, ctx, c)
	bin := harness.AccelDoctor(t)
	// And deploy/ with the opt-in components/dra-state, as an overlay.
	overlay := t.TempDir()
	rel := func(p string) string {
		a, _ := filepath.Abs(p)
		r, err := filepath.Rel(overlay, a)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: ["+
		rel(repoDeploy)+"]\ncomponents: ["+rel(repoDeploy+"/components/dra-state")+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, exit, out := lintCluster(t, ctx, bin, c.Kubeconfig, render(t, repoDeploy), render(t, repoDeploy+"/plugin"), render(t, repoDeploy+"/examples"), render(t, overlay))
	workloads := 0
	for _, f := range fs {
		switch {
		case f.Code == "LINT_CLEAN":
			workloads++
		case f.Code == "LINT_KIND_SKIPPED":
		default:
			t.Errorf("%s %s %s: %s %s", f.Status, f.Code, f.Subject, f.Summary, f.Reason)
		}
	}
	if exit != 0 || workloads != 6 {
		t.Errorf("exit %d, %d clean workloads (want 0 and 6: the agent of deploy/, the agent and the plugin of deploy/plugin, the Job, the gated Pod, the agent with components/dra-state):\n%s", exit, workloads, out)
	}
}
