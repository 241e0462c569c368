package e2erun

import (
	"os/exec"
	"strings"
	"testing"
)

// differ are the modules both builds compile at different versions, and
// why they may: each is compiled twice, once per version.
var differ = map[string]string{
	// k8s.io/kubernetes v1.37.2's kubelet is built against the cgroups and
	// dbus versions it requires; the product moved ahead of both.
	"github.com/opencontainers/cgroups": "k8s.io/kubernetes requires v0.0.x",
	"github.com/godbus/dbus/v5":         "k8s.io/kubernetes requires a newer v5 than the product",
}

// TestModulesAgree: every other module whose packages both this module's
// tests and the e2e module's compile is at one version in both. A package
// compiled at one version for both, with the same settings, is compiled
// once: TestE2E's build then finds k8s.io/api, client-go, grpc and the
// rest in the go build cache instead of compiling them again (go test
// compiled them for this module's tests first).
func TestModulesAgree(t *testing.T) {
	built := func(dir string) map[string]string {
		cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", "./...")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if p, v, ok := strings.Cut(l, " "); ok && v != "" {
				m[p] = v
			}
		}
		return m
	}
	ours, theirs := built(repo), built(e2e)
	shared := 0
	for p, v := range ours {
		w, ok := theirs[p]
		if !ok {
			continue
		}
		shared++
		if _, ok := differ[p]; v != w && !ok {
			t.Errorf("%s: %s here, %s in e2e/go.mod: raise the lower to the higher (go get %s@VERSION in the module that has the lower, then go mod tidy)", p, v, w, p)
		}
	}
	if shared < 10 {
		t.Fatalf("only %d modules in common: the listing is wrong", shared)
	}
}
