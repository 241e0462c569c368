package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

func newCDICmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cdi",
		Short: "CDI specs against this host: validate them all, or check one device name (read-only)",
	}
	cmd.AddCommand(newCDIValidateCmd(g), newCDICheckCmd(g))
	return cmd
}

// cdiFlags are the flags both subcommands take.
type cdiFlags struct {
	snapshot string
	dirs     []string
	runtime  string
	verbose  bool
}

func (f *cdiFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	Flag(fl, "snapshot", "").String(&f.snapshot, "")
	Flag(fl, "cdi-spec-dir", CDISpecDirsHelp).StringSlice(&f.dirs, nil)
	Alias(fl, "spec-dir", "", "cdi-spec-dir", "")
	Flag(fl, "runtime", ": "+strings.Join(cdi.RuntimeNames, ", ")).String(&f.runtime, "")
	Flag(fl, "verbose", "").Bool(&f.verbose, false)
}

// CDISpecDirsHelp is what --cdi-spec-dir is in the commands that resolve
// CDI names.
const CDISpecDirsHelp = " to resolve CDI names in (repeatable, in priority order; default: the runtime's cdi_spec_dirs, else /etc/cdi,/var/run/cdi)"

func (f *cdiFlags) options() (cdi.Options, error) {
	if f.runtime != "" && !containsString(cdi.RuntimeNames, f.runtime) {
		return cdi.Options{}, usageErr("--runtime %q: want one of %s", f.runtime, strings.Join(cdi.RuntimeNames, ", "))
	}
	for _, d := range f.dirs {
		if !strings.HasPrefix(d, "/") {
			return cdi.Options{}, usageErr("--cdi-spec-dir %q is not a host-absolute path", d)
		}
	}
	return cdi.Options{Dirs: f.dirs, Runtime: f.runtime}, nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func newCDIValidateCmd(g *globals) *cobra.Command {
	var f cdiFlags
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Every CDI spec of this host: does it load, does each node, mount and hook exist, does the runtime load its version",
		Long: `validate reads every spec file of the CDI spec directories (the runtime's
cdi_spec_dirs, else /etc/cdi and /var/run/cdi; a later directory wins a
name) through the host root, and checks each the way a runtime would load it:
parse and validation by the CDI library itself, name conflicts, then every
device node (present, a device, the spec's type and major:minor), mount source
and hook program (present, executable) its edits name on the host, and whether
each container runtime found (containerd, crio, podman, dockerd: version and
CDI library read from the binary's build information, never by running it)
loads its cdiVersion and has CDI enabled.

It is read-only. Exit status: 0 no FAIL; 1 at least one FAIL; 2 nothing could
be judged (no spec at all), or a usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			root, source, cleanup, err := g.openHost(f.snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			res := cdi.Validate(root, opts)
			return g.renderCDI(root, res, "cdi validate", source, f.snapshot, f.verbose)
		},
	}
	f.add(cmd)
	g.addRootFlag(cmd)
	g.addOutputFlag(cmd)
	return cmd
}

func newCDICheckCmd(g *globals) *cobra.Command {
	var (
		f    cdiFlags
		spec string
	)
	cmd := &cobra.Command{
		Use:   "check NAME | --oci-spec CONFIG",
		Short: "One CDI device name (or a container's config.json): does it resolve, what would it inject, is every piece there",
		Long: `check resolves one qualified CDI device name (vendor/class=name, e.g.
nvidia.com/gpu=0) as the runtime would: against the spec directories, with
the CDI library's priority and conflict rules ("unresolvable CDI devices" when
no valid spec declares it: a spec that declares only "all" does not resolve
"nvidia.com/gpu=0"). It lists what the device would inject, checks every device
node, mount source and hook program on the host, and whether the runtime loads
the spec's cdiVersion.

With --oci-spec CONFIG (a container's OCI config.json, a host path) it names how
that container asks for devices instead — linux.devices, CDI names (cdi.k8s.io
annotations, CRI-O's copy of them), the legacy NVIDIA hook and
NVIDIA_VISIBLE_DEVICES, privileged — with the conflicts between them, and checks
every CDI name it carries.

It is read-only. Exit status: 0 no FAIL; 1 at least one FAIL; 2 a usage error.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (spec != "") {
				return usageErr("cdi check needs exactly one of NAME or --oci-spec CONFIG")
			}
			opts, err := f.options()
			if err != nil {
				return err
			}
			root, source, cleanup, err := g.openHost(f.snapshot)
			if err != nil {
				return err
			}
			defer cleanup()
			var res *cdi.Result
			if spec != "" {
				s, err := runtime.ReadSpec(root, spec)
				if err != nil {
					return usageErr("--oci-spec: %v", err)
				}
				res = cdi.Container(root, s, opts)
			} else {
				res = cdi.Check(root, args[0], opts)
			}
			// What the device would inject is the point: every finding
			// is listed, and (text, markdown) a table of the edits.
			return g.renderCDI(root, res, "cdi check", source, f.snapshot, true)
		},
	}
	f.add(cmd)
	g.addRootFlag(cmd)
	Flag(cmd.Flags(), "oci-spec", ": check how it asks for devices").String(&spec, "")
	Alias(cmd.Flags(), "spec", "", "oci-spec", "")
	g.addOutputFlag(cmd)
	return cmd
}

