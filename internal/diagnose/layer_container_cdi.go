package diagnose

import (
	"io/fs"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// Checkpoint 2 of a container: what should inject its devices (plain
// linux.devices, CDI names, the legacy NVIDIA hook, privileged), and for
// CDI, whether each name resolves against the host's spec directories and
// each node, mount and hook of its edits is there (internal/cdi's facts,
// one finding code per fact kind). The resolved edits join what
// checkpoint 3 expects to find in the container's process.

// cdiCodes are internal/cdi's catalog entries, taken in as they are.
func cdiCodes() []Code {
	out := make([]Code, 0, len(cdi.Codes))
	for _, c := range cdi.Codes {
		out = append(out, Code{Code: c.Code, Layer: report.LayerRuntime, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	return out
}

func cdiCodeNames() []string {
	out := make([]string, 0, len(cdi.Codes))
	for _, c := range cdi.Codes {
		out = append(out, c.Code)
	}
	return out
}

// CDIFinding is the finding a checkpoint-2 fact is (read through root):
// its kind's code and status, its evidence, the code's fix; a NOT_RUN's
// reason is what it says, and its fix what its kind and error call for.
func CDIFinding(root *hostfs.Root, f cdi.Fact) report.Finding {
	prefix, _, _ := strings.Cut(string(f.Kind), ".")
	c, ok := cdi.CodeOf(f.Kind)
	if !ok {
		// A kind without a code is a bug of ours: say so rather than drop it.
		out := report.Finding{Check: "cdi." + prefix, Code: CodeCheckCrashed, Layer: report.LayerRuntime, Subject: f.Subject, Summary: f.Summary}
		out.CouldNotLook(report.Bug("internal: fact kind " + string(f.Kind) + " has no finding code"))
		return out
	}
	out := report.Finding{Check: "cdi." + prefix, Code: c.Code, Layer: report.LayerRuntime, Status: report.Status(c.Status),
		Subject: f.Subject, Summary: f.Summary}
	for _, e := range f.Evidence {
		out.Evidence = append(out.Evidence, report.Evidence{Path: e.Path, Value: e.Value})
	}
	switch out.Status {
	case report.Warn, report.Fail:
		out.Remediation = c.Remediation
	case report.NotRun:
		out.CouldNotLook(cdiWhy(&Env{Root: root}, f))
	}
	return out
}

// cdiWhy is why a checkpoint-2 fact could not be judged: its error (a
// path the capture lacks, a permission, a read that failed), or what its
// kind says no file on the host tells.
func cdiWhy(e *Env, f cdi.Fact) report.Why {
	p := f.Subject
	for _, ev := range f.Evidence {
		if strings.HasPrefix(ev.Path, "/") {
			p = ev.Path
			break
		}
	}
	switch f.Kind {
	case cdi.KindSpecNone:
		return report.Explain(f.Summary, "Nothing to do where devices reach containers through a device plugin's DeviceSpecs or the legacy NVIDIA runtime. Where CDI is meant, the spec was never written or was lost with /var/run/cdi at a reboot: have its writer write it again (NVIDIA: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`; the GPU operator and DRA drivers write theirs when they start).")
	case cdi.KindRuntimeNone:
		return report.Explain(f.Summary, "accel-doctor looks for the runtime's binary only in the directories named: find the node's runtime (`crictl info`, `systemctl status containerd crio docker`) and read its release by hand (`containerd --version`, `crio version`).")
	case cdi.KindRuntimeUnknown, cdi.KindVersionUnknown:
		if f.Err != nil {
			break
		}
		return report.Explain(f.Summary, "Read the runtime's release by hand (`containerd --version`, `crio version`, `rpm -q containerd.io cri-o`): `accel-doctor explain CDI_VERSION_UNSUPPORTED` lists the first releases that load each cdiVersion.")
	case cdi.KindCDIConfigUnknown:
		if f.Err != nil {
			break
		}
		return report.Explain(f.Summary, "Read the effective setting by hand: `containerd config dump | grep -i enable_cdi`, `crictl info | grep -i cdi`; setting it explicitly in the configuration makes it known.")
	}
	if f.Err == nil {
		return report.Unusable(f.Summary, p).FromCapture(e.snapshot())
	}
	return e.errWhy(f.Summary, f.Err, p, "")
}

// cdiRuntime is the runtime name internal/cdi judges compatibility
// against, for the container's runtime ("" when it is plain runc or crun:
// then every runtime found is judged).
func cdiRuntime(r runtime.Runtime) string {
	switch r {
	case runtime.Containerd:
		return "containerd"
	case runtime.CRIO:
		return "crio"
	case runtime.Docker:
		return "dockerd"
	case runtime.Podman:
		return "podman"
	}
	return ""
}

// ContainerCDI is checkpoint 2 for the container, read once per run.
func (e *Env) ContainerCDI() *cdi.Result {
	r, _ := memo(e, "container.cdi", func() (*cdi.Result, error) {
		c := e.Opts.Container
		return cdi.Container(e.Root, c.Spec, cdi.Options{Runtime: cdiRuntime(c.Runtime), Dirs: e.Opts.CDISpecDirs}), nil
	})
	return r
}

func checkContainerInject(e *Env, out *Out) {
	c := e.Opts.Container
	if c == nil || c.Spec == nil {
		return // CONTAINER_SPEC_UNREADABLE says so
	}
	for _, f := range e.ContainerCDI().Facts {
		fd := CDIFinding(e.Root, f)
		got := out.Add(fd.Code, fd.Status, fd.Subject, fd.Summary, fd.Evidence...)
		got.Reason, got.Remediation = fd.Reason, fd.Remediation
	}
}

// cdiNode is the node a CDI deviceNodes entry puts in the container. An
// entry without type and numbers takes them from the host's node at its
// hostPath (or path), as the CDI library does when it injects (pkg/cdi
// container-edits: fillMissingInfo); without that node there is nothing
// to expect.
func cdiNode(root *hostfs.Root, dn *cdispec.DeviceNode) (runtime.ExpectedNode, bool) {
	n := runtime.ExpectedNode{Path: dn.Path, Type: hostfs.TypeChar, Major: uint32(dn.Major), Minor: uint32(dn.Minor)}
	if dn.Type == "b" {
		n.Type = hostfs.TypeBlock
	}
	if dn.Type == "" || (dn.Major == 0 && dn.Minor == 0) {
		host := dn.HostPath
		if host == "" {
			host = dn.Path
		}
		st, err := root.Stat(host)
		if err != nil || (st.Type != hostfs.TypeChar && st.Type != hostfs.TypeBlock) {
			return n, false
		}
		if dn.Type == "" {
			n.Type = st.Type
		}
		if dn.Major == 0 && dn.Minor == 0 {
			n.Major, n.Minor = st.Major, st.Minor
		}
	}
	return n, true
}

// addCDIEdits adds what the resolved CDI devices inject to what the
// container's process should have (skipping what the spec names already:
// containerd and Docker write the resolved edits into config.json).
func addCDIEdits(root *hostfs.Root, w *runtime.Expected, res *cdi.Result) {
	have := map[string]bool{}
	for _, n := range w.Nodes {
		have["node "+n.Path] = true
	}
	for _, m := range w.Mounts {
		have["mount "+m.ContainerPath] = true
	}
	for _, v := range w.Env {
		have["env "+v] = true
	}
	for _, r := range res.Resolutions {
		if r.Device == nil {
			continue
		}
		ed := r.Device.Edits()
		for _, dn := range ed.DeviceNodes {
			if dn == nil || have["node "+dn.Path] {
				continue
			}
			n, ok := cdiNode(root, dn)
			if !ok {
				continue // checkpoint 2 says the host lacks it
			}
			have["node "+dn.Path] = true
			if dn.FileMode != nil {
				m := fs.FileMode(*dn.FileMode).Perm()
				n.Mode = &m
			}
			w.Nodes = append(w.Nodes, n)
		}
		for _, m := range ed.Mounts {
			if m == nil || have["mount "+m.ContainerPath] {
				continue
			}
			have["mount "+m.ContainerPath] = true
			w.Mounts = append(w.Mounts, runtime.ExpectedMount{HostPath: m.HostPath, ContainerPath: m.ContainerPath})
		}
		for _, kv := range ed.Env {
			name, _, _ := strings.Cut(kv, "=")
			if name != "" && !have["env "+name] {
				have["env "+name] = true
				w.Env = append(w.Env, name)
			}
		}
	}
}
