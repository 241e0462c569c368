package kubecli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/lint"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

func newLintCmd(g *cli.Globals) *cobra.Command {
	var (
		files       []string
		recursive   bool
		verbose     bool
		withCluster bool
		opts        cluster.ConfigOptions
	)
	cmd := &cobra.Command{
		Use:   "lint -f FILE|DIR|- [-f ...]",
		Short: "Check workload manifests for accelerator mistakes before they run (offline, read-only)",
		Long: `lint reads Kubernetes manifests (YAML or JSON, several documents per file, List
kinds too) and checks every Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
Job and CronJob for the accelerator mistakes that otherwise show up as a rejected
pod, a Pending pod or a container that sees the wrong devices: extended resources
whose requests and limits differ, NVIDIA_VISIBLE_DEVICES without a GPU request,
privileged GPU containers, an NVIDIA RuntimeClass without a GPU, a GPU request
without a toleration, a device-plugin resource beside a DRA claim of the same
vendor, hostPath mounts of device nodes, VFIO without CAP_IPC_LOCK.

Without --cluster it is offline: it reads only the files given (-f FILE, -f DIR
for its *.yaml, *.yml and *.json files, -R to descend, -f - for stdin) and asks no
API server, so what needs the cluster (does the RuntimeClass exist, which taints
do the GPU nodes carry) is left out, and the rules that depend on it are WARN.
Objects of kinds lint does not read (RBAC, Namespaces, kustomizations) are
counted in one NOT_RUN finding, and documents that are no Kubernetes object (no
apiVersion, no kind: a tool's config file) in another; neither is a FAIL.

With --cluster it also lists the cluster's RuntimeClasses, DeviceClasses and
Nodes once (paged; it needs list on runtimeclasses.node.k8s.io,
deviceclasses.resource.k8s.io and nodes, and writes nothing), reaching it as
kubectl does (--kubeconfig, $KUBECONFIG, ~/.kube/config, the pod's service
account; --context), and runs the LINT_CLUSTER_* rules: a RuntimeClass or
DeviceClass that does not exist, a node selector no node matches, an extended
resource no node advertises, a taint every fitting node carries and the pod does
not tolerate. A LIST that fails leaves the rules that need it NOT_RUN with the
error. docs/lint.md lists the rules; accel-doctor explain LINT_... prints one.

Exit status: 1 when a rule FAILs, 0 otherwise, 2 on a usage error or when no
document could be judged (empty input, or only kinds lint does not read).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return cli.UsageErr("lint needs -f FILE, -f DIR or -f - (stdin)")
			}
			if !withCluster && (cmd.Flags().Changed("kubeconfig") || cmd.Flags().Changed("context")) {
				return cli.UsageErr("--kubeconfig and --context are for --cluster: without it lint asks no API server")
			}
			inputs, err := readLintInputs(cmd, files, recursive)
			if err != nil {
				return err
			}
			var (
				lc     *lint.Cluster
				source string
			)
			if withCluster {
				cfg, host, err := cluster.RESTConfig(opts)
				if err != nil {
					return cli.UsageErr("--cluster: %v", err)
				}
				cfg.UserAgent = "accel-doctor-lint"
				if lc, err = lintCluster(cmd.Context(), cfg, host); err != nil {
					return cli.UsageErr("--cluster: %v", err)
				}
				source = "; cluster " + host
			}
			res := lint.LintWith(inputs, lc)
			names := make([]string, len(inputs))
			for i, in := range inputs {
				names[i] = in.Name
			}
			rep := &report.Report{
				SchemaVersion: report.SchemaVersion, Tool: "accel-doctor " + cli.Version, Command: "lint",
				Source: "manifests " + strings.Join(names, ", ") + source, Generated: time.Now().UTC(),
				Layers: []report.Layer{report.LayerKube}, Devices: []report.Device{}, Findings: res.Findings,
			}
			if rep.Findings == nil {
				rep.Findings = []report.Finding{}
			}
			rep.Decide()
			if err := g.Render(rep, verbose); err != nil {
				return err
			}
			if g.Output() == "text" {
				fmt.Fprintf(g.Stdout(), "\n%d document(s) read: %d workload(s) linted, %d object(s) not judged, %d document(s) with no apiVersion and no kind, %d malformed.\n",
					res.Documents, res.Workloads, res.Skipped, res.NotObjects, res.Malformed)
			}
			if lc != nil && lc.RuntimeClassesErr != nil && lc.DeviceClassesErr != nil && lc.NodesErr != nil {
				// --cluster asked for the API server's view and got none
				// of it: the manifests' own verdict is not the answer asked.
				return cli.ExitErr(2, fmt.Errorf("--cluster: the API server answered none of the LISTs (RuntimeClasses: %v)", lc.RuntimeClassesErr))
			}
			return cli.ExitFor(rep)
		},
	}
	fl := cmd.Flags()
	cli.Flag(fl, "filename", ": a manifest or a directory of them (repeatable)").StringArray(&files, nil)
	fl.BoolVarP(&recursive, "recursive", "R", false, "with -f DIR: read its subdirectories too")
	cli.Flag(fl, "verbose", " (every workload, the clean ones too)").Bool(&verbose, false)
	fl.BoolVar(&withCluster, "cluster", false, "also check against the live API server: RuntimeClasses, DeviceClasses, nodes' labels, taints and allocatable resources (read-only)")
	cli.Flag(fl, "kubeconfig", cli.KubeconfigDefault+"; with --cluster").String(&opts.Kubeconfig, "")
	cli.Flag(fl, "context", "; with --cluster").String(&opts.Context, "")
	g.AddOutputFlag(cmd)
	return cmd
}

// readLintInputs reads the -f arguments: files, directories (their
// *.yaml, *.yml and *.json, in name order, as kubectl -f DIR does), and
// stdin once. A path that cannot be read is a usage error: nothing was
// linted, and a partial verdict over the others would mislead.
func readLintInputs(cmd *cobra.Command, args []string, recursive bool) ([]lint.Input, error) {
	var inputs []lint.Input
	stdin := false
	for _, a := range args {
		if a == "-" {
			if stdin {
				return nil, cli.UsageErr("-f - given twice: stdin is read once")
			}
			stdin = true
			in, err := lint.ReadInput("-", cmd.InOrStdin())
			if err != nil {
				return nil, cli.UsageErr("%v", err)
			}
			inputs = append(inputs, in)
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, cli.UsageErr("%v", err)
		}
		paths := []string{a}
		if st.IsDir() {
			if paths, err = manifestFiles(a, recursive); err != nil {
				return nil, cli.UsageErr("%v", err)
			}
			if len(paths) == 0 {
				return nil, cli.UsageErr("%s holds no *.yaml, *.yml or *.json file", a)
			}
		}
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				return nil, cli.UsageErr("%v", err)
			}
			in, err := lint.ReadInput(p, f)
			f.Close()
			if err != nil {
				return nil, cli.UsageErr("%v", err)
			}
			inputs = append(inputs, in)
		}
	}
	return inputs, nil
}

func manifestFiles(dir string, recursive bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if d.Type().IsRegular() {
				out = append(out, p)
			}
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
