// Package hostfs is the one place in accel-doctor that touches host files.
//
// A Root reads a Linux host through a directory: "/" for the live host,
// "/host" inside a pod, a fixture tree in tests, or an unpacked snapshot.
// Paths given to a Root are host-absolute ("/sys/bus/pci/devices"); symlinks
// are resolved inside the root directory, never outside it (a hostile link to
// "/" or "../../.." stays in the root), and a symlink loop is an ELOOP error.
//
// Reads are bounded: a file larger than the limit, a FIFO or a device node
// given to ReadFile is an error, never a hang, and directory listings are
// capped.
//
// Device nodes cannot live in git or in an archive unpacked without root, so
// a tree may carry a device manifest (ManifestPath) describing its /dev
// nodes. The root consults the manifest only for paths that are not really
// present: real nodes in DIR/dev are stat'ed as they are.
package hostfs
