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

// CDIFinding is the finding a checkpoint-2 fact is: its kind's code and
// status, its evidence, the code's fix; a NOT_RUN's reason is what it says.
func CDIFinding(f cdi.Fact) report.Finding {
	prefix, _, _ := strings.Cut(string(f.Kind), ".")
	c, ok := cdi.CodeOf(f.Kind)
	if !ok {
		// A kind without a code is a bug of ours: say so rather than drop it.
		return report.Finding{Check: "cdi." + prefix, Code: CodeCheckCrashed, Layer: report.LayerRuntime, Status: report.NotRun,
			Subject: f.Subject, Summary: f.Summary, Reason: "internal: fact kind " + string(f.Kind) + " has no finding code"}
	}
	out := report.Finding{Check: "cdi." + prefix, Code: c.Code, Layer: report.LayerRuntime, Status: report.Status(c.Status),
		Subject: f.Subject, Summary: f.Summary}
	for _, e := range f.Evidence {
		out.Evidence = append(out.Evidence, report.Evidence{Path: e.Path, Value: e.Value})
	}
	if out.Status != report.Pass {
		out.Remediation = c.Remediation
	}
	if out.Status == report.NotRun {
		out.Reason = f.Summary
	}
	return out
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
		fd := CDIFinding(f)
		got := out.Add(fd.Code, fd.Status, fd.Subject, fd.Summary, fd.Evidence...)
		got.Reason = fd.Reason
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
