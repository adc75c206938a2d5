package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/deb"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/rpm"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

type convertFlags struct {
	output      string
	inPlace     bool
	version     uint8
	pcrel       bool
	sigFrames   bool
	fragile     bool
	shared      bool
	fromCode    bool
	debugDirs   []string
	force       bool
	quiet       bool
	diagnostics string
	jobs        int
	json        bool
	forReader   string
	dates       bool
	// maxExpansion bounds a compressed package member or image layer
	// (layer.Bounds.Expansion; 0: no limit).
	maxExpansion int64
}

func addConvertFlags(cmd *cobra.Command, fl *convertFlags) {
	f := cmd.Flags()
	f.StringVarP(&fl.output, "output", "o", "", "write the converted file to `FILE` (several inputs or a directory: into directory FILE)")
	f.BoolVar(&fl.inPlace, "in-place", false, "replace the input files (atomically) instead of writing -o")
	addConversionFlags(cmd, fl, "files")
	f.StringVar(&fl.diagnostics, "diagnostics", "", "print every skipped function, and notes on Go functions: `text` (stderr) or json (stdout); one input file only")
	f.BoolVar(&fl.json, "json", false, "several inputs: print one JSON record per file on stdout")
	f.BoolVarP(&fl.dates, "preserve-dates", "p", false, "give converted files their input's access and modification times (files copied unchanged with -o DIR keep them always)")
}

// addConversionFlags adds the flags that choose how each file is
// converted, shared by the file command and the image command; what
// says what -j runs at once.
func addConversionFlags(cmd *cobra.Command, fl *convertFlags, what string) {
	f := cmd.Flags()
	f.Uint8Var(&fl.version, "sframe-version", 3, "SFrame version to write: 3 or 2")
	f.BoolVar(&fl.pcrel, "pcrel", false, "version 2: set SFRAME_F_FDE_FUNC_START_PCREL (start addresses relative to the field)")
	f.BoolVar(&fl.force, "force", false, "replace SFrame data the input already has")
	f.BoolVar(&fl.sigFrames, "signal-frames", true, "version 3: give signal trampolines whose CFI cannot be described a signal FDE whose one FRE says RA undefined, so unwinders that know signal frames continue through the kernel's signal frame and others stop there instead of guessing (verify reports these against the CFI); =false leaves them without an FDE, as before")
	f.BoolVar(&fl.shared, "shared-blocks", true, "linked little-endian files: functions whose FRE blocks are the same point at one copy (a smaller section every reader in the file's byte order takes); =false writes one block per function, as GNU as and ld do")
	f.BoolVar(&fl.fragile, "fragile-layout", false, "for a file where the program header table cannot grow in place, move it to the end of the file (with a warning) instead of refusing; strip, objcopy before 2.44, eu-strip and patchelf may break such files")
	f.BoolVar(&fl.fromCode, "from-code", false, "describe the code that no CFI and no Go table describes from its instructions (a flow analysis per function, as objtool does); what cannot be proven is left out, with a code-* reason in --diagnostics")
	f.StringArrayVar(&fl.debugDirs, "debug-file-directory", nil, "--from-code: look separate debug files up by build-id under `DIR`/.build-id/ (repeatable; default /usr/lib/debug), for the function starts of stripped files")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "print nothing but errors")
	f.StringVar(&fl.forReader, "for", "", "write what `READER` takes (kernel, glibc, libsframe, libsframe-2.44: version, flags, outermost frames) and check the output against its rules")
	f.IntVarP(&fl.jobs, "jobs", "j", 0, "several inputs: convert `N` "+what+" at once (default: all CPUs)")
	fl.maxExpansion = layer.DefaultMaxExpansion
	f.Var(countFlag{&fl.maxExpansion}, "max-expansion", "let a Debian package's compressed member or an image's layer expand to at most 64 MiB + `N` times its compressed size (0: no limit); an xz dictionary or zstd window over 128 MiB, or more than 1 MiB after a tar's end, is refused whatever N")
}

// bounds is what --max-expansion allows a compressed stream.
func (fl *convertFlags) bounds() layer.Bounds { return layer.Bounds{Expansion: fl.maxExpansion} }

// countFlag is an int64 flag that is not negative.
type countFlag struct{ p *int64 }

func (f countFlag) String() string { return strconv.FormatInt(*f.p, 10) }
func (f countFlag) Type() string   { return "int" }

func (f countFlag) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil || v < 0 {
		return errors.New("want 0 or more")
	}
	*f.p = v
	return nil
}

