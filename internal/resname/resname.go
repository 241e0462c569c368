// Package resname is the one rule for an extended resource's name (a
// device plugin's resource, a container's request), shared by the device
// plugin and its tester, lint and cluster, so that they agree with each
// other and with the kubelet and the API server.
package resname

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// Validate applies the kubelet's rule for the resource name
// of a Register request: v1helper.IsExtendedResourceName, which
// pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register) calls
// and answers with `the ResourceName %q is invalid` (errInvalidResourceName
// in api.go). The rule (pkg/apis/core/v1/helper/helpers.go): not a native
// resource (a name without "/" is in the implicit kubernetes.io/
// namespace, and any name containing "kubernetes.io/" is native), not
// prefixed "requests.", and "requests."+name must be a qualified name
// (content.IsLabelKey: an optional DNS-1123 subdomain prefix and a name of
// at most 63 characters of [A-Za-z0-9._-], beginning and ending
// alphanumeric).
func Validate(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the ResourceName is empty")
	case !strings.Contains(name, "/"):
		return fmt.Errorf("the ResourceName %q is invalid: a name without a domain prefix is a native resource (implicitly kubernetes.io/); use vendor.example.com/%s", name, name)
	case strings.Contains(name, "kubernetes.io/"):
		return fmt.Errorf("the ResourceName %q is invalid: the kubernetes.io/ namespace holds native resources only", name)
	case strings.HasPrefix(name, "requests."):
		return fmt.Errorf("the ResourceName %q is invalid: the requests. prefix is reserved for quota", name)
	}
	if errs := content.IsLabelKey("requests." + name); len(errs) > 0 {
		return fmt.Errorf("the ResourceName %q is invalid: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// IsExtended reports whether name is an extended resource's: the API
// server's and the scheduler's helper.IsExtendedResourceName, the same
// rule as Validate.
func IsExtended(name string) bool { return Validate(name) == nil }
