// Package dra reads the node side of Dynamic Resource Allocation (layer
// 6): what the kubelet's DRA manager and the DRA drivers leave on the
// node, through a hostfs.Root. It reports facts with their paths; judging
// them is internal/diagnose's (Codes proposes the findings).
//
// What it reads, under the kubelet's --root-dir (/var/lib/kubelet):
//
//   - plugins_registry/: every socket (and every regular file named
//     *.sock) at the top of the directory. Each socket is asked GetInfo
//     (k8s.io/kubelet/pkg/apis/pluginregistration/v1), the first call the
//     kubelet's plugin watcher makes, which only reads: the plugin's type
//     (DRAPlugin, CSIPlugin, DevicePlugin), name, endpoint and supported
//     versions. NotifyRegistrationStatus, the other method, changes the
//     plugin's state and is never called. A DRA registration naming no
//     gRPC service a 1.37 kubelet speaks is marked Unsupported.
//   - the endpoint each DRA or CSI registration names: connected to and
//     closed. The DRA v1 service has no read-only method
//     (NodePrepareResources and NodeUnprepareResources act), so a connect
//     is all that is done: it proves a listener, not a working driver.
//   - plugins/<driver>/: each driver's data directory (kubeletplugin's
//     PluginDataDirectoryPath) and the sockets in it, connected to once. A
//     directory with a serving socket that no live registration names is a
//     driver that is not registered. A registration socket older than the
//     kubelet is not stale by that alone: the plugin watcher registers the
//     sockets it finds when it starts (traversePluginDir).
//   - dra_manager_state: the DRA manager's checkpoint (ParseState, with
//     the kubelet's own types re-declared and its CRC-32 checksum
//     verified), every prepared claim's CDI device IDs resolved against
//     the node's CDI specs (internal/cdi's Load, /etc/cdi and
//     /var/run/cdi); an ID that does not resolve names the spec file that
//     declares it when the CDI library refuses that file (Rejected), and
//     one that cannot be looked up (a directory not read) is unknown,
//     never unresolved. The format has no boot ID; its mtime is compared
//     with the boot time in /proc/stat instead.
//   - device-plugins/kubelet_internal_checkpoint (through internal/kubelet,
//     or the caller's parsed copy): devices its RegisteredDevices lists
//     that a DRA driver's CDI spec also names (by GPU UUID, PCI address or
//     device node; /proc/driver/nvidia/gpus and /sys/class/drm tie them
//     together) are advertised twice.
//
// Read-only. Connections go through hostfs.Root.DialUnix, which resolves
// the path inside the root and connects to the very inode it checked is a
// socket; each socket gets one connection and at most one call.
//
// Snapshots: a socket cannot be archived. Read hands what the sockets
// answered to the snapshot being recorded (hostfs.Root.Capture, under
// "dra/<kubelet dir>/sockets.json"); on a snapshot Read replays it and
// reads the state file and the CDI specs from the snapshot's files. The
// state holds claim names, UIDs and CDI device names, no secrets, so it is
// archived as a file.
//
// testdata/state/kubelet-v1.37.2*.json were written by the kubelet's own
// checkpointer (pkg/kubelet/cm/dra/state, v1.37.2) by the program in
// testdata/state/generate.go.txt; TestRealKubeletState reads them.
package dra