// conversionOptions are the convert.Options the flags ask for.
func conversionOptions(cmd *cobra.Command, fl *convertFlags) (convert.Options, error) {
	opts := convert.Options{Version: fl.version, PCRel: fl.pcrel}
	if fl.forReader != "" {
		if cmd.Flags().Changed("sframe-version") || cmd.Flags().Changed("pcrel") {
			return opts, errors.New("--for chooses the SFrame version and flags; drop --sframe-version/--pcrel")
		}
		r, err := acceptance.Parse(fl.forReader)
		if err != nil {
			return opts, err
		}
		if opts, err = convert.ForReader(convert.Reader(r)); err != nil {
			return opts, err
		}
	}
	opts.Force = fl.force
	opts.NoSignalFrames = !fl.sigFrames
	opts.FragileLayout = fl.fragile
	opts.PlainLayout = !fl.shared
	opts.FromCode, opts.DebugDirs = fl.fromCode, fl.debugDirs
	if err := opts.Validate(); err != nil {
		return opts, flagError(err)
	}
	return opts, nil
}

// runConvert is the root command: cfi2sframe IN -o OUT, or the tree form
// cfi2sframe --in-place|-o DIR PATH... when several paths or a directory
// are given.
func runConvert(cmd *cobra.Command, args []string, fl *convertFlags) error {
	switch {
	case fl.inPlace && fl.output != "":
		return errors.New("--in-place and -o exclude each other")
	case !fl.inPlace && fl.output == "":
		return errors.New("no output: give -o FILE or --in-place")
	}
	switch fl.diagnostics {
	case "", "text", "json":
	default:
		return fmt.Errorf("--diagnostics %q: want text or json", fl.diagnostics)
	}
	// The tree form: several paths, a directory, or -o naming an existing
	// directory (then IN goes to DIR/base(IN), as cp would put it).
	treeMode := len(args) > 1
	if len(args) == 1 {
		if st, err := os.Lstat(args[0]); err == nil && st.IsDir() {
			treeMode = true
		}
		if st, err := os.Stat(fl.output); fl.output != "" && err == nil && st.IsDir() {
			treeMode = true
		}
	}
	opts, err := conversionOptions(cmd, fl)
	if err != nil {
		return err
	}
	if treeMode {
		if fl.diagnostics != "" {
			return errors.New("--diagnostics applies to one input file; use --json for several")
		}
		return runTree(cmd, args, fl, opts)
	}
	if fl.json {
		return errors.New("--json applies to several inputs or a directory; use --diagnostics json for one file")
	}
	return runOne(cmd, args[0], fl, opts)
}

func runOne(cmd *cobra.Command, name string, fl *convertFlags, opts convert.Options) error {
	out := fl.output
	if fl.inPlace {
		out = name
	}
	// Ctrl-C is held off until the output is renamed or discarded, so
	// that no temporary file is left behind.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	interrupted := func(err error) error {
		if ctx.Err() != nil {
			return &exitError{130, fmt.Sprintf("%s: interrupted; nothing written", name)}
		}
		return err
	}
	// The metadata is read before the input is mapped, which updates its
	// access time.
	fh, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	meta, err := fsmeta.Read(fh)
	if err != nil {
		fh.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	in, err := mapped.OpenFile(fh, name)
	if err != nil {
		return &convert.Error{File: name, Err: err}
	}
	defer in.Close()
	if err := checkOutput(in.Info, out, fl.inPlace); err != nil {
		return err
	}
	// A Debian package is an ar archive too: it is told apart first.
	if deb.Is(in.Data) {
		if err := runPackage(ctx, cmd, in, meta, out, fl, opts, debKind); err != nil {
			return interrupted(withHint(err))
		}
		return nil
	}
	if rpm.Is(in.Data) {
		if err := runPackage(ctx, cmd, in, meta, out, fl, opts, rpmKind); err != nil {
			return interrupted(withHint(err))
		}
		return nil
	}
	cf, err := convert.NewFile(name, in.File(), in.Size)
	if err != nil {
		return err
	}
	defer cf.Close()
	var res *convert.Result
	if fl.inPlace {
		res, err = convertInPlace(ctx, in, cf, meta, opts, fl.dates)
	} else {
		// Converted and written at once: the unchanged bytes are copied
		// while the CFI is translated. An unchanged input is copied.
		res, err = cf.WriteFile(ctx, opts, out, in.Mode)
	}
	if err != nil {
		return interrupted(withHint(err))
	}
	stderr := cmd.ErrOrStderr()
	if res.Unchanged != "" {
		if !fl.quiet {
			fmt.Fprintf(stderr, "%s: %s\n", name, res.Unchanged)
		}
		return nil
	}
	switch fl.diagnostics {
	case "text":
		for _, e := range res.CFIErrors {
			fmt.Fprintf(stderr, "%s: %v\n", name, e)
		}
		for _, d := range res.Translate.Diags {
			fmt.Fprintf(stderr, "%s: %s\n", name, d)
		}
	case "json":
		errs := make([]string, len(res.CFIErrors))
		for i, e := range res.CFIErrors {
			errs[i] = e.Error()
		}
		if err := printJSON(cmd, struct {
			File        string   `json:"file"`
			CFIErrors   []string `json:"cfi_errors"`
			Diagnostics any      `json:"diagnostics"`
		}{name, errs, res.Translate.Diags}); err != nil {
			return err
		}
	}
	if !fl.quiet {
		where := fmt.Sprintf(" at %#x", res.Addr)
		switch {
		case res.Members > 0:
			where = fmt.Sprintf(" in %d archive members", res.Members)
		case res.Addr == 0:
			where = " (relocatable object)"
		}
		fmt.Fprintf(stderr, "%s: %s; .sframe v%d, %d bytes%s\n", out, res.Translate.Summary(), opts.Version, len(res.SFrame), where)
		if n := len(res.CFIErrors); n > 0 {
			fmt.Fprintf(stderr, "%s: %d malformed CFI records skipped (--diagnostics text lists them)\n", name, n)
		}
	}
	if res.Warning != "" {
		fmt.Fprintf(stderr, "%s: warning: %s\n", out, res.Warning)
	}
	if res.Violations > 0 {
		// Only lookups of --for's reader failing at some PCs get here
		// (an output the reader drops whole is refused, with
		// convert.ErrUnsupported): written all the same, as a trace may
		// never reach those PCs (verify --for lists them).
		fmt.Fprintf(stderr, "%s: warning: %s (%d violations of %s's rules; verify --for %s lists them)\n", out, res.FirstViolation, res.Violations, fl.forReader, fl.forReader)
	}
	return nil
}

