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
		Long: `cfi2sframe turns the DWARF call-frame information ELF files already
carry (.eh_frame, .debug_frame) into SFrame (.sframe, PT_GNU_SFRAME), the
compact stack-trace format read by profilers, the Linux kernel's user-space
unwinder, glibc's backtrace and GNU libsframe. It is for binaries built
without GNU as --gsframe: old toolchains, clang, prebuilt vendor libraries.
Executables, PIEs and shared libraries for x86-64, AArch64 and s390x get a
.sframe section and a PT_GNU_SFRAME segment; a relocatable object gets
.sframe and .rela.sframe as GNU as --gsframe writes them, for ld to merge;
a static archive has every object in it converted. A Debian package
(.deb) has the ELF files of its data.tar converted and their md5sums
updated, every other byte of its control files kept; each member keeps
its compression (bzip2 too). An RPM
package (.rpm) has the ELF files of its payload converted, compressed
again as it was, and the header's file
digests and sizes and the payload's digests updated, every other tag
kept; signatures over the header are dropped, with a line saying to
sign again with rpmsign --addsign. The result can be read back with
objdump --sframe or cfi2sframe dump.

    cfi2sframe IN -o OUT           write IN with SFrame added to OUT
    cfi2sframe --in-place PATH...  convert files and trees in place
    cfi2sframe -o DIR PATH...      convert into DIR, copying the rest
    cfi2sframe dump FILE...        print .sframe like objdump --sframe
    cfi2sframe verify FILE...      check .sframe against the CFI at every PC
    cfi2sframe report FILE|DIR...  size and coverage of SFrame vs .eh_frame
    cfi2sframe trace -p PID        walk a process's stacks with SFrame alone

SFrame version 3 is written unless --sframe-version 2 (with --pcrel,
PC-relative function starts) or --for READER, which writes what the Linux
kernel, glibc or a libsframe release takes and checks the output against
that reader's rules. A file that already has SFrame data is refused unless
--force replaces it. Functions SFrame cannot describe are left out and
counted by reason; --diagnostics lists them, and notes on the Go
functions whose CFI the function table cannot give in full (go-stack-switch,
go-outermost, go-fp-unknown), which change nothing.

The output is written to a temporary file that takes its place only when
complete: on any error nothing is written. -o OUT keeps the input's mode;
--in-place also keeps its owner, group, setuid/setgid bits and extended
attributes (capabilities, ACLs, SELinux labels), and leaves alone a file
whose content is signed (IMA/EVM, kernel module signature) or whose
metadata it could not keep. -p keeps the access and modification times,
as strip -p does. A summary (functions converted, skipped by reason) goes
to stderr unless -q. A relocatable object without .eh_frame (data only)
is copied unchanged with a note, since GNU as --gsframe writes no .sframe
for it either.

With several paths, a directory, or -o naming an existing directory, every
regular file found (directories walked recursively, symbolic links not
followed), .deb and .rpm files included, is converted on its own, -j N at a time
(default: all CPUs), with a progress bar on a terminal and a summary by
outcome (a package with nothing to convert counts as without CFI):
converted, already have SFrame, without CFI, not ELF, unsupported machine
or type, without a safe layout, signed (left alone), refused (metadata
not kept), failed. --json prints one record per file on stdout. Files with nothing
to do are left byte-identical (with -o DIR, copied). With -o DIR a file
argument F is written to DIR/F's base name and a file under a directory
argument D to DIR/D's base name/its path below D, as cp -r places them;
outputs that would collide (two inputs to one path, an output that is an
input, a directory copied into itself) are refused before anything is
created. DIR receives the whole tree as cp -a copies it: directories,
symbolic links, hard links, devices, FIFOs and sockets, with owners,
modes, extended attributes and times, so that it can be chrooted into.
The walk never follows a symbolic link, and a tree others can write to
cannot lead it outside.

The exit status is 0 on success and 1 on an error. With several files,
only those that failed or were refused count as errors, and a file that
fails does not stop the others. Ctrl-C lets conversions in flight discard
their temporary files and starts no new one; the exit status is then 130.`,
		Example: `  # Add SFrame to a copy of a program, then check and print it
  cfi2sframe /usr/bin/ls -o ls
  cfi2sframe verify ls
  cfi2sframe dump ls | less

  # Convert a shared library in place, replacing any SFrame it has
  cfi2sframe --in-place --force libfoo.so

  # Convert two directory trees in place, 4 files at a time
  cfi2sframe --in-place -j 4 /usr/bin /usr/lib/x86_64-linux-gnu

  # Copy a tree into staged/, converted, with one JSON record per file
  cfi2sframe -o staged/ --json build/ > records.jsonl

  # Write SFrame version 2 with PC-relative function starts
  cfi2sframe --sframe-version 2 --pcrel libfoo.so -o libfoo.so.new

  # Write what the kernel's unwinder takes; list the functions left out
  cfi2sframe --for kernel --diagnostics text prog -o prog.new`,
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
	root.AddCommand(newDumpCmd(), newVerifyCmd(), newReportCmd(), newTraceCmd(), newImageCmd())
	return root
}
