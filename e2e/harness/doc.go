// Package harness runs the kubelet's own device manager
// (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager) inside a Go test, wired
// as the kubelet wires it, so that device plugins are tested against the
// code that judges them on a node rather than against a fake kubelet.
//
// The manager's exported constructor, NewManagerImpl, hard-codes the
// kubelet's directory /var/lib/kubelet/device-plugins (pluginapi.KubeletSocket);
// the constructor that takes a socket path is unexported and reachable only
// from upstream's in-package tests. Main therefore runs the test binary a
// second time in a private mount namespace (unshare(CLONE_NEWNS), / made
// rprivate), and each test's Kubelet bind-mounts a temporary directory over
// /var/lib/kubelet/device-plugins there. The host's directory is never
// written: when it exists it is only covered, inside that namespace; when it
// does not exist (this is not a node), its nearest existing ancestor is
// covered by an overlay whose upper layer is a tmpfs of the namespace, and
// the path is made in that layer. Nothing of either survives the test
// binary.
//
// A plugin under test reaches the manager through either path of the same
// directory: Kubelet.Dir (the temporary directory, valid outside the
// namespace too) or pluginapi.DevicePluginPath (valid inside it, where the
// tests and the processes they start run).
//
// This needs root (CAP_SYS_ADMIN for the namespace and the mounts). Without
// it, Main runs the tests in place and Start skips each one, saying why.
package harness
