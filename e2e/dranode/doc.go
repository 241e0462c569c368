// Package dranode tests the DRA mock (`accel-doctor plugin mock --dra`) and
// `accel-doctor check`'s kube.dra check against the kubelet's own DRA
// registration path, run inside the test binary as the kubelet runs it:
//
//   - k8s.io/kubernetes/pkg/kubelet/pluginmanager (NewPluginManager over
//     the node's plugins_registry: the plugin watcher and its reconciler,
//     which call GetInfo and NotifyRegistrationStatus), with
//   - the DRA manager of pkg/kubelet/cm/dra (NewManager, Start), whose
//     GetWatcherHandler is the DRAPluginManager of pkg/kubelet/cm/dra/plugin
//     added for the DRAPlugin type, as the kubelet's
//     GetPluginRegistrationHandlers does. NewDRAPluginManager takes a kube
//     client only to wipe the node's ResourceSlices (at start, and a
//     wiping delay after a driver is gone); the DRA manager uses the same
//     client to GET each claim it prepares. The client is a real API
//     server's (../apiserver), with the node's Node object, so that both
//     happen: claims are created there, allocated and reserved for the
//     pod as the scheduler would, and PrepareResources prepares them
//     through the kubelet's DRA plugin client (DRAPlugin,
//     NodePrepareResources over the v1 gRPC service) and checkpoints them
//     in dra_manager_state with the kubelet's state package.
//
// What is not the kubelet here: the pod. It is handed to the DRA manager
// as the kubelet's pod workers would hand it, never created in the API
// server; its claim's reservedFor names its UID, which is all the DRA
// manager checks. The wiping delay is the kubelet's own (30 s,
// defaultWipingDelay; Start sets it, and the constructor that takes
// another is unexported), so the stale-slice scenario waits that long.
//
// A driver's registration names its service socket by a node path
// (/var/lib/kubelet/plugins/DRIVER/dra.sock); that directory is
// bind-mounted from the test's node root in the test binary's private
// mount namespace (harness.BindNodeDir), so that the kubelet dials the
// path it is given and `check --root ROOT` finds the same socket under
// ROOT. Needs root, as the other e2e packages; elsewhere each test skips
// saying why.
package dranode
