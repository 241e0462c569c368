package deviceplugin

import "github.com/accel-doctor/accel-doctor/internal/plugincodes"

// The catalog of `plugin test`'s codes lives in internal/plugincodes, which
// links nothing, so that accel-doctor's explain knows these codes without
// linking this package's gRPC (internal/kubeletrpc's doc says why).
type Code = plugincodes.Code

// Codes are the codes `plugin test` reports.
var Codes = plugincodes.Codes

// CodeOf looks a code up.
func CodeOf(code string) (Code, bool) { return plugincodes.CodeOf(code) }

const (
	// AllocateSlowThreshold is where an Allocate's p99 becomes a WARN (ms).
	AllocateSlowThreshold = plugincodes.AllocateSlowThreshold

	CodeRegistered            = plugincodes.CodeRegistered
	CodeNotRegistered         = plugincodes.CodeNotRegistered
	CodeAPIVersion            = plugincodes.CodeAPIVersion
	CodeResourceNameInvalid   = plugincodes.CodeResourceNameInvalid
	CodeEndpointUnreachable   = plugincodes.CodeEndpointUnreachable
	CodeRegisterBeforeServe   = plugincodes.CodeRegisterBeforeServe
	CodeDuplicateRegistration = plugincodes.CodeDuplicateRegistration
	CodeOptionsOK             = plugincodes.CodeOptionsOK
	CodeOptionsFailed         = plugincodes.CodeOptionsFailed
	CodeListed                = plugincodes.CodeListed
	CodeListAndWatchFailed    = plugincodes.CodeListAndWatchFailed
	CodeNoDevices             = plugincodes.CodeNoDevices
	CodeDeviceIDDuplicate     = plugincodes.CodeDeviceIDDuplicate
	CodeDeviceIDInvalid       = plugincodes.CodeDeviceIDInvalid
	CodeDeviceIDLong          = plugincodes.CodeDeviceIDLong
	CodeHealthInvalid         = plugincodes.CodeHealthInvalid
	CodeDevicesUnhealthy      = plugincodes.CodeDevicesUnhealthy
	CodeNoHealthyDevices      = plugincodes.CodeNoHealthyDevices
	CodeNUMAUnknown           = plugincodes.CodeNUMAUnknown
	CodeHealthFlapping        = plugincodes.CodeHealthFlapping
	CodeHealthUpdate          = plugincodes.CodeHealthUpdate
	CodeHealthNotReported     = plugincodes.CodeHealthNotReported
	CodePreferredOK           = plugincodes.CodePreferredOK
	CodePreferredWrong        = plugincodes.CodePreferredWrong
	CodePreferredFailed       = plugincodes.CodePreferredFailed
	CodeAllocateOK            = plugincodes.CodeAllocateOK
	CodeAllocateFailed        = plugincodes.CodeAllocateFailed
	CodeAllocateSlow          = plugincodes.CodeAllocateSlow
	CodeCrashed               = plugincodes.CodeCrashed
	CodeAllocateInvalid       = plugincodes.CodeAllocateInvalid
	CodeAllocateHostMissing   = plugincodes.CodeAllocateHostMissing
	CodeAllocateCDIResolved   = plugincodes.CodeAllocateCDIResolved
	CodeAllocateCDIUnresolved = plugincodes.CodeAllocateCDIUnresolved
	CodeAllocateEnvInvalid    = plugincodes.CodeAllocateEnvInvalid
	CodeAllocateEnvUnusual    = plugincodes.CodeAllocateEnvUnusual
	CodeUnknownIDAccepted     = plugincodes.CodeUnknownIDAccepted
	CodePreStartOK            = plugincodes.CodePreStartOK
	CodePreStartFailed        = plugincodes.CodePreStartFailed
	CodeReregistered          = plugincodes.CodeReregistered
	CodeNoReregister          = plugincodes.CodeNoReregister
	CodeNotRun                = plugincodes.CodeNotRun
)
