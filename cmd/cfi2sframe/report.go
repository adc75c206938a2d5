package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/report"
)

func newReportCmd() *cobra.Command {
	var asJSON, asCSV bool
	var htmlFile string
	var fromCode bool
	var debugDirs []string
	var against string
	cmd := &cobra.Command{
		Use:   "report [--json|--csv] [--html FILE] [--against FILE] FILE|DIR...",
		Short: "Compare SFrame's size and coverage with .eh_frame, per file and in total",
		Long: `report analyzes every ELF file given or found under the directories given
(non-ELF files are skipped silently; symbolic links inside directories are
not followed) and prints, per file and in total: the bytes of .eh_frame and
.eh_frame_hdr, of the .sframe cfi2sframe would write in V3 and in V2, their
ratio, FDE and FRE counts, FRE-type and data-word-size histograms, the share
of CFI functions and code bytes SFrame describes, what sharing identical FRE
blocks saved, and the functions skipped, by reason. With --against FILE (one
input), the size of that file's .sframe too: GNU's for the same program. Output is an aligned table, or JSON, or CSV; --html also writes a
self-contained page with charts. A progress line is shown on a terminal.
Nothing is written to the files: report converts them in memory.`,
		Example: `  cfi2sframe report /usr/bin/ls /usr/lib/x86_64-linux-gnu/libc.so.6
  cfi2sframe report --html report.html /usr/bin
  cfi2sframe report --csv build/ > sizes.csv`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && asCSV {
				return fmt.Errorf("--json and --csv exclude each other")
			}
			if against != "" && len(args) != 1 {
				return fmt.Errorf("--against compares with one input file, not %d", len(args))
			}
			if htmlFile != "" {
				if _, err := elfwrite.ResolveOutput(htmlFile); err != nil {
					return fmt.Errorf("%s: %w", htmlFile, err)
				}
			}
			stderr := cmd.ErrOrStderr()
			var progress func(done, total int)
			if f, ok := stderr.(*os.File); ok && isTerminal(f) {
				progress = func(done, total int) {
					if done%16 == 0 || done == total {
						const w = 30
						fill := w * done / max(total, 1)
						fmt.Fprintf(stderr, "\r[%-*s] %d/%d files", w, bars(fill), done, total)
						if done == total {
							fmt.Fprint(stderr, "\r\033[K")
						}
					}
				}
			}
			files, errs := report.Collect(args, report.Options{FromCode: fromCode, DebugDirs: debugDirs, Against: against}, progress)
			for _, e := range errs {
				fmt.Fprintf(stderr, "cfi2sframe: %v\n", withHint(e))
			}
			out := cmd.OutOrStdout()
			var err error
			switch {
			case asJSON:
				err = report.WriteJSON(out, files)
			case asCSV:
				err = report.WriteCSV(out, files)
			default:
				err = report.WriteTable(out, files)
			}
			if err != nil {
				return err
			}
			if htmlFile != "" {
				if err := elfwrite.WriteFileAtomic(cmd.Context(), htmlFile, 0o644, func(f *os.File) error { return report.WriteHTML(f, files) }); err != nil {
					return err
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("%d failures (listed above)", len(errs))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&asCSV, "csv", false, "print CSV")
	cmd.Flags().StringVar(&htmlFile, "html", "", "also write a self-contained HTML page with charts to `FILE`")
	cmd.Flags().BoolVar(&fromCode, "from-code", false, "convert as --from-code does: the code without CFI described from its instructions, counted apart (from-code functions and bytes)")
	cmd.Flags().StringVar(&against, "against", "", "also give the size of the .sframe section of `FILE` (the same program built with as --gsframe, say) next to ours")
	cmd.Flags().StringArrayVar(&debugDirs, "debug-file-directory", nil, "--from-code: look separate debug files up by build-id under `DIR`/.build-id/ (repeatable; default /usr/lib/debug)")
	return cmd
}

func bars(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '='
	}
	return string(b)
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
