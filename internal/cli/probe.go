package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// terminationLog is where Kubernetes reads a container's termination
// message (terminationMessagePath's default); the kubelet keeps at most
// 4096 bytes of it.
const (
	terminationLog    = "/dev/termination-log"
	terminationLogMax = 4096
)

func newProbeCmd(g *globals) *cobra.Command {
	var (
		opt     probe.Options
		termLog string
		facts   bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Inside a container: open every accelerator node this process sees and make a small request of each driver",
		Long: `probe runs inside a container (or as an initContainer gate) and finds out what
this process can see and use. For every accelerator node in its /dev
(nvidia*, nvidia-caps/*, dri/card*, dri/renderD*, accel/accel*, kfd, video*,
vfio/*, vfio/devices/*) it opens the node with the access its users ask for,
classifies the errno by the layer that produced it (EPERM: the device
cgroup; EACCES: mode, owner, nodev or an LSM; ENXIO/ENODEV: no driver), and
makes the kind's read-only identification ioctl (DRM_IOCTL_VERSION,
VIDIOC_QUERYCAP, VFIO_GET_API_VERSION and VFIO_CHECK_EXTENSION,
VFIO_GROUP_GET_STATUS, AMDKFD_IOC_GET_VERSION). Where libnvidia-ml.so.1 or
libcuda.so.1 is installed, the companion accel-doctor-cuda (beside this
binary, or --cuda-helper) loads it: nvmlInit_v2 and the GPU count; cuInit, the
devices' names, a context, a 1 MiB allocation and a copy there and back
checked byte for byte. A step that cannot run is NOT_RUN with the reason.

What it does to the system: opens and closes device nodes (a DRM card node
may make this process DRM master for that instant; opening a VFIO group
holds it exclusively for that instant; /dev/kfd creates a KFD process
context, released on close), allocates and frees 1 MiB on each GPU, and
makes one write: a short summary to /dev/termination-log (--termination-log)
when that file exists, and only then; it never creates it.

Exit status: 0 no FAIL; 1 a FAIL (an initContainer gate stops the pod);
2 nothing could be examined (no accelerator node, no library) or a usage
error. --facts prints what was observed as JSON, without judgement.
SIGINT or SIGTERM: the CUDA helper, if it runs, is killed, nothing is
reported or written, and it exits 128+N (130, 143).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The CUDA helper is a child process: a signal ends it
			// through the context (and a cuInit that hangs with it).
			takeCancel()
			ctx := probeContext(cmd)
			r := probe.Run(ctx, opt)
			if ctx.Err() != nil {
				return context.Cause(ctx) // a probe cut short judges nothing
			}
			if facts {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			rep := ProbeReport(r, "probe")
			if !facts {
				if err := g.render(rep, verbose); err != nil {
					return err
				}
			}
			if err := writeTerminationLog(termLog, rep); err != nil {
				fmt.Fprintf(g.stderr, "accel-doctor: %v\n", err)
			}
			return verdictExit(rep.ExitCode(), rep.Verdict.Summary)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Dev, "dev", "/dev", "the device directory to probe")
	f.StringVar(&opt.HelperPath, "cuda-helper", "", "the accel-doctor-cuda companion (default: beside this binary)")
	f.DurationVar(&opt.HelperTimeout, "cuda-timeout", probe.DefaultHelperTimeout, "how long the NVML and CUDA steps may take in all")
	f.BoolVar(&opt.NoLibraries, "no-libraries", false, "skip the NVML and CUDA steps")
	f.StringVar(&termLog, "termination-log", terminationLog, "write the summary here if the file exists ('' never)")
	f.BoolVar(&facts, "facts", false, "print the observations as JSON (no findings)")
	Flag(f, "verbose", "").Bool(&verbose, false)
	g.addOutputFlag(cmd)
	g.refuseRoot(cmd, "it examines this process's own view of the system (run it inside the container, or use 'container --probe' from the host)")
	return cmd
}

// ProbeReport judges a probe's observations: one finding per node open,
// per ioctl and per library, in the functional layer. The host-side
// `container --probe` passes the report internal/enter brought back.
func ProbeReport(r *probe.Report, command string) *report.Report {
	rep := &report.Report{
		SchemaVersion: report.SchemaVersion,
		Tool:          "accel-doctor " + Version,
		Command:       command,
		Source:        "this process",
		Root:          "/",
		Generated:     time.Now().UTC().Truncate(time.Second),
		Layers:        []report.Layer{report.LayerFunctional},
		Findings:      ProbeFindings(r),
	}
	rep.Decide()
	return rep
}

// ProbeFindings turns a probe's observations into findings.
func ProbeFindings(r *probe.Report) []report.Finding {
	var out []report.Finding
	who := report.Evidence{Path: "identity", Value: identity(r.Process)}
	// Out of out, in order: a NOT_RUN's fix names an earlier finding.
	add := func(check, code string, st report.Status, subject, summary string, ev ...report.Evidence) *report.Finding {
		f := report.Finding{Check: check, Code: code, Layer: report.LayerFunctional, Status: st, Subject: subject, Summary: summary, Evidence: ev}
		if c, ok := probe.LookupCode(code); ok && (st == report.Warn || st == report.Fail) {
			f.Remediation = c.Remediation
		}
		out = append(out, f)
		return &out[len(out)-1]
	}
	for _, e := range r.DevErrors {
		f := add("probe.nodes", probe.CodeDevUnreadable, report.NotRun, r.Dev, "a device directory could not be read")
		f.CouldNotLook(report.Explain(e, "List it by hand in the container (`ls -la "+r.Dev+"`): a directory this process may not read (its mode, an LSM) hides the nodes in it; run the probe as the workload's user to see what the workload sees."))
	}
	if len(r.Nodes) == 0 {
		f := add("probe.nodes", probe.CodeNoNodes, report.NotRun, r.Dev, "no accelerator node in "+r.Dev,
			report.Evidence{Path: r.Dev, Value: "patterns: " + strings.Join(r.Patterns, " ")})
		f.CouldNotLook(report.Explain("no accelerator node in "+r.Dev,
			"Give the container the device: a resources.limits request of the device plugin's resource, or a ResourceClaim, in the pod; --device or a CDI name for a plain container. On the node, `accel-doctor container ID` shows what the runtime applied."))
	}
	for _, n := range r.Nodes {
		nodeFindings(add, n, who)
	}
	libFinding(add, &r.NVML, probe.CodeNVMLOK, probe.CodeNVMLFailed, probe.CodeNVMLNotRun, who)
	libFinding(add, &r.CUDA, probe.CodeCUDAOK, probe.CodeCUDAFailed, probe.CodeCUDANotRun, who)
	return out
}

type addFunc func(check, code string, st report.Status, subject, summary string, ev ...report.Evidence) *report.Finding

func nodeFindings(add addFunc, n probe.NodeProbe, who report.Evidence) {
	o := n.Open
	node := o.Node
	if node == "" {
		node = "unknown type"
	}
	ev := []report.Evidence{{Path: n.Path, Value: node}}
	var opened *report.Finding // the open's finding, which an ioctl not made follows from
	if n.Target != "" {
		ev = append(ev, report.Evidence{Path: n.Path, Value: "symbolic link to " + n.Target})
	}
	call := fmt.Sprintf("open(%s, %s)", n.Path, openFlagName(o.Access))
	if o.Class == probe.OK {
		ev = append(ev, report.Evidence{Value: call + ": OK"}, who)
		if !n.IsChar {
			add("probe.open", probe.CodeNodeNotChar, report.Fail, n.Path, fmt.Sprintf("%s is not a character device (%s)", n.Path, node), ev...)
			return
		}
		opened = add("probe.open", probe.CodeNodeOpened, report.Pass, n.Path, fmt.Sprintf("opened %s (%s)", openFlagName(o.Access), node), ev...)
	} else {
		ev = append(ev, report.Evidence{Value: fmt.Sprintf("%s: %s (%s)", call, o.ErrnoName, o.Message)}, who)
		code, st, why := probe.CodeNodeOpenFailed, report.Fail, "failed"
		switch o.Class {
		case probe.CgroupDenied:
			code, why = probe.CodeNodeCgroupDenied, "the device cgroup refused it"
		case probe.PermissionDenied:
			code, why = probe.CodeNodePermission, "mode, owner, nodev or an LSM refused it, before the cgroup was asked"
		case probe.NoDriver:
			code, why = probe.CodeNodeNoDriver, "no driver serves "+node+" (the cgroup allowed it)"
		case probe.Busy:
			code, st, why = probe.CodeNodeBusy, report.Warn, "another process holds it"
		case probe.NotPresent:
			why = "the name does not lead to a node (a dangling link, or it vanished)"
		}
		opened = add("probe.open", code, st, n.Path, fmt.Sprintf("open %s: %s: %s", openFlagName(o.Access), o.ErrnoName, why), ev...)
	}
	c := n.Ioctl
	if c.Name == "" {
		return // the kind has no ioctl step (NVIDIA: the library steps)
	}
	subject := n.Path
	if c.NotRun != "" {
		var prev report.Finding
		if opened != nil {
			prev = *opened
		}
		why := ioctlWhy(c, prev)
		f := add("probe.ioctl", probe.CodeIoctlNotRun, report.NotRun, subject, c.Name+" not made")
		f.CouldNotLook(why)
		return
	}
	iev := []report.Evidence{{Path: n.Path, Value: fmt.Sprintf("ioctl(%s %s)", c.Name, c.Request)}}
	if c.Class != probe.Answered {
		iev[0].Value += fmt.Sprintf(": %s (%s)", c.ErrnoName, c.Message)
		if c.Class == probe.NotThatDriver {
			add("probe.ioctl", probe.CodeNotThatDriver, report.Fail, subject,
				fmt.Sprintf("%s: ENOTTY: the driver behind %s is not a %s driver", c.Name, node, n.Kind), iev...)
			return
		}
		add("probe.ioctl", probe.CodeIoctlFailed, report.Fail, subject, fmt.Sprintf("%s: %s (%s)", c.Name, c.ErrnoName, strings.ToLower(string(c.Class))), iev...)
		return
	}
	answer := ioctlAnswer(c)
	iev = append(iev, report.Evidence{Path: n.Path, Value: answer})
	switch {
	case c.VFIO != nil && c.VFIO.APIVersion != probe.VFIOAPIVersion:
		add("probe.ioctl", probe.CodeVFIOAPI, report.Fail, subject, fmt.Sprintf("VFIO API version %d, not %d", c.VFIO.APIVersion, probe.VFIOAPIVersion), iev...)
	case c.VFIO != nil && !c.VFIO.HasIOMMUModel():
		add("probe.ioctl", probe.CodeVFIONoIOMMU, report.Fail, subject, "the VFIO container offers no IOMMU model", iev...)
	case c.VFIOGroup != nil && !c.VFIOGroup.Viable:
		add("probe.ioctl", probe.CodeVFIONotViable, report.Fail, subject, "the VFIO group is not viable", iev...)
	case c.KFD != nil && c.KFD.Major != probe.KFDIoctlMajorVersion:
		add("probe.ioctl", probe.CodeKFDVersion, report.Fail, subject, fmt.Sprintf("KFD interface %d.%d, user space needs major %d", c.KFD.Major, c.KFD.Minor, probe.KFDIoctlMajorVersion), iev...)
	default:
		add("probe.ioctl", probe.CodeDriverAnswered, report.Pass, subject, answer, iev...)
	}
}

// ioctlWhy is why the kind's ioctl was not made: the open before it
// failed (its finding's fix comes first), or this architecture.
func ioctlWhy(c probe.Ioctl, opened report.Finding) report.Why {
	switch c.Skip {
	case probe.SkipOpenFailed, probe.SkipNotChar:
		if opened.Status == report.Fail || opened.Status == report.Warn {
			return report.AfterFix(c.NotRun, opened)
		}
		return report.Explain(c.NotRun, "The open decides: see its finding.")
	case probe.SkipArch:
		return report.NotOffered(c.NotRun, "this architecture's ioctl encoding",
			"The open above is the check here: run the probe on amd64 or arm64 to have the driver identify itself.")
	case probe.SkipByDesign:
		return report.Explain(c.NotRun, "Nothing to do: the other steps of the probe cover it.")
	}
	return report.Unusable(c.NotRun, "")
}

// libWhy is why a library's steps did not run, by its typed skip.
func libWhy(l *probe.LibProbe) report.Why {
	dir := ""
	if exe, err := os.Executable(); err == nil {
		dir = filepath.Dir(exe)
	}
	switch l.Skip {
	case probe.SkipNotAsked:
		return report.Off(l.NotRun, "--no-libraries")
	case probe.SkipNoLibrary:
		return report.Explain(l.NotRun, "Nothing to do where the workload uses no "+l.Library+". Otherwise give the container the driver's user-space libraries: the NVIDIA container toolkit or a CDI spec mounts them (`nvidia-ctk cdi generate`); LD_LIBRARY_PATH must name where they are.")
	case probe.SkipNoHelper:
		return report.Helper(l.NotRun, probe.HelperName, dir).With("Or give its path with --cuda-helper.")
	case probe.SkipHelperUntrusted:
		return report.Untrusted(l.NotRun, l.Helper)
	case probe.SkipHelperUnusable:
		return report.HelperBroken(l.NotRun, probe.HelperName, dir)
	case probe.SkipNoLoader:
		return report.NotOffered(l.NotRun, "a glibc dynamic loader in this file system",
			"NVML and CUDA load only in an image with glibc (the CUDA base images have it); the node findings above stand without them.")
	}
	return report.Unusable(l.NotRun, "")
}

func ioctlAnswer(c probe.Ioctl) string {
	switch {
	case c.DRM != nil:
		return fmt.Sprintf("DRM driver %s %d.%d.%d (%s)", c.DRM.Name, c.DRM.Major, c.DRM.Minor, c.DRM.Patch, c.DRM.Desc)
	case c.V4L2 != nil:
		return fmt.Sprintf("V4L2 driver %s, card %q, %s, caps %s", c.V4L2.Driver, c.V4L2.Card, c.V4L2.BusInfo, strings.Join(c.V4L2.Names, "|"))
	case c.VFIO != nil:
		return fmt.Sprintf("VFIO API %d, extensions: %s", c.VFIO.APIVersion, strings.Join(c.VFIO.Extensions, ", "))
	case c.VFIOGroup != nil:
		return fmt.Sprintf("VFIO group flags %s (viable %v, container set %v)", c.VFIOGroup.Flags, c.VFIOGroup.Viable, c.VFIOGroup.ContainerSet)
	case c.KFD != nil:
		return fmt.Sprintf("KFD interface %d.%d", c.KFD.Major, c.KFD.Minor)
	}
	return c.Name + " answered"
}

func libFinding(add addFunc, l *probe.LibProbe, okCode, failCode, notRunCode string, who report.Evidence) {
	subject := l.Library
	if l.NotRun != "" {
		f := add("probe."+l.Lib, notRunCode, report.NotRun, subject, l.Library+" not exercised")
		f.CouldNotLook(libWhy(l))
		return
	}
	ev := []report.Evidence{}
	if l.Search != nil && l.Search.Found != "" {
		ev = append(ev, report.Evidence{Path: l.Search.Found, Value: "found by the loader's search"})
	}
	if l.Loaded != "" {
		ev = append(ev, report.Evidence{Path: l.Loaded, Value: "mapped by the loader"})
	}
	for _, s := range l.Steps {
		ev = append(ev, report.Evidence{Value: stepLine(s)})
	}
	ev = append(ev, who)
	if l.Error != "" || !l.Done {
		why := l.Error
		if l.Unfinished != "" {
			why = fmt.Sprintf("%s never returned; %s", l.Unfinished, why)
		}
		ev = append(ev, report.Evidence{Path: l.Helper, Value: why})
		add("probe."+l.Lib, probe.CodeLibIncomplete, report.Fail, subject, "the helper did not finish: "+why, ev...)
		return
	}
	if s := l.FirstFailure(); s != nil {
		if s.Name == "compare" {
			add("probe."+l.Lib, probe.CodeCUDAMismatch, report.Fail, subject, "the 1 MiB copy came back different: "+s.Error, ev...)
			return
		}
		summary := s.Name + ": "
		switch {
		case s.Code != nil && *s.Code != 0:
			table, enum := probe.CUDAResults, "CUresult"
			if l.Lib == probe.HelperNVML {
				table, enum = probe.NVMLResults, "nvmlReturn_t"
			}
			rc := probe.LookupResult(table, *s.Code, enum)
			summary += fmt.Sprintf("%s (%d): %s", rc.Name, rc.Code, rc.Meaning)
			if rc.Cause != "" {
				ev = append(ev, report.Evidence{Value: "usual cause: " + rc.Cause})
			}
		default:
			summary += s.Error
		}
		add("probe."+l.Lib, failCode, report.Fail, subject, summary, ev...)
		return
	}
	add("probe."+l.Lib, okCode, report.Pass, subject, libOKSummary(l), ev...)
}

func stepLine(s probe.Step) string {
	b := s.Name
	if s.Device != nil {
		b += fmt.Sprintf("[device %d]", *s.Device)
	}
	if s.CodeName != "" {
		b += " = " + s.CodeName
	} else if s.OK {
		b += ": OK"
	}
	if s.Value != "" {
		b += " (" + s.Value + ")"
	}
	if s.Error != "" {
		b += ": " + s.Error
	}
	return b
}

func libOKSummary(l *probe.LibProbe) string {
	var ver, count string
	var names []string
	for _, s := range l.Steps {
		switch s.Name {
		case "nvmlSystemGetDriverVersion", "cuDriverGetVersion":
			ver = s.Value
		case "nvmlDeviceGetCount_v2", "cuDeviceGetCount":
			count = s.Value
		case "cuDeviceGetName":
			names = append(names, s.Value)
		}
	}
	if l.Lib == probe.HelperNVML {
		return fmt.Sprintf("NVML: driver %s, %s GPU(s)", ver, count)
	}
	return fmt.Sprintf("CUDA %s: %s device(s) (%s), context, 1 MiB alloc and copy round-trip OK", ver, count, strings.Join(names, ", "))
}

func openFlagName(a probe.Access) string {
	switch a {
	case probe.Read:
		return "O_RDONLY"
	case probe.Write:
		return "O_WRONLY"
	}
	return "O_RDWR"
}

func identity(p probe.Process) string {
	s := fmt.Sprintf("pid %d uid %d gid %d", p.PID, p.UID, p.GID)
	if len(p.Groups) > 0 {
		s += fmt.Sprintf(" groups %v", p.Groups)
	}
	return s + fmt.Sprintf(" CapEff %s NoNewPrivs %v Seccomp %d", p.CapEff, p.NoNewPrivs, p.Seccomp)
}

// writeTerminationLog writes the verdict and the first failures to path
// if it exists (it is never created: Kubernetes mounts it, and anywhere
// else the probe writes nothing).
func writeTerminationLog(path string, rep *report.Report) error {
	if path == "" {
		return nil
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("termination log %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if _, err := f.WriteString(TerminationSummary(rep)); err != nil {
		return fmt.Errorf("termination log %s: %w", path, err)
	}
	return nil
}

// TerminationSummary is the verdict and one line per FAIL, at most 4096
// bytes (what the kubelet keeps of a termination message).
func TerminationSummary(rep *report.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "accel-doctor probe: %s: %s\n", rep.Verdict.Status, rep.Verdict.Summary)
	for _, f := range rep.Findings {
		if f.Status != report.Fail {
			continue
		}
		line := fmt.Sprintf("%s %s %s: %s\n", f.Status, f.Code, f.Subject, f.Summary)
		if b.Len()+len(line) > terminationLogMax {
			break
		}
		b.WriteString(line)
	}
	s := b.String()
	if len(s) > terminationLogMax {
		s = s[:terminationLogMax]
	}
	return s
}

// probeContext is cmd.Context, never nil.
func probeContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
