package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// explain is the whole catalog in every binary: accel-doctor alone (no
// other binary beside it, so nothing is handed over),
// accel-doctor-kubelet and accel-doctor-kube list the same codes, and
// accel-doctor answers for the codes of the commands it hands over.
func TestExplainInEveryBinary(t *testing.T) {
	dir := filepath.Dir(testutil.Binaries(t, "../.."))
	env := []string{"PATH=/usr/bin:/bin"}
	codes := func(bin string) []string {
		t.Helper()
		cmd := exec.Command(bin, "explain", "-o", "json")
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s explain -o json: %v", bin, err)
		}
		var list []struct{ Code string }
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("%s explain -o json: %v", bin, err)
		}
		var names []string
		for _, c := range list {
			names = append(names, c.Code)
		}
		return names
	}
	node := codes(accelDoctor(t))
	if len(node) < 300 || !slices.Contains(node, "LINT_CLEAN") || !slices.Contains(node, "DRA_PLUGIN_CONTRACT_OK") || !slices.Contains(node, "CGROUP_DEVICE_DENIED") {
		t.Fatalf("accel-doctor explain lists %d codes: %v", len(node), node)
	}
	for _, other := range []string{"accel-doctor-kubelet", "accel-doctor-kube"} {
		if got := codes(filepath.Join(dir, other)); !slices.Equal(got, node) {
			t.Errorf("%s explain lists %d codes, accel-doctor %d", other, len(got), len(node))
		}
	}
	if r := runBin(t, env, "explain", "lint_privileged_gpu", "claim_allocated"); r.code != 0 || !strings.HasPrefix(r.stdout, "LINT_PRIVILEGED_GPU  (layer 6") || !strings.Contains(r.stdout, "\nCLAIM_ALLOCATED  (layer 6") {
		t.Errorf("accel-doctor explain of accel-doctor-kube's codes, alone: exit %d, %q%s", r.code, r.stdout, r.stderr)
	}
	if r := runBin(t, env, "explain", "LINT_PRIVILEGD_GPU"); r.code != 2 || !strings.Contains(r.stderr, "did you mean LINT_PRIVILEGED_GPU?") {
		t.Errorf("explain of a typo: exit %d, %q", r.code, r.stderr)
	}
}
