package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "cfi2sframe",
		Short: "Convert DWARF CFI (.eh_frame, .debug_frame) in ELF files into SFrame",
		Long: `cfi2sframe turns the call-frame information already inside ELF files
(.eh_frame, .debug_frame) into SFrame (.sframe, PT_GNU_SFRAME), the compact
stack-trace format read by profilers, the Linux kernel and libsframe.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDumpCmd())
	return root
}
