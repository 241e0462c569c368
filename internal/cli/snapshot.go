package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

func newSnapshotCmd(g *globals) *cobra.Command {
	var (
		file, container string
		opts            diagnose.Options
	)
	cmd := &cobra.Command{
		Use:   "snapshot FILE|-",
		Short: "Capture exactly what the readers read into one archive, for a bug report",
		Long: `snapshot runs every reader of 'check' over the host (read-only) and writes
the files, directory listings and symlinks they read, plus a manifest of the
device nodes they looked at, into one .tar.gz; the BPF device programs
read from the kernel are kept too (.accel-doctor/captured), so a replay
decides cgroup v2 access as the live host did, and so is what it looked for
and did not find, so a replay can tell "absent on the host" from "not
captured". Process environments, command lines, keys and credentials are
never captured. 'check --snapshot FILE' replays it through the same code.
With --pid (and --oci-spec) it also captures a container's cgroups, the
nodes its /dev holds and its OCI spec, for 'check --snapshot FILE --pid
PID'. With --container-id (an ID, an ID prefix or a PID, as 'container'
takes it) it captures what finding that container reads: the runtimes'
state files (kept only in the fields the lookup uses), its spec (redacted
like --oci-spec) and its init process's /proc entries, and then what --pid
and --oci-spec capture for them.
It writes only FILE ('-': standard output).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := snapshotTarget(file, args)
			if err != nil {
				return err
			}
			root, err := hostfs.New(g.root)
			if err != nil {
				return usageErr("%v", err)
			}
			rec := root.Record()
			if container != "" {
				m, _, err := runtime.Find(root, container)
				if err != nil {
					return usageErr("snapshot --container-id: %v", err)
				}
				if m.Alive() {
					opts.PID = m.PID
				}
				opts.Spec = m.ConfigPath
				// What `container ID` reads, so that it replays.
				judgeContainer(root, "snapshot", m.Container)
			}
			rec.PID = opts.PID
			opts.KubeletRPC = g.kubeletRPC()
			env := diagnose.NewEnv(root, opts)
			diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Command: "snapshot"})
			cdi.Validate(root, cdi.Options{}) // what `cdi validate` reads
			meta, err := writeSnapshot(g, root, rec, out)
			if err != nil {
				return err
			}
			name := out
			if out == "-" {
				name = "standard output"
			}
			fmt.Fprintf(g.stderr, "wrote %s: %d files, %d device nodes from %s\n", name, meta.Files, meta.Nodes, meta.Source)
			return nil
		},
	}
	f := cmd.Flags()
	g.addRootFlag(cmd)
	Flag(f, "filename", ": the archive to write (.tar.gz), or give it as the argument").String(&file, "")
	Alias(f, "file", "", "filename", "")
	// -o FILE was the first form (-o is the output format in every other
	// command).
	Alias(f, "output", "o", "filename", "or give the archive as the argument: -o is the output format in every other command")
	Flag(f, "pid", ": also capture its cgroups and what its /dev holds (replay with check --pid)").Int(&opts.PID, 0)
	Flag(f, "oci-spec", ": also capture it (replay with check --oci-spec)").String(&opts.Spec, "")
	Alias(f, "spec", "", "oci-spec", "")
	Flag(f, "kubelet-root-dir", ": what its sockets answer is captured").String(&opts.KubeletDir, "")
	Flag(f, "container-id", ": also capture what finding it reads, and its init process and spec as --pid and --oci-spec do").String(&container, "")
	Alias(f, "container", "", "container-id", "--container is a container's name in a pod, in 'container --pod'")
	cmd.MarkFlagsMutuallyExclusive("container-id", "pid")
	cmd.MarkFlagsMutuallyExclusive("container-id", "oci-spec")
	return cmd
}

// snapshotTarget is the one archive named by the argument or -f (or the
// old -o, its alias).
func snapshotTarget(file string, args []string) (string, error) {
	var named []string
	for _, v := range append([]string{file}, args...) {
		if v != "" {
			named = append(named, v)
		}
	}
	switch len(named) {
	case 0:
		return "", usageErr("snapshot needs the archive to write: accel-doctor snapshot FILE (or - for standard output)")
	case 1:
		return named[0], nil
	}
	return "", usageErr("snapshot writes one archive; got %d: %v", len(named), named)
}

// writeSnapshot writes the archive to standard output, or to a temporary
// file beside out that is renamed over it when complete (and removed on
// any exit path otherwise).
func writeSnapshot(g *globals, root *hostfs.Root, rec *hostfs.Recorder, out string) (hostfs.SnapshotMeta, error) {
	tool := "accel-doctor " + Version
	if out == "-" {
		return root.WriteSnapshot(rec, g.stdout, tool)
	}
	var tmp *os.File
	remove, err := makeTemp(func() (func(), error) {
		var err error
		tmp, err = os.CreateTemp(filepath.Dir(out), ".snapshot-*")
		if err != nil {
			return nil, err
		}
		return func() { os.Remove(tmp.Name()) }, nil
	})
	if err != nil {
		return hostfs.SnapshotMeta{}, err
	}
	defer remove()
	meta, err := root.WriteSnapshot(rec, tmp, tool)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return meta, err
	}
	return meta, os.Rename(tmp.Name(), out)
}
