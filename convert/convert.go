// Package convert is the whole conversion of one file, a linked ELF file,
// a relocatable object or a static archive: read its call-frame
// information, execute it, translate the rows to SFrame, encode the
// section and write it into a copy of the file (for objects, with the
// relocations GNU ld merges; for archives, in every member).
//
// It only strings the other packages together, in the one direction data
// flows: elfread → cfi → translate → sframe → elfwrite.
//
// As debug/elf opens a file and reads it, convert opens one (Open, or
// NewFile for a reader) and converts it with Options into a Result: the
// section, its address and what the conversion found. File.Convert
// converts in memory and writes nothing (Result.Write writes the output
// to a writer); File.WriteFile converts and writes the output to a path,
// atomically, copying the unchanged bytes while the CFI is translated:
// what the command does for one file (see ExampleFile_WriteFile). Every
// command that builds SFrame from CFI (convert, report, trace) goes
// through this one conversion. Options are checked once, by
// Options.Validate, at each conversion; errors are typed (errors.go) and
// name the file once, in no command's words.
package convert

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/callsite"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/pltfind"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// Options selects the output.
type Options struct {
	Version uint8 // sframe.Version3 (0 means 3) or sframe.Version2
	PCRel   bool  // V2: set SFRAME_F_FDE_FUNC_START_PCREL (V3 always does)
	Force   bool  // replace SFrame data the input already has
	// OutermostGap: leave outermost (RA-undefined) PCs without an FRE
	// instead of writing an FRE without data words (translate.Options).
	OutermostGap bool
	// reader, when set (only ForReader sets it, with the version and
	// flags that reader takes), checks a linked file's output against the
	// reader's acceptance rules (Result.Violations).
	reader Reader
	// FragileLayout: for a file where no layout the standard tools keep
	// can be made (ErrLayout), write the old one (a new PT_LOAD at the
	// end) with Result.Warning instead of failing.
	FragileLayout bool
	// NoSignalFrames: V3, leave a signal trampoline whose CFI cannot be
	// described without an FDE, as conversions did by default before
	// (--signal-frames=false). By default it gets a signal FDE whose one
	// FRE says RA undefined (translate.Options.SignalOutermost): without
	// an FDE, the kernel's unwinder walks such a frame by the frame
	// pointer and records a wrong caller; with it, it stops there, and
	// readers that know signal frames go on through the kernel's signal
	// frame.
	NoSignalFrames bool
	// FromCode: describe the code no CFI and no Go table describes from
	// its instructions (cfi.Options.FromCode), leaving out with a reason
	// (a Skipped diagnostic) what the analysis cannot prove. Linked files
	// only.
	FromCode bool
	// DebugDirs are where separate debug files are looked up by build-id
	// for FromCode's function starts (nil: /usr/lib/debug).
	DebugDirs []string
	// PlainLayout: one FRE block per function, in the order of the
	// functions, as GNU as and ld write it. By default a linked
	// little-endian file's functions with the same block share one copy
	// (sframe.Options.Share), which every reader that reads the section
	// in its own byte order takes (docs/readers.md). A big-endian output
	// (s390x, AArch64 BE) never shares: libsframe on a little-endian
	// host flips it FRE by FRE and refuses a block flipped twice.
	// Relocatable objects never share either: they keep what as
	// --gsframe writes, for ld to re-encode.
	PlainLayout bool
}

// translateOptions are the translation's options for o.
func (o Options) translateOptions() translate.Options {
	return translate.Options{Version: o.Version, OutermostGap: o.OutermostGap, SignalOutermost: !o.NoSignalFrames}
}

// Reader names an SFrame reader whose acceptance rules an output can be
// made for and checked against (ForReader).
type Reader string

