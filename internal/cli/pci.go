package cli

import "github.com/spf13/cobra"

func newPCICmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pci", Short: "The PCI inventory as a table or JSON"}
	return cmd
}
