package resname

import (
	"strings"
	"testing"
)

func TestIsExtended(t *testing.T) {
	for _, n := range []string{"nvidia.com/gpu", "gpu.intel.com/i915", "amd.com/gpu", "example.com/a.b-c_d", "habana.ai/gaudi"} {
		if !IsExtended(n) {
			t.Errorf("%q is an extended resource", n)
		}
	}
	for _, n := range []string{"", "gpu", "cpu", "kubernetes.io/gpu", "example.kubernetes.io/gpu", "requests.example.com/gpu",
		"example.com/", "example.com/bad name", "example.com/-x", "Example_Com/gpu", "example.com/" + strings.Repeat("x", 64)} {
		if IsExtended(n) {
			t.Errorf("%q is not an extended resource", n)
		}
		if err := Validate(n); err == nil || !strings.Contains(err.Error(), "ResourceName") {
			t.Errorf("Validate(%q) = %v", n, err)
		}
	}
}
