package cli

import "github.com/spf13/cobra"

// extraCommands are the commands of the later layers.
func extraCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{newCgroupCmd(g), newSandboxCmd(g), newContainerCmd(g), newCDICmd(g), newProbeCmd(g), newIOMMUCmd(g), newTopoCmd(g)}
}
