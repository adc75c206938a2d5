// Package convert is the whole conversion of one file, a linked ELF file,
// a relocatable object or a static archive: read its call-frame
// information, execute it, translate the rows to SFrame, encode the
// section and write it into a copy of the file (for objects, with the
// relocations GNU ld merges; for archives, in every member).
//
// It only strings the other packages together, in the one direction data
// flows: elfread → cfi → translate → sframe → elfwrite.
//
// OpenInput, then ConvertWrite, is what the command does for one file;
// see ExampleConvertWrite.
package convert

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/readers"
	"github.com/cfi2sframe/cfi2sframe/relobj"
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
	// For, when set, checks a linked file's output against that reader's
	// acceptance rules (Result.Reader); ForReader fills it.
	For readers.Reader
	// FragileLayout: for a file where no layout the standard tools keep
	// can be made (ErrLayout), write the old one (elfwrite's
	// AppendSegment) with Result.Warning instead of failing.
	FragileLayout bool
	// SignalFrames: V3, a signal trampoline whose CFI cannot be described
	// gets a signal FDE whose one FRE says RA undefined
	// (translate.Options.SignalOutermost).
	SignalFrames bool
}

// ForReader returns the options whose output reader r takes, on the
// evidence gathered in the readers package and README:
//
//   - kernel: V3 with FUNC_START_PCREL, and signal trampolines whose CFI
//     cannot be described get a signal FDE (SignalFrames): the kernel
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
func ForReader(r readers.Reader) (Options, error) {
	switch r {
	case readers.Kernel:
		return Options{Version: sframe.Version3, SignalFrames: true, For: r}, nil
	case readers.Libsframe:
		return Options{Version: sframe.Version3, For: r}, nil
	case readers.Glibc:
		return Options{Version: sframe.Version2, OutermostGap: true, For: r}, nil
	case readers.Libsframe244:
		return Options{Version: sframe.Version2, For: r}, nil
	}
	return Options{}, fmt.Errorf("no output options for reader %q", r)
}

// Result is a converted file and what the conversion found.
type Result struct {
	// Output is the new ELF file. ConvertInput leaves it nil for a
	// linked file, whose output WriteResult writes from the plan.
	Output    []byte
	SFrame    []byte            // the encoded .sframe section
	Addr      uint64            // its address
	Translate *translate.Result // functions, diagnostics, counts
	CFIErrors []error           // malformed CIEs/FDEs, skipped
	FDEs      int               // FDEs read (all sections)
	Members   int               // archives: members converted
	// Unchanged: there was nothing to convert and Output is the input as
	// it is (a relocatable object or archive without CFI, for which
	// as --gsframe writes no .sframe either); Note says why.
	Unchanged bool
	// Warning, when set, is to be shown to the user: the output was
	// written but is fragile (Options.FragileLayout).
	Warning string
	Note    string
	Reader  *readers.Result // Options.For's rules applied to the output (linked files)

	plan *elfwrite.Plan // the output's layout, when Output is not built
}

// Error is a conversion failure of one file.
type Error struct {
	File string
	Err  error
}

func (e *Error) Error() string {
	// Errors from elfread and cfi already name the file: name it once.
	if msg := e.Err.Error(); strings.HasPrefix(msg, e.File+": ") {
		return msg
	}
	return e.File + ": " + e.Err.Error()
}
func (e *Error) Unwrap() error { return e.Err }

// ErrHasSFrame is wrapped by the error for an input that already has
// SFrame data when Options.Force is not set.
var ErrHasSFrame = errors.New("already has SFrame data (.sframe or PT_GNU_SFRAME); use --force to replace it")

// ErrUnsupported is wrapped by the error for an ELF file of a machine,
// class or type that cannot be converted.
var ErrUnsupported = errors.New("unsupported")

// ErrRejected is wrapped by the error for a linked file whose output
// Options.For's reader would drop whole (a readers.Reject violation, such
// as the kernel's for a file whose functions lie in two executable
// segments). It wraps ErrUnsupported: the tree form counts such files as
// unsupported and leaves them alone.
var ErrRejected = fmt.Errorf("%w by the reader", ErrUnsupported)

// ErrLayout is wrapped by the error for a linked file in which the
// program header table cannot grow where the standard tools expect it
// (elfwrite.LayoutError) and Options.FragileLayout is not set.
var ErrLayout = errors.New("no layout that strip, objcopy, eu-strip and patchelf keep")

