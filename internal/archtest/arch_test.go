package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/accel-doctor/accel-doctor/internal/"

// allowed lists, per package, the internal packages it may import. A
// package not listed may import nothing internal; readers may not reach up
// into diagnose, report or cli.
var allowed = map[string][]string{
	"hostfs":  {},
	"report":  {},
	"lazyre":  {}, // regexps compiled on first use, for the readers
	"trim":    {}, // madvise of the process's own image; cli's long-running commands call it
	"helper":  {}, // finds the companion binaries, and refuses one another user could change
	"pci":     {"hostfs"},
	"driver":  {"hostfs", "pci"},
	"devnode": {"hostfs", "pci", "driver"},
	"cgroup":  {"hostfs", "probe"},
	"sandbox": {"hostfs", "cgroup", "probe"}, // the one writer; only cli (and cmd) import it
	"enter":   {"probe", "helper"},           // the second writer (container --probe); only cli (and cmd) import it
	"probe":   {"hostfs", "helper"},
	"runtime": {"hostfs"},
	"cdi":     {"hostfs", "runtime", "lazyre"},
	"iommu":   {"hostfs", "pci", "runtime", "driver"},
	"kubelet": {"hostfs", "pci", "driver", "lazyre", "kubeletrpc"},            // the node's kubelet state, read-only
	"dra":     {"hostfs", "kubelet", "cdi", "driver", "lazyre", "kubeletrpc"}, // the node's DRA state, read-only
	// kubeletrpc: layer 6's calls on the kubelet's sockets (types, and the
	// exec of accel-doctor-kubelet); its grpccall makes them with gRPC.
	"kubeletrpc": {"hostfs", "helper"},
	"catalog":    {}, // the codes of plugin test, lint, cluster, claim and dra: every binary's explain, without their gRPC or client-go
	"resname":    {}, // the extended-resource name rule: deviceplugin, lint and cluster share it
	"topo":       {"hostfs", "pci"},
	"fixture":    {"hostfs", "pci", "kubelet"}, // pci.ConfigSpec encodes the trees' config spaces; kubelet their kubelet captures
	"demo":       {"hostfs"},
	"diagnose":   {"hostfs", "report", "pci", "driver", "devnode", "cgroup", "probe", "runtime", "cdi", "iommu", "kubelet", "dra", "kubeletrpc"},
	"lint":       {"report", "resname", "catalog"}, // manifests only (bytes in, findings out); in accel-doctor-kube (internal/kubecli)
	// deviceplugin sits beside diagnose: a writer (its sockets, its CDI
	// spec) that reads devices through the readers and reports findings.
	"deviceplugin": {"hostfs", "pci", "devnode", "cdi", "report", "lazyre", "catalog", "resname"},
	"cluster":      {"report", "pci", "resname", "catalog"}, // reads the API server (client-go) and reports findings; pci classifies NFD's class labels as the node does
	// dramock is a writer beside deviceplugin: the DRA mock driver (its
	// sockets and CDI specs) and the kubelet-side DRA tester.
	"dramock": {"hostfs", "cdi", "report", "deviceplugin", "dra", "catalog"},
	// agent is accel-doctor-kube's DaemonSet mode: it runs diagnose and
	// writes its own node's condition and annotation (client-go).
	"agent":      {"hostfs", "report", "diagnose", "cluster", "driver", "kubelet"},
	"claim":      {"report", "cluster", "catalog"}, // DRA claims through the API server (cluster's client setup); in accel-doctor-kube
	"cli":        {"*"},
	"kubecli":    {"*"}, // accel-doctor-kube's commands: cli's Extension
	"kubeletcli": {"*"}, // accel-doctor-kubelet's commands: cli's Extension
	"archtest":   {},
	"e2erun":     {}, // one test that runs the e2e module; no code
	"deploytest": {}, // tests of deploy/, the image, the kubectl plugin and krew; no code
	"testutil":   {"testbin"},
	// Tests' builds of the product binaries; testbin/product links every
	// package they link, for go test to compile first.
	"testbin": {"cli", "enter", "kubecli", "kubeletcli", "sandbox"},
}

