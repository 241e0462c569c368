package diagnose

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/devnode"
	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 3: device nodes. Every node an accelerator needs exists, is a char
// device with the number the kernel published, belongs to a registered
// major, is accessible as usual, and has its /dev/char link.

const (
	CodeDevnodeOK                = "DEVNODE_OK"
	CodeDevnodeMissing           = "DEVNODE_MISSING"
	CodeDevnodeNotChar           = "DEVNODE_NOT_CHAR"
	CodeDevnodeWrongDevnum       = "DEVNODE_WRONG_DEVNUM"
	CodeDevnodeMajorUnregistered = "DEVNODE_MAJOR_UNREGISTERED"
	CodeDevnodeMajorsUnknown     = "DEVNODE_MAJORS_UNKNOWN"
	CodeDevnodeSkipped           = "DEVNODE_SKIPPED"
	CodeDevnodeUnknown           = "DEVNODE_UNKNOWN"
	CodeDevnodeNoneExpected      = "DEVNODE_NONE_EXPECTED"
	CodeDevnodeMode              = "DEVNODE_MODE"
	CodeDevnodeModeOK            = "DEVNODE_MODE_OK"
	CodeDevnodeNoCharLink        = "DEVNODE_NO_CHAR_LINK"
	CodeDevnodeCharLinkOK        = "DEVNODE_CHAR_LINK_OK"
)