// The readers whose rules are known (docs/readers.md).
const (
	Kernel       Reader = "kernel"         // the Linux kernel's user-space unwinder
	Glibc        Reader = "glibc"          // glibc's backtrace, --enable-sframe (2.42-2.44)
	Libsframe    Reader = "libsframe"      // GNU libsframe 2.47
	Libsframe244 Reader = "libsframe-2.44" // GNU libsframe 2.44
)

// ForReader returns the options whose output reader r takes, on the
// evidence gathered in internal/acceptance and docs/readers.md; a
// conversion with them also checks a linked file's output against r's
// rules (Result.Violations). The other fields may be changed after.
//
//   - kernel: V3 with FUNC_START_PCREL, and signal trampolines whose CFI
//     cannot be described get a signal FDE (as by default): the kernel
//     stops its walk at the FDE's RA-undefined FRE, while at a PC without
//     an FDE it falls back to its frame-pointer walk, which on code built
//     without frame pointers records a wrong frame (a kernel booted with
//     the unwinder, scripts/kernel-acceptance.sh, recorded glibc's
//     __restore_rt followed by a stack address).
//   - libsframe (2.47): V3 with FUNC_START_PCREL (the default).
//   - glibc (2.42-2.44 --enable-sframe): V2, sorted, without
//     FUNC_START_PCREL (every glibc from 2.42 accepts that; PCREL came
//     later), and outermost frames left without an FRE, since glibc
//     discards the whole trace at an FRE without data words.
//   - libsframe-2.44: V2 without FUNC_START_PCREL (2.44 refuses the flag
//     and V3).
func ForReader(r Reader) (Options, error) {
	switch r {
	case Kernel:
		return Options{Version: sframe.Version3, reader: r}, nil
	case Libsframe:
		return Options{Version: sframe.Version3, reader: r}, nil
	case Glibc:
		return Options{Version: sframe.Version2, OutermostGap: true, reader: r}, nil
	case Libsframe244:
		return Options{Version: sframe.Version2, reader: r}, nil
	}
	return Options{}, fmt.Errorf("no output options for reader %q", r)
}

// Validate reports options that cannot be used, as an *OptionError: a
// version other than 2 or 3 (0 means 3), PCRel with version 3. Every
// conversion checks its options once, before it reads the input.
func (o Options) Validate() error {
	_, err := o.normalize()
	return err
}

// normalize is Validate, returning the options with the version's
// default filled in.
func (o Options) normalize() (Options, error) {
	if o.Version == 0 {
		o.Version = sframe.Version3
	}
	switch {
	case o.Version != sframe.Version2 && o.Version != sframe.Version3:
		return o, &OptionError{Option: "Version", Msg: fmt.Sprintf("SFrame version %d cannot be written (2 or 3)", o.Version)}
	case o.PCRel && o.Version != sframe.Version2:
		return o, &OptionError{Option: "PCRel", Msg: "applies to SFrame version 2 only (version 3 start addresses are always PC-relative)"}
	}
	return o, nil
}

// Result is a converted file and what the conversion found. Write writes
// the output.
type Result struct {
	// SFrame is the encoded .sframe section (for an archive, its
	// members', one after the other), and Addr its address in a linked
	// file's output, which V3's PC-relative start fields depend on (0
	// for objects and archives, whose section is relocated by the
	// linker).
	SFrame    []byte
	Addr      uint64
	Translate *translate.Result // diagnostics, counts
	CFIErrors []error           // malformed CIEs/FDEs, skipped
	Members   int               // archives: members converted
	// Unchanged, when set, says why there was nothing to convert: the
	// output is the input as it is (a relocatable object or archive
	// without CFI, for which as --gsframe writes no .sframe either).
	Unchanged string
	// Warning, when set, is to be shown to the user: the output is
	// fragile (Options.FragileLayout).
	Warning string
	// Violations counts the rules of the reader that ForReader's options
	// are for that the output breaks, FirstViolation says the first:
	// lookups that fail at some PCs (an output the reader would drop whole
	// is refused with ErrUnsupported instead).
	Violations     int
	FirstViolation string

	output []byte         // the output, when it is not written from plan
	plan   *elfwrite.Plan // a linked file's output, laid out
	in     *File          // what plan copies from
}

