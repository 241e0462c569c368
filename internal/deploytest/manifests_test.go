package deploytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of a kustomization.yaml the test reads.
type kustomization struct {
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
}

// manifestDirs are the kustomizations whose resources are manifests.
var manifestDirs = []string{"deploy/base", "deploy/policy", "deploy/examples"}

// object is one decoded document.
type object struct {
	file string
	kind string
	obj  any
}

// readManifests decodes every resource of the kustomizations, strictly
// (an unknown field, a typo kubectl would reject or silently drop, is an
// error), into its k8s.io/api type.
func readManifests(t *testing.T) []object {
	t.Helper()
	var out []object
	for _, dir := range manifestDirs {
		var k kustomization
		readYAML(t, filepath.Join(repoRoot, dir, "kustomization.yaml"), &k)
		if len(k.Resources) == 0 {
			t.Fatalf("%s/kustomization.yaml lists no resources", dir)
		}
		// Every manifest in the directory is a resource: a file left out
		// would be neither applied nor tested.
		entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		generated := map[string]bool{}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.Files {
				generated[f] = true
			}
		}
		for _, e := range entries {
			n := e.Name()
			if strings.HasSuffix(n, ".yaml") && n != "kustomization.yaml" && !generated[n] && !slices.Contains(k.Resources, n) {
				t.Errorf("%s/%s is not in its kustomization's resources", dir, n)
			}
		}
		for _, r := range k.Resources {
			file := filepath.Join(dir, r)
			for i, doc := range splitDocs(t, filepath.Join(repoRoot, file)) {
				var tm struct{ APIVersion, Kind string }
				if err := yaml.Unmarshal(doc, &tm); err != nil {
					t.Fatalf("%s document %d: %v", file, i+1, err)
				}
				var obj any
				switch tm.APIVersion + " " + tm.Kind {
				case "v1 Namespace":
					obj = &corev1.Namespace{}
				case "v1 ServiceAccount":
					obj = &corev1.ServiceAccount{}
				case "v1 Pod":
					obj = &corev1.Pod{}
				case "rbac.authorization.k8s.io/v1 ClusterRole":
					obj = &rbacv1.ClusterRole{}
				case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
					obj = &rbacv1.ClusterRoleBinding{}
				case "apps/v1 DaemonSet":
					obj = &appsv1.DaemonSet{}
				case "batch/v1 Job":
					obj = &batchv1.Job{}
				case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
					obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
				case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
					obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
				default:
					t.Fatalf("%s document %d: %s %s: no type in this test (add it)", file, i+1, tm.APIVersion, tm.Kind)
				}
				if err := yaml.UnmarshalStrict(doc, obj); err != nil {
					t.Fatalf("%s document %d (%s): %v", file, i+1, tm.Kind, err)
				}
				out = append(out, object{file: file, kind: tm.Kind, obj: obj})
			}
		}
	}
	return out
}

// readYAML decodes what the test models of a file (not strict: the
// kustomization has fields the test does not read).
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func splitDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, d)
		}
	}
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

func find[T any](t *testing.T, objs []object, name string) *T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.obj.(*T); ok {
			type named interface{ GetName() string }
			if n, ok := o.obj.(named); ok && n.GetName() == name {
				return v
			}
		}
	}
	t.Fatalf("no %T named %q in deploy/", new(T), name)
	return nil
}

func TestManifestsDecode(t *testing.T) {
	objs := readManifests(t)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.kind)
	}
	sort.Strings(kinds)
	want := []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "DaemonSet", "Job", "Namespace", "Pod", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds in deploy/: %v, want %v", kinds, want)
	}
}

