package deploytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
)

// kustomization is the part of a kustomization.yaml the test reads.
type kustomization struct {
	Resources []string `json:"resources"`
	// Namespace sets the namespace of every namespaced object;
	// Transformers may hold an inline NamespaceTransformer (namespaceOf).
	Namespace          string   `json:"namespace"`
	Transformers       []string `json:"transformers"`
	ConfigMapGenerator []struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace"`
		Files     []string `json:"files"`
	} `json:"configMapGenerator"`
}

// namespaceRule is what a kustomization does to its objects' namespaces:
// set ns on every namespaced object, or (unsetOnly) on those whose
// manifest names none. ns "" changes nothing.
type namespaceRule struct {
	ns        string
	unsetOnly bool
}

// namespaceOf reads the kustomization's namespace rule: its namespace
// field, or a NamespaceTransformer given inline in transformers (the
// builtin's fields: kustomize api filters/namespace). Any other
// transformer is refused, so that a new one is modelled here before the
// tests trust what they read.
func (k kustomization) namespaceOf(t *testing.T, dir string) namespaceRule {
	t.Helper()
	r := namespaceRule{ns: k.Namespace}
	for _, tr := range k.Transformers {
		var nt struct {
			APIVersion, Kind string
			Metadata         struct{ Name, Namespace string }
			UnsetOnly        bool `json:"unsetOnly"`
		}
		if err := yaml.UnmarshalStrict([]byte(tr), &nt); err != nil || nt.APIVersion != "builtin" || nt.Kind != "NamespaceTransformer" {
			t.Fatalf("%s/kustomization.yaml: transformer %q: this test models an inline builtin NamespaceTransformer only (%v)", dir, tr, err)
		}
		if r.ns != "" {
			t.Fatalf("%s/kustomization.yaml sets its namespace twice", dir)
		}
		r = namespaceRule{ns: nt.Metadata.Namespace, unsetOnly: nt.UnsetOnly}
	}
	return r
}

// clusterScoped are the kinds of deploy/ that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// manifestDirs are the kustomizations whose resources are manifests: the
// read-only base and the agent's policy (deploy/ is the two), the device
// plugin's overlay, the examples.
var manifestDirs = []string{"deploy/base", "deploy/policy", "deploy/plugin", "deploy/examples"}

// object is one decoded document.
type object struct {
	file string
	kind string
	obj  any
	// ns is its namespace: its manifest's, and in an install (readInstall)
	// what the kustomizations above it make of it.
	ns string
}

// named is what every object of deploy/ is.
type named interface {
	GetName() string
	GetNamespace() string
}

// isDir: a kustomization's resource that is a directory (another
// kustomization), not a manifest file.
func isDir(t *testing.T, dir, r string) bool {
	t.Helper()
	st, err := os.Stat(filepath.Join(repoRoot, dir, r))
	if err != nil {
		t.Fatalf("%s/kustomization.yaml: resource %s: %v", dir, r, err)
	}
	return st.IsDir()
}

// readManifests decodes every manifest file of the kustomizations of
// manifestDirs, strictly (an unknown field, a typo kubectl would reject
// or silently drop, is an error), into its k8s.io/api type.
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
			if isDir(t, dir, r) {
				continue // another kustomization, read as its own
			}
			out = append(out, decodeFile(t, filepath.Join(dir, r))...)
		}
	}
	return out
}

// decodeFile decodes every document of a manifest file (relative to the
// repository) into its k8s.io/api type, strictly.
func decodeFile(t *testing.T, file string) []object {
	t.Helper()
	var out []object
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
		case "rbac.authorization.k8s.io/v1 Role":
			obj = &rbacv1.Role{}
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "apps/v1 DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "batch/v1 Job":
			obj = &batchv1.Job{}
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		default:
			t.Fatalf("%s document %d: %s %s: no type in this test (add it)", file, i+1, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", file, i+1, tm.Kind, err)
		}
		out = append(out, object{file: file, kind: tm.Kind, obj: obj, ns: obj.(named).GetNamespace()})
	}
	return out
}

