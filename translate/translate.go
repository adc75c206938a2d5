// Package translate turns executed CFI (cfi.Table rows) into SFrame
// functions and rows (sframe.Function), per ABI, and says for every
// function it cannot describe why not.
//
// It follows what GNU as (gas/gen-sframe.c) decides for the same CFI, so
// that a converted file agrees with one assembled with --gsframe: CFA on
// the stack or frame pointer, return address and frame pointer on the
// stack; on AMD64 and s390x with SFrame V3 also the flexible forms (CFA on
// another register or loaded from memory as in DRAP code, RA or FP in a
// register or behind a dereference; on s390x V2, RA or FP in a register
// take the V2 register-number form instead). PLT stubs, which have no CFI
// of their own or a PC-dependent expression, are described from their
// instructions (internal/pltsim).
//
// It has one entry point: New makes a Translator from the file's Input
// and the Options; its PLTs hands the PLT stubs' functions to an emit
// function (sframe.Encoder.Add, say), and its Functions pulls the file's
// functions from a Source one at a time (a cfi.Context executes each FDE
// when it is reached) and hands each SFrame function to emit, keeping
// none; Result.Add sums the two. The common AMD64 FDEs are translated
// straight from their programs without being executed into a table (the
// direct path, fast.go), with the same result. A caller that spreads the
// work over goroutines cuts the functions where Cuts allows and gives
// each part to Functions.
package translate

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Options selects what the output may use.
type Options struct {
	// Version is sframe.Version3 (0 means 3) or sframe.Version2; with 2,
	// functions needing a flexible FDE are skipped with a reason.
	Version uint8
	// SignalOutermost: with V3, a signal frame (CIE augmentation "S")
	// whose CFI cannot be described still gets an FDE, with the signal
	// bit and one FRE at its start without data words (RA undefined), so
	// that a stack tracer that knows signal frames continues through the
	// kernel's signal frame and one that does not stops there instead of
	// guessing. GNU as 2.47 writes no FRE there (an FDE without FREs is
	// the other V3 outermost-frame marker), but the kernel's unwinder
	// (the core series after v13) removes the whole section at a lookup
	// in an FDE without FREs; only its signal-frame RFC reads one. Its
	// diagnostic stays (Skipped). The zero Options leave it off, as
	// translate's tests and GNU as's .o comparisons want; package convert
	// turns it on unless told not to (convert.Options.NoSignalFrames),
	// and verify counts such an FDE as a signal frame marked as such.
	SignalOutermost bool
	// OutermostGap: write no FRE where the return address is undefined
	// (the outermost frame, e.g. _start) instead of an FRE without data
	// words. The function is split around such rows, so those PCs are
	// covered by no FDE at all. For glibc's SFrame backtrace() (2.42-2.44),
	// which discards the whole trace at an FRE without data words but
	// stops cleanly at a PC without SFrame where the frame pointer is 0.
	OutermostGap bool
}

// PLT is a PLT section's contents.
type PLT struct {
	Name    string // ".plt", ".plt.sec", ".plt.got", ".iplt" (AArch64)
	Addr    uint64
	Data    []byte
	EntSize uint64 // sh_entsize (0 when unset)
}

// Input is what a Translator knows of a file besides its CFI: the machine,
// the PLT sections, which are described from their instructions, and the
// symbols.
type Input struct {
	Machine elf.Machine      // EM_X86_64, EM_AARCH64 or EM_S390
	Order   binary.ByteOrder // the file's, and so its CFI's (little-endian when nil)
	PLTs    []PLT
	Symbol  func(addr uint64) string // may be nil; called only for functions with a diagnostic
}

// A Source gives a Translator a file's CFI functions one at a time, as
// gimli's UnwindTable gives rows: each function's FDE, in order of start
// address (functions with the same start in the order of their FDEs in
// the file), and its executed table when asked. A cfi.Context over a
// file's sorted entries is one, executing an FDE only when asked. The
// common AMD64 FDEs are
// translated from their programs without asking for the table (fast.go).
type Source interface {
	// Next returns the next function's FDE, not executed, or io.EOF
	// after the last; valid until the next call. Any other error stops
	// the translation.
	Next() (*cfi.FDE, error)
	// Table executes the FDE Next returned last and returns its table,
	// valid until the next call to Next, or nil when it cannot be
	// executed (the source keeps the error, as cfi.Context.Errors does;
	// the function is left out).
	Table() *cfi.Table
}

