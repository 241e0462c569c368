package dramock

// The findings of `plugin test --dra`.
const (
	CodeNotRegistered      = "DRA_PLUGIN_NOT_REGISTERED"
	CodeGetInfoFailed      = "DRA_PLUGIN_GETINFO_FAILED"
	CodeWrongType          = "DRA_PLUGIN_WRONG_TYPE"
	CodeUnsupportedVersion = "DRA_PLUGIN_UNSUPPORTED_VERSION"
	CodeEndpointMissing    = "DRA_PLUGIN_ENDPOINT_MISSING"
	CodeNotifyFailed       = "DRA_PLUGIN_NOTIFY_FAILED"
	CodePrepareFailed      = "DRA_PLUGIN_PREPARE_FAILED"
	CodePrepareIncomplete  = "DRA_PLUGIN_PREPARE_INCOMPLETE"
	CodeCDIUnresolved      = "DRA_PLUGIN_CDI_UNRESOLVED"
	CodeCDIInvalidSpec     = "DRA_PLUGIN_CDI_INVALID_SPEC"
	CodeUnprepareFailed    = "DRA_PLUGIN_UNPREPARE_FAILED"
	CodeDoubleAdvertised   = "DRA_PLUGIN_DOUBLE_ADVERTISED"
	CodeContractOK         = "DRA_PLUGIN_CONTRACT_OK"
	CodeNotRun             = "DRA_PLUGIN_CHECK_NOT_RUN"
)

// Code is one finding's catalog entry.
type Code struct {
	Code, Status, Title, Remediation string
}

// Codes is the catalog, in report order. Remediations name only real
// commands.
var Codes = []Code{
	{CodeNotRegistered, "FAIL", "no registration socket for the driver appeared in plugins_registry",
		"Check that the driver's DaemonSet mounts /var/lib/kubelet/plugins_registry and that the driver starts its registration server (`kubectl -n NAMESPACE logs DRIVER-POD`)."},
	{CodeGetInfoFailed, "FAIL", "the registration socket did not answer GetInfo",
		"Read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`); the kubelet registers nothing when GetInfo fails."},
	{CodeWrongType, "FAIL", "GetInfo's type is not DRAPlugin, or its name is not the driver's",
		"Fix the driver's registration (kubeletplugin.DriverName); the kubelet hands a registration to the handler its type names."},
	{CodeUnsupportedVersion, "FAIL", "GetInfo's supported versions name no DRA service a 1.37 kubelet speaks (v1.DRAPlugin, v1beta1.DRAPlugin)",
		"Rebuild the driver against k8s.io/dynamic-resource-allocation of this Kubernetes release, or upgrade it."},
	{CodeEndpointMissing, "FAIL", "the endpoint GetInfo names does not accept connections",
		"Compare the endpoint with the driver's hostPath mounts (`kubectl -n NAMESPACE get daemonset DRIVER -o yaml`) and `ls -l` the path."},
	{CodeNotifyFailed, "WARN", "NotifyRegistrationStatus returned an error",
		"Read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`)."},
	{CodePrepareFailed, "FAIL", "NodePrepareResources failed for the claim",
		"Read the driver's log for the claim (`kubectl -n NAMESPACE logs DRIVER-POD`); the kubelet retries and the pod stays in ContainerCreating."},
	{CodePrepareIncomplete, "FAIL", "NodePrepareResources answered without the claim, or with no device for it",
		"The driver must answer every claim asked, keyed by UID; read its log (`kubectl -n NAMESPACE logs DRIVER-POD`)."},
	{CodeCDIUnresolved, "FAIL", "a CDI device ID NodePrepareResources answered is declared by no valid spec in the CDI directories",
		"The driver must write the spec before it answers; check `ls /var/run/cdi` and `accel-doctor cdi validate`."},
	{CodeCDIInvalidSpec, "FAIL", "the spec of an answered CDI device does not load",
		"Fix the spec the driver writes; `accel-doctor cdi validate` gives the CDI library's error."},
	{CodeUnprepareFailed, "FAIL", "NodeUnprepareResources failed for the claim",
		"Read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`); pods using the claim stay Terminating while it fails."},
	{CodeDoubleAdvertised, "WARN", "a device the driver prepared is also listed by a device plugin",
		"Run only one of the two on the node: `kubectl -n NAMESPACE delete daemonset PLUGIN`, or keep the DRA driver off the node."},
	{CodeContractOK, "PASS", "the driver registered, prepared and unprepared a claim, and its CDI devices resolve", ""},
	{CodeNotRun, "NOT_RUN", "a check could not run", ""},
}

// CodeOf looks a code up.
func CodeOf(code string) (Code, bool) {
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
