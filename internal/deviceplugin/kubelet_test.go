package deviceplugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kubeletSource is the directory of the k8s.io/kubernetes module the e2e
// suite builds the real kubelet from (its version in e2e/go.mod), in the
// Go module cache; the test skips when it is not there.
func kubeletSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "e2e/go.mod"))
	if err != nil {
		t.Skipf("no e2e/go.mod: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindStringSubmatch(string(b))
	if m == nil {
		t.Skip("e2e/go.mod requires no k8s.io/kubernetes")
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+m[1])
	if _, err := os.Stat(filepath.Join(dir, "pkg/kubelet/cm/devicemanager/manager.go")); err != nil {
		t.Skipf("the kubelet's source (k8s.io/kubernetes %s) is not in the module cache: `cd e2e && go mod download k8s.io/kubernetes` brings it", m[1])
	}
	return dir
}

// Every function the kubelet table names is in the file it names, in the
// kubelet the e2e suite runs, and the kubelet's words the codes quote are
// its own.
func TestKubeletMirrorsNameTheKubeletsCode(t *testing.T) {
	src := kubeletSource(t)
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatalf("the table names %s: %v", f, err)
		}
		return string(b)
	}
	method := regexp.MustCompile(`^\(\*(\w+)\)\.(\w+)$`)
	for _, m := range KubeletMirrors {
		for _, f := range m.Kubelet {
			text := read(f.File)
			re := `(?m)^func ` + regexp.QuoteMeta(f.Func) + `\(`
			if g := method.FindStringSubmatch(f.Func); g != nil {
				re = `(?m)^func \(\w+ \*` + g[1] + `\) ` + g[2] + `\(`
			}
			if !regexp.MustCompile(re).MatchString(text) {
				t.Errorf("%s is not a function of %s", f.Func, f.File)
			}
		}
	}
	for _, q := range []struct{ file, text string }{
		{kubeletManager, `"device plugin already connected: %s"`},
		{kubeletHandler, `if c == nil {
		return
	}`},
		{kubeletManager, `"no containers return in allocation response %v"`},
		{kubeletManager, `resp.ContainerResponses[0]`},
		{kubeletManager, `"no healthy devices present; cannot allocate unhealthy devices %s"`},
		{kubeletManager, `"previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s"`},
		{kubeletManager, `preferred.Intersection(aligned)`},
		{kubeletTopology, `"Ignoring NUMA node IDs reported by device plugin that are unknown to cadvisor"`},
		{kubeletPodDevs, `"Container device has conflicting mapping host devices"`},
		{kubeletPodDevs, `"Container mount has conflicting mapping host mounts"`},
		{kubeletClient, `errFailedToDialDevicePlugin+" %v"`},
		{kubeletClient, `grpc.WithBlock()`},
		{"pkg/kubelet/cm/devicemanager/types.go", `endpointStopGracePeriod = time.Duration(5) * time.Minute`},
	} {
		if !strings.Contains(read(q.file), q.text) {
			t.Errorf("%s does not say %s", q.file, q.text)
		}
	}
}

// Where the codes' long forms and the mock's symptoms cite a file of the
// device manager and a name in it ("manager.go PluginConnected"), the
// name is that file's.
func TestCodesCiteTheKubeletsNames(t *testing.T) {
	src := kubeletSource(t)
	dirs := map[string]string{}
	for _, f := range []string{"manager.go", "endpoint.go", "pod_devices.go", "topology_hints.go", "types.go"} {
		dirs[f] = "pkg/kubelet/cm/devicemanager/" + f
	}
	for _, f := range []string{"api.go", "client.go", "handler.go", "server.go"} {
		dirs[f] = "pkg/kubelet/cm/devicemanager/plugin/v1beta1/" + f
	}
	cite := regexp.MustCompile(`\b(\w+\.go),?\s+(\w+)`)
	n := 0
	texts := map[string]string{}
	for _, c := range Codes {
		texts[c.Code] = c.Explain
	}
	for _, d := range ModeDocs {
		texts["mode "+string(d.Mode)] = d.Symptom
	}
	for what, text := range texts {
		for _, m := range cite.FindAllStringSubmatch(text, -1) {
			file, ok := dirs[m[1]]
			if !ok {
				continue
			}
			b, err := os.ReadFile(filepath.Join(src, file))
			if err != nil {
				t.Fatal(err)
			}
			name := regexp.QuoteMeta(m[2])
			def := regexp.MustCompile(`(?m)^func (\(\w+ \*?\w+\) )?` + name + `\(|^\s*` + name + `\s+=|^const ` + name + `\s`)
			if !def.Match(b) {
				t.Errorf("%s cites %s %s, which %s does not define", what, m[1], m[2], file)
			}
			n++
		}
	}
	if n < 20 {
		t.Errorf("only %d citations found: the pattern no longer matches the catalog", n)
	}
}