// install is what `kubectl apply -k DIR` creates, as far as these tests
// judge it: the objects of its manifest files and of the kustomizations
// it names, recursively, each in the namespace the kustomizations give
// it, and the files of its generated ConfigMaps (by the generator's
// name). TestInstallsAsKustomizeRenders holds it to kustomize's own
// rendering.
type install struct {
	objects    []object
	configMaps map[string][]string // generator name -> files, relative to the repository
	cmNS       map[string]string   // generator name -> namespace
}

func readInstall(t *testing.T, dir string) install {
	t.Helper()
	in := install{configMaps: map[string][]string{}, cmNS: map[string]string{}}
	var walk func(dir string)
	walk = func(dir string) {
		var k kustomization
		readYAML(t, filepath.Join(repoRoot, dir, "kustomization.yaml"), &k)
		first := len(in.objects)
		for _, r := range k.Resources {
			if isDir(t, dir, r) {
				walk(filepath.Join(dir, r))
				continue
			}
			in.objects = append(in.objects, decodeFile(t, filepath.Join(dir, r))...)
		}
		// A kustomization's namespace applies to what it and the
		// kustomizations below it produce, after theirs.
		rule := k.namespaceOf(t, dir)
		for i := first; i < len(in.objects); i++ {
			o := &in.objects[i]
			if rule.ns != "" && !clusterScoped[o.kind] && (!rule.unsetOnly || o.ns == "") {
				o.ns = rule.ns
			}
		}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.Files {
				in.configMaps[g.Name] = append(in.configMaps[g.Name], filepath.Join(dir, f))
			}
			in.cmNS[g.Name] = g.Namespace
			if rule.ns != "" && (!rule.unsetOnly || g.Namespace == "") {
				in.cmNS[g.Name] = rule.ns
			}
		}
	}
	walk(dir)
	return in
}

// names are an install's objects as "Kind/name", sorted, with a
// ConfigMap per generator.
func (in install) names() []string {
	var out []string
	for _, o := range in.objects {
		out = append(out, o.kind+"/"+o.obj.(named).GetName())
	}
	for n := range in.configMaps {
		out = append(out, "ConfigMap/"+n)
	}
	sort.Strings(out)
	return out
}

// placed are an install's objects as "Kind/namespace/name" (namespace
// empty for a cluster-scoped one), sorted, with a ConfigMap per
// generator.
func (in install) placed() []string {
	var out []string
	for _, o := range in.objects {
		out = append(out, o.kind+"/"+o.ns+"/"+o.obj.(named).GetName())
	}
	for n := range in.configMaps {
		out = append(out, "ConfigMap/"+in.cmNS[n]+"/"+n)
	}
	sort.Strings(out)
	return out
}

// podSpecs are the pod templates of an install's workloads, by
// "Kind/name".
func (in install) podSpecs() map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for _, o := range in.objects {
		switch v := o.obj.(type) {
		case *appsv1.DaemonSet:
			out["DaemonSet/"+v.Name] = v.Spec.Template.Spec
		case *batchv1.Job:
			out["Job/"+v.Name] = v.Spec.Template.Spec
		case *corev1.Pod:
			out["Pod/"+v.Name] = v.Spec
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
	want := []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "DaemonSet", "Job", "Namespace", "NetworkPolicy", "Pod", "Role", "RoleBinding", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
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
	wantArgs := []string{"agent", "--root=/host", "--node-name=$(NODE_NAME)", "--interval=60s", "--metrics-address=[$(POD_IP)]:9808"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			t.Errorf("env %s is not from the downward API", e.Name)
			continue
		}
		env = append(env, e.Name+" from "+e.ValueFrom.FieldRef.FieldPath)
	}
	if want := []string{"NODE_NAME from spec.nodeName", "POD_IP from status.podIP"}; !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
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
	// Of /run, modprobe.d only (TestAgentReachesNoRuntimeSocket,
	// TestAgentMountsLoseNoFinding).
	wantMounts := []string{"/dev", "/etc/cdi", "/proc", "/run/modprobe.d", "/sys", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/pod-resources", "/var/run/cdi"}
	if !slices.Equal(mounted, wantMounts) {
		t.Errorf("host mounts %q, want %q", mounted, wantMounts)
	}
}

// metricsPort is the agent container's port named metrics.
func metricsPort(t *testing.T, c corev1.Container) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			if p.Protocol != corev1.ProtocolTCP && p.Protocol != "" {
				t.Errorf("port metrics: protocol %s", p.Protocol)
			}
			return p.ContainerPort
		}
	}
	t.Fatalf("the agent has no port named metrics: %+v", c.Ports)
	return 0
}

