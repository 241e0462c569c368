package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

func newSnapshotCmd(g *globals) *cobra.Command {
	var (
		out  string
		opts diagnose.Options
	)
	cmd := &cobra.Command{
		Use:   "snapshot -o FILE",
		Short: "Capture exactly what the readers read into one archive, for a bug report",
		Long: `snapshot runs every reader of 'check' over the host (read-only) and writes
the files, directory listings and symlinks they read, plus a manifest of the
device nodes they looked at, into one .tar.gz; the BPF device programs
read from the kernel are kept too (.accel-doctor/captured), so a replay
decides cgroup v2 access as the live host did. Process environments, keys
and credentials are never captured. 'check --snapshot FILE' replays it
through the same code. With --pid (and --spec) it also captures a
container's cgroups, the nodes its /dev holds and its OCI spec, for
'check --snapshot FILE --pid PID'. It writes only FILE.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErr("snapshot needs -o FILE")
			}
			root, err := hostfs.New(g.root)
			if err != nil {
				return usageErr("%v", err)
			}
			rec := root.Record()
			env := diagnose.NewEnv(root, opts)
			diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Command: "snapshot"})
			tmp, err := os.CreateTemp(filepath.Dir(out), ".snapshot-*")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			meta, err := root.WriteSnapshot(rec, tmp, "accel-doctor "+Version)
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Rename(tmp.Name(), out); err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "wrote %s: %d files, %d device nodes from %s\n", out, meta.Files, meta.Nodes, meta.Source)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the archive to write (.tar.gz)")
	cmd.Flags().IntVar(&opts.PID, "pid", 0, "also capture this process's cgroups and what its /dev holds (replay with check --pid)")
	cmd.Flags().StringVar(&opts.Spec, "spec", "", "also capture this OCI config.json (replay with check --spec)")
	return cmd
}
