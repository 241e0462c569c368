// Package kubelet reads the node side of the Kubernetes layer (layer 6):
// what the kubelet's device manager and its plugins leave on the node,
// through a hostfs.Root. It reports facts with their paths; judging them
// is internal/diagnose's (Codes proposes the findings).
//
// What it reads, under the kubelet's --root-dir (/var/lib/kubelet):
//
//   - device-plugins/: every entry that is a socket or is named like one,
//     with its type and mtime (hostfs.Root.ModTime). kubelet.sock is the
//     kubelet's registration socket; the others are plugins'. A plugin
//     socket older than kubelet.sock was not made for the running kubelet,
//     which removes every socket there when its device manager starts
//     (ManagerImpl.CleanupPluginDirectory, pkg/kubelet/cm/devicemanager/
//     manager.go, called from server.Start in plugin/v1beta1/server.go).
//     A socket does not name its resource (the kubelet keeps the
//     endpoint-to-resource map in memory); the resource is known from the
//     socket's name when it follows a known plugin's convention
//     (VendorPlugins), and confirmed by the checkpoint or PodResources.
//   - device-plugins/kubelet_internal_checkpoint: the device manager's
//     checkpoint, parsed (ParseCheckpoint: the current layout, the one of
//     kubelets up to 1.19, and BootID of kubelets after 1.37) and its
//     checksum verified the kubelet's way (checksum.go says how, and cites
//     where). Its allocated device IDs are matched against the host:
//     NVIDIA GPU UUIDs against /proc/driver/nvidia/gpus/*/information, PCI
//     addresses against /sys/bus/pci/devices, Intel's card<N>-<i> against
//     /sys/class/drm, AMD's partitions against /sys/devices/platform; an ID
//     of no known form, or a MIG UUID, is unknown, never absent
//     (hostdevices.go). The checkpoint's BootID is compared with
//     /proc/sys/kernel/random/boot_id.
//   - pod-resources/kubelet.sock: the PodResources service's List and
//     GetAllocatableResources.
//
// Read-only. The package writes nothing, and of each socket it makes one
// connection and one call that only reads: grpc.health.v1 Health/Check on
// kubelet.sock (the kubelet serves only Registration, whose one method,
// Register, would register a plugin: never called; it answers the health
// call Unimplemented, which proves a gRPC server answers),
// GetDevicePluginOptions on a plugin socket (the call the kubelet itself
// makes on registration; it takes Empty and returns constants), and List
// and GetAllocatableResources on PodResources (both read the kubelet's
// state). A connect does not change the listener's state: the kernel
// queues the connection, or refuses it when nobody listens. Connections
// go through hostfs.Root.DialUnix, which resolves the path inside the root
// and connects to the very inode it checked is a socket.
//
// Snapshots: a socket cannot be archived. Read hands what every socket
// answered, and the checkpoint's parsed content, to the snapshot being
// recorded (hostfs.Root.Capture, under "kubelet/<dir>/node.json"); on a
// snapshot Read replays that capture instead of dialing. The checkpoint
// file itself is never archived (ReadFileRedacted): its AllocateResponses
// hold the environment plugins gave containers, which may be secrets; the
// capture keeps environment names only.
//
// The checksum printer is tested against the kubelet's algorithm run with
// go-spew (the version k8s.io/kubelet requires) on constructed data and
// under fuzzing, and against testdata/checkpoints/kubelet-v1.37.2.json,
// written by the kubelet's own checkpoint package (v1.37.2: see
// TestRealKubeletCheckpoint); the other fixtures are constructed with the
// algorithm. One written by a running device manager (the e2e module runs
// it) is still to be added.
package kubelet