// cdiReport turns checkpoint 2's facts into findings with the proposed
// catalog (cdi.Codes): each kind is one code and one status.
func cdiReport(host *hostfs.Root, res *cdi.Result, command, source, root string) (*report.Report, error) {
	rep := &report.Report{
		SchemaVersion: report.SchemaVersion, Tool: "accel-doctor " + Version, Command: command,
		Source: source, Root: root, Generated: time.Now().UTC(),
		Layers: []report.Layer{report.LayerRuntime}, Devices: []report.Device{}, Findings: []report.Finding{},
	}
	for _, f := range res.Facts {
		rep.Findings = append(rep.Findings, diagnose.CDIFinding(host, f))
	}
	rep.Decide()
	return rep, nil
}

func (g *globals) renderCDI(root *hostfs.Root, res *cdi.Result, command, source, snapshot string, verbose bool) error {
	rep, err := cdiReport(root, res, command, source, snapshotName(snapshot))
	if err != nil {
		return err
	}
	if err := g.render(rep, verbose); err != nil {
		return err
	}
	if g.output != "json" {
		for _, t := range injectTables(res) {
			fmt.Fprintln(g.stdout)
			if err := g.renderTable(t, nil); err != nil {
				return err
			}
		}
	}
	return verdictExit(rep.ExitCode(), rep.Verdict.Summary)
}

// injectTables is, per resolved device, what it would inject and what
// the host has of each piece (the JSON report holds the same as the
// evidence of CDI_DEVICE_RESOLVED and the host findings).
func injectTables(res *cdi.Result) []*report.Table {
	onHost := map[string]cdi.Fact{}
	for _, f := range res.Facts {
		switch strings.SplitN(string(f.Kind), ".", 2)[0] {
		case "node", "mount", "hook", "netdev":
			onHost[f.Subject] = f
		}
	}
	state := func(owner, host string) string {
		f, ok := onHost[owner+": "+host]
		if !ok {
			return ""
		}
		c, _ := cdi.CodeOf(f.Kind)
		return c.Status + " " + c.Code
	}
	var out []*report.Table
	for _, r := range res.Resolutions {
		if r.Device == nil {
			continue
		}
		e := r.Device.Edits()
		t := &report.Table{Title: []string{fmt.Sprintf("%s would inject (%s):", r.Name, r.Device.Spec.Path)},
			Header: []string{"EDIT", "IN THE CONTAINER", "FROM THE HOST", "ON THE HOST"}}
		for _, dn := range e.DeviceNodes {
			if dn == nil {
				continue
			}
			host := dn.HostPath
			if host == "" {
				host = dn.Path
			}
			what := host
			if dn.Type != "" || dn.Major != 0 {
				what += fmt.Sprintf(" (%s %d:%d)", dn.Type, dn.Major, dn.Minor)
			}
			t.Rows = append(t.Rows, []string{"device node", dn.Path, what, state(r.Name, host)})
		}
		for _, m := range e.Mounts {
			if m != nil {
				t.Rows = append(t.Rows, []string{"mount", m.ContainerPath, m.HostPath, state(r.Name, m.HostPath)})
			}
		}
		for _, h := range e.Hooks {
			if h != nil {
				t.Rows = append(t.Rows, []string{"hook " + h.HookName, "", strings.Join(append([]string{h.Path}, h.Args[min(1, len(h.Args)):]...), " "), state(r.Name, h.Path)})
			}
		}
		for _, n := range e.NetDevices {
			if n != nil {
				t.Rows = append(t.Rows, []string{"net device", n.Name, n.HostInterfaceName, state(r.Name, "/sys/class/net/"+n.HostInterfaceName)})
			}
		}
		for _, v := range e.Env {
			name, val, _ := strings.Cut(v, "=")
			t.Rows = append(t.Rows, []string{"env", name, val, ""})
		}
		for _, gid := range e.AdditionalGIDs {
			t.Rows = append(t.Rows, []string{"additional gid", fmt.Sprint(gid), "", ""})
		}
		out = append(out, t)
	}
	return out
}