// earlyWrite is what WriteFile's writer shares with the conversion
// while it copies the input's unchanged bytes.
type earlyWrite struct {
	// plan gives a plan already made for the input (elfwrite.NewPlan,
	// any size), which saves parsing and planning it again; it is called
	// only when the plan is needed, and may return nil.
	plan func() *elfwrite.Plan
	// copying is closed once the copy is over (done, failed or never
	// started): until then the translation leaves it a CPU.
	copying <-chan struct{}
}

// convertBytes converts the file in, of whichever kind it is; a linked
// file's output is only planned (Result.plan). early, when not nil, is
// what WriteFile's writer shares (see earlyWrite). The options are
// normalized; errors do not name the file.
func convertBytes(in []byte, o Options, early *earlyWrite) (*Result, error) {
	if isArchive(in) {
		return convertArchive(in, o)
	}
	f, err := elfread.NewFileBytes(in, "")
	if err != nil {
		return nil, err
	}
	if err := supported(f.ELF); err != nil {
		return nil, err
	}
	if f.ELF.Type == elf.ET_REL {
		return convertRelocatable(in, f, o)
	}
	return convertLinked(in, f, o, early)
}

// isArchive says whether in is an ar archive (thin or not).
func isArchive(in []byte) bool {
	return bytes.HasPrefix(in, []byte(relobj.ArchiveMagic)) || bytes.HasPrefix(in, []byte("!<thin>\n"))
}

// supported refuses the ELF files that are not converted: machines other
// than x86-64, AArch64 and s390x, ELF32, and types other than executables,
// shared libraries and objects.
func supported(ef *elf.File) error {
	if arch.ForMachine(ef.Machine) == nil {
		return &unsupportedError{what: "machine " + ef.Machine.String(), detail: "x86-64, AArch64 and s390x are supported"}
	}
	if ef.Class != elf.ELFCLASS64 {
		return &unsupportedError{what: "class " + ef.Class.String(), detail: "ELF64 only"}
	}
	switch ef.Type {
	case elf.ET_EXEC, elf.ET_DYN, elf.ET_REL:
		return nil
	}
	return &unsupportedError{what: "ELF type " + ef.Type.String(), detail: "executables, shared libraries, objects and archives"}
}

// convertLinked converts an executable or shared library: its CFI,
// translated one FDE at a time into an encoder, is placed where the
// output's layout puts the section, and checked against the reader of
// ForReader's options (o.reader).
func convertLinked(in []byte, f *elfread.File, o Options, early *earlyWrite) (*Result, error) {
	if !o.Force {
		if _, err := f.SFrame(); err == nil {
			return nil, ErrHasSFrame
		}
	}
	st, err := indexCFI(in, cfi.Options{FromCode: o.FromCode, DebugDirs: o.DebugDirs})
	if err != nil {
		return nil, err
	}
	res := &Result{}
	var copying <-chan struct{}
	if early != nil {
		copying = early.copying
	}
	tr, enc, cfiErrs, err := translateLinked(f, in, st, o, copying)
	if err != nil {
		return nil, err
	}
	tr.Diags = append(tr.Diags, leftOut(st, lazySymbolizer(f))...)
	res.Translate, res.CFIErrors = tr, cfiErrs
	if err := res.place(in, enc, o, early); err != nil {
		return nil, err
	}
	if o.reader != "" {
		r := acceptance.Check(acceptance.Reader(o.reader), acceptance.Input{Section: res.SFrame, Addr: res.Addr, Exec: acceptance.ExecRanges(f.ELF)})
		// An output the reader drops whole is not written: ForReader promises
		// what the reader takes. A lookup that fails at some PCs is only
		// reported (Result.Violations).
		if v := r.FirstReject(); v != nil {
			return nil, &rejectedError{violation: v.String()}
		}
		if v := r.First(); v != nil {
			res.Violations, res.FirstViolation = r.Total, v.String()
		}
	}
	return res, nil
}