func TestDependencyDirection(t *testing.T) {
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		pkg := d.Name()
		ok, listed := allowed[pkg]
		if !listed {
			t.Errorf("package internal/%s is not in the dependency table: add it with what it may import", pkg)
			continue
		}
		fset := token.NewFileSet()
		files, _ := filepath.Glob(filepath.Join("..", pkg, "**", "*.go"))
		top, _ := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		for _, f := range append(top, files...) {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				p := strings.Trim(im.Path.Value, `"`)
				if !strings.HasPrefix(p, module) {
					continue
				}
				dep := strings.SplitN(strings.TrimPrefix(p, module), "/", 2)[0]
				if dep != pkg && !permitted(ok, dep) {
					t.Errorf("%s imports internal/%s: against the direction hostfs -> readers -> diagnose -> report -> cli", f, dep)
				}
			}
		}
	}
}

func permitted(list []string, dep string) bool {
	for _, a := range list {
		if a == "*" || a == dep {
			return true
		}
	}
	return false
}

// accel-doctor, the node diagnosis, does not link the Kubernetes client,
// the API types or the DRA libraries: their package initialisation would
// be paid by every start (internal/cli's KubeBinary). Those commands are
// accel-doctor-kube's.
// The documented build's -tags=grpcnotrace keeps golang.org/x/net/trace
// (and html/template, text/template and expvar with it) out of both
// binaries: grpc imports it only for its optional request tracing, which
// nothing here turns on, and its package inits ran on every start. If a
// grpc release renames the tag, this fails rather than the binaries
// silently growing again.
func TestGRPCNoTraceTagDropsTrace(t *testing.T) {
	for _, cmd := range []string{"../../cmd/accel-doctor", "../../cmd/accel-doctor-kubelet", "../../cmd/accel-doctor-kube"} {
		out, err := exec.Command("go", "list", "-deps", "-tags=grpcnotrace", cmd).Output()
		if err != nil {
			t.Fatalf("go list -deps: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "golang.org/x/net/trace" || dep == "html/template" {
				t.Errorf("%s built with -tags=grpcnotrace still links %s", cmd, dep)
			}
		}
	}
}

func TestNodeBinaryLinksNoKubernetesClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/accel-doctor").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go/", "k8s.io/api/core/", "k8s.io/dynamic-resource-allocation/", module + "kubecli", module + "lint", module + "cluster", module + "agent", module + "claim", module + "dramock"} {
			if dep == strings.TrimSuffix(banned, "/") || strings.HasPrefix(dep, banned) {
				t.Errorf("cmd/accel-doctor links %s (move what needs it to internal/kubecli)", dep)
			}
		}
	}
}

// Nor does it link gRPC, the protobuf runtime, Prometheus' client or the
// kubelet's generated APIs: their package initialisation cost every start
// of check about 1.5 ms and 4 MiB (internal/kubeletrpc's doc). Those are
// accel-doctor-kubelet's (the device plugin, its mock and tester, and the
// calls on the kubelet's sockets, which accel-doctor makes through it).
// Nor any of the protobuf module: even its wire-format reader's
// dependency opens the executable in its init (internal/kubelet's
// allocresp.go).
func TestNodeBinaryLinksNoGRPC(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/accel-doctor").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		for _, banned := range []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/prometheus/", "k8s.io/kubelet/",
			module + "deviceplugin", module + "dramock", module + "kubeletcli", module + "kubeletrpc/grpccall"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") || strings.HasSuffix(banned, "/") && strings.HasPrefix(dep, banned) {
				t.Errorf("cmd/accel-doctor links %s (move what needs it to internal/kubeletcli)", dep)
			}
		}
	}
	// The check still reaches the kubelet's sockets: through kubeletrpc.
	if !slices.Contains(deps, module+"kubeletrpc") {
		t.Error("cmd/accel-doctor does not link internal/kubeletrpc: how does layer 6 call the kubelet's sockets?")
	}
}

// accel-doctor-kubelet, a node daemon (the device plugin), links no
// Kubernetes client either: its resident memory is the plugin's.
func TestKubeletBinaryLinksNoKubernetesClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/accel-doctor-kubelet").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go/", "k8s.io/api/core/", "k8s.io/dynamic-resource-allocation/", module + "kubecli", module + "dramock"} {
			if dep == strings.TrimSuffix(banned, "/") || strings.HasPrefix(dep, banned) {
				t.Errorf("cmd/accel-doctor-kubelet links %s", dep)
			}
		}
	}
}
