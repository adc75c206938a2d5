package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/trace"
)

func newTraceCmd() *cobra.Command {
	var (
		opt       trace.Options
		pprofOut  string
		foldedOut string
		check     string
		noConvert bool
	)
	cmd := &cobra.Command{
		Use:   "trace [-F HZ] [-d DURATION] [--pprof FILE] [--folded FILE] [--check dwarf] [--no-convert] {-p PID | -- PROG ARGS...}",
		Short: "Sample a process's stacks with ptrace and walk them with SFrame alone",
		Long: `trace samples every thread of a process HZ times a second with ptrace
(seize, interrupt, read the registers, resume) and walks each stack with
the .sframe sections of the ELF files the process maps (/proc/PID/maps,
files opened through /proc/PID/map_files or their paths). It writes a
pprof profile with symbolized locations (--pprof), folded stacks for flame
graphs (--folded) and prints a summary: samples, the share walked to the
outermost frame (_start or a thread's start function), where and why the
other walks stopped, and the cost per sample.

--check dwarf also steps every frame with the file's DWARF CFI and reports
the frame-by-frame agreement, listing each disagreement with its object,
PC and both answers.

With -p PID it samples a running process for DURATION (default: until it
exits or Ctrl-C); with -- PROG ARGS it starts the program and traces it to
its exit (or for DURATION, then lets it run on). Ctrl-C or SIGTERM
detaches from every thread, leaving the process running (or stopped, if
job control had stopped it). x86-64 only.

An ELF file mapped without .sframe is walked with SFrame converted from
its CFI in memory (the same conversion cfi2sframe IN -o OUT writes), once
per file, when trace attaches or when a walk first reaches a file mapped
later; the summary lists each with the section's size and the time it
took. Nothing is written. --no-convert walks only the files that have
.sframe (a walk stops at the others). The vDSO, which no file holds, is
converted either way (unless the kernel built it with .sframe).`,
		Example: `  cfi2sframe trace -p 1234 -d 10s --pprof cpu.pb.gz
  cfi2sframe trace --check dwarf --folded out.folded -- ./prog args
  LD_LIBRARY_PATH=converted cfi2sframe trace --no-convert -- ./prog args`,
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 0 {
				return fmt.Errorf("unexpected argument %q before --", args[0])
			} else if dash == 0 {
				opt.Argv = args
			} else if len(args) > 0 {
				return fmt.Errorf("give the program after --: cfi2sframe trace -- %s", args[0])
			}
			if (opt.PID != 0) == (len(opt.Argv) > 0) {
				return errors.New("give one of -p PID and -- PROG ARGS")
			}
			switch check {
			case "":
			case "dwarf":
				opt.Dwarf = true
			default:
				return fmt.Errorf("--check %q: only dwarf is known", check)
			}
			if opt.Duration < 0 {
				return errors.New("negative duration")
			}
			// Check the outputs can be written before sampling.
			for _, out := range []string{pprofOut, foldedOut} {
				if out == "" {
					continue
				}
				if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
					return fmt.Errorf("%s: no such directory", filepath.Dir(out))
				}
			}
			// Objects without .sframe (the vDSO always, files unless
			// --no-convert) are converted in memory as the command
			// converts files: signal trampolines get a signal FDE, and
			// a file whose program headers cannot grow in place is
			// planned with the layout --fragile-layout writes, which only
			// decides the section's address here.
			opt.Convert = convertInMemory
			opt.ConvertFiles = !noConvert
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := trace.Run(ctx, opt)
			if err != nil {
				return err
			}
			res.WriteSummary(cmd.ErrOrStderr())
			if pprofOut != "" {
				p := res.Profile(opt.Freq, res.Start, res.Elapsed)
				if err := writeOutput(cmd.Context(), pprofOut, func(w io.Writer) error { return p.Write(w) }); err != nil {
					return err
				}
			}
			if foldedOut != "" {
				if err := writeOutput(cmd.Context(), foldedOut, func(w io.Writer) error { return res.WriteFolded(w) }); err != nil {
					return err
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&opt.Freq, "freq", "F", 99, "sample each thread `HZ` times a second")
	fl.DurationVarP(&opt.Duration, "duration", "d", 0, "sample for `DURATION` (0: until the process exits or Ctrl-C)")
	fl.IntVarP(&opt.PID, "pid", "p", 0, "sample the running process `PID`")
	fl.StringVar(&pprofOut, "pprof", "", "write a pprof profile to `FILE`")
	fl.StringVar(&foldedOut, "folded", "", "write folded stacks (flame-graph input) to `FILE`")
	fl.StringVar(&check, "check", "", "also walk every frame with `dwarf` CFI and report agreement")
	fl.BoolVar(&noConvert, "no-convert", false, "walk only files that have .sframe; do not convert the CFI of the others in memory (the vDSO still is)")
	return cmd
}

// convertInMemory is trace's Converter: a linked file converted in memory
// as the command converts files (convert.NewFile, Convert), with signal
// FDEs and, for a file whose program headers cannot grow in place, the
// layout --fragile-layout writes (which only decides the section's
// address here). Relocatable objects and archives are refused: their
// .sframe means nothing without the relocations in the file. Its errors
// do not name the file, which trace names beside them.
func convertInMemory(name string, r io.ReaderAt, size int64) ([]byte, uint64, error) {
	if ef, err := elf.NewFile(r); err == nil && ef.Type == elf.ET_REL {
		return nil, 0, errors.New("relocatable object: its .sframe needs its relocations")
	}
	res, err := sframeInMemory(name, r, size)
	if err == nil && (res.Members > 0 || res.Unchanged != "") {
		err = errors.New("static archive: its members' .sframe need their relocations")
	}
	var ce *convert.Error
	if errors.As(err, &ce) {
		err = ce.Err
	}
	if err != nil {
		return nil, 0, err
	}
	return res.SFrame, res.Addr, nil
}

// sframeInMemory converts the size bytes of r in memory, writing
// nothing.
func sframeInMemory(name string, r io.ReaderAt, size int64) (*convert.Result, error) {
	f, err := convert.NewFile(name, r, size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Convert(convert.Options{FragileLayout: true})
}

// writeOutput writes a profile file through the one atomic writer every
// command uses (elfwrite.WriteFileAtomic): a temporary file in its
// directory renamed into place only when write succeeds, a symbolic link
// written through, a device or FIFO refused.
func writeOutput(ctx context.Context, name string, write func(io.Writer) error) error {
	return elfwrite.WriteFileAtomic(ctx, name, 0o644, func(f *os.File) error { return write(f) })
}