// ErrNoCFI is wrapped by the error for an input without call-frame
// information.
var ErrNoCFI = errors.New("no call-frame information (.eh_frame or .debug_frame) to convert")

// Convert converts the ELF file in (named name in errors).
func Convert(name string, in []byte, o Options) (*Result, error) {
	return convert(name, in, o, false, nil)
}

// convert is Convert; with lazy, a linked file's output is only planned
// (Result.plan), for WriteResult to write without a copy in memory. first,
// when not nil, is a plan already made for in (elfwrite.NewPlan, any
// size), which saves parsing and planning it again; it is called only
// when the plan is needed, and may return nil.
func convert(name string, in []byte, o Options, lazy bool, first func() *elfwrite.Plan) (*Result, error) {
	fail := func(err error) (*Result, error) { return nil, &Error{File: name, Err: err} }
	if o.Version == 0 {
		o.Version = sframe.Version3
	}
	if o.Version != sframe.Version2 && o.Version != sframe.Version3 {
		return fail(fmt.Errorf("SFrame version %d cannot be written (2 or 3)", o.Version))
	}
	if o.PCRel && o.Version != sframe.Version2 {
		return fail(errors.New("--pcrel applies to SFrame version 2 only (version 3 start addresses are always PC-relative)"))
	}
	if bytes.HasPrefix(in, []byte(relobj.ArchiveMagic)) || bytes.HasPrefix(in, []byte("!<thin>\n")) {
		return convertArchive(name, in, o)
	}
	f, err := elfread.NewFileBytes(in, name)
	if err != nil {
		return nil, err // elfread's errors name the file
	}
	ef := f.ELF
	switch ef.Machine {
	case elf.EM_X86_64, elf.EM_AARCH64, elf.EM_S390:
	default:
		return fail(fmt.Errorf("%w machine %v (x86-64, AArch64 and s390x are supported)", ErrUnsupported, ef.Machine))
	}
	if ef.Class != elf.ELFCLASS64 {
		return fail(fmt.Errorf("%w class %v (ELF64 only)", ErrUnsupported, ef.Class))
	}
	switch ef.Type {
	case elf.ET_EXEC, elf.ET_DYN:
	case elf.ET_REL:
		return convertRelocatable(name, in, f, o)
	default:
		return fail(fmt.Errorf("%w ELF type %v (executables, shared libraries, objects and archives)", ErrUnsupported, ef.Type))
	}
	if !o.Force {
		if _, err := f.SFrame(); err == nil {
			return fail(ErrHasSFrame)
		}
	}

	// One pass per FDE: translate executes each into the stream's one
	// reused table and keeps only the SFrame function.
	st, err := cfi.Index(f)
	if err != nil {
		return fail(err)
	}
	if st.Sections == 0 {
		return fail(ErrNoCFI)
	}
	if err := noFDE(st.Parsed, st.Errors); err != nil {
		return fail(err)
	}
	res := &Result{FDEs: st.Parsed}

	// Each function goes straight into the encoder: translate keeps
	// none of them, and the encoder keeps its FREs as bytes.
	abiID, fixedFP, fixedRA, err := translate.ABI(ef.Machine, ef.ByteOrder)
	if err != nil {
		return fail(err)
	}
	encOpts := sframe.Options{
		Version:    o.Version,
		ABI:        abiID,
		Order:      ef.ByteOrder,
		PCRel:      o.Version == sframe.Version3 || o.PCRel,
		Sort:       true,
		CFAFixedFP: fixedFP,
		CFAFixedRA: fixedRA,
	}
	enc, err := sframe.NewEncoder(encOpts)
	if err != nil {
		return fail(err)
	}
	// Room for every function (PLT entries are a few more).
	enc.Grow(len(st.Entries) + 64)
	tin := translate.Input{
		Machine:   ef.Machine,
		Order:     ef.ByteOrder,
		Entries:   st.Entries,
		ExecEntry: st.ExecuteEntry,
		PLTs:      PLTSections(ef),
		Symbol:    lazySymbolizer(f),
		Emit:      enc.Add,
	}
	// On a machine with a second CPU, translate may hand the second half
	// of the functions to another goroutine, with its own execution
	// context and encoder, appended to the first when both are done.
	var st2 *cfi.Stream
	var enc2 *sframe.Encoder
	if runtime.GOMAXPROCS(0) > 1 {
		tin.Second = func(n int) (func(cfi.Entry) (*cfi.Table, error), func(*sframe.Function) error) {
			st2 = st.Clone()
			enc2, _ = sframe.NewEncoder(encOpts) // the options are enc's, already accepted
			enc2.Grow(n + 64)
			return st2.ExecuteEntry, enc2.Add
		}
	}
	tr, err := translate.Translate(tin, translate.Options{Version: o.Version, OutermostGap: o.OutermostGap, SignalOutermost: o.SignalFrames})
	if err != nil {
		return fail(err)
	}
	if st2 != nil {
		st.Errors = append(st.Errors, st2.Errors...)
		if err := enc.Append(enc2); err != nil {
			return fail(err)
		}
	}
	res.Translate = tr
	res.CFIErrors = st.Errors

	encode := func(addr uint64) ([]byte, error) {
		b, err := enc.Section(addr)
		if err == nil {
			res.SFrame, res.Addr = b, addr
		}
		return b, err
	}
	place := func(opts elfwrite.Options) (*elfwrite.Plan, []byte, error) {
		if first != nil {
			if p := first(); p != nil && p.Options() == opts {
				return elfwrite.PlaceFrom(p, encode)
			}
		}
		return elfwrite.Place(in, opts, encode)
	}
	plan, data, err := place(elfwrite.Options{Replace: o.Force})
	var le *elfwrite.LayoutError
	if errors.As(err, &le) {
		if !o.FragileLayout {
			return fail(fmt.Errorf("%w: %s (--fragile-layout writes one that strip, eu-strip and patchelf may break)", ErrLayout, le.Msg))
		}
		plan, data, err = place(elfwrite.Options{Replace: o.Force, AppendSegment: true})
		if err == nil {
			res.Warning = fmt.Sprintf("fragile layout (%s): strip, objcopy before 2.44, eu-strip and patchelf may break this file; run verify after them", le.Msg)
		}
	}
	if err != nil {
		var hs *elfwrite.HasSFrameError
		if errors.As(err, &hs) {
			return fail(ErrHasSFrame)
		}
		return fail(err)
	}
	res.SFrame = data
	if lazy {
		res.plan = plan
	} else if res.Output, err = plan.Bytes(res.SFrame); err != nil {
		return fail(err)
	}
	if o.For != "" {
		res.Reader = readers.Check(o.For, readers.Input{Section: res.SFrame, Addr: res.Addr, Exec: ExecRanges(ef)})
		// An output the reader drops whole is not written: --for
		// promises what the reader takes. A lookup that fails at some
		// PCs is only reported (Result.Reader).
		if v := res.Reader.FirstReject(); v != nil {
			return fail(fmt.Errorf("%w: %s; nothing written", ErrRejected, v))
		}
	}
	return res, nil
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
		return fmt.Errorf("no FDE could be read (%d malformed records; the first: %v)", len(errs), errs[0])
	}
	return fmt.Errorf("%w: the call-frame sections hold no FDE", ErrNoCFI)
}

// ExecRanges returns a linked file's executable PT_LOAD segments, which
// the kernel requires every function start to lie in.
func ExecRanges(ef *elf.File) []readers.Range {
	out := []readers.Range{}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			out = append(out, readers.Range{Lo: p.Vaddr, Hi: p.Vaddr + p.Memsz})
		}
	}
	return out
}

// PLTSections returns the PLT sections the translator describes from their
// instructions.
func PLTSections(ef *elf.File) []translate.PLT {
	var out []translate.PLT
	for _, s := range ef.Sections {
		switch s.Name {
		case ".plt", ".plt.sec", ".plt.got":
		default:
			continue
		}
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_EXECINSTR == 0 || s.Size == 0 {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		out = append(out, translate.PLT{Name: s.Name, Addr: s.Addr, Data: data, EntSize: s.Entsize})
	}
	return out
}

// lazySymbolizer reads the symbol table only when the first diagnostic
// needs a name: most conversions never do.
// It is safe for concurrent use (translate may run on two goroutines).
func lazySymbolizer(f *elfread.File) func(uint64) string {
	var sym func(uint64) string
	var once sync.Once
	return func(a uint64) string {
		once.Do(func() { sym = f.Symbolizer() })
		return sym(a)
	}
}