// The agent's pod is what the manifest's comments say it is: read-only
// host mounts, read-only root, no privilege, exactly the three capabilities
// documented, the host's PID namespace, its node's name.
func TestAgentDaemonSet(t *testing.T) {
	ds := find[appsv1.DaemonSet](t, readManifests(t), "accel-doctor-agent")
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Error("hostPID is false: /proc/PID of the node's containers is not visible")
	}
	if spec.ServiceAccountName != "accel-doctor-agent" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/usr/bin/accel-doctor"}) {
		t.Errorf("command %q", c.Command)
	}
	wantArgs := []string{"agent", "--root=/host", "--node-name=$(NODE_NAME)", "--interval=60s", "--metrics-address=:9808"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v: want NODE_NAME from spec.nodeName", c.Env)
	}
	checkSecurity(t, "agent", c, []corev1.Capability{"SYS_ADMIN", "SYS_PTRACE", "DAC_READ_SEARCH"})
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			t.Errorf("volume %s is not a hostPath", v.Name)
			continue
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	var mounted []string
	for _, m := range c.VolumeMounts {
		p, ok := hostPaths[m.Name]
		if !ok {
			t.Errorf("mount %s: no such volume", m.Name)
			continue
		}
		if !m.ReadOnly {
			t.Errorf("hostPath %s is mounted writable", p)
		}
		// Under --root: the reader sees the host's path at /host/PATH.
		if m.MountPath != "/host"+p {
			t.Errorf("hostPath %s mounted at %s, want /host%s (--root=/host)", p, m.MountPath, p)
		}
		mounted = append(mounted, p)
	}
	sort.Strings(mounted)
	wantMounts := []string{"/dev", "/etc/cdi", "/proc", "/run", "/sys", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/pod-resources", "/var/run/cdi"}
	if !slices.Equal(mounted, wantMounts) {
		t.Errorf("host mounts %q, want %q", mounted, wantMounts)
	}
}

// hostMounts lists a container's hostPath mounts as "HOST at PATH ro|rw".
func hostMounts(spec corev1.PodSpec, c corev1.Container) []string {
	hp := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hp[v.Name] = v.HostPath.Path
		}
	}
	var out []string
	for _, m := range c.VolumeMounts {
		if p, ok := hp[m.Name]; ok {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			out = append(out, p+" at "+m.MountPath+" "+mode)
		}
	}
	sort.Strings(out)
	return out
}

func checkSecurity(t *testing.T, name string, c corev1.Container, add []corev1.Capability) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("%s: no securityContext", name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: root filesystem not read-only", name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation not false", name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: capabilities do not drop ALL", name)
	} else if !slices.Equal(sc.Capabilities.Add, add) {
		t.Errorf("%s: adds capabilities %q, want %q", name, sc.Capabilities.Add, add)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccomp not RuntimeDefault", name)
	}
}

// The role allows what the agent does and nothing more.
func TestAgentRBAC(t *testing.T) {
	objs := readManifests(t)
	role := find[rbacv1.ClusterRole](t, objs, "accel-doctor-agent")
	var got []string
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: resourceNames or nonResourceURLs", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					got = append(got, g+"/"+res+":"+v)
				}
			}
		}
	}
	sort.Strings(got)
	want := []string{"/events:create", "/events:patch", "/nodes/status:get", "/nodes/status:patch", "/nodes:get", "/nodes:patch", "events.k8s.io/events:create", "events.k8s.io/events:patch"}
	if !slices.Equal(got, want) {
		t.Errorf("the role allows %q, want %q", got, want)
	}
	b := find[rbacv1.ClusterRoleBinding](t, objs, "accel-doctor-agent")
	if b.RoleRef.Name != role.Name || len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != "accel-doctor-agent" || b.Subjects[0].Namespace != "accel-doctor" {
		t.Errorf("binding %+v does not bind the role to the agent's ServiceAccount", b)
	}
}