// indexCFI finds a linked file's FDEs (cfi.OpenBytesWith: one pass, each
// kept as a small entry), refusing a file without any.
func indexCFI(in []byte, o cfi.Options) (*cfi.File, error) {
	st, err := cfi.OpenBytesWith(in, o)
	if err != nil {
		return nil, err
	}
	if len(st.Sections()) == 0 {
		return nil, ErrNoCFI
	}
	if err := noFDE(st.Parsed(), st.Errors()); err != nil {
		return nil, err
	}
	return st, nil
}

// place encodes the section for the address the output's layout gives it
// (V3's start fields are relative to it) and keeps the plan: the
// standard layout, or, where elfwrite refuses it and
// Options.FragileLayout allows, the fragile one, with a warning.
func (res *Result) place(in []byte, enc *sframe.Encoder, o Options, early *earlyWrite) error {
	encode := func(addr uint64) ([]byte, error) {
		b, err := enc.Section(addr)
		if err == nil {
			res.SFrame, res.Addr = b, addr
		}
		return b, err
	}
	plan := func(opts elfwrite.Options) (*elfwrite.Plan, []byte, error) {
		if early != nil {
			if p := early.plan(); p != nil && p.Options() == opts {
				return elfwrite.PlaceFrom(p, encode)
			}
		}
		return elfwrite.Place(in, opts, encode)
	}
	p, data, err := plan(elfwrite.Options{Replace: o.Force})
	var le *elfwrite.LayoutError
	if errors.As(err, &le) {
		if !o.FragileLayout {
			return &layoutError{reason: le.Msg}
		}
		p, data, err = plan(elfwrite.Options{Replace: o.Force, AppendSegment: true})
		if err == nil {
			res.Warning = fmt.Sprintf("fragile layout (%s): strip, objcopy before 2.44, eu-strip and patchelf may break this file; run verify after them", le.Msg)
		}
	}
	var hs *elfwrite.HasSFrameError
	if errors.As(err, &hs) {
		return ErrHasSFrame
	}
	if err != nil {
		return err
	}
	res.SFrame, res.plan = data, p
	return nil
}

