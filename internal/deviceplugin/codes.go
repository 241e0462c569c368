package deviceplugin

import "github.com/accel-doctor/accel-doctor/internal/catalog"

// The catalog of `plugin test`'s codes lives in internal/catalog, which
// links nothing, so that accel-doctor's explain knows these codes without
// linking this package's gRPC (internal/kubeletrpc's doc says why).
type Code = catalog.Code

// Codes are the codes `plugin test` reports.
var Codes = catalog.Plugin

// CodeOf looks a code up.
func CodeOf(code string) (Code, bool) {
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}

const (
	// AllocateSlowThreshold is where an Allocate's p99 becomes a WARN (ms).
	AllocateSlowThreshold = catalog.PluginAllocateSlowThreshold

	CodeRegistered            = catalog.PluginRegistered
	CodeNotRegistered         = catalog.PluginNotRegistered
	CodeAPIVersion            = catalog.PluginAPIVersion
	CodeResourceNameInvalid   = catalog.PluginResourceNameInvalid
	CodeEndpointUnreachable   = catalog.PluginEndpointUnreachable
	CodeRegisterBeforeServe   = catalog.PluginRegisterBeforeServe
	CodeDuplicateRegistration = catalog.PluginDuplicateRegistration
	CodeRegisteredTwice       = catalog.PluginRegisteredTwice
	CodeOptionsOK             = catalog.PluginOptionsOK
	CodeOptionsFailed         = catalog.PluginOptionsFailed
	CodeOptionsMismatch       = catalog.PluginOptionsMismatch
	CodeListed                = catalog.PluginListed
	CodeListAndWatchFailed    = catalog.PluginListAndWatchFailed
	CodeListAndWatchEnded     = catalog.PluginListAndWatchEnded
	CodeNoDevices             = catalog.PluginNoDevices
	CodeDeviceIDDuplicate     = catalog.PluginDeviceIDDuplicate
	CodeDeviceIDInvalid       = catalog.PluginDeviceIDInvalid
	CodeDeviceIDLong          = catalog.PluginDeviceIDLong
	CodeHealthInvalid         = catalog.PluginHealthInvalid
	CodeDevicesUnhealthy      = catalog.PluginDevicesUnhealthy
	CodeNoHealthyDevices      = catalog.PluginNoHealthyDevices
	CodeNUMAUnknown           = catalog.PluginNUMAUnknown
	CodeNUMAPartial           = catalog.PluginNUMAPartial
	CodeHealthFlapping        = catalog.PluginHealthFlapping
	CodeDeviceRemoved         = catalog.PluginDeviceRemoved
	CodeHealthUpdate          = catalog.PluginHealthUpdate
	CodeHealthNotReported     = catalog.PluginHealthNotReported
	CodePreferredOK           = catalog.PluginPreferredOK
	CodePreferredWrong        = catalog.PluginPreferredWrong
	CodePreferredFailed       = catalog.PluginPreferredFailed
	CodeAllocateOK            = catalog.PluginAllocateOK
	CodeAllocateFailed        = catalog.PluginAllocateFailed
	CodeAllocateSlow          = catalog.PluginAllocateSlow
	CodeCrashed               = catalog.PluginCrashed
	CodeAllocateInvalid       = catalog.PluginAllocateInvalid
	CodeAllocateExtra         = catalog.PluginAllocateExtra
	CodeAllocatePathConflict  = catalog.PluginAllocatePathConflict
	CodeAllocateHostMissing   = catalog.PluginAllocateHostMissing
	CodeAllocateCDIResolved   = catalog.PluginAllocateCDIResolved
	CodeAllocateCDIUnresolved = catalog.PluginAllocateCDIUnresolved
	CodeAllocateEnvInvalid    = catalog.PluginAllocateEnvInvalid
	CodeAllocateEnvUnusual    = catalog.PluginAllocateEnvUnusual
	CodeUnknownIDAccepted     = catalog.PluginUnknownIDAccepted
	CodePreStartOK            = catalog.PluginPreStartOK
	CodePreStartFailed        = catalog.PluginPreStartFailed
	CodeReregistered          = catalog.PluginReregistered
	CodeNoReregister          = catalog.PluginNoReregister
	CodeReregisterRefused     = catalog.PluginReregisterRefused
	CodeReregisterSlow        = catalog.PluginReregisterSlow
	CodeNotRun                = catalog.PluginNotRun
)
