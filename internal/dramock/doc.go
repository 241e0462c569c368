// Package dramock is a fake DRA driver and the kubelet's side of DRA,
// for `accel-doctor plugin mock --dra` and `plugin test --dra`.
//
// The mock (Mock) is built on k8s.io/dynamic-resource-allocation/
// kubeletplugin, the helper real drivers use: its registration server in
// the kubelet's plugins_registry, its DRA v1 gRPC service in the driver's
// data directory, its serialization. It WRITES: those two sockets (mode
// 0600 from their first moment, deviceplugin.ListenUnix, where
// kubeletplugin's own listener leaves the mode to the umask), and one
// CDI spec per prepared claim (removed on unprepare and on exit). Modes
// (ModeDocs) plant the failures users report.
//
// kubeletplugin needs a Kubernetes client: NodePrepareResources GETs each
// claim by name (the kubelet sends only namespace, name and UID). Without
// an API server the mock passes kubeletplugin an in-memory client
// (memClient) and, in a gRPC interceptor that runs before kubeletplugin's
// handler, holds each claim it is asked to prepare, allocated to its next
// fake device. ResourceSlices are published only with a real client
// (--kubeconfig); stale-slice is therefore a behaviour of that case only.
//
// The tester (Test) is the kubelet's side: it watches a plugins_registry
// directory, calls GetInfo and NotifyRegistrationStatus (the plugin
// watcher's two calls), dials the endpoint, prepares and unprepares
// claims it makes up, resolves the answered CDI device IDs with
// internal/cdi against the spec directories it is given, compares the
// prepared devices with a device plugin's ListAndWatch list when asked,
// and times registration, NodePrepareResources and NodeUnprepareResources.
package dramock
