package main

import (
	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
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
  cfi2sframe --in-place PATH...    convert files and directory trees in place
  cfi2sframe -o DIR PATH...        write the results (and unchanged copies) into DIR
  cfi2sframe dump FILE             print an SFrame section like objdump --sframe
  cfi2sframe verify FILE           check .sframe against the CFI at every PC
  cfi2sframe report FILE|DIR...    size and coverage of SFrame against .eh_frame

The output is written to a temporary file and renamed, keeping the input's
mode; on any error nothing is written. A summary (functions converted,
skipped by reason) goes to stderr unless -q. A relocatable object without
.eh_frame (data only) is copied unchanged with a note, as as --gsframe
writes no .sframe for it.

With several paths or a directory, every regular file found (directories
walked recursively, symbolic links not followed) is converted on its own,
-j N at a time (default: all CPUs), with a progress bar on a terminal and a
summary by outcome: converted, already have SFrame, without CFI, not ELF,
unsupported machine or type, failed. --json prints one record per file.
Files with nothing to do are left byte-identical (with -o DIR, copied).
With -o DIR a file argument F is written to DIR/F's base name and a file
under a directory argument D to DIR/D's base name/its path below D, as
cp -r places them; outputs that would collide (two inputs to one path, an
output that is an input, a directory copied into itself) are refused before
anything is created. The exit status is 0 when no file failed; a file that
fails does not stop the others; Ctrl-C lets conversions in flight discard
their temporary files and starts no new one (exit status 130).`,
		Example: `  cfi2sframe /usr/bin/ls -o ls.sframe
  cfi2sframe --sframe-version 2 --pcrel libfoo.so -o libfoo.so.new
  cfi2sframe --in-place --force prog
  cfi2sframe --in-place -j 4 /usr/bin /usr/lib/x86_64-linux-gnu
  cfi2sframe -o staged/ --json build/ > records.jsonl
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
	root.Version = versionString()
	root.SetVersionTemplate("{{.Version}}")
	addConvertFlags(root, &fl)
	pf := root.PersistentFlags()
	pf.Int64Var(&elfread.MaxInflate, "max-inflate", elfread.MaxInflate, "inflate a compressed section to at most `BYTES`")
	pf.Int64Var(&elfread.MaxInflateRatio, "max-inflate-ratio", elfread.MaxInflateRatio, "inflate a compressed section to at most `N` times the file's size")
	root.AddCommand(newDumpCmd(), newVerifyCmd(), newReportCmd(), newTraceCmd())
	return root
}