// convertInPlace converts in and replaces its file with the result,
// which keeps everything but its bytes (owner, group, mode bits,
// extended attributes; with dates its times): a file whose metadata
// cannot be kept, or that carries a signature over its content, is left
// as it was, with an error saying why.
func convertInPlace(ctx context.Context, in *mapped.File, cf *convert.File, meta *fsmeta.Meta, opts convert.Options, dates bool) (*convert.Result, error) {
	d, err := inPlaceDest(in, meta, dates)
	if err != nil {
		return nil, err
	}
	defer d.Dir.Close()
	res, err := cf.Convert(opts)
	if err != nil || res.Unchanged != "" {
		return res, err
	}
	return res, writeInPlace(ctx, d, func(f *os.File) error { return res.Write(f) })
}

// inPlaceDest is where the file in is replaced by its conversion, which
// gets in's metadata (meta; with dates its times too). A file whose
// content is signed, or whose metadata could not be kept, is refused.
// The caller closes its Dir.
func inPlaceDest(in *mapped.File, meta *fsmeta.Meta, dates bool) (elfwrite.Dest, error) {
	if why := fsmeta.Signature(meta, in.Data); why != "" {
		return elfwrite.Dest{}, fmt.Errorf("%s: %s; left alone", in.Name, why)
	}
	if why := meta.Sealed(); why != "" {
		return elfwrite.Dest{}, fmt.Errorf("%s: %s; left as it was", in.Name, why)
	}
	d, err := elfwrite.OpenDest(in.Name, in.Mode)
	if err != nil {
		return elfwrite.Dest{}, err
	}
	d.Finish = func(f *os.File) error {
		_, err := fsmeta.Apply(f, meta, fsmeta.Options{Times: dates})
		return err
	}
	d.Replaces = &elfwrite.FileID{Dev: in.Dev, Ino: in.Ino}
	return d, nil
}

// writeInPlace writes the file replacing d's (inPlaceDest) with write.
func writeInPlace(ctx context.Context, d elfwrite.Dest, write func(f *os.File) error) error {
	err := elfwrite.WriteAtomic(ctx, d, write)
	var lost *fsmeta.LostError
	if errors.As(err, &lost) {
		err = fmt.Errorf("%w; left as it was", err)
	}
	return err
}