func TestPluginDaemonSet(t *testing.T) {
	ds := find[appsv1.DaemonSet](t, readManifests(t), "accel-doctor-plugin")
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	wantArgs := []string{"plugin", "serve", "--config=/etc/accel-doctor/plugin.yaml", "--root=/host"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	checkSecurity(t, "plugin", c, nil)
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	want := map[string]struct {
		path     string
		readOnly bool
	}{
		"/var/lib/kubelet/device-plugins": {"/var/lib/kubelet/device-plugins", false},
		"/dev":                            {"/host/dev", true},
		"/sys":                            {"/host/sys", true},
		"/proc":                           {"/host/proc", true},
		"/var/run/cdi":                    {"/host/var/run/cdi", false},
	}
	seen := 0
	for _, m := range c.VolumeMounts {
		v := vols[m.Name]
		if v.ConfigMap != nil {
			if v.ConfigMap.Name != "accel-doctor-plugin" || m.MountPath != "/etc/accel-doctor" {
				t.Errorf("config mount %+v of %+v", m, v)
			}
			continue
		}
		if v.HostPath == nil {
			t.Errorf("mount %s: not a hostPath or the config", m.Name)
			continue
		}
		w, ok := want[v.HostPath.Path]
		if !ok || w.path != m.MountPath || w.readOnly != m.ReadOnly {
			t.Errorf("hostPath %s at %s read-only %v, want %+v", v.HostPath.Path, m.MountPath, m.ReadOnly, w)
		}
		seen++
	}
	if seen != len(want) {
		t.Errorf("%d host mounts, want %d", seen, len(want))
	}
	// The ConfigMap's file is the documented example, kept equal (kustomize
	// reads no file outside the kustomization's directory).
	a, err := os.ReadFile(filepath.Join(repoRoot, "deploy/base/plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/plugin-config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("deploy/base/plugin.yaml differs from docs/plugin-config.example.yaml: copy one onto the other")
	}
}

func TestJobAndProbeGate(t *testing.T) {
	objs := readManifests(t)
	job := find[batchv1.Job](t, objs, "accel-doctor-check")
	c := job.Spec.Template.Spec.Containers[0]
	if got := append(slices.Clone(c.Command), c.Args...); !slices.Equal(got, []string{"/usr/bin/accel-doctor", "check", "--root", "/host", "-o", "json"}) {
		t.Errorf("job runs %q", got)
	}
	checkSecurity(t, "job", c, []corev1.Capability{"SYS_ADMIN", "SYS_PTRACE", "DAC_READ_SEARCH"})
	// The Job sees the host as the agent does.
	agent := find[appsv1.DaemonSet](t, objs, "accel-doctor-agent").Spec.Template.Spec
	if a, j := hostMounts(agent, agent.Containers[0]), hostMounts(job.Spec.Template.Spec, c); !slices.Equal(a, j) || !job.Spec.Template.Spec.HostPID {
		t.Errorf("the Job's host view %q (hostPID %v) differs from the agent's %q", j, job.Spec.Template.Spec.HostPID, a)
	}
	pod := find[corev1.Pod](t, objs, "gpu-workload-gated")
	if len(pod.Spec.InitContainers) != 1 || !slices.Equal(pod.Spec.InitContainers[0].Command, []string{"/usr/bin/accel-doctor", "probe"}) {
		t.Fatalf("init containers %+v: want one running accel-doctor probe", pod.Spec.InitContainers)
	}
	ic, wc := pod.Spec.InitContainers[0], pod.Spec.Containers[0]
	checkSecurity(t, "gate", ic, nil)
	// The gate asks for the workload's devices: the device manager hands
	// them on, so it probes the workload's own.
	for name, q := range wc.Resources.Limits {
		if iq, ok := ic.Resources.Limits[name]; !ok || !iq.Equal(q) {
			t.Errorf("the gate does not request the workload's %s", name)
		}
	}
}

// `accel-doctor lint` (the binary, as a user runs it) flags nothing in the
// manifests: every workload LINT_CLEAN, no WARN or FAIL.
func TestLintFlagsNothing(t *testing.T) {
	bin := binaries(t)
	args := []string{"lint", "-o", "json"}
	workloads := 0
	for _, dir := range manifestDirs {
		var k kustomization
		readYAML(t, filepath.Join(repoRoot, dir, "kustomization.yaml"), &k)
		for _, r := range k.Resources {
			args = append(args, "-f", filepath.Join(repoRoot, dir, r))
		}
	}
	for _, o := range readManifests(t) {
		switch o.kind {
		case "DaemonSet", "Job", "Pod":
			workloads++
		}
	}
	cmd := exec.Command(filepath.Join(bin, "accel-doctor"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("accel-doctor %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	var rep struct {
		Findings []struct{ Status, Code, Subject, Summary string }
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("lint -o json: %v\n%s", err, out)
	}
	clean := 0
	for _, f := range rep.Findings {
		switch {
		case f.Code == "LINT_CLEAN" && f.Status == "PASS":
			clean++
		case f.Code == "LINT_KIND_SKIPPED" && f.Status == "NOT_RUN":
			// Namespace, ServiceAccount, RBAC: no pod template to lint.
		default:
			t.Errorf("lint flags %s %s: %s", f.Status, f.Code, f.Summary)
		}
	}
	if clean != workloads {
		t.Errorf("%d workloads LINT_CLEAN, want %d (every DaemonSet, Job and Pod)", clean, workloads)
	}
}

// The agent's admission policy judges the agent's ServiceAccount (the one
// agent-rbac.yaml binds) on every update of a Node and its status, and
// its binding denies: what e2e/deploy's TestAgentOwnNodePolicy runs
// against a real API server.
func TestAgentNodePolicy(t *testing.T) {
	objs := readManifests(t)
	p := find[admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "accel-doctor-agent-own-node")
	b := find[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs, "accel-doctor-agent-own-node")
	sa := find[corev1.ServiceAccount](t, objs, "accel-doctor-agent")
	user := "system:serviceaccount:accel-doctor:" + sa.Name
	if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, `"`+user+`"`) {
		t.Errorf("match conditions %+v: want the one user %s", p.Spec.MatchConditions, user)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", p.Spec.FailurePolicy)
	}
	mc := p.Spec.MatchConstraints
	if mc == nil || len(mc.ResourceRules) != 1 || !slices.Equal(mc.ResourceRules[0].Resources, []string{"nodes", "nodes/status"}) ||
		!slices.Equal(mc.ResourceRules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) {
		t.Errorf("match constraints %+v: want UPDATE of nodes and nodes/status", mc)
	}
	if len(p.Spec.Validations) == 0 || !strings.Contains(p.Spec.Validations[0].Expression, "object.metadata.name") {
		t.Errorf("the first validation does not compare the node's name: %+v", p.Spec.Validations)
	}
	if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v: want policy %s, Deny", b.Spec, p.Name)
	}
}

// components/dra-state adds the kubelet's directory to the agent,
// read-only (recursively where the runtime can), as a Directory hostPath:
// what the DRA layer needs for dra_manager_state. e2e/deploy renders it
// over deploy/ and dry-runs the result; e2e/lint lints it.
func TestDRAStateComponent(t *testing.T) {
	var c struct {
		APIVersion, Kind string
		Patches          []struct {
			Target struct{ Kind, Name string }
			Patch  string
		}
	}
	readYAML(t, filepath.Join(repoRoot, "deploy/components/dra-state/kustomization.yaml"), &c)
	if c.Kind != "Component" || c.APIVersion != "kustomize.config.k8s.io/v1alpha1" || len(c.Patches) != 1 {
		t.Fatalf("%s %s with %d patches: want one Component patch", c.APIVersion, c.Kind, len(c.Patches))
	}
	p := c.Patches[0]
	if p.Target.Kind != "DaemonSet" || p.Target.Name != find[appsv1.DaemonSet](t, readManifests(t), "accel-doctor-agent").Name {
		t.Errorf("target %+v", p.Target)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict([]byte(p.Patch), &ds); err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.Containers[0].VolumeMounts) != 1 || len(spec.Volumes) != 1 {
		t.Fatalf("patch: %+v", spec)
	}
	m, v := spec.Containers[0].VolumeMounts[0], spec.Volumes[0]
	if m.Name != v.Name || m.MountPath != "/host/var/lib/kubelet" || !m.ReadOnly || m.RecursiveReadOnly == nil || *m.RecursiveReadOnly != corev1.RecursiveReadOnlyIfPossible {
		t.Errorf("mount %+v", m)
	}
	if v.HostPath == nil || v.HostPath.Path != "/var/lib/kubelet" || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectory {
		t.Errorf("volume %+v", v)
	}
}
