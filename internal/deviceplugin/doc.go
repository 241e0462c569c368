// Package deviceplugin is accel-doctor's side of the Kubernetes
// device-plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): a
// generic plugin (`plugin serve`: New, Plugin.Run), a fake plugin that
// plants one failure (`plugin mock`: NewMock, Mock.Run) and the kubelet's
// side, a contract tester (`plugin test`: Test). docs/device-plugin.md
// is the user's documentation.
//
// What it reads, through a *hostfs.Root (the host, or a fixture tree):
// the PCI functions (internal/pci: ids, class, driver link, NUMA node,
// the bridges above each function), the nodes each needs
// (internal/devnode: /dev/nvidiaN from the NVIDIA procfs, DRM, accel,
// VFIO, /dev/kfd, with the numbers sysfs and /proc/devices give), nodes
// matched by globs and their kernel device through /sys/dev/char/M:m,
// /sys/devices/system/node/online (the tester's NUMA check), and CDI
// specs (internal/cdi, to resolve the names an Allocate answers).
//
// What it writes, and only in the plugin and the mock, which say so in
// their help: its socket(s) in the kubelet's device-plugins directory
// (mode 0600 from the moment the name exists, whatever the umask:
// ListenUnix binds each in a 0700 directory of its own beside it and
// links it into place; removed on exit, and only if still the one it
// made: device and inode are compared), a CDI spec for a CDI resource
// (written to a temporary file and renamed, after the CDI library parsed
// it), and, in the tester, kubelet.sock in the directory it is given
// (made the same way; refused when something answers there already: it
// never takes over a live kubelet's socket), where its restart removes the
// sockets of the plugins that registered with it, as a starting kubelet
// removes every socket of its directory.
//
// The tester judges a plugin as the kubelet's device manager of 1.37
// does (pkg/kubelet/cm/devicemanager); KubeletMirrors says, check by
// check, which of the manager's functions each one mirrors.
//
// Health is event-driven (Monitor): fsnotify watches on /dev, the
// devices' node directories and their sysfs directories, and the kernel's
// uevents on a NETLINK_KOBJECT_UEVENT socket bound to the kernel's
// multicast group (uevent.go: it only listens; the kernel sends device
// uevents to every network namespace of the host's user namespace, a
// pod's own included, and to none of another user namespace); each event
// re-evaluates every device at once (a few stat and readlink calls per
// device), and a slow periodic rescan catches what no event announced
// (a driver unbound where no uevent arrives). A device once
// listed stays listed: a node that disappears, a driver unbound or a
// sysfs entry removed make it Unhealthy, its return Healthy again.
//
// Registration follows the kubelet's own order
// (pkg/kubelet/cm/devicemanager/plugin/v1beta1): the socket is served and
// answers GetDevicePluginOptions before Register is called, and the
// kubelet directory is watched so that a recreated kubelet.sock (a kubelet
// restart, which removes every socket there first) is followed by the
// socket made again and a new Register, within milliseconds.
//
// The parsers of untrusted input (ParseUevent, ParseConfig) are fuzzed.
package deviceplugin