var devnodeCodes = []Code{{
	Code: CodeDevnodeOK, Layer: report.LayerDevNode,
	Title: "the device node exists with the expected device number",
	Explain: `The node exists under /dev, is a character device, has the major:minor the
kernel published for it (the sysfs "dev" attribute, the NVIDIA procfs, or
the driver's fixed numbers), and its major is registered in /proc/devices,
so open() reaches the driver. This says nothing about whether a container
may open it (layer 4) or whether the device works (layer 8).`,
}, {
	Code: CodeDevnodeMissing, Layer: report.LayerDevNode,
	Title: "a device node the accelerator needs does not exist",
	Explain: `The kernel or driver says the node should exist, but there is nothing at the
path. Nodes are created by udev (devtmpfs) for devices with a sysfs "dev"
attribute, and by nvidia-modprobe or the NVIDIA container toolkit for
/dev/nvidia*, which the driver does not publish in sysfs. A missing required
node means the device cannot be used at all; an optional one (nvidia-modeset,
nvidia-uvm-tools, a DRM primary node when a render node exists) only limits
some uses, so it is a WARN. A missing /dev/nvidia-uvm usually means the
nvidia-uvm module is not loaded. For a device no driver is bound to, the
nodes its vendor's driver would create are reported missing as a
consequence of the layer-2 finding (caused_by names it): the device's own
node (/dev/nvidia<minor>, a render or accel node) has no name until the
driver binds it, and a shared one (/dev/nvidiactl, /dev/nvidia-uvm,
/dev/kfd) is absent while the driver drives nothing; the fix is the
layer-2 finding's.`,
	Remediation: "For NVIDIA nodes run `nvidia-modprobe -c <minor> -u` (or `nvidia-ctk system create-device-nodes --control-devices --load-kernel-modules`) and make it persistent (nvidia-persistenced, the GPU operator's driver container); for other nodes run `udevadm trigger --subsystem-match=drm --subsystem-match=accel` and check that devtmpfs is mounted on /dev.",
}, {
	Code: CodeDevnodeNotChar, Layer: report.LayerDevNode,
	Title: "the path exists but is not a character device",
	Explain: `Something other than a character device sits at the node's path: a regular
file or directory (often created by a container runtime or a bind mount when
the node was missing at start, e.g. an empty file mounted in its place). open()
of it never reaches a driver.`,
	Remediation: "Remove the file or directory at the path and recreate the node (udev, `nvidia-modprobe`, or `mknod PATH c MAJOR MINOR` with the numbers in the evidence); find what created it (a hostPath volume with type FileOrCreate, a runtime bind mount).",
}, {
	Code: CodeDevnodeWrongDevnum, Layer: report.LayerDevNode,
	Title: "the node's major:minor differs from what the kernel published",
	Explain: `The node is a character device, but its major:minor is not the one the
kernel publishes for the device (sysfs "dev", /proc/devices for dynamic
majors, the NVIDIA Device Minor). Opening it reaches a different device or
none. Typical after a driver reload gave a dynamic major a new number
(nvidia-uvm, nvidia-caps) while nodes made by hand kept the old one, or when
GPU minors were renumbered and stale nodes stayed. FAIL for a required node,
WARN for an optional one (nvidia-uvm-tools, nvidia-modeset).`,
	Remediation: "Delete the stale node and recreate it with the published number (`nvidia-modprobe -u -c <minor>` for NVIDIA, `udevadm trigger` for udev-managed nodes); restart containers that captured the old node.",
}, {
	Code: CodeDevnodeMajorUnregistered, Layer: report.LayerDevNode,
	Title: "no driver holds the node's major",
	Explain: `The node exists, but its major number is not in /proc/devices: no driver has
registered it. open() of such a node fails with ENXIO ("No such device or
address", fs/char_dev.c chrdev_open). Seen when the driver was unloaded (or
never loaded on this boot) but the node was left behind, e.g. nodes created
by a driver container that has since stopped, or nvidia-uvm not loaded while
/dev/nvidia-uvm exists. FAIL for a required node, WARN for an optional one.`,
	Remediation: "Load the driver that owns the node (`modprobe nvidia nvidia_uvm`, `modprobe amdgpu`), or remove the stale node; then recheck that the node's number matches /proc/devices.",
}, {
	Code: CodeDevnodeMajorsUnknown, Layer: report.LayerDevNode,
	Title: "/proc/devices could not be read",
	Explain: `Without /proc/devices the check cannot tell whether a node's major is
registered to a driver, nor learn the dynamic majors of nvidia-uvm,
nvidia-caps and vfio. The other properties of the nodes were still checked.`,
	Remediation: "Run accel-doctor where the host's /proc is visible, or recapture the snapshot on the host.",
}, {
	Code: CodeDevnodeSkipped, Layer: report.LayerDevNode,
	Title: "device nodes not checked because a lower layer failed",
	Explain: `The device failed an earlier layer (the wrong driver, a PCI problem, or no
driver where accel-doctor knows no driver of its vendor whose nodes it could
name). Its nodes would fail as a consequence, so they are not checked; fix
the earlier failure first. A device with no driver whose vendor's driver is
known is not skipped: the nodes that driver would create are reported
missing, as a consequence of the layer-2 finding (DEVNODE_MISSING).`,
	Remediation: "Fix the failure named in the reason, then run the check again.",
}, {
	Code: CodeDevnodeUnknown, Layer: report.LayerDevNode,
	Title: "which nodes the device needs, or their state, could not be determined",
	Explain: `A node could not be checked: the information that names it could not be
read (for NVIDIA, /proc/driver/nvidia/gpus/<BDF>/information gives the
minor of /dev/nvidiaN), or stat of the node failed for a reason other than
absence (permission). The reason says which.`,
	Remediation: "Run accel-doctor as root on the host, with the host's /proc and /sys visible; for NVIDIA, check that /proc/driver/nvidia/gpus/<BDF>/information exists (the GPU is initialised by the driver).",
}, {
	Code: CodeDevnodeNoneExpected, Layer: report.LayerDevNode,
	Title: "no device node is known for this device's driver",
	Explain: `The device has a driver, but accel-doctor knows no node it needs: the driver
registered no DRM, accel, video4linux, KFD or VFIO node for it, and it is
not an NVIDIA GPU. Some accelerators are used through a vendor-specific
node or a network interface; those are not checked here.`,
	Remediation: "Nothing to fix here; check the vendor's documentation for the node the device uses. To see whether that node opens at all, `accel-doctor sandbox --default allow --device-node NODE` opens it in a transient cgroup that allows every device and classifies the errno (ENXIO: no driver behind it; EACCES: mode, nodev or LSM).",
}, {
	Code: CodeDevnodeMode, Layer: report.LayerDevNode,
	Title: "the node's permissions are stricter than usual",
	Explain: `The node's mode or group does not give non-root users the access the
vendor stack expects. The rule: NVIDIA nodes (/dev/nvidia*, nvidiactl,
nvidia-uvm, nvidia-modeset) are 0666 by default (the driver's
NVreg_DeviceFileMode and nvidia-modprobe), because containers run as any user
and the cgroup decides access; DRM card and render nodes, /dev/kfd,
/dev/accel/* and /dev/video* are fine when readable and writable by others
(0666) or by a non-root group (0660 root:render or root:video, with the user
in that group); /dev/vfio/vfio is 0666 (drivers/vfio/container.c). A
non-root process in a container then gets EACCES even though the cgroup
allows the device. This is a WARN because some sites restrict nodes on
purpose (NVreg_DeviceFileGID/Mode).`,
	Remediation: "Restore the usual mode (`chmod 0666 /dev/nvidia*`, or NVreg_DeviceFileMode=0666 in the nvidia module options; for DRM nodes a udev rule with GROUP=\"render\", MODE=\"0660\") or run the container with the node's group as a supplemental group (securityContext.supplementalGroups).",
}, {
	Code: CodeDevnodeModeOK, Layer: report.LayerDevNode,
	Title: "the node's permissions follow the usual rule",
	Explain: `The node's mode and group give non-root users the access the vendor stack
expects (see DEVNODE_MODE for the rule).`,
}, {
	Code: CodeDevnodeNoCharLink, Layer: report.LayerDevNode,
	Title: "the /dev/char/MAJOR:MINOR link of the node is missing or wrong",
	Explain: `udev creates /dev/char/MAJOR:MINOR links for the nodes it manages; nodes
made by nvidia-modprobe or by hand have none. With the systemd cgroup driver,
runc turns each device rule into DeviceAllow=/dev/char/MAJOR:MINOR and systemd
resolves that path to find the device; without the link the rule is dropped.
The container still works until systemd re-applies the unit's device policy
(for instance on "systemctl daemon-reload"), and then loses access to the
node: NVML reports "Failed to initialize NVML: Unknown Error" and CUDA sees
no device.`,
	Remediation: "Create the links: `nvidia-ctk system create-dev-char-symlinks --create-all` for NVIDIA nodes (and the nvidia-container-toolkit's udev rule to keep them), or a udev rule for the node; better, inject devices with CDI, whose specs the runtime applies as explicit rules.",
}, {
	Code: CodeDevnodeCharLinkOK, Layer: report.LayerDevNode,
	Title: "the /dev/char link of the node is present",
	Explain: `/dev/char/MAJOR:MINOR exists and leads to the node, so systemd can resolve
DeviceAllow rules for it.`,
}}

