package cli

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// KubectlPlugin is the name under which the binary is a kubectl plugin:
// kubectl runs `kubectl-accel_doctor ARGS...` for `kubectl accel-doctor
// ARGS...` (a dash in the command maps to an underscore in the file name,
// https://kubernetes.io/docs/tasks/extend-kubectl/kubectl-plugins/).
// Installed under that name (by krew: deploy/krew/accel-doctor.yaml, or by
// hand on PATH) it behaves as accel-doctor, and its help and usage lines
// say `kubectl accel-doctor`.
const KubectlPlugin = "kubectl-accel_doctor"

// displayName is how usage lines name the root command: "kubectl
// accel-doctor" when this process was started as the kubectl plugin, which
// is what the user typed.
func displayName() string {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == KubectlPlugin {
		return "kubectl accel-doctor"
	}
	return ""
}

// setDisplayName makes cobra's usage, help and examples say name instead
// of the command's own (its CommandDisplayNameAnnotation, meant for kubectl
// plugins); "" leaves them as they are.
func setDisplayName(root *cobra.Command, name string) {
	if name == "" {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = name
}

// otherArgv0 is argv[0] for another of the binaries when this process
// hands it a command: as the kubectl plugin, the plugin's name, so that
// the other binary's usage lines say `kubectl accel-doctor` too (it finds
// itself by os.Executable, not by argv[0]).
func otherArgv0(path string) string {
	if displayName() != "" {
		return KubectlPlugin
	}
	return path
}
