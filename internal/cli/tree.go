package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// Tree is the whole command tree of a binary (ext: nil for accel-doctor,
// else accel-doctor-kubelet's or accel-doctor-kube's Extension), built as
// a run builds it, for tests that walk every command; nil writers discard.
func Tree(ext *Extension, stdout, stderr io.Writer) *cobra.Command {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	root := newRoot(&globals{stdout: stdout, stderr: stderr, ext: ext})
	root.InitDefaultVersionFlag() // as a run adds it
	root.SetOut(stdout)
	root.SetErr(stderr)
	setFlagOutput(root, stderr)
	return root
}
