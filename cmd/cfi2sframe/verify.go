package main

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/callsite"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/verify"
)

func newVerifyCmd() *cobra.Command {
	var asJSON, quiet bool
	var forReader string
	cmd := &cobra.Command{
		Use:   "verify [--json] [--for READER] FILE...",
		Short: "Check that a file's .sframe agrees with its CFI at every PC",
		Long: `verify compares, for every PC of every function the .sframe section
describes, the SFrame rule (CFA, return address, frame pointer, mangled RA,
outermost frame) with what the file's .eh_frame/.debug_frame says there.
Findings are printed as "file: func+off [range): what: sframe says X, CFI
says Y".

In a Go program, where .gopclntab and .eh_frame or .debug_frame both
describe a function, the function is checked against the section
cfi2sframe converts it from (.eh_frame over .gopclntab, .gopclntab over
.debug_frame): a line counts each pair, and the first functions where
.eh_frame or .debug_frame wins over .gopclntab are named (every Go
function of a build with DWARF is in both .gopclntab and .debug_frame:
those are only counted).

Every function the CFI describes must be in .sframe too, unless SFrame
cannot describe it: the decision cfi2sframe itself makes when converting,
with the reason code --diagnostics gives (cfa-expression, overlap, ...;
outermost for a function whose return address is undefined throughout,
which --for glibc leaves out). A function missing for any other reason
makes the exit status non-zero. An empty or SHT_NOBITS .sframe describes
nothing. The first 10 functions of either kind are named ("and N more"
after them); the summary line and --json count them all. .sframe ranges
no CFI covers (PLTs described from their instructions) are listed and do
not count against the file.

Functions no CFI covers that cfi2sframe --from-code described from their
machine code (x86-64, AArch64) are checked against their instructions
instead: each instruction is stepped from the rule at it, and the rule
wherever it can go next (the next instruction, a branch or jump target,
a jump table's entries) must be the one that follows; a return or a
jump out of the described code must leave the frame gone, and a
function's first rule must be the one at an entry. A rule that does not
follow ("from-code": its PC, what differs, the rule and what the
instructions give) makes the exit status non-zero; the summary line
counts the ranges checked so.

A linked file's layout is checked too, and a problem with it makes the
exit status non-zero: PT_LOADs that overlap or are out of order, a
PT_PHDR not at e_phoff inside the first PT_LOAD, a PT_GNU_SFRAME that
holds no bytes, lies past the end of the file or outside every PT_LOAD,
or describes other bytes than the .sframe section, a .sframe without
PT_GNU_SFRAME, an allocated section no PT_LOAD maps. These are what
strip, objcopy, eu-strip and patchelf leave when they break a file. The
.sframe compared with the CFI is the one a loader reads, through
PT_GNU_SFRAME; when the kernel would find none there (or a section it
would refuse), the .sframe section is compared instead and the layout
problem says so.

With --for READER, verify instead checks the section against the rules
by which that reader accepts a section and looks PCs up in it: kernel
(the Linux kernel's SFrame user-space unwinder, version 3 only), glibc
(glibc's backtrace built with --enable-sframe, version 2 only), libsframe
(GNU libsframe 2.47.50) or libsframe-2.44. It prints the first violation
with its FDE and FRE index and PC, and the count of the others; any
violation makes the exit status non-zero.`,
		Example: `  cfi2sframe verify prog libfoo.so
  cfi2sframe verify --json -q prog > findings.json
  cfi2sframe verify --for kernel prog`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if forReader != "" {
				return runVerifyFor(cmd, forReader, args, asJSON)
			}
			bad := 0
			var all []fileResult
			for _, name := range args {
				res, err := verify.CheckFile(name)
				if err != nil {
					return err
				}
				if !res.Agree {
					bad++
				}
				if asJSON {
					all = append(all, fileResult{name, res})
					continue
				}
				printVerify(cmd, name, res, quiet)
			}
			if asJSON {
				if err := printJSON(cmd, all); err != nil {
					return err
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d files disagree with their CFI, lack functions it describes or have a broken layout", bad, len(args))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as JSON")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only what fails the check: disagreements, missing functions, rules that do not follow from the code, layout problems")
	cmd.Flags().StringVar(&forReader, "for", "", "check the acceptance rules of `READER` (kernel, glibc, libsframe, libsframe-2.44) instead of the CFI")
	return cmd
}

// printVerify prints one file's findings (with -q only those that fail
// it), "and N more" after the listed missing and skipped functions, and
// the summary line on stderr.
func printVerify(cmd *cobra.Command, name string, res *verify.Result, quiet bool) {
	out := cmd.OutOrStdout()
	counts := map[verify.Kind]int{}
	for _, f := range res.Findings {
		counts[f.Kind]++
		if quiet && f.Kind != verify.Disagree && f.Kind != verify.Missing && f.Kind != verify.FromCode {
			continue
		}
		fmt.Fprintf(out, "%s: %s\n", name, f)
	}
	skipped := 0
	var reasons []string
	for r, n := range res.Skipped {
		skipped += n
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(reasons)
	if n := res.Missing - counts[verify.Missing]; n > 0 {
		fmt.Fprintf(out, "%s: and %d more CFI functions not in .sframe\n", name, n)
	}
	if n := skipped - counts[verify.Skipped]; n > 0 && !quiet {
		fmt.Fprintf(out, "%s: and %d more CFI functions not in .sframe, skipped as cfi2sframe skips them\n", name, n)
	}
	if !quiet {
		printShared(out, name, res.Shared)
	}
	for _, l := range res.Layout {
		fmt.Fprintf(out, "%s: %s\n", name, l)
	}
	why := ""
	if len(reasons) > 0 {
		why = " (" + strings.Join(reasons, ", ") + ")"
	}
	marks := ""
	if n := counts[verify.SignalMark]; n > 0 {
		marks = fmt.Sprintf(", %d signal frames marked as such", n)
	}
	if n := res.ReturnAddresses; n > 0 {
		marks += fmt.Sprintf(", %d return addresses after a function's last call checked at the call", n)
	}
	if res.FromCode > 0 {
		marks += fmt.Sprintf(", %d ranges checked against their instructions (%d rules that do not follow", res.FromCode, counts[verify.FromCode])
		if res.Unproven > 0 {
			marks += fmt.Sprintf("; %d the rows alone cannot re-derive, not failures", res.Unproven)
		}
		marks += ")"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d functions, %d bytes checked: %d disagreements, %d ranges without CFI%s, %d CFI functions missing from .sframe, %d skipped as cfi2sframe skips them%s, %d layout problems\n",
		name, res.Functions, res.Checked, counts[verify.Disagree], counts[verify.NoCFI], marks, res.Missing, skipped, why, len(res.Layout))
}

// printShared prints, for each pair of sections that both describe
// functions (a Go program's table and .eh_frame or .debug_frame), how many
// and which one they were checked against.
func printShared(out io.Writer, name string, shared map[string]int) {
	pairs := slices.Sorted(maps.Keys(shared))
	for _, p := range pairs {
		used, unused, _ := strings.Cut(p, " over ")
		fns := "functions"
		if shared[p] == 1 {
			fns = "function"
		}
		fmt.Fprintf(out, "%s: %d %s described by both %s and %s: checked against %s, which cfi2sframe converts them from\n", name, shared[p], fns, used, unused, used)
	}
}

func runVerifyFor(cmd *cobra.Command, name string, args []string, asJSON bool) error {
	r, err := acceptance.Parse(name)
	if err != nil {
		return err
	}
	bad := 0
	var all []readerResult
	for _, file := range args {
		in, release, err := readerInput(file)
		if err != nil {
			return err
		}
		res := acceptance.Check(r, in)
		release()
		if !res.OK() {
			bad++
		}
		if asJSON {
			all = append(all, readerResult{file, res})
			continue
		}
		out := cmd.OutOrStdout()
		if v := res.First(); v != nil {
			more := ""
			if res.Total > 1 {
				more = fmt.Sprintf(" (and %d more)", res.Total-1)
			}
			fmt.Fprintf(out, "%s: %s%s\n", file, v, more)
		} else {
			fmt.Fprintf(out, "%s: %s: ok (%d functions, %d FREs)\n", file, r, res.Functions, res.FREs)
		}
		if res.Registration == acceptance.RegisteredBySyscall {
			fmt.Fprintf(out, "%s: note: a shared object: the kernel reads its .sframe once the dynamic loader (or a preloaded library) registers it with sframe_register(); at exec it registers only the program's and its interpreter's\n", file)
		}
		printLimits(out, file, res)
	}
	if asJSON {
		if err := printJSON(cmd, all); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d files break %s's rules", bad, len(args), r)
	}
	return nil
}

// printLimits says, per kind, how many of the reader's limits the file
// meets, and the first of each: they do not fail the check.
func printLimits(out io.Writer, file string, res *acceptance.Result) {
	what := map[acceptance.Kind]string{
		acceptance.InnermostOnly: "%[1]d rules in %[2]d %[3]s are used only in the interrupted frame (a walk reaching them as a caller stops)",
		acceptance.CallerLookup:  "%[2]d %[3]s end with a call, whose return address the kernel looks up as it is: in the next function or in padding (a walk through the call gets a wrong caller or falls back to the frame pointer)",
	}
	for _, k := range []acceptance.Kind{acceptance.InnermostOnly, acceptance.CallerLookup} {
		n := res.LimitKinds[k]
		if n.Rules == 0 {
			continue
		}
		fns := "functions"
		if n.Functions == 1 {
			fns = "function"
		}
		first := ""
		for _, v := range res.Limits {
			if v.Kind == k {
				first = "; the first: " + v.String()
				break
			}
		}
		fmt.Fprintf(out, "%s: note: %s%s\n", file, fmt.Sprintf(what[k], n.Rules, n.Functions, fns), first)
	}
}

type readerResult struct {
	File string `json:"file"`
	*acceptance.Result
}

// readerInput reads a linked file's .sframe and executable segments, and
// gives the checks its code; release unmaps the file once they are done.
func readerInput(name string) (in acceptance.Input, release func(), err error) {
	data, err := openMapped(name)
	if err != nil {
		return acceptance.Input{}, nil, err
	}
	f, err := elfread.NewFileBytes(data.Data, name)
	if err == nil {
		var es *elfread.Section
		if es, err = f.LoaderSFrame(); err == nil {
			// A copy: the section outlives the mapping in the result.
			in = acceptance.Input{Section: append([]byte(nil), es.Data...), Addr: es.Addr, Unfollowed: es.Fallback}
		}
	}
	if err != nil {
		data.Close()
		return acceptance.Input{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	if f.ELF.Type != elf.ET_REL {
		in.Exec = acceptance.ExecRanges(f.ELF)
		in.Loads = acceptance.LoadRanges(f.ELF)
		in.Shared = acceptance.SharedObject(f.ELF)
		in.CallEnds = callsite.New(f.ELF, data.Data).EndsWithCall
	}
	return in, func() { data.Close() }, nil
}

type fileResult struct {
	File string `json:"file"`
	*verify.Result
}

// printJSON writes v to the command's standard output as indented JSON.
func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