// Result is what the translation of a file (or a part of it) found: the
// diagnostics and the counts. The SFrame ABI and fixed offsets the
// functions are for are the Translator's (ABI).
type Result struct {
	Diags     []Diagnostic // functions skipped (Diagnostic.Skipped) or described differently from their CFI
	Converted int          // functions emitted from CFI
	PLTFuncs  int          // functions emitted from PLT instructions
	empty     int          // zero-size or discarded (address 0) FDEs, ignored (no diagnostic)
}

// Add adds the diagnostics and counts of r2, the translation of another
// part of the same file, to r's.
func (r *Result) Add(r2 *Result) {
	r.Diags = append(r.Diags, r2.Diags...)
	r.Converted += r2.Converted
	r.PLTFuncs += r2.PLTFuncs
	r.empty += r2.empty
}

// Summary is a one-line account of the translation.
func (r *Result) Summary() string {
	s := fmt.Sprintf("%d functions converted", r.Converted)
	if r.PLTFuncs > 0 {
		s += fmt.Sprintf(" (+%d PLT)", r.PLTFuncs)
	}
	counts := map[Reason]int{}
	skipped := 0
	for _, d := range r.Diags {
		if d.Skipped {
			counts[d.Reason]++
			skipped++
		}
	}
	s += fmt.Sprintf(", %d skipped", skipped)
	if len(counts) > 0 {
		var parts []string
		for k, n := range counts {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(parts)
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// abi is the ABI of a translation (its descriptor and the facts taken
// from it in the types the translator compares) and the SFrame version.
type abi struct {
	arch    *arch.Arch
	id      sframe.ABI
	sp, fp  uint64
	ra      uint64
	flexABI bool // the ABI has flexible FDEs (AMD64 and s390x, as gas writes them)
	fixedRA int8 // the header's fixed RA offset (AMD64's slot), or 0
	fixedFP int8
	flexOK  bool             // flexible FDEs allowed (V3 on a flexABI)
	order   binary.ByteOrder // the file's, and so its CFA programs' operands'
	version uint8
	rows    []sframe.Row // a function's rows, reused from function to function
}

// errMachine is wrapped by the error for an unsupported machine.
var errMachine = errors.New("unsupported machine")

func newABI(m elf.Machine, order binary.ByteOrder, o Options) (abi, error) {
	d := arch.ForMachine(m)
	if d == nil {
		return abi{}, fmt.Errorf("%w %v", errMachine, m)
	}
	if order == nil {
		order = binary.LittleEndian
	}
	a := abi{arch: d, id: sframe.ABI(d.SFrameABI(order)), order: order,
		sp: uint64(d.SP()), fp: uint64(d.FP()), ra: uint64(d.RA()),
		// GNU as writes flexible FDEs on AMD64 and s390x only.
		flexABI: d != arch.ARM64,
		// The header's fixed RA offset is AMD64's slot (GNU as tracks the
		// RA per row elsewhere); it has no fixed FP offset (fixedFP 0, the
		// format's "none").
		fixedRA: int8(d.FixedRAOffset()),
	}
	a.version = o.Version
	a.flexOK = a.flexABI && o.Version >= sframe.Version3
	return a, nil
}

// A Translator translates the functions of one file: PLTs once, then
// Functions over the file's functions; a caller that spreads the work
// over goroutines calls Functions once per part, each part
// with its own Source and emit function, and adds the parts' Results
// (Result.Add) in the order of their functions. A Translator is not
// changed by its methods: Functions may run on several goroutines at
// once (Input.Symbol must then be safe for concurrent use).
type Translator struct {
	a   abi
	o   Options
	sym func(uint64) string
	// The PLT sections described from their instructions: their
	// functions, ranges and names, and the diagnostics of those that
	// are not.
	pltFuncs []sframe.Function
	pltSpans []span
	pltNames []string
	pltDiags []Diagnostic
}

// New returns the Translator for a file; it describes the PLT sections.
func New(in Input, o Options) (*Translator, error) {
	if o.Version == 0 {
		o.Version = sframe.Version3
	}
	if o.Version != sframe.Version2 && o.Version != sframe.Version3 {
		return nil, fmt.Errorf("SFrame version %d cannot be written", o.Version)
	}
	a, err := newABI(in.Machine, in.Order, o)
	if err != nil {
		return nil, err
	}
	t := &Translator{a: a, o: o, sym: in.Symbol}
	if t.sym == nil {
		t.sym = func(uint64) string { return "" }
	}
	t.pltFuncs, t.pltSpans, t.pltNames, t.pltDiags = a.pltSections(in.PLTs)
	return t, nil
}

// ABI returns the SFrame ABI and the header's fixed FP and RA offsets of
// the functions the translation emits, for the encoder (sframe.Options).
func (t *Translator) ABI() (id sframe.ABI, fixedFP, fixedRA int8) {
	return t.a.id, t.a.fixedFP, t.a.fixedRA
}

// PLTs hands the functions of the PLT sections described from their
// instructions to emit, and reports the PLT sections that are not (left
// to their CFI). Each function and its rows are valid only during the
// call to emit (their memory is reused); with Options.OutermostGap a
// function is handed over in its parts. An error from emit stops it.
func (t *Translator) PLTs(emit func(*sframe.Function) error) (*Result, error) {
	res := &Result{}
	res.Diags = append(res.Diags, t.pltDiags...)
	res.PLTFuncs = len(t.pltFuncs)
	out := emitter(emit, t.o)
	for _, fn := range t.pltFuncs {
		if err := out(fn); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Functions translates every function src gives, in order, handing each
// to emit as PLTs does; an error from emit or src stops the translation.
// src may be a part of a file's functions:
// two parts translate apart as they do together when they are cut where
// Cuts says.
func (t *Translator) Functions(src Source, emit func(*sframe.Function) error) (*Result, error) {
	res := &Result{}
	if src == nil {
		return res, nil
	}
	a := t.a // its rows are this call's
	out := emitter(emit, t.o)
	var seq sequence
	var last uint64
	var dc directCIE
	var direct []sframe.Row
	for n := 0; ; {
		f, err := src.Next()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		var taken bool
		var tab *cfi.Table
		if direct, taken = a.directRows(f, &dc, direct); !taken {
			if tab = src.Table(); tab == nil {
				continue // not executable: left out, as the source keeps its error
			}
		}
		if n > 0 && f.Start < last {
			return nil, fmt.Errorf("functions out of order: %#x after %#x", f.Start, last)
		}
		last = f.Start
		n++
		fi := fnIn{f: f, tab: tab, direct: direct, src: src}
		if err := t.function(&a, &fi, &seq, out, res); err != nil {
			return nil, err
		}
	}
}

// fnIn is one function to translate: its FDE and its executed table, or
// (tab nil) the rows the direct path made of it (direct, meaningless
// otherwise), with the source that executes it when the table is needed
// after all.
type fnIn struct {
	f      *cfi.FDE
	tab    *cfi.Table
	direct []sframe.Row
	src    Source
}

// table returns the function's executed table.
func (fi *fnIn) table() *cfi.Table {
	if fi.tab == nil {
		fi.tab = fi.src.Table()
	}
	return fi.tab
}

// function decides about one CFI function, in the order of the checks
// Describer makes too: ignored for its range, inside a PLT section
// described from its instructions, overlapping the function before it,
// then describe. A function's note (cfi.FDE.Note: Go's, from-code) is reported before
// the decision, as a remark (not Skipped).
func (t *Translator) function(a *abi, fi *fnIn, seq *sequence, emit func(sframe.Function) error, res *Result) error {
	f := fi.f
	if ignored(f.Start, f.Size) {
		res.empty++
		return nil
	}
	if j := spanIndex(t.pltSpans, f.Start, f.End()); j >= 0 {
		// CFI for a PLT described from its instructions: say so when
		// the two disagree.
		tab := fi.table()
		if tab == nil {
			return nil // cannot happen: the direct path takes only FDEs that execute
		}
		if d := a.checkPLTCFI(tab, t.pltFuncs); d != nil {
			d.Symbol = t.pltNames[j]
			res.Diags = append(res.Diags, *d)
		}
		return nil
	}
	if overlaps, prev := seq.next(f.Start, f.End()); overlaps {
		d := overlapDiag(f, prev)
		d.Symbol = t.sym(f.Start)
		res.Diags = append(res.Diags, *d)
		return nil
	}
	if code, detail := f.Note(); code != "" {
		// A Go function's rules that its code does not give: a remark,
		// the function is described all the same.
		res.Diags = append(res.Diags, Diagnostic{Start: f.Start, End: f.End(), Symbol: t.sym(f.Start), PC: f.Start, Reason: Reason(code), Detail: detail})
	}
	var fn sframe.Function
	var fns []sframe.Function
	var d *Diagnostic
	if fi.tab == nil {
		// The direct path's rows: no PLT expression, no diagnostic, no
		// outermost row.
		fn = sframe.Function{Start: f.Start, Size: uint32(f.Size), PCType: sframe.PCInc, Signal: f.CIE.Signal, Rows: fi.direct}
	} else {
		fn, fns, d = a.describe(fi.tab, t.o)
	}
	switch {
	case fns != nil:
		// A PLT known only from its CFI (no section headers).
		for _, fn := range fns {
			if err := emit(fn); err != nil {
				return err
			}
		}
		res.PLTFuncs += len(fns)
	case d != nil:
		d.Symbol = t.sym(f.Start)
		if t.o.SignalOutermost && t.o.Version >= sframe.Version3 && f.CIE.Signal && d.Reason != FunctionSize && d.Reason != Outermost && f.Size > 0 {
			d.Detail += "; written as a signal FDE whose one FRE says RA undefined (outermost frame)"
			if err := emit(sframe.Function{Start: f.Start, Size: uint32(f.Size), PCType: sframe.PCInc, Signal: true,
				Rows: []sframe.Row{{Start: 0, RAUndefined: true}}}); err != nil {
				return err
			}
		}
		res.Diags = append(res.Diags, *d)
	default:
		if err := emit(fn); err != nil {
			return err
		}
		res.Converted++
	}
	return nil
}

// emitter returns the function a translation hands each function to: to,
// after splitting it for Options.OutermostGap.
func emitter(to func(*sframe.Function) error, o Options) func(sframe.Function) error {
	var cur sframe.Function // what is handed over, not reallocated per call
	return func(fn sframe.Function) error {
		if o.OutermostGap && fn.PCType == sframe.PCInc && hasOutermost(fn.Rows) {
			return splitOutermost(fn, func(part sframe.Function) error {
				cur = part
				return to(&cur)
			})
		}
		cur = fn
		return to(&cur)
	}
}

// Cuts returns where functions sorted by start address (entries, as a
// Source gives them) can be cut into parts that Functions translates
// apart as they are translated together: for each index in from
// (ascending), the first index at or after it that no function before it
// reaches, in one pass, each cut once, none at len(entries). Overlap with
// the functions before is the only link between functions; functions
// the Translator ignores for their range do not count.
func Cuts(entries []cfi.Entry, from []int) []int {
	var cuts []int
	var reach uint64 // the furthest end before index i
	for i, e := range entries {
		if len(from) == 0 {
			break
		}
		if i >= from[0] && e.Start >= reach {
			if len(cuts) == 0 || cuts[len(cuts)-1] != i {
				cuts = append(cuts, i)
			}
			for len(from) > 0 && from[0] <= i {
				from = from[1:]
			}
		}
		if !ignored(e.Start, e.Size) {
			reach = max(reach, e.Start+e.Size)
		}
	}
	return cuts
}

// collect returns an emit function that appends a copy of every function
// (its rows included) to *funcs, for a caller that keeps them all.
func collect(funcs *[]sframe.Function) func(*sframe.Function) error {
	return func(fn *sframe.Function) error {
		c := *fn
		c.Rows = slices.Clone(fn.Rows)
		*funcs = append(*funcs, c)
		return nil
	}
}

// splitOutermost hands the runs of fn's rows between RA-undefined rows
// to emit, each as a function of its own that ends where the next
// RA-undefined row starts. A function that is outermost throughout gives
// none.
func splitOutermost(fn sframe.Function, emit func(sframe.Function) error) error {
	rows := fn.Rows
	for i := 0; i < len(rows); {
		if rows[i].RAUndefined {
			i++
			continue
		}
		j := i
		for j < len(rows) && !rows[j].RAUndefined {
			j++
		}
		lo, hi := rows[i].Start, fn.Size
		if j < len(rows) {
			hi = rows[j].Start
		}
		if hi > lo {
			part := fn
			part.Start = fn.Start + uint64(lo)
			part.Size = hi - lo
			part.Rows = make([]sframe.Row, j-i)
			for k := i; k < j; k++ {
				r := rows[k]
				r.Start -= lo
				part.Rows[k-i] = r
			}
			if err := emit(part); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

func hasOutermost(rows []sframe.Row) bool {
	for _, r := range rows {
		if r.RAUndefined {
			return true
		}
	}
	return false
}

// ignored says whether the Translator passes over an FDE for its range alone:
// an empty one, or one at address 0 (a function the linker discarded).
// It counts them (Result.empty) and reports nothing.
func ignored(start, size uint64) bool { return size == 0 || start == 0 }

// sequence is the one decision that links a function to those before it:
// an FDE that overlaps the last one taken (in order of start address) is
// skipped (Overlap). Only FDEs that can be executed take part.
type sequence struct{ lastEnd uint64 }

// next takes the next FDE's range [start, end) and says whether it is
// skipped for overlapping the last one taken, which ends at prev.
func (s *sequence) next(start, end uint64) (overlaps bool, prev uint64) {
	if start < s.lastEnd {
		return true, s.lastEnd
	}
	s.lastEnd = end
	return false, 0
}

// overlapDiag is the diagnostic of an FDE skipped for overlapping a
// function that ends at prev.
func overlapDiag(f *cfi.FDE, prev uint64) *Diagnostic {
	return &Diagnostic{Start: f.Start, End: f.End(), PC: f.Start, Reason: Overlap,
		Detail: fmt.Sprintf("FDE at offset %#x overlaps the function before it (ends at %#x)", f.Offset, prev), Skipped: true}
}

// describe is the decision about one FDE's function once its place has
// been decided (ignored, a PLT section, sequence): a PLT known only from
// its CFI gives plt, the functions of its description; any other function
// gives fn, or the diagnostic (Skipped, without Symbol) when it is not
// described.
func (a *abi) describe(t *cfi.Table, o Options) (fn sframe.Function, plt []sframe.Function, d *Diagnostic) {
	if fns, ok := a.pltFromCFI(t); ok {
		return fn, fns, nil
	}
	f := t.FDE
	fn, d = a.function(t)
	if d == nil && o.OutermostGap && fn.PCType == sframe.PCInc && outermostOnly(fn.Rows) {
		// splitOutermost would leave nothing of it: say so.
		d = skip(f.Start, Outermost, "the return address is undefined at every PC (the outermost frame), and outermost PCs are left without an FRE")
	}
	if d != nil {
		d.Start, d.End, d.Skipped = f.Start, f.End(), true
	}
	return fn, nil, d
}

// outermostOnly says whether every row has the return address undefined.
func outermostOnly(rows []sframe.Row) bool {
	for _, r := range rows {
		if !r.RAUndefined {
			return false
		}
	}
	return len(rows) > 0
}

// pltSections describes the PLT sections from their instructions: the
// functions, the ranges and names of the sections described, and a
// diagnostic for each section that is not (which is left to its CFI).
func (a *abi) pltSections(ps []PLT) (funcs []sframe.Function, spans []span, names []string, diags []Diagnostic) {
	for _, p := range ps {
		fns, diag := a.plt(p)
		if diag != nil {
			diag.Symbol = p.Name
			diags = append(diags, *diag)
		}
		if len(fns) == 0 {
			continue
		}
		funcs = append(funcs, fns...)
		spans = append(spans, span{p.Addr, p.Addr + uint64(len(p.Data))})
		names = append(names, p.Name)
	}
	return funcs, spans, names, diags
}

type span struct{ lo, hi uint64 }

// spanIndex returns the index of the first span [lo, hi) overlaps, or -1.
func spanIndex(s []span, lo, hi uint64) int {
	for i, x := range s {
		if lo < x.hi && x.lo < hi {
			return i
		}
	}
	return -1
}

// skip builds the diagnostic for a function that cannot be described.
func skip(pc uint64, r Reason, format string, args ...any) *Diagnostic {
	return &Diagnostic{PC: pc, Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// function translates one FDE's rows.
func (a *abi) function(t *cfi.Table) (sframe.Function, *Diagnostic) {
	f := t.FDE
	fn := sframe.Function{Start: f.Start, PCType: sframe.PCInc, Signal: f.CIE.Signal}
	if f.Size > math.MaxUint32 {
		return fn, skip(f.Start, FunctionSize, "%d bytes", f.Size)
	}
	fn.Size = uint32(f.Size)
	if a.arch.PointerAuth() {
		fn.PauthKeyB = f.CIE.BKey
	}
	if f.CIE.RAColumn != a.ra {
		return fn, skip(f.Start, ReturnColumn, "CIE at offset %#x names register %d as the return address", f.CIE.Offset, f.CIE.RAColumn)
	}
	rows := a.rows[:0]
	defer func() { a.rows = rows[:0] }()
	for i := range t.Rows {
		cr := &t.Rows[i]
		if cr.Loc >= f.End() {
			break
		}
		argsSet := cr.ArgsSize != 0 && (i == 0 || t.Rows[i-1].ArgsSize != cr.ArgsSize)
		// Made in place: a row built apart and copied in is two copies of
		// it per row.
		rows = append(rows, sframe.Row{})
		r := &rows[len(rows)-1]
		flexWhy, d := a.row(cr, argsSet, r)
		if d != nil {
			return fn, d
		}
		if flexWhy != nil {
			if !a.flexOK {
				if a.flexABI {
					flexWhy.Detail += " (needs an SFrame V3 flexible FDE)"
				}
				return fn, flexWhy
			}
			fn.Flex = true
		}
		r.Start = uint32(cr.Loc - f.Start)
		// Rows equal in SFrame terms collapse, unless an instruction set
		// the CFA, FP or RA rule there (GNU as starts a row then).
		if n := len(rows); n > 1 && sameRow(&rows[n-2], r) && !cr.Touches(a.fp, a.ra, a.fixedRA == 0) {
			rows = rows[:n-1]
		}
	}
	rows = lastAdvanceRow(rows, f, t.LastAdvance)
	if len(rows) > math.MaxUint16 {
		return fn, skip(f.Start, TooManyRows, "%d rows (at most %d)", len(rows), math.MaxUint16)
	}
	fn.Rows = rows
	return fn, nil
}

// lastAdvanceRow ends f's rows as GNU as ends every function: with the
// row being built at the last location advance la (0: none inside f),
// even when nothing SFrame tracks changed there (gen-sframe.c links in
// its scratchpad FRE unconditionally), so that objects come out as as
// --gsframe makes them.
func lastAdvanceRow(rows []sframe.Row, f *cfi.FDE, la uint64) []sframe.Row {
	if la > f.Start && la < f.End() && len(rows) > 0 {
		if last := rows[len(rows)-1]; uint64(last.Start) < la-f.Start {
			last.Start = uint32(la - f.Start)
			rows = append(rows, last)
		}
	}
	return rows
}

func sameRow(a, b *sframe.Row) bool {
	if a.RAUndefined || b.RAUndefined {
		return a.RAUndefined == b.RAUndefined && a.MangledRA == b.MangledRA
	}
	return a.CFA == b.CFA && a.RA == b.RA && a.FP == b.FP && a.MangledRA == b.MangledRA
}