// The agent serves on its own pod IP, at the container port named
// metrics, where its liveness probe goes: the pod is not hostNetwork (the
// pod IP is its own), and --metrics-address, with $(POD_IP) expanded as
// the kubelet expands it for an IPv4 and an IPv6 pod IP, is that IP and
// port, the very address of the probe's URL (no host: the pod IP,
// pkg/probe/http/request.go, joined with net.JoinHostPort).
// internal/kubecli's TestAgentBinaryServesOnBracketedIP serves on both
// forms.
func TestAgentListensOnItsPodIP(t *testing.T) {
	spec := find[appsv1.DaemonSet](t, readManifests(t), "accel-doctor-agent").Spec.Template.Spec
	if spec.HostNetwork {
		t.Fatal("hostNetwork: the pod IP would be the node's, and the metrics port on every node address")
	}
	c := spec.Containers[0]
	port := metricsPort(t, c)
	var addr string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-address="); ok {
			addr = v
		}
	}
	if !strings.Contains(addr, "$(POD_IP)") {
		t.Fatalf("--metrics-address %q: want the pod IP, $(POD_IP)", addr)
	}
	lp := c.LivenessProbe
	if lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Host != "" || lp.HTTPGet.Port.String() != "metrics" || lp.HTTPGet.Path != "/healthz" {
		t.Fatalf("livenessProbe %+v: want GET /healthz on port metrics of the pod IP (no host)", lp)
	}
	for _, ip := range []string{"10.244.1.7", "fd00:10:244::7"} {
		expanded := strings.ReplaceAll(addr, "$(POD_IP)", ip)
		host, p, err := net.SplitHostPort(expanded)
		if err != nil || host != ip || p != strconv.Itoa(int(port)) {
			t.Errorf("pod IP %s: --metrics-address=%s is %q port %q (%v), want %s port %d", ip, expanded, host, p, err, ip, port)
			continue
		}
		if probe, listen := net.JoinHostPort(ip, strconv.Itoa(int(port))), net.JoinHostPort(host, p); probe != listen {
			t.Errorf("pod IP %s: the probe goes to %s, the agent listens on %s", ip, probe, listen)
		}
	}
}

