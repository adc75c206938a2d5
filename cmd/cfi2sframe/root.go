package main

import (
	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/elfread"
)

func newRootCmd() *cobra.Command {
	var fl convertFlags
	root := &cobra.Command{
		Use:   "cfi2sframe IN -o OUT | cfi2sframe COMMAND",
		Short: "Convert DWARF CFI (.eh_frame, .debug_frame) in ELF files into SFrame",
		Long: `cfi2sframe turns the call-frame information already inside ELF files
(.eh_frame, .debug_frame) into SFrame (.sframe, PT_GNU_SFRAME), the compact
stack-trace format read by profilers, the Linux kernel and libsframe.

  cfi2sframe in.elf -o out.elf     add .sframe (V3 unless --sframe-version 2)
  cfi2sframe dump FILE             print an SFrame section like objdump --sframe
  cfi2sframe verify FILE           check .sframe against the CFI at every PC
  cfi2sframe report FILE|DIR...    size and coverage of SFrame against .eh_frame

The output is written to a temporary file and renamed, keeping the input's
mode; on any error nothing is written. A summary (functions converted,
skipped by reason) goes to stderr unless -q.`,
		Example: `  cfi2sframe /usr/bin/ls -o ls.sframe
  cfi2sframe --sframe-version 2 --pcrel libfoo.so -o libfoo.so.new
  cfi2sframe --in-place --force prog
  cfi2sframe --diagnostics json prog -o prog.out > skipped.json`,
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return runConvert(cmd, args, &fl)
		},
	}
	addConvertFlags(root, &fl)
	pf := root.PersistentFlags()
	pf.Int64Var(&elfread.MaxInflate, "max-inflate", elfread.MaxInflate, "inflate a compressed section to at most `BYTES`")
	pf.Int64Var(&elfread.MaxInflateRatio, "max-inflate-ratio", elfread.MaxInflateRatio, "inflate a compressed section to at most `N` times the file's size")
	root.AddCommand(newDumpCmd(), newVerifyCmd(), newReportCmd())
	return root
}
