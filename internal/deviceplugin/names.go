package deviceplugin

import (
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/lazyre"
	"github.com/accel-doctor/accel-doctor/internal/resname"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// KubeletSocket is the kubelet's registration socket's file name in its
// device-plugins directory (v1beta1 constants.go, KubeletSocket).
const KubeletSocket = "kubelet.sock"

// DefaultKubeletDir is the kubelet's device-plugins directory
// (v1beta1 constants.go, DevicePluginPath).
const DefaultKubeletDir = "/var/lib/kubelet/device-plugins"

// MaxDeviceIDLen is the limit the device-plugin API documents for a
// device ID ("Max length of this field is 63 characters", message Device
// in k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto). The kubelet
// of 1.37 does not enforce it (nothing in pkg/kubelet/cm/devicemanager
// checks an ID's length), so a longer ID is a WARN: it works today and
// breaks whatever relies on the documented limit.
const MaxDeviceIDLen = 63

// ValidateResourceName applies the kubelet's rule for the resource name
// of a Register request (internal/resname says which).
func ValidateResourceName(name string) error { return resname.Validate(name) }

// envVarName is the API server's rule for a pod's env names
// (k8s.io/apimachinery/pkg/util/validation IsEnvVarName: envVarNameFmt
// "[-._a-zA-Z][-._a-zA-Z0-9]*", and not ".", ".." or "..."-prefixed,
// hasChDirPrefix). That package is not imported for one regexp: it pulls
// klog into the binary.
var envVarName = lazyre.New(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// envNameProblem says what is wrong with an environment variable name
// given to a container, "" when nothing. The kubelet passes a plugin's
// envs to the runtime unchecked; a pod's own env names are validated by
// the API server (envVarName), so a plugin's name that fails it is one no
// pod could set.
func envNameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case strings.ContainsAny(name, "=\x00"):
		return "contains '=' or NUL: the runtime splits NAME=VALUE at the first '='"
	case !envVarName().MatchString(name):
		return "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit"
	case name == "." || strings.HasPrefix(name, ".."):
		return "must not be '.' or start with '..'"
	}
	return ""
}

// validHealth reports whether h is one of the API's two health values
// (v1beta1 constants.go). The kubelet counts anything but Healthy as
// unhealthy (manager.go, genericDeviceUpdateCallback: dev.Health ==
// pluginapi.Healthy, else unhealthyDevices).
func validHealth(h string) bool { return h == pluginapi.Healthy || h == pluginapi.Unhealthy }