// translateLinked translates a linked file's CFI functions, executed one
// at a time (st), and its PLTs into an encoder: translate keeps none of
// the functions, and the encoder keeps only their FREs, as bytes. On a
// machine with more CPUs the functions are cut into parts (see parts),
// which that many goroutines take in turn, each with its own execution
// context, into an encoder per part; the parts are appended in order as
// they are done (joiner), so the functions, their order and the
// diagnostics are those of one pass. While copying is open (the file's
// unchanged bytes being copied), one goroutine fewer translates: the copy
// is as much work as the translation and the kernel does it on one CPU,
// so it must have that CPU to itself, not share two with the goroutines
// and end last. cfiErrs are st's errors followed by those of the FDEs
// that could not be executed, in the order of the functions.
func translateLinked(f *elfread.File, in []byte, st *cfi.File, o Options, copying <-chan struct{}) (res *translate.Result, enc *sframe.Encoder, cfiErrs []error, err error) {
	ef := f.ELF
	t, err := translate.New(translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, PLTs: pltfind.Sections(ef), Symbol: lazySymbolizer(f)},
		o.translateOptions())
	if err != nil {
		return nil, nil, nil, err
	}
	abiID, fixedFP, fixedRA := t.ABI()
	encOpts := sframe.Options{
		Version:    o.Version,
		ABI:        abiID,
		Order:      ef.ByteOrder,
		PCRel:      o.Version == sframe.Version3 || o.PCRel,
		Sort:       true,
		CFAFixedFP: fixedFP,
		CFAFixedRA: fixedRA,
		Share:      !o.PlainLayout && ef.ByteOrder == binary.LittleEndian,
	}
	enc, err = sframe.NewEncoder(encOpts)
	if err != nil {
		return nil, nil, nil, err
	}
	all := st.Entries()
	cfi.SortEntries(all)
	cfiErrs = slices.Clone(st.Errors())
	cuts := parts(all)
	forks := reserve(enc, ef, cuts)
	pad := callsite.NewReturnPad(ef, in, all)
	enc.Grow(len(all) + 64) // room for every function (PLT entries are a few more)
	res, err = t.PLTs(enc.Add)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(cuts) == 2 {
		ctx := st.Context(all)
		r, err := t.Functions(ctx, pad.Wrap(enc.Add))
		pad.Release(all)
		if err != nil {
			return nil, nil, nil, err
		}
		res.Add(r)
		return res, enc, append(cfiErrs, ctx.Errors()...), nil
	}
	j := &joiner{parts: make([]part, len(cuts)-1), ready: make([]bool, len(cuts)-1), enc: enc, res: res, cfiErrs: cfiErrs}
	for i, f := range forks {
		j.parts[i].enc = f
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(runtime.GOMAXPROCS(0), len(j.parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w == 1 && copying != nil {
				<-copying
			}
			for i := int(next.Add(1) - 1); i < len(j.parts); i = int(next.Add(1) - 1) {
				p := &j.parts[i]
				p.enc.Grow(cuts[i+1] - cuts[i])
				ctx := st.Context(all[cuts[i]:cuts[i+1]])
				p.res, p.err = t.Functions(ctx, pad.Wrap(p.enc.Add))
				pad.Release(all[cuts[i]:cuts[i+1]])
				p.cfiErrs = ctx.Errors()
				j.finish(i)
			}
		}()
	}
	wg.Wait()
	if j.err != nil {
		return nil, nil, nil, j.err
	}
	return res, enc, j.cfiErrs, nil
}

// reserve gives the file's encoder an arena (sframe.Encoder.Reserve) for
// the functions of entries cut at cuts: its own FREs (the PLTs', and all
// of them when there is one part) and a part for each fork's, sized in
// proportion to its functions. It returns the forks, one per part when
// there are several. FREs take about as many bytes as the CFI
// (libLLVM-15: 0.8 times, libc and bash 0.8, tiny FDEs 0.6): the arena
// takes 1.5 times as many, and is left out above 64 MiB, where it would
// count against the collector's memory limit long before it is used.
func reserve(enc *sframe.Encoder, ef *elf.File, cuts []int) []*sframe.Encoder {
	cfiBytes := uint64(0)
	for _, s := range ef.Sections {
		if s.Name == ".eh_frame" || s.Name == ".debug_frame" {
			cfiBytes += s.Size
		}
	}
	total := cfiBytes*3/2 + 64<<10
	n := cuts[len(cuts)-1]
	if len(cuts) == 2 {
		if total <= 64<<20 && n > 0 {
			enc.Reserve(n+64, int(total), int(total))
		}
		return nil
	}
	const own = 16 << 10 // the PLTs'
	arena := total <= 64<<20 && n > 0
	if arena {
		enc.Reserve(n+64, int(total)+own, own)
	}
	forks := make([]*sframe.Encoder, len(cuts)-1)
	for i := range forks {
		size := 0
		if arena {
			size = int(total * uint64(cuts[i+1]-cuts[i]) / uint64(n))
		}
		forks[i] = enc.Fork(size)
	}
	return forks
}

// part is what translating one part of a file's functions gave.
type part struct {
	enc     *sframe.Encoder
	res     *translate.Result
	cfiErrs []error
	err     error
}