// The NetworkPolicy isolates the agent's pods, and only them, for
// ingress, and allows exactly TCP to the metrics port, from any source
// (deploy/README.md says why); egress it leaves alone.
func TestAgentNetworkPolicy(t *testing.T) {
	objs := readManifests(t)
	np := find[networkingv1.NetworkPolicy](t, objs, "accel-doctor-agent")
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Empty() {
		t.Fatal("the podSelector selects every pod of the namespace")
	}
	agent := find[appsv1.DaemonSet](t, objs, "accel-doctor-agent")
	if !sel.Matches(labels.Set(agent.Spec.Template.Labels)) {
		t.Errorf("podSelector %s does not select the agent's pods %v", sel, agent.Spec.Template.Labels)
	}
	for _, o := range objs {
		var name string
		var l map[string]string
		switch v := o.obj.(type) {
		case *appsv1.DaemonSet:
			name, l = "DaemonSet/"+v.Name, v.Spec.Template.Labels
		case *batchv1.Job:
			name, l = "Job/"+v.Name, v.Spec.Template.Labels
		case *corev1.Pod:
			name, l = "Pod/"+v.Name, v.Labels
		default:
			continue
		}
		if name != "DaemonSet/accel-doctor-agent" && sel.Matches(labels.Set(l)) {
			t.Errorf("podSelector %s also selects %s's pods", sel, name)
		}
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want [Ingress] (egress unrestricted)", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) != 0 {
		t.Errorf("egress rules %+v", np.Spec.Egress)
	}
	if len(np.Spec.Ingress) != 1 {
		t.Fatalf("%d ingress rules, want 1", len(np.Spec.Ingress))
	}
	r := np.Spec.Ingress[0]
	if len(r.From) != 0 {
		t.Errorf("from %+v: want any source", r.From)
	}
	port := metricsPort(t, agent.Spec.Template.Spec.Containers[0])
	if len(r.Ports) != 1 || r.Ports[0].Protocol == nil || *r.Ports[0].Protocol != corev1.ProtocolTCP ||
		r.Ports[0].Port == nil || r.Ports[0].Port.IntValue() != int(port) || r.Ports[0].EndPort != nil {
		t.Errorf("ports %+v: want exactly TCP %d, the agent's metrics port", r.Ports, port)
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
	// Health follows the kernel's device uevents, which reach the pod's own
	// network namespace as long as the host's user namespace owns it:
	// hostNetwork is not needed, hostUsers must not be false
	// (internal/deviceplugin TestUeventDeviceEventsByNetworkNamespace).
	if spec.HostNetwork {
		t.Error("hostNetwork: true: the plugin needs no host network to hear device uevents")
	}
	if spec.HostUsers == nil || !*spec.HostUsers {
		t.Errorf("hostUsers %v, want true: in a user namespace of its own the pod hears no device uevent", spec.HostUsers)
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
	bin := binaries(t, false)
	args := []string{"lint", "-o", "json"}
	workloads := 0
	for _, dir := range manifestDirs {
		var k kustomization
		readYAML(t, filepath.Join(repoRoot, dir, "kustomization.yaml"), &k)
		for _, r := range k.Resources {
			if !isDir(t, dir, r) {
				args = append(args, "-f", filepath.Join(repoRoot, dir, r))
			}
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

// writesDevicePlugins lists the writable hostPath mounts of a pod that
// reach the kubelet's device-plugins directory: the directory itself, one
// below it, or one above it (/var/lib/kubelet, /).
func writesDevicePlugins(spec corev1.PodSpec) []string {
	const dp = "/var/lib/kubelet/device-plugins"
	hp := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hp[v.Name] = path.Clean(v.HostPath.Path)
		}
	}
	var out []string
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			p, ok := hp[m.Name]
			if !ok || m.ReadOnly {
				continue
			}
			if p == dp || strings.HasPrefix(p, dp+"/") || p == "/" || strings.HasPrefix(dp, p+"/") {
				out = append(out, c.Name+": "+p+" at "+m.MountPath)
			}
		}
	}
	return out
}

// runsPluginServe: a container of the pod runs `plugin serve`.
func runsPluginServe(spec corev1.PodSpec) bool {
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		args := append(slices.Clone(c.Command), c.Args...)
		if i := slices.Index(args, "plugin"); i >= 0 && i+1 < len(args) && args[i+1] == "serve" {
			return true
		}
	}
	return false
}

