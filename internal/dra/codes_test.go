package dra

import (
	"regexp"
	"strings"
	"testing"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func TestCodes(t *testing.T) {
	seen := map[string]bool{}
	// Commands a remediation may name in backticks.
	cmds := map[string]bool{"kubectl": true, "systemctl": true, "journalctl": true, "crictl": true, "ls": true, "rm": true, "nvidia-smi": true, "accel-doctor": true}
	tick := regexp.MustCompile("`([^`]+)`")
	for _, c := range Codes {
		if !strings.HasPrefix(c.Code, "DRA_") || seen[c.Code] {
			t.Errorf("%s: duplicate or not DRA_", c.Code)
		}
		seen[c.Code] = true
		if c.Title == "" || c.Explain == "" || c.Facts == "" || c.Status == "" {
			t.Errorf("%s: empty field", c.Code)
		}
		for _, m := range tick.FindAllStringSubmatch(c.Remediation, -1) {
			if w := strings.Fields(m[1])[0]; !cmds[w] {
				t.Errorf("%s: remediation names %q", c.Code, w)
			}
		}
		if c.Status != "PASS" && c.Remediation == "" {
			t.Errorf("%s: no remediation", c.Code)
		}
	}
}

// The plugin types are spelled by hand (the package links no generated
// API): they are the generated constants.
func TestPluginTypesAreTheGeneratedOnes(t *testing.T) {
	if TypeDRA != registerapi.DRAPlugin || TypeCSI != registerapi.CSIPlugin || TypeDevicePlugin != registerapi.DevicePlugin {
		t.Errorf("TypeDRA %q TypeCSI %q TypeDevicePlugin %q", TypeDRA, TypeCSI, TypeDevicePlugin)
	}
}
