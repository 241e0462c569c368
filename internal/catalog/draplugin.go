package catalog

// The codes `plugin test --dra` reports (internal/dramock).
const (
	DRAPluginNotRegistered      = "DRA_PLUGIN_NOT_REGISTERED"
	DRAPluginGetInfoFailed      = "DRA_PLUGIN_GETINFO_FAILED"
	DRAPluginWrongType          = "DRA_PLUGIN_WRONG_TYPE"
	DRAPluginUnsupportedVersion = "DRA_PLUGIN_UNSUPPORTED_VERSION"
	DRAPluginEndpointMissing    = "DRA_PLUGIN_ENDPOINT_MISSING"
	DRAPluginNotifyFailed       = "DRA_PLUGIN_NOTIFY_FAILED"
	DRAPluginPrepareFailed      = "DRA_PLUGIN_PREPARE_FAILED"
	DRAPluginPrepareIncomplete  = "DRA_PLUGIN_PREPARE_INCOMPLETE"
	DRAPluginCDIUnresolved      = "DRA_PLUGIN_CDI_UNRESOLVED"
	DRAPluginCDIInvalidSpec     = "DRA_PLUGIN_CDI_INVALID_SPEC"
	DRAPluginUnprepareFailed    = "DRA_PLUGIN_UNPREPARE_FAILED"
	DRAPluginDoubleAdvertised   = "DRA_PLUGIN_DOUBLE_ADVERTISED"
	DRAPluginContractOK         = "DRA_PLUGIN_CONTRACT_OK"
	DRAPluginNotRun             = "DRA_PLUGIN_CHECK_NOT_RUN"
)

// DRAPlugin is the catalog of `plugin test --dra`, in report order. Its
// codes carry their meaning in the title (docs/dra.md has them as a
// table). Remediations name only real commands.
var DRAPlugin = []Code{
	{
		Code:        DRAPluginNotRegistered,
		Status:      "FAIL",
		Title:       "no registration socket for the driver appeared in plugins_registry",
		Remediation: "Check that the driver's DaemonSet mounts /var/lib/kubelet/plugins_registry and that the driver starts its registration server (`kubectl -n NAMESPACE logs DRIVER-POD`).",
	},
	{
		Code:        DRAPluginGetInfoFailed,
		Status:      "FAIL",
		Title:       "the registration socket did not answer GetInfo",
		Remediation: "Read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`); the kubelet registers nothing when GetInfo fails.",
	},
	{
		Code:        DRAPluginWrongType,
		Status:      "FAIL",
		Title:       "GetInfo's type is not DRAPlugin, or its name is not the driver's",
		Remediation: "Fix the driver's registration (kubeletplugin.DriverName); the kubelet hands a registration to the handler its type names.",
	},
	{
		Code:        DRAPluginUnsupportedVersion,
		Status:      "FAIL",
		Title:       "GetInfo's supported versions name no DRA service a 1.37 kubelet speaks (v1.DRAPlugin, v1beta1.DRAPlugin)",
		Remediation: "Rebuild the driver against k8s.io/dynamic-resource-allocation of this Kubernetes release, or upgrade it.",
	},
	{
		Code:        DRAPluginEndpointMissing,
		Status:      "FAIL",
		Title:       "the endpoint GetInfo names does not accept connections",
		Remediation: "Compare the endpoint with the driver's hostPath mounts (`kubectl -n NAMESPACE get daemonset DRIVER -o yaml`) and `ls -l` the path.",
	},
	{
		Code:        DRAPluginNotifyFailed,
		Status:      "WARN",
		Title:       "NotifyRegistrationStatus returned an error",
		Remediation: "Read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`).",
	},
	{
		Code:        DRAPluginPrepareFailed,
		Status:      "FAIL",
		Title:       "NodePrepareResources failed for the claim",
		Remediation: "Read the driver's log for the claim (`kubectl -n NAMESPACE logs DRIVER-POD`); the kubelet retries and the pod stays in ContainerCreating.",
	},
	{
		Code:        DRAPluginPrepareIncomplete,
		Status:      "FAIL",
		Title:       "NodePrepareResources answered without the claim, or with no device for it",
		Remediation: "The driver must answer every claim asked, keyed by UID; read its log (`kubectl -n NAMESPACE logs DRIVER-POD`).",
	},
	{
		Code:        DRAPluginCDIUnresolved,
		Status:      "FAIL",
		Title:       "a CDI device ID NodePrepareResources answered is declared by no valid spec in the CDI directories",
		Remediation: "The driver must write the spec before it answers; check `ls /var/run/cdi` and `accel-doctor cdi validate`.",
	},
	{
		Code:        DRAPluginCDIInvalidSpec,
		Status:      "FAIL",
		Title:       "the spec of an answered CDI device does not load",
		Remediation: "Fix the spec the driver writes; `accel-doctor cdi validate` gives the CDI library's error.",
	},
	{
		Code:        DRAPluginUnprepareFailed,
		Status:      "FAIL",
		Title:       "NodeUnprepareResources failed for the claim",
		Remediation: "Read the driver's log (`kubectl -n NAMESPACE logs DRIVER-POD`); pods using the claim stay Terminating while it fails.",
	},
	{
		Code:        DRAPluginDoubleAdvertised,
		Status:      "WARN",
		Title:       "a device the driver prepared is also listed by a device plugin",
		Remediation: "Run only one of the two on the node: `kubectl -n NAMESPACE delete daemonset PLUGIN`, or keep the DRA driver off the node.",
	},
	{
		Code:   DRAPluginContractOK,
		Status: "PASS",
		Title:  "the driver registered, prepared and unprepared a claim, and its CDI devices resolve",
	},
	{
		Code:   DRAPluginNotRun,
		Status: "NOT_RUN",
		Title:  "a check could not run",
	},
}
