package dramock

import "github.com/accel-doctor/accel-doctor/internal/catalog"

// The catalog of `plugin test --dra`'s codes lives in internal/catalog,
// which every binary links (this package links the DRA libraries and
// gRPC, which accel-doctor does not).
type Code = catalog.Code

// Codes is the catalog, in report order.
var Codes = catalog.DRAPlugin

// The findings of `plugin test --dra`.
const (
	CodeNotRegistered      = catalog.DRAPluginNotRegistered
	CodeGetInfoFailed      = catalog.DRAPluginGetInfoFailed
	CodeWrongType          = catalog.DRAPluginWrongType
	CodeUnsupportedVersion = catalog.DRAPluginUnsupportedVersion
	CodeEndpointMissing    = catalog.DRAPluginEndpointMissing
	CodeNotifyFailed       = catalog.DRAPluginNotifyFailed
	CodePrepareFailed      = catalog.DRAPluginPrepareFailed
	CodePrepareIncomplete  = catalog.DRAPluginPrepareIncomplete
	CodeCDIUnresolved      = catalog.DRAPluginCDIUnresolved
	CodeCDIInvalidSpec     = catalog.DRAPluginCDIInvalidSpec
	CodeUnprepareFailed    = catalog.DRAPluginUnprepareFailed
	CodeDoubleAdvertised   = catalog.DRAPluginDoubleAdvertised
	CodeContractOK         = catalog.DRAPluginContractOK
	CodeNotRun             = catalog.DRAPluginNotRun
)

// CodeOf looks a code up.
func CodeOf(code string) (Code, bool) {
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
