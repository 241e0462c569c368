// Package hostfs is the one place in accel-doctor that touches host files.
//
// A Root reads a Linux host through a directory: "/" for the live host,
// "/host" inside a pod, a fixture tree in tests, or an unpacked snapshot.
// Paths given to a Root are host-absolute ("/sys/bus/pci/devices").
//
// Confinement is the kernel's: a non-live root holds an fd of its directory
// and resolves every path with openat2(2) RESOLVE_IN_ROOT (chroot
// semantics: an absolute link or ".." stops at the root, so a hostile link
// to "/" or "../../.." stays in it) and RESOLVE_NO_MAGICLINKS, in the same
// call that opens; a symlink loop is ELOOP. Where openat2 is missing,
// filepath-securejoin's pathrs-lite does the same in user space. open.go
// says how and why.
//
// Reads are bounded and never open what is not a regular file: a path is
// opened O_PATH (no driver open, no FIFO wait) and fstat'ed first; only a
// regular file is reopened for reading, so a FIFO, a socket or a device node
// given to ReadFile or MapFile is ErrNotRegular, never a hang or a side
// effect; a file larger than the limit is ErrTooLarge, and directory
// listings are capped.
//
// A Dir (dir.go) is a directory held open for reading many of its entries
// by name, with the Root's answers and refusals: a regular file of a tree
// is still found O_PATH and reopened, a file of a kernel tree (sysfs,
// procfs, cgroupfs, by fstatfs of the directory's fd) opened directly, a
// link read with one readlinkat and followed by the Root.
//
// Device nodes cannot live in git or in an archive unpacked without root, so
// a tree may carry a device manifest (ManifestPath) describing its /dev
// nodes. The root consults the manifest only for paths that are not really
// present: real nodes in DIR/dev are stat'ed as they are.
//
// Snapshots (snapshot.go) record what the readers asked about and replay it
// through the same Root; an archive is a snapshot only if it carries
// MetaPath. Unpacking (unpack.go) is linear in the archive and bounded in
// every way a hostile archive could cost (LimitError names the bound); the
// temporary directories it makes (unpackdir.go) are removed on exit, by
// RemoveUnpacked on a panic and StopUnpacking on a signal (after which none
// is made), and by the next run's sweep after a SIGKILL.
package hostfs