// joiner adds the parts to the file's encoder, result and CFI errors in
// their order, each as soon as it and every part before it are done (the
// index room of a part's encoder then goes to a later part's: see
// sframe.Encoder.Fork). The first error, in part order, is kept.
type joiner struct {
	mu      sync.Mutex
	parts   []part
	ready   []bool
	next    int // the first part not added yet
	enc     *sframe.Encoder
	res     *translate.Result
	cfiErrs []error // the file's CFI errors, then the parts' in order
	err     error
}

// finish records that part i is done and adds what can be added.
func (j *joiner) finish(i int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ready[i] = true
	for ; j.next < len(j.parts) && j.ready[j.next]; j.next++ {
		p := &j.parts[j.next]
		switch {
		case j.err != nil:
		case p.err != nil:
			j.err = p.err
		default:
			j.cfiErrs = append(j.cfiErrs, p.cfiErrs...)
			j.res.Add(p.res)
			j.err = j.enc.Append(p.enc)
		}
		*p = part{}
	}
}

// minSplit is the fewest FDEs translateLinked shares between goroutines:
// fewer are not worth a goroutine. A variable for the tests.
var minSplit = 4096

// partsPerCPU is how many parts translateLinked cuts the functions into
// per CPU. Goroutines take the parts in turn, so one that met costlier
// functions, or shared its CPU with the copy of the file, takes fewer;
// both finish within about one part of each other.
const partsPerCPU = 8

// parts returns where translateLinked cuts the sorted entries into parts:
// ascending bounds from 0 to len(entries), the cuts translate.Cuts allows
// nearest to equal parts, partsPerCPU for each CPU; just 0 and
// len(entries) for one CPU or fewer than minSplit entries.
func parts(entries []cfi.Entry) []int {
	n := len(entries)
	cpus := runtime.GOMAXPROCS(0)
	if cpus < 2 || n < minSplit {
		return []int{0, n}
	}
	k := cpus * partsPerCPU
	at := make([]int, k-1)
	for i := range at {
		at[i] = n * (i + 1) / k
	}
	cuts := translate.Cuts(entries, at)
	if len(cuts) > 0 && cuts[0] == 0 {
		cuts = cuts[1:]
	}
	return append(append([]int{0}, cuts...), n)
}

// noFDE is the error for call-frame sections that hold no FDE: empty
// (wrapping ErrNoCFI, so an archive member keeps its bytes) or garbage
// (the first malformed record: which section, at which offset). Writing an
// empty .sframe for them would hide the fault.
func noFDE(parsed int, errs []error) error {
	if parsed > 0 {
		return nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("no FDE could be read (%d malformed records; the first: %w)", len(errs), errs[0])
	}
	return fmt.Errorf("%w: the call-frame sections hold no FDE", ErrNoCFI)
}

// FromCode is the reason of the remark (a Diagnostic not Skipped) on
// each function Options.FromCode described from its instructions.
const FromCode translate.Reason = "from-code"

// leftOut is the code cfi.Options.FromCode left out, as Skipped
// diagnostics with their code-* reasons.
func leftOut(st *cfi.File, sym func(uint64) string) []translate.Diagnostic {
	var out []translate.Diagnostic
	for _, l := range st.Left() {
		out = append(out, translate.Diagnostic{Start: l.Start, End: l.End, PC: l.PC, Symbol: sym(l.Start),
			Reason: translate.Reason(l.Reason), Detail: l.Detail, Skipped: true})
	}
	return out
}

// lazySymbolizer makes the symbolizer (gopclntab.Symbolizer: a Go
// program's functions named by its function table, the others by the
// symbol table) only when the first diagnostic needs a name: most C
// conversions never do, and a Go program's notes read only its table.
// It is safe for concurrent use (translate may run on two goroutines).
func lazySymbolizer(f *elfread.File) func(uint64) string {
	var sym func(uint64) string
	var once sync.Once
	return func(a uint64) string {
		once.Do(func() { sym = gopclntab.Symbolizer(f) })
		return sym(a)
	}
}