// exitError carries an exit status other than 1.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func runTree(cmd *cobra.Command, args []string, fl *convertFlags, opts convert.Options) error {
	stderr, stdout := cmd.ErrOrStderr(), cmd.OutOrStdout()
	// tree.Run creates the output directory itself, once it has found
	// that every output can be written (no two inputs to one path, no
	// output that is an input, ...), and removes it again if nothing
	// succeeds: a refused run creates nothing.
	to := tree.Options{Convert: opts, Jobs: fl.jobs, OutDir: fl.output, PreserveDates: fl.dates, Packages: tree.Packagers{deb.Packages{Bounds: fl.bounds()}, rpm.Packages{Bounds: fl.bounds()}}}
	enc := json.NewEncoder(stdout)
	tty := false
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		tty = true
	}
	to.Record = func(r tree.Record) {
		r.Error += hint(r.Err)
		if tty {
			fmt.Fprint(stderr, "\r\033[K")
		}
		if fl.json {
			_ = enc.Encode(r)
		}
		switch {
		case r.Outcome == tree.Failed || r.Outcome == tree.Refused:
			fmt.Fprintf(stderr, "cfi2sframe: %s\n", r.Error)
		case r.Outcome == tree.Signed && !fl.quiet:
			fmt.Fprintf(stderr, "cfi2sframe: left alone: %s\n", r.Error)
		case len(r.NotKept) > 0 && !fl.quiet:
			fmt.Fprintf(stderr, "cfi2sframe: %s: its copy %s could not keep its %s (not permitted)\n", r.File, r.Output, strings.Join(r.NotKept, ", "))
		case r.Outcome == tree.NoLayout && !fl.quiet:
			fmt.Fprintf(stderr, "cfi2sframe: left alone: %s\n", r.Error)
		case r.Warning != "":
			fmt.Fprintf(stderr, "cfi2sframe: %s: warning: %s\n", r.File, r.Warning)
		}
	}
	if tty && !fl.quiet {
		to.Progress = func(done, total int) {
			const w = 30
			fill := w * done / max(total, 1)
			fmt.Fprintf(stderr, "\r[%-*s] %d/%d files", w, bars(fill), done, total)
			if done == total {
				fmt.Fprint(stderr, "\r\033[K")
			}
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := tree.Run(ctx, args, to)
	if err != nil {
		return err
	}
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if !fl.quiet || !sum.OK() {
		fmt.Fprintf(stderr, "%d files:", sum.Files)
		for i, oc := range tree.Outcomes {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(stderr, "%s %d %s", sep, sum.Counts[oc], outcomeText[oc])
		}
		if sum.Special > 0 {
			fmt.Fprintf(stderr, "; %d symbolic links or special files left alone", sum.Special)
		}
		fmt.Fprintln(stderr)
		if sum.CodeBytes > 0 {
			fmt.Fprintf(stderr, "SFrame describes %.1f%% of the converted programs' and libraries' code (%d of %d bytes of executable sections)\n",
				100*float64(sum.CoveredBytes)/float64(sum.CodeBytes), sum.CoveredBytes, sum.CodeBytes)
			if sum.FromCodeBytes > 0 {
				fmt.Fprintf(stderr, "of which %.1f%% from the instructions (--from-code: %d bytes), the rest from CFI and Go's tables\n",
					100*float64(sum.FromCodeBytes)/float64(sum.CodeBytes), sum.FromCodeBytes)
			}
		}
		if k := keptText(sum.Kept); k != "" {
			fmt.Fprintln(stderr, k)
		}
	}
	switch {
	case ctx.Err() != nil:
		return &exitError{130, fmt.Sprintf("interrupted: %d files not started", sum.Interrupted)}
	case !sum.OK():
		if n := sum.Counts[tree.Refused]; n > 0 {
			return fmt.Errorf("%d of %d files failed, %d refused (their metadata could not be kept)", sum.Counts[tree.Failed], sum.Files, n)
		}
		return fmt.Errorf("%d of %d files failed", sum.Counts[tree.Failed], sum.Files)
	}
	return nil
}

// keptText says what the files written kept besides their bytes, and
// what a copy made again ("" if nothing).
func keptText(k tree.Kept) string {
	var kept, made []string
	add := func(list *[]string, n int, what string) {
		if n > 0 {
			*list = append(*list, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(&kept, k.Owners, "files owned by another user or group")
	add(&kept, k.SpecialBits, "with setuid, setgid or sticky bits")
	add(&kept, k.Xattrs, "with capabilities, ACLs or other extended attributes")
	add(&made, k.Dirs, "directories")
	add(&made, k.Symlinks, "symbolic links")
	add(&made, k.Devices, "devices, FIFOs or sockets")
	add(&kept, k.HardLinks, "names kept as hard links")
	var parts []string
	if len(kept) > 0 {
		parts = append(parts, "kept: "+strings.Join(kept, ", "))
	}
	if len(made) > 0 {
		parts = append(parts, "copied: "+strings.Join(made, ", "))
	}
	if k.NotKept > 0 {
		parts = append(parts, fmt.Sprintf("%d copies could not keep all metadata (not root)", k.NotKept))
	}
	if k.Stale > 0 {
		parts = append(parts, fmt.Sprintf("%d temporary files of killed runs removed", k.Stale))
	}
	return strings.Join(parts, "; ")
}

var outcomeText = map[tree.Outcome]string{
	tree.Converted:   "converted",
	tree.HasSFrame:   "already have SFrame",
	tree.NoCFI:       "without CFI",
	tree.NotELF:      "not ELF",
	tree.Unsupported: "unsupported machine or type",
	tree.NoLayout:    "without a safe layout",
	tree.Signed:      "signed (left alone)",
	tree.Refused:     "refused (metadata not kept)",
	tree.Failed:      "failed",
}