func devnodeChecks() []Check {
	return []Check{{
		ID: "devnode.present", Layer: report.LayerDevNode,
		Title: "each accelerator's device nodes exist with the published major:minor and a registered major",
		Codes: []string{CodeDevnodeOK, CodeDevnodeMissing, CodeDevnodeNotChar, CodeDevnodeWrongDevnum,
			CodeDevnodeMajorUnregistered, CodeDevnodeMajorsUnknown, CodeDevnodeSkipped, CodeDevnodeUnknown, CodeDevnodeNoneExpected},
		Run: checkDevnodePresent,
	}, {
		ID: "devnode.mode", Layer: report.LayerDevNode,
		Title: "device node permissions allow the usual non-root access",
		Codes: []string{CodeDevnodeMode, CodeDevnodeModeOK},
		Run:   checkDevnodeMode,
	}, {
		ID: "devnode.char-link", Layer: report.LayerDevNode,
		Title: "each char node has its /dev/char/MAJOR:MINOR link",
		Codes: []string{CodeDevnodeNoCharLink, CodeDevnodeCharLinkOK, CodeDevnodeUnknown},
		Run:   checkDevnodeCharLink,
	}}
}

// expectation is every node the selected accelerators need, worked out
// once per run.
func (e *Env) expectation() *devnode.Expectation {
	x, _ := memo(e, "devnode.expected", func() (*devnode.Expectation, error) {
		var devs []devnode.Device
		for _, d := range e.Accelerators() {
			devs = append(devs, devnode.Device{
				Address: d.Address.String(), Vendor: d.Vendor, Driver: e.Binding(d).Driver, Class: d.Class, SysfsPath: d.Path,
			})
		}
		return devnode.Expected(e.Root, devs), nil
	})
	return x
}

// ExpectedNodes is every device node the selected accelerators need:
// host path, type, the expected major:minor (when DevKnown) and the PCI
// addresses needing it (Subjects; shared nodes such as /dev/nvidiactl
// appear once). Later layers (cgroup, runtime) take the nodes from here.
func (e *Env) ExpectedNodes() []devnode.ExpectedNode {
	return e.expectation().Nodes
}

// NodeState is the stat of a node path (never an open), read once per run.
func (e *Env) NodeState(p string) devnode.NodeState {
	s, _ := memo(e, "devnode.state:"+p, func() (devnode.NodeState, error) {
		return devnode.StatNode(e.Root, p), nil
	})
	return s
}

// nodeSkipped says why a node is not checked: every device needing it
// failed a lower layer.
func (e *Env) nodeSkipped(n devnode.ExpectedNode) (report.Why, bool) {
	var why []string
	var first report.Finding
	for i, s := range n.Subjects {
		f, failed := e.FailedBelow(s, report.LayerDevNode)
		if !failed {
			return report.Why{}, false
		}
		if i == 0 {
			first = f
		}
		why = append(why, fmt.Sprintf("%s failed layer %d: %s (%s)", s, int(f.Layer), f.Code, f.Summary))
	}
	if len(why) == 0 {
		return report.Why{}, false
	}
	return report.AfterFix(strings.Join(why, "; "), first), true
}

func needEv(n devnode.ExpectedNode) report.Evidence {
	req := "optional"
	if n.Required {
		req = "required"
	}
	return Ev("", fmt.Sprintf("needed by %s (%s): %s", strings.Join(n.Subjects, ", "), req, n.Why))
}

func nodeEv(s devnode.NodeState) report.Evidence {
	v := fmt.Sprintf("%s %s mode %s owner %d:%d", s.Node.Type, s.Node.Dev(), s.Node.ModeString(), s.Node.UID, s.Node.GID)
	if s.Node.Type != hostfs.TypeChar && s.Node.Type != hostfs.TypeBlock {
		v = fmt.Sprintf("%s mode %s owner %d:%d", s.Node.Type, s.Node.ModeString(), s.Node.UID, s.Node.GID)
	}
	if s.Symlink {
		v += " (via symlink to " + s.LinkTarget + ")"
	}
	if s.Node.FromManifest {
		v += " [device manifest]"
	}
	return Ev(s.Path, v)
}

// majorView is what /proc/devices lets the check say about majors: known
// (the file was read), and complete (every line of it parsed). A major
// missing from a file with skipped lines is not shown unregistered.
type majorView struct {
	known, complete bool
	pd              devnode.ProcDevices
}

