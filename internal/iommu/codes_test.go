package iommu

import (
	"regexp"
	"strings"
	"testing"
)

// The proposed codes are unique, say what they are for, and their
// remediations name only commands that exist.
func TestProposedCodes(t *testing.T) {
	commands := map[string]bool{"modprobe": true, "echo": true, "driverctl": true, "grubby": true, "update-grub": true,
		"grub2-mkconfig": true, "lspci": true, "ls": true, "-device": true,
		"prlimit": true, "setcap": true, "systemctl": true, "chown": true, "chmod": true, "fuser": true, "udevadm": true, "docker": true}
	code := regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`)
	quoted := regexp.MustCompile("`([^`]+)`")
	seen := map[string]bool{}
	for _, c := range Codes {
		if !code.MatchString(c.Code) || seen[c.Code] {
			t.Errorf("%q: not an upper-case code, or twice", c.Code)
		}
		seen[c.Code] = true
		if c.Title == "" || c.Explain == "" || c.Status == "" {
			t.Errorf("%s: title, explanation or status missing", c.Code)
		}
		if c.Status != "PASS" && c.Remediation == "" {
			t.Errorf("%s: a non-PASS code without remediation", c.Code)
		}
		for _, m := range quoted.FindAllStringSubmatch(c.Remediation, -1) {
			if f := strings.Fields(m[1]); len(f) == 0 || !commands[f[0]] {
				t.Errorf("%s: %q is not a command the remediations may name", c.Code, m[1])
			}
		}
	}
	for _, want := range []string{"IOMMU_OFF", "IOMMU_GROUP_NOT_VIABLE", "IOMMU_GROUP_SHARED", "IOMMU_ACS_NOT_READABLE",
		"VFIO_MODULE_NOT_LOADED", "VFIO_DEVICE_NOT_BOUND", "VFIO_CONTAINER_NODE", "VFIO_GROUP_NODE", "VFIO_MEMLOCK_LOW",
		"VFIO_NO_IPC_LOCK", "VFIO_GROUP_BUSY"} {
		if !seen[want] {
			t.Errorf("%s missing", want)
		}
	}
}
