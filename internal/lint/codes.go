package lint

import "github.com/accel-doctor/accel-doctor/internal/catalog"

// Code is one lint rule's catalog entry: what `accel-doctor explain CODE`
// prints and what docs/lint.md tabulates. The catalog lives in
// internal/catalog, which every binary links (this package links the
// Kubernetes API types, which accel-doctor does not).
type Code = catalog.Code

// Codes is the catalog, in rule order.
var Codes = catalog.Lint

// The codes, in the order the rules run.
const (
	CodeClean                        = catalog.LintClean
	CodeRequestWithoutLimit          = catalog.LintRequestWithoutLimit
	CodeRequestNotLimit              = catalog.LintRequestNotLimit
	CodeNotInteger                   = catalog.LintNotInteger
	CodeVisibleDevicesNoGPU          = catalog.LintVisibleDevicesNoGPU
	CodePrivilegedGPU                = catalog.LintPrivilegedGPU
	CodeRuntimeClassNoGPU            = catalog.LintRuntimeClassNoGPU
	CodeNoToleration                 = catalog.LintNoToleration
	CodePluginAndDRA                 = catalog.LintPluginAndDRA
	CodeHostPathDevice               = catalog.LintHostPathDevice
	CodeHostPathDeviceBeside         = catalog.LintHostPathDeviceBeside
	CodeHostPathDevWritable          = catalog.LintHostPathDevWritable
	CodeVFIOWithoutIPCLock           = catalog.LintVFIOWithoutIPCLock
	CodeClusterRuntimeClassMissing   = catalog.LintClusterRuntimeClassMissing
	CodeClusterDeviceClassMissing    = catalog.LintClusterDeviceClassMissing
	CodeClusterNoNodeMatches         = catalog.LintClusterNoNodeMatches
	CodeClusterResourceNotAdvertised = catalog.LintClusterResourceNotAdvertised
	CodeClusterTaintNotTolerated     = catalog.LintClusterTaintNotTolerated
	CodeKindSkipped                  = catalog.LintKindSkipped
	CodeNotAnObject                  = catalog.LintNotAnObject
	CodeDocumentMalformed            = catalog.LintDocumentMalformed
	CodeDocumentTooLarge             = catalog.LintDocumentTooLarge
)

// Lookup finds a code's catalog entry.
func Lookup(code string) (Code, bool) {
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