func (m majorView) unregistered(major uint32) bool {
	return m.known && !m.pd.CharRegistered(major)
}

func checkDevnodePresent(e *Env, out *Out) {
	x := e.expectation()
	if len(x.Nodes) == 0 && len(e.Accelerators()) == 0 {
		return // no accelerator, no node: nothing needs /proc/devices
	}
	mv := e.procDevicesView(x, out)
	unregistered := e.unregisteredMajors(x, mv)
	for _, n := range x.Nodes {
		if len(n.Subjects) == 1 {
			e.AddDeviceNode(n.Subjects[0], n.Path)
		}
		e.checkNode(out, n, mv, unregistered)
	}
	judged := e.checkUnboundNodes(out, x, mv)
	e.checkDevicesWithoutNodes(out, x, judged)
}

// unboundShared is a shared node (nvidiactl, nvidia-uvm, kfd) that the
// driver of accelerators no driver is bound to would create, and that no
// bound device needs.
type unboundShared struct {
	n     devnode.ExpectedNode
	drv   string
	cause report.Cause // the first device's layer-2 finding
}

// checkUnboundNodes judges the nodes of the accelerators no driver is
// bound to whose vendor's driver is known (noDriverCause): the nodes that
// driver creates are absent because it does not drive them, a consequence
// of the layer-2 finding (Follows). A device's own node cannot exist
// before the driver names it; a shared node is looked at as it is: absent
// (the consequence), left behind with no driver holding its major (a
// consequence too: open gives ENXIO), or there, held by the loaded module
// for other devices or none. It returns the devices it judged.
func (e *Env) checkUnboundNodes(out *Out, x *devnode.Expectation, mv majorView) map[string]bool {
	judged := map[string]bool{}
	needed := map[string]bool{}
	for _, n := range x.Nodes {
		needed[n.Path] = true
	}
	shared := map[string]*unboundShared{}
	var paths []string
	for _, d := range e.Accelerators() {
		bdf := d.Address.String()
		if e.Binding(d).State != driver.Unbound || x.Covered[bdf] {
			continue
		}
		nd := e.noDriverCause(d)
		if nd.drv == nil || len(nd.drv.Nodes) == 0 {
			continue
		}
		judged[bdf] = true
		for _, kind := range nd.drv.Nodes {
			n, ok := x.DriverNode(e.Root, kind)
			if !ok {
				continue
			}
			n.Subjects = []string{bdf}
			switch {
			case n.Unnamed:
				e.unboundOwnNode(out, d, nd, n, needed)
			case needed[n.Path]:
				// A bound device needs it too: judged with that device.
			case shared[n.Path] != nil:
				shared[n.Path].n.Subjects = append(shared[n.Path].n.Subjects, bdf)
			default:
				shared[n.Path] = &unboundShared{n: n, drv: nd.drv.Name, cause: report.Cause{Code: nd.code, Subject: bdf}}
				paths = append(paths, n.Path)
			}
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		e.unboundSharedNode(out, shared[p], mv)
	}
	return judged
}

// consequenceFix is the fix of a node that is absent because its driver
// is not bound: the cause's.
func consequenceFix(c report.Cause, drv, who string) string {
	return fmt.Sprintf("Fix %s (layer 2, %s) first: once %s drives %s it creates the node; then run accel-doctor again.", c.Code, c.Subject, drv, who)
}

// unboundOwnNode reports a device's own node (/dev/nvidia<minor>, its
// render or accel node) missing: no driver named it.
func (e *Env) unboundOwnNode(out *Out, d *pci.Device, nd noDriver, n devnode.ExpectedNode, needed map[string]bool) {
	bdf := d.Address.String()
	ev := []report.Evidence{Ev(path.Join(d.Path, "driver"), "absent: no driver is bound ("+nd.code+")")}
	switch n.Kind {
	case devnode.KindNVIDIAGPU:
		ev = append(ev, Ev(path.Join(driver.NVIDIAGPUsDir, bdf), "absent: nvidia.ko gave the GPU no minor"))
	case devnode.KindDRMRender:
		ev = append(ev, Ev(path.Join(d.Path, "drm"), "no render node registered under the device"))
	case devnode.KindAccel:
		ev = append(ev, Ev("/sys/class/accel", "no entry leads to the device"))
	}
	if present, err := devnode.NodesOfForm(e.Root, n.Kind); err == nil {
		var stray []string
		for _, p := range present {
			if !needed[p] {
				stray = append(stray, p)
			}
		}
		if len(stray) > 0 {
			// Say what is there: nodes of this form that no bound device
			// needs (left from an earlier load, or made by hand).
			ev = append(ev, Ev(path.Dir(n.Path), "present, and needed by no bound device: "+strings.Join(stray, " ")))
		}
	}
	ev = append(ev, needEv(n), expectEv(n))
	st := report.Fail
	if !n.Required {
		st = report.Warn
	}
	f := out.Add(CodeDevnodeMissing, st, bdf,
		fmt.Sprintf("%s has no node %s: %s names it when it binds the device, and no driver is bound", bdf, n.Path, nd.drv.Name), ev...)
	f.Follows(nd.code, bdf)
	f.Remediation = consequenceFix(report.Cause{Code: nd.code, Subject: bdf}, nd.drv.Name, bdf)
}

// unboundSharedNode judges a shared node of unbound devices as it is.
func (e *Env) unboundSharedNode(out *Out, u *unboundShared, mv majorView) {
	n := u.n
	sort.Strings(n.Subjects)
	if len(n.Subjects) == 1 {
		e.AddDeviceNode(n.Subjects[0], n.Path)
	}
	who := whoNeeds(n)
	expect := expectEv(n)
	unbound := Ev("", fmt.Sprintf("%s creates it; no driver is bound to %s (%s %s)", u.drv, strings.Join(n.Subjects, ", "), u.cause.Code, u.cause.Subject))
	s := e.NodeState(n.Path)
	brokenSt := report.Fail
	if !n.Required {
		brokenSt = report.Warn
	}
	switch {
	case s.Err != nil:
		out.NotRun(CodeDevnodeUnknown, n.Path, "could not stat "+n.Path, e.errWhy(s.Err.Error(), s.Err, n.Path, ""), needEv(n), expect)
	case !s.Exists:
		if gap, ok := captureGap(e.Root, n.Path); ok {
			out.NotRun(CodeDevnodeUnknown, n.Path, "not checked: "+gap, e.missing(gap+": whether "+n.Path+" exists is not known", n.Path),
				Ev(n.Path, "not in the capture"), needEv(n), expect)
			return
		}
		what := "required"
		if !n.Required {
			what = "optional"
		}
		bound := "is not bound to it"
		if len(n.Subjects) > 1 {
			bound = "is bound to none of them"
		}
		f := out.Add(CodeDevnodeMissing, brokenSt, n.Path,
			fmt.Sprintf("%s node %s of %s is missing: %s, which creates it, %s", what, n.Path, who, u.drv, bound),
			Ev(n.Path, "absent"), unbound, needEv(n), expect)
		f.Follows(u.cause.Code, u.cause.Subject)
		f.Remediation = consequenceFix(u.cause, u.drv, who)
	case !s.IsChar():
		out.Add(CodeDevnodeNotChar, report.Fail, n.Path, fmt.Sprintf("%s is a %s, not a char device (%s)", n.Path, s.Node.Type, who),
			nodeEv(s), needEv(n), expect)
	case mv.complete && mv.unregistered(s.Node.Major):
		f := out.Add(CodeDevnodeMajorUnregistered, brokenSt, n.Path,
			fmt.Sprintf("%s is present but no driver holds char major %d: open() gives ENXIO (left from an earlier load; %s)", n.Path, s.Node.Major, who),
			nodeEv(s), Ev(devnode.ProcDevicesPath, fmt.Sprintf("no char major %d", s.Node.Major)), unbound, needEv(n))
		f.Follows(u.cause.Code, u.cause.Subject)
		f.Remediation = consequenceFix(u.cause, u.drv, who)
	case n.DevKnown && (s.Node.Major != n.Major || s.Node.Minor != n.Minor):
		out.Add(CodeDevnodeWrongDevnum, brokenSt, n.Path,
			fmt.Sprintf("%s is %s, the kernel published %s (%s)", n.Path, s.Node.Dev(), n.Dev(), who), nodeEv(s), expect, needEv(n))
	default:
		ev := []report.Evidence{nodeEv(s), expect, unbound}
		held := "; major registration not checked"
		if mv.known && mv.pd.CharRegistered(s.Node.Major) {
			held = ", held by " + strings.Join(mv.pd.CharNames(s.Node.Major), ", ")
			ev = append(ev, Ev(devnode.ProcDevicesPath, fmt.Sprintf("char major %d: %s", s.Node.Major, strings.Join(mv.pd.CharNames(s.Node.Major), ", "))))
		}
		out.Add(CodeDevnodeOK, report.Pass, n.Path,
			fmt.Sprintf("%s is char %s%s; %s is bound to none of %s, so no device of theirs is behind it", n.Path, s.Node.Dev(), held, u.drv, who), ev...)
	}
}

// procDevicesView reports a /proc/devices that could not be read
// (NOT_RUN) or only in part (WARN naming the lines).
func (e *Env) procDevicesView(x *devnode.Expectation, out *Out) majorView {
	err := x.ProcDevicesErr
	switch {
	case err == nil:
		return majorView{known: true, complete: true, pd: x.ProcDevices}
	case errors.Is(err, devnode.ErrSkippedLines):
		out.Add(CodeDevnodeMajorsUnknown, report.Warn, "host", "part of /proc/devices does not parse; majors missing from it are not judged",
			Ev(devnode.ProcDevicesPath, err.Error()))
		return majorView{known: true, pd: x.ProcDevices}
	}
	why := devnode.ProcDevicesProblem(err)
	w := e.errWhy(why, err, devnode.ProcDevicesPath, "")
	if errors.Is(err, fs.ErrNotExist) && !e.Root.IsLive() {
		// Every Linux host has one: under another root, the capture
		// (or the pod's mount of /proc) lacks it.
		w = e.missing(why, devnode.ProcDevicesPath)
	}
	out.NotRun(CodeDevnodeMajorsUnknown, "host", "driver majors unknown: /proc/devices unreadable", w, Ev(devnode.ProcDevicesPath, why))
	return majorView{}
}

// unregisteredMajors groups the existing char nodes whose major no driver
// holds, so that one cause gives one finding.
func (e *Env) unregisteredMajors(x *devnode.Expectation, mv majorView) map[uint32][]devnode.ExpectedNode {
	out := map[uint32][]devnode.ExpectedNode{}
	if !mv.complete {
		return out
	}
	for _, n := range x.Nodes {
		if _, skip := e.nodeSkipped(n); skip {
			continue
		}
		if s := e.NodeState(n.Path); s.Err == nil && s.IsChar() && mv.unregistered(s.Node.Major) {
			out[s.Node.Major] = append(out[s.Node.Major], n)
		}
	}
	for m := range out {
		// The finding belongs to a required node when there is one.
		sort.SliceStable(out[m], func(i, j int) bool { return out[m][i].Required && !out[m][j].Required })
	}
	return out
}

// expectEv says which number the node must have and where that comes
// from, or what was read and why it gave none.
func expectEv(n devnode.ExpectedNode) report.Evidence {
	switch {
	case n.DevKnown:
		return Ev("", "expected "+n.Dev()+" ("+n.DevSource+")")
	case n.MajorOnly:
		return Ev("", fmt.Sprintf("expected major %d (%s)", n.Major, n.DevSource))
	}
	return Ev("", "expected number not known: "+n.DevSource)
}

// checkNode judges one expected node: skipped, not captured, missing, not
// a char device, or a char device judged by checkCharNode.
func (e *Env) checkNode(out *Out, n devnode.ExpectedNode, mv majorView, unregistered map[uint32][]devnode.ExpectedNode) {
	if why, skip := e.nodeSkipped(n); skip {
		out.NotRun(CodeDevnodeSkipped, n.Path, "not checked: a lower layer failed for "+whoNeeds(n), why, needEv(n))
		return
	}
	expect := expectEv(n)
	s := e.NodeState(n.Path)
	if s.Err != nil {
		out.NotRun(CodeDevnodeUnknown, n.Path, "could not stat "+n.Path, e.errWhy(s.Err.Error(), s.Err, n.Path, ""), needEv(n), expect)
		return
	}
	if !s.Exists {
		if gap, ok := captureGap(e.Root, n.Path); ok {
			out.NotRun(CodeDevnodeUnknown, n.Path, "not checked: "+gap, e.missing(gap+": whether "+n.Path+" exists is not known", n.Path),
				Ev(n.Path, "not in the capture"), needEv(n), expect)
			return
		}
		st, what := report.Fail, "required"
		if !n.Required {
			st, what = report.Warn, "optional"
		}
		ev := []report.Evidence{Ev(n.Path, "absent"), needEv(n), expect}
		if s.Symlink {
			ev[0] = Ev(n.Path, "dangling symlink to "+s.LinkTarget)
		}
		out.Add(CodeDevnodeMissing, st, n.Path, fmt.Sprintf("%s node %s of %s is missing", what, n.Path, whoNeeds(n)), ev...)
		return
	}
	if !s.IsChar() {
		out.Add(CodeDevnodeNotChar, report.Fail, n.Path, fmt.Sprintf("%s is a %s, not a char device (%s)", n.Path, s.Node.Type, whoNeeds(n)),
			nodeEv(s), needEv(n), expect)
		return
	}
	e.checkCharNode(out, n, s, expect, mv, unregistered)
}

// checkCharNode judges an existing char node: its number against the
// published one, its major against /proc/devices.
func (e *Env) checkCharNode(out *Out, n devnode.ExpectedNode, s devnode.NodeState, expect report.Evidence, mv majorView, unregistered map[uint32][]devnode.ExpectedNode) {
	// A broken optional node (a profiler's nvidia-uvm-tools) limits some
	// uses only: WARN, as when it is missing.
	brokenSt := report.Fail
	if !n.Required {
		brokenSt = report.Warn
	}
	bad := false
	if n.DevKnown && (s.Node.Major != n.Major || s.Node.Minor != n.Minor) {
		out.Add(CodeDevnodeWrongDevnum, brokenSt, n.Path,
			fmt.Sprintf("%s is %s, the kernel published %s (%s)", n.Path, s.Node.Dev(), n.Dev(), whoNeeds(n)),
			nodeEv(s), expect, needEv(n))
		bad = true
	} else if n.MajorOnly && s.Node.Major != n.Major {
		out.Add(CodeDevnodeWrongDevnum, brokenSt, n.Path,
			fmt.Sprintf("%s has major %d, the driver registered %d (%s)", n.Path, s.Node.Major, n.Major, whoNeeds(n)),
			nodeEv(s), expect, needEv(n))
		bad = true
	}
	if mv.unregistered(s.Node.Major) {
		if mv.complete {
			e.unregisteredFinding(out, n, s.Node.Major, unregistered[s.Node.Major])
		} else {
			out.NotRun(CodeDevnodeMajorsUnknown, n.Path, fmt.Sprintf("registration of char major %d of %s not checked", s.Node.Major, n.Path),
				report.Unusable("the major is not among the lines of /proc/devices that parse, and some lines do not", devnode.ProcDevicesPath).FromCapture(e.snapshot()), nodeEv(s), expect)
		}
		bad = true
	}
	if bad {
		return
	}
	summary := fmt.Sprintf("%s is char %s (%s)", n.Path, s.Node.Dev(), whoNeeds(n))
	ev := []report.Evidence{nodeEv(s), expect}
	if mv.known {
		ev = append(ev, Ev(devnode.ProcDevicesPath, fmt.Sprintf("char major %d: %s", s.Node.Major, strings.Join(mv.pd.CharNames(s.Node.Major), ", "))))
	} else {
		summary += "; major registration not checked"
	}
	if !n.DevKnown && !n.MajorOnly {
		summary += "; expected number unknown, not compared"
	}
	out.Add(CodeDevnodeOK, report.Pass, n.Path, summary, ev...)
}

// unregisteredFinding: one cause, one finding. Every node of an
// unregistered major (nvidia-uvm and nvidia-uvm-tools share one) is
// listed in the finding of the first.
func (e *Env) unregisteredFinding(out *Out, n devnode.ExpectedNode, major uint32, nodes []devnode.ExpectedNode) {
	if len(nodes) == 0 || nodes[0].Path != n.Path {
		return
	}
	st, paths, ev := report.Warn, []string{}, []report.Evidence{}
	for _, m := range nodes {
		if m.Required {
			st = report.Fail
		}
		paths = append(paths, m.Path)
		ev = append(ev, nodeEv(e.NodeState(m.Path)), needEv(m))
	}
	ev = append(ev, Ev(devnode.ProcDevicesPath, fmt.Sprintf("no char major %d", major)))
	out.Add(CodeDevnodeMajorUnregistered, st, n.Path,
		fmt.Sprintf("no driver holds char major %d of %s: open() gives ENXIO", major, strings.Join(paths, ", ")), ev...)
}

// checkDevicesWithoutNodes covers the devices, not the nodes: one whose
// driver is not known (its driver-specific nodes cannot be named), one
// with no node to check, and one whose nodes are partly unknown.
func (e *Env) checkDevicesWithoutNodes(out *Out, x *devnode.Expectation, judged map[string]bool) {
	for _, d := range e.Accelerators() {
		bdf := d.Address.String()
		if judged[bdf] {
			continue // checkUnboundNodes
		}
		if !x.Covered[bdf] {
			if f, failed := e.FailedBelow(bdf, report.LayerDevNode); failed {
				out.NotRun(CodeDevnodeSkipped, bdf, "device nodes not checked: a lower layer failed",
					report.AfterFix(fmt.Sprintf("layer %d: %s (%s)", int(f.Layer), f.Code, f.Summary), f))
				continue
			}
		}
		var errs []string
		var whys []report.Why
		if b := e.Binding(d); b.State == driver.BindUnknown {
			// What kept layer 2 from naming the driver keeps this one
			// from naming its nodes: the same why.
			text := "which nodes it needs depends on its driver, which is not known: " + b.Why
			errs = append(errs, text)
			whys = append(whys, e.bindingWhy(b, d.Path))
		}
		for _, de := range x.Errors {
			if de.Address == bdf {
				errs = append(errs, e.withGap(de.Err))
				whys = append(whys, e.errWhy(e.withGap(de.Err), de.Err, "", ""))
			}
		}
		switch {
		case len(errs) > 0:
			why := whys[0]
			why.Reason = strings.Join(errs, "; ")
			out.NotRun(CodeDevnodeUnknown, bdf, "some device nodes of this device could not be determined", why)
		case !x.Covered[bdf]:
			drv := e.Binding(d).Driver
			why := "no DRM, accel, video4linux, KFD or VFIO node is registered for it under " + d.Path + " or /sys/class, and it is not an NVIDIA GPU"
			fix := "A device its kernel driver serves alone (a NIC, a driver without a node) needs nothing here; for one used through a node, the vendor's documentation names it, and `accel-doctor sandbox --default allow --device NODE` tells whether it opens."
			if !e.Root.IsLive() {
				why += " (a capture may not have kept them)"
				fix += " A capture may not have kept the node's class links: take it again on the host with `accel-doctor snapshot node.tar.gz`."
			}
			out.NotRun(CodeDevnodeNoneExpected, bdf, "no device node known for driver "+orUnknown(drv), report.Explain(why, fix),
				Ev(d.Path, "driver "+orUnknown(drv)))
		}
	}
}

// withGap is err's text, and what the capture lacks when err is a path
// the root could not have shown.
func (e *Env) withGap(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist) {
		if gap, ok := captureGap(e.Root, pe.Path); ok {
			return err.Error() + " (" + gap + ")"
		}
	}
	return err.Error()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// checkedNode returns the state of a node that devnode.present found to
// be an existing char device and did not skip.
func (e *Env) checkedNode(n devnode.ExpectedNode) (devnode.NodeState, bool) {
	if _, skip := e.nodeSkipped(n); skip {
		return devnode.NodeState{}, false
	}
	s := e.NodeState(n.Path)
	return s, s.Err == nil && s.IsChar()
}

// modeRule says whether a node's mode gives the usual access, and the
// rule applied; apply is false for nodes without a usual mode.
func modeRule(n devnode.ExpectedNode, s devnode.NodeState) (ok bool, rule string, apply bool) {
	perm := s.Node.Mode.Perm()
	othersRW := perm&0o006 == 0o006
	groupRW := perm&0o060 == 0o060 && s.Node.GID != 0
	switch n.Kind {
	case devnode.KindNVIDIAGPU, devnode.KindNVIDIACtl, devnode.KindNVIDIAUVM, devnode.KindNVIDIAUVMTools, devnode.KindNVIDIAModeset:
		return othersRW, "NVIDIA nodes are 0666 by default (NVreg_DeviceFileMode)", true
	case devnode.KindVFIOContainer:
		return othersRW, "/dev/vfio/vfio is 0666 (drivers/vfio/container.c)", true
	case devnode.KindDRMCard, devnode.KindDRMRender, devnode.KindKFD, devnode.KindAccel, devnode.KindVideo:
		return othersRW || groupRW, "0666, or 0660 with a non-root group such as render or video", true
	}
	// nvidia-caps modes are set per capability by the driver (config is
	// 0400 on purpose); VFIO group and device nodes are 0600 root until a
	// VMM or device plugin hands them to its user.
	return false, "", false
}

func checkDevnodeMode(e *Env, out *Out) {
	for _, n := range e.ExpectedNodes() {
		s, ok := e.checkedNode(n)
		if !ok {
			continue
		}
		good, rule, apply := modeRule(n, s)
		if !apply {
			continue
		}
		ev := []report.Evidence{nodeEv(s), Ev("", "rule: "+rule)}
		if good {
			out.Add(CodeDevnodeModeOK, report.Pass, n.Path, fmt.Sprintf("%s mode %s %d:%d (%s)", n.Path, s.Node.ModeString(), s.Node.UID, s.Node.GID, whoNeeds(n)), ev...)
		} else {
			out.Add(CodeDevnodeMode, report.Warn, n.Path,
				fmt.Sprintf("%s mode %s owner %d:%d keeps non-root users out (%s)", n.Path, s.Node.ModeString(), s.Node.UID, s.Node.GID, whoNeeds(n)), ev...)
		}
	}
}

func checkDevnodeCharLink(e *Env, out *Out) {
	for _, n := range e.ExpectedNodes() {
		s, ok := e.checkedNode(n)
		if !ok || s.CharLink == nil {
			continue
		}
		cl := s.CharLink
		gap, notCaptured := "", false
		if !cl.Present {
			gap, notCaptured = captureGap(e.Root, cl.Path)
		}
		switch {
		case cl.Err != nil:
			// Could not look; say so rather than guess.
			out.NotRun(CodeDevnodeUnknown, n.Path, "could not read "+cl.Path, e.errWhy(cl.Err.Error(), cl.Err, cl.Path, ""), Ev(cl.Path, cl.Err.Error()))
		case notCaptured:
			out.NotRun(CodeDevnodeUnknown, n.Path, "/dev/char link of "+n.Path+" not checked: "+gap, e.missing(gap, cl.Path), Ev(cl.Path, "not in the capture"))
		case !cl.Present:
			out.Add(CodeDevnodeNoCharLink, report.Warn, n.Path,
				fmt.Sprintf("%s has no %s link: systemd drops DeviceAllow for it after a daemon-reload (%s)", n.Path, cl.Path, whoNeeds(n)),
				Ev(cl.Path, "absent"), nodeEv(s))
		case !cl.PointsAtNode:
			out.Add(CodeDevnodeNoCharLink, report.Warn, n.Path,
				fmt.Sprintf("%s points at %s, not at %s (%s)", cl.Path, orUnknown(cl.Resolved), n.Path, whoNeeds(n)),
				Ev(cl.Path, "-> "+cl.Target), nodeEv(s))
		default:
			out.Add(CodeDevnodeCharLinkOK, report.Pass, n.Path, fmt.Sprintf("%s -> %s", cl.Path, cl.Target), Ev(cl.Path, "-> "+cl.Target))
		}
	}
}

// whoNeeds names the devices needing a node for a one-line summary: the
// addresses of one or two, a count for a shared node (the evidence lists
// them all).
func whoNeeds(n devnode.ExpectedNode) string {
	if len(n.Subjects) > 2 {
		return fmt.Sprintf("shared by %d devices", len(n.Subjects))
	}
	return strings.Join(n.Subjects, ", ")
}
