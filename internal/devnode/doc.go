// Package devnode reads the device nodes accelerators need and what the
// kernel says they should be: /proc/devices (which driver owns which
// major), the sysfs "dev" attribute of each class device (drm, kfd, accel,
// video4linux, vfio, misc), the NVIDIA module's procfs (the minor of
// /dev/nvidiaN), and the nodes themselves under /dev with their
// /dev/char/MAJOR:MINOR links.
//
// Expected reads /proc/devices only when it is given a device (a host
// without accelerators needs no node), and always while a snapshot
// records. It is parsed line by line without a length limit; a line
// that does not parse is skipped and named (ErrSkippedLines) and the
// others kept. An expected node whose number is not known says what was
// read and why it gave none (ExpectedNode.DevSource). For a device no
// driver is bound to, DriverNode gives the nodes its vendor's driver would
// create: a shared one by its path, the device's own one only by its form
// (Unnamed), since the driver names it when it binds the device.
//
// Nodes are stat'ed through the hostfs.Root, which consults the tree's
// device manifest for nodes a fixture or snapshot cannot hold. Nothing
// here opens a device node: opening is a functional probe (internal/probe)
// and may have side effects (loading firmware, waking a GPU). Nothing here
// judges either; internal/diagnose does.
package devnode