// What each install schedules. deploy/, the read-only install, runs the
// agent and nothing that advertises a device: no device-plugin
// DaemonSet, no container running `plugin serve`, no generated plugin
// config, and no pod that mounts the kubelet's device-plugins directory
// (or one above it) writable. deploy/plugin adds exactly the plugin's
// DaemonSet and its config, and that config selects no device.
// deploy/examples runs no DaemonSet.
func TestWhatEachInstallSchedules(t *testing.T) {
	base := readInstall(t, "deploy")
	want := []string{"ClusterRole//accel-doctor-agent", "ClusterRoleBinding//accel-doctor-agent", "DaemonSet/accel-doctor/accel-doctor-agent", "Namespace//accel-doctor",
		"NetworkPolicy/accel-doctor/accel-doctor-agent", "Role/default/accel-doctor-agent-events", "RoleBinding/default/accel-doctor-agent-events",
		"ServiceAccount/accel-doctor/accel-doctor-agent", "ValidatingAdmissionPolicy//accel-doctor-agent-own-node", "ValidatingAdmissionPolicyBinding//accel-doctor-agent-own-node"}
	if got := base.placed(); !slices.Equal(got, want) {
		t.Errorf("deploy/ installs %q, want %q", got, want)
	}
	for name, spec := range base.podSpecs() {
		if w := writesDevicePlugins(spec); len(w) > 0 {
			t.Errorf("deploy/: %s writes to the kubelet's device-plugins directory: %q", name, w)
		}
		if runsPluginServe(spec) {
			t.Errorf("deploy/: %s runs plugin serve", name)
		}
	}
	if len(base.configMaps) != 0 {
		t.Errorf("deploy/ generates ConfigMaps %v", base.configMaps)
	}

	plugin := readInstall(t, "deploy/plugin")
	var added []string
	for _, n := range plugin.names() {
		if !slices.Contains(base.names(), n) {
			added = append(added, n)
		}
	}
	if want := []string{"ConfigMap/accel-doctor-plugin", "DaemonSet/accel-doctor-plugin"}; !slices.Equal(added, want) || len(plugin.names()) != len(base.names())+len(want) {
		t.Errorf("deploy/plugin installs %q: want deploy/'s objects and %q", plugin.names(), want)
	}
	specs := plugin.podSpecs()
	ps, ok := specs["DaemonSet/accel-doctor-plugin"]
	if !ok || !runsPluginServe(ps) {
		t.Fatalf("deploy/plugin: no DaemonSet accel-doctor-plugin running plugin serve")
	}
	// The detector finds what it is for: the plugin's socket directory.
	if w := writesDevicePlugins(ps); len(w) != 1 {
		t.Errorf("the plugin's writable device-plugins mounts: %q, want its one", w)
	}
	if ps.HostNetwork {
		t.Error("deploy/plugin: the plugin DaemonSet has hostNetwork")
	}
	files := plugin.configMaps["accel-doctor-plugin"]
	if len(files) != 1 || filepath.Base(files[0]) != "plugin.yaml" {
		t.Fatalf("the plugin's ConfigMap holds %q, want plugin.yaml", files)
	}
	f, err := os.Open(filepath.Join(repoRoot, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := deviceplugin.ParseConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	if len(cfg.Resources) != 0 {
		t.Errorf("%s declares %d resources: what ships selects no device", files[0], len(cfg.Resources))
	}

	for name, spec := range readInstall(t, "deploy/examples").podSpecs() {
		if strings.HasPrefix(name, "DaemonSet/") || len(writesDevicePlugins(spec)) > 0 || runsPluginServe(spec) {
			t.Errorf("deploy/examples: %s", name)
		}
	}
}

// The installs as this package reads them (readInstall) are what
// kustomize renders (`kubectl kustomize DIR`, kustomize as kubectl links
// it): the same objects in the same namespaces, a generated ConfigMap
// under its name and a hash.
func TestInstallsAsKustomizeRenders(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the installs are read from their kustomization files only")
	}
	for _, dir := range []string{"deploy", "deploy/plugin", "deploy/examples"} {
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(repoRoot, dir)).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		in := readInstall(t, dir)
		var got []string
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
		for {
			d, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			var o struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
			}
			if err := yaml.Unmarshal(d, &o); err != nil {
				t.Fatal(err)
			}
			name := o.Metadata.Name
			if o.Kind == "ConfigMap" {
				for g := range in.configMaps {
					if strings.HasPrefix(name, g+"-") {
						name = g
					}
				}
			}
			got = append(got, o.Kind+"/"+o.Metadata.Namespace+"/"+name)
		}
		sort.Strings(got)
		if want := in.placed(); !slices.Equal(got, want) {
			t.Errorf("kubectl kustomize %s renders %q; read from its files: %q", dir, got, want)
		}
	}
}

// The flags the DaemonSets give are flags of the binary: `--help` of the
// command they run lists each.
func TestDaemonSetFlagsExist(t *testing.T) {
	bin := filepath.Join(binaries(t, false), "accel-doctor")
	for _, name := range []string{"accel-doctor-agent", "accel-doctor-plugin"} {
		c := find[appsv1.DaemonSet](t, readManifests(t), name).Spec.Template.Spec.Containers[0]
		var cmd, flags []string
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--") {
				flags = append(flags, strings.SplitN(a, "=", 2)[0])
			} else {
				cmd = append(cmd, a)
			}
		}
		out, err := exec.Command(bin, append(cmd, "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("accel-doctor %s --help: %v\n%s", strings.Join(cmd, " "), err, out)
		}
		for _, f := range flags {
			if !regexp.MustCompile(`(?m)^\s+(-\w, )?` + regexp.QuoteMeta(f) + `\b`).Match(out) {
				t.Errorf("%s runs accel-doctor %s %s, which its --help does not list:\n%s", name, strings.Join(cmd, " "), f, out)
			}
		}
	}
}
