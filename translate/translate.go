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
// instructions (arch/amd64, arch/arm64, arch/s390x).
package translate

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/arch/amd64"
	"github.com/cfi2sframe/cfi2sframe/arch/arm64"
	"github.com/cfi2sframe/cfi2sframe/arch/s390x"
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
	// diagnostic stays (Skipped). Off by default: verify reads such an
	// FDE as "RA undefined" and reports it against the CFI.
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
	Name    string // ".plt", ".plt.sec", ".plt.got"
	Addr    uint64
	Data    []byte
	EntSize uint64 // sh_entsize (0 when unset)
}

// Input is what Translate works from.
type Input struct {
	Machine elf.Machine // EM_X86_64, EM_AARCH64 or EM_S390
	Order   binary.ByteOrder
	Tables  []*cfi.Table
	// FDEs with Exec, instead of Tables, stream: Translate executes one
	// FDE at a time through Exec (cfi.Stream.Execute) and keeps nothing of
	// its table, so memory grows with one function's rows. An FDE whose
	// execution fails is left out, as a table Load could not make is.
	FDEs []*cfi.FDE
	Exec func(*cfi.FDE) (*cfi.Table, error)
	// Entries with ExecEntry, instead of FDEs and Exec, stream the same
	// way from compact entries (cfi.Index, cfi.Stream.ExecuteEntry); the
	// FDE of the table ExecEntry returns may be reused by the next call.
	// ExecEntry is used when set, else Exec, else Tables.
	Entries   []cfi.Entry
	ExecEntry func(cfi.Entry) (*cfi.Table, error)
	PLTs      []PLT
	Symbol    func(addr uint64) string // may be nil; called only for functions with a diagnostic
	// Emit, when set, receives every function instead of Result.Funcs
	// (which stays empty): the PLT functions first, then the others by
	// start address, each already split for Options.OutermostGap, in the
	// order Result.Funcs would have them before its final stable sort by
	// start address. The function and its rows are valid only during the
	// call (the rows' memory is reused). An error stops the translation.
	Emit func(*sframe.Function) error
	// Second, when set together with ExecEntry and Emit, lets Translate
	// work on two goroutines: it may call Second once, with the number of
	// FDEs of the second part, to get an execution
	// function (independent of ExecEntry, for use on another goroutine)
	// and an Emit for the second part of the functions, which then go to
	// that Emit instead of Emit. Every function given to it comes after
	// every function given to Emit, in the order above; the caller joins
	// the two streams after Translate returns. The Symbol function must
	// then be safe for concurrent use. Diagnostics and counts are the
	// same as without Second.
	Second func(n int) (exec func(cfi.Entry) (*cfi.Table, error), emit func(*sframe.Function) error)
}

// minSplit is the fewest FDEs Translate splits between two goroutines
// (Input.Second): fewer are not worth a goroutine. A variable for the
// tests.
var minSplit = 4096

// Result is the translation of one file.
type Result struct {
	ABI        sframe.ABI
	CFAFixedFP int8
	CFAFixedRA int8
	Funcs      []sframe.Function // sorted by start address; empty with Input.Emit
	Diags      []Diagnostic      // functions skipped or described differently from their CFI
	Converted  int               // functions in Funcs that came from CFI
	PLTFuncs   int               // functions in Funcs described from PLT instructions
	Skipped    int               // CFI functions with a diagnostic and no SFrame
	Empty      int               // zero-size or discarded (address 0) FDEs, ignored
}

// Summary is a one-line account of the translation.
func (r *Result) Summary() string {
	s := fmt.Sprintf("%d functions converted", r.Converted)
	if r.PLTFuncs > 0 {
		s += fmt.Sprintf(" (+%d PLT)", r.PLTFuncs)
	}
	s += fmt.Sprintf(", %d skipped", r.Skipped)
	counts := map[Reason]int{}
	for _, d := range r.Diags {
		if d.Skipped {
			counts[d.Reason]++
		}
	}
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

// abi holds the register facts of one ABI.
type abi struct {
	id      sframe.ABI
	sp, fp  uint64
	ra      uint64
	amd64   bool
	arm64   bool
	s390x   bool
	flexABI bool // the ABI has flexible FDEs (AMD64 and s390x, as gas writes them)
	fixedRA int8
	fixedFP int8
	flexOK  bool // flexible FDEs allowed (V3 on a flexABI)
	version uint8
	reuse   bool         // function's rows go into rows, reused (Input.Emit)
	rows    []sframe.Row // the reused rows
}

// ErrMachine is wrapped by the error for an unsupported machine.
var ErrMachine = errors.New("unsupported machine")

func newABI(m elf.Machine, order binary.ByteOrder) (abi, error) {
	var a abi
	switch m {
	case elf.EM_X86_64:
		a = abi{id: sframe.ABIAMD64LE, sp: amd64.SP, fp: amd64.FP, ra: amd64.RA, amd64: true, flexABI: true}
	case elf.EM_AARCH64:
		a = abi{id: sframe.ABIAArch64LE, sp: arm64.SP, fp: arm64.FP, ra: arm64.RA, arm64: true}
		if order == binary.BigEndian {
			a.id = sframe.ABIAArch64BE
		}
	case elf.EM_S390:
		a = abi{id: sframe.ABIS390XBE, sp: s390x.SP, fp: s390x.FP, ra: s390x.RA, s390x: true, flexABI: true}
	default:
		return a, fmt.Errorf("%w %v", ErrMachine, m)
	}
	a.fixedFP, a.fixedRA = sframe.DefaultFixedOffsets(a.id)
	return a, nil
}

// ABI returns the SFrame ABI and the header's fixed FP and RA offsets
// Translate uses for a machine (Result.ABI, CFAFixedFP, CFAFixedRA), for
// a caller that starts an encoder before translating (Input.Emit).
func ABI(m elf.Machine, order binary.ByteOrder) (id sframe.ABI, fixedFP, fixedRA int8, err error) {
	a, err := newABI(m, order)
	return a.id, a.fixedFP, a.fixedRA, err
}

// Translate converts every table (and PLT section) of one file.
func Translate(in Input, o Options) (*Result, error) {
	if o.Version == 0 {
		o.Version = sframe.Version3
	}
	if o.Version != sframe.Version2 && o.Version != sframe.Version3 {
		return nil, fmt.Errorf("SFrame version %d cannot be written", o.Version)
	}
	a, err := newABI(in.Machine, in.Order)
	if err != nil {
		return nil, err
	}
	a.version = o.Version
	a.flexOK = a.flexABI && o.Version >= sframe.Version3
	a.reuse = in.Emit != nil
	res := &Result{ABI: a.id, CFAFixedFP: a.fixedFP, CFAFixedRA: a.fixedRA}
	sym := in.Symbol
	if sym == nil {
		sym = func(uint64) string { return "" }
	}
	emit := emitter(in.Emit, o, res)
	// PLT sections first: their description replaces any CFI covering them.
	pltFuncs, pltSpans, pltNames, pltDiags := a.pltSections(in.PLTs)
	res.Diags = append(res.Diags, pltDiags...)
	res.PLTFuncs += len(pltFuncs)
	for _, fn := range pltFuncs {
		if err := emit(fn); err != nil {
			return nil, err
		}
	}

	// The FDEs: given with their tables, or executed on demand. Only
	// indices are sorted and kept.
	var (
		count   int
		rangeOf func(i int) (start, size uint64, ok bool)
		table   func(i int) *cfi.Table
	)
	switch {
	case in.ExecEntry != nil:
		count = len(in.Entries)
		rangeOf = func(i int) (uint64, uint64, bool) { e := &in.Entries[i]; return e.Start, e.Size, true }
		table = func(i int) *cfi.Table {
			t, err := in.ExecEntry(in.Entries[i])
			if err != nil {
				return nil
			}
			return t
		}
	case in.Exec != nil:
		count = len(in.FDEs)
		rangeOf = func(i int) (uint64, uint64, bool) {
			f := in.FDEs[i]
			if f == nil {
				return 0, 0, false
			}
			return f.Start, f.Size, true
		}
		table = func(i int) *cfi.Table {
			t, err := in.Exec(in.FDEs[i])
			if err != nil {
				return nil
			}
			return t
		}
	default:
		count = len(in.Tables)
		rangeOf = func(i int) (uint64, uint64, bool) {
			t := in.Tables[i]
			if t == nil || t.FDE == nil {
				return 0, 0, false
			}
			return t.FDE.Start, t.FDE.Size, true
		}
		table = func(i int) *cfi.Table { return in.Tables[i] }
	}
	keep := make([]int, 0, count)
	for i := range count {
		start, size, ok := rangeOf(i)
		if !ok {
			continue
		}
		if ignored(start, size) {
			if table(i) != nil {
				res.Empty++
			}
			continue
		}
		if j := spanIndex(pltSpans, start, start+size); j >= 0 {
			// CFI for a PLT described from its instructions: say so
			// when the two disagree.
			if t := table(i); t != nil {
				if d := a.checkPLTCFI(t, pltFuncs); d != nil {
					d.Symbol = pltNames[j]
					res.Diags = append(res.Diags, *d)
				}
			}
			continue
		}
		keep = append(keep, i)
	}
	startOf := func(i int) uint64 { s, _, _ := rangeOf(i); return s }
	slices.SortStableFunc(keep, func(x, y int) int { return cmp.Compare(startOf(x), startOf(y)) })
	if c := cutPoint(keep, rangeOf, in.ExecEntry != nil && in.Emit != nil && in.Second != nil); c > 0 {
		exec2, emit2 := in.Second(len(keep) - c)
		b, err := newABI(in.Machine, in.Order)
		if err != nil {
			return nil, err
		}
		b.version, b.flexOK, b.reuse = a.version, a.flexOK, a.reuse
		res2 := &Result{}
		table2 := func(i int) *cfi.Table {
			t, err := exec2(in.Entries[i])
			if err != nil {
				return nil
			}
			return t
		}
		done := make(chan error, 1)
		go func() { done <- b.functions(keep[c:], table2, emitter(emit2, o, res2), sym, o, res2) }()
		errA := a.functions(keep[:c], table, emit, sym, o, res)
		errB := <-done
		if errA != nil {
			return nil, errA
		}
		if errB != nil {
			return nil, errB
		}
		res.Diags = append(res.Diags, res2.Diags...)
		res.Skipped += res2.Skipped
		res.Converted += res2.Converted
		res.PLTFuncs += res2.PLTFuncs
		return res, nil
	}
	if err := a.functions(keep, table, emit, sym, o, res); err != nil {
		return nil, err
	}
	if in.Emit != nil {
		return res, nil
	}
	if o.OutermostGap {
		res.Funcs = splitOutermost(res.Funcs)
	}
	sort.SliceStable(res.Funcs, func(i, j int) bool { return res.Funcs[i].Start < res.Funcs[j].Start })
	return res, nil
}

// emitter returns the function Translate hands each function to: to
// Emit (split for Options.OutermostGap), or into res.Funcs without Emit.
func emitter(to func(*sframe.Function) error, o Options, res *Result) func(sframe.Function) error {
	var cur sframe.Function // what emit hands over, not reallocated per call
	var one [1]sframe.Function
	return func(fn sframe.Function) error {
		if to == nil {
			res.Funcs = append(res.Funcs, fn)
			return nil
		}
		if o.OutermostGap && fn.PCType == sframe.PCInc && hasOutermost(fn.Rows) {
			one[0] = fn
			for _, part := range splitOutermost(one[:]) {
				cur = part
				if err := to(&cur); err != nil {
					return err
				}
			}
			return nil
		}
		cur = fn
		return to(&cur)
	}
}

// cutPoint returns where keep (sorted by start) can be cut in two parts
// that translate alone as they do together: no FDE before the cut reaches
// the first one after it, so the overlap check, the only link between
// functions, sees the same. 0 when there is no such point near the middle
// or splitting is off.
func cutPoint(keep []int, rangeOf func(int) (uint64, uint64, bool), on bool) int {
	if !on || len(keep) < minSplit {
		return 0
	}
	var reach uint64 // the furthest end before index i
	mid := len(keep) / 2
	for i, k := range keep {
		start, size, _ := rangeOf(k)
		if i >= mid && start >= reach {
			if i >= len(keep)-len(keep)/8 {
				return 0 // too lopsided to be worth it
			}
			return i
		}
		reach = max(reach, start+size)
	}
	return 0
}

// functions translates the FDEs keep (sorted by start address) in order,
// handing each function to emit and adding diagnostics and counts to res.
// What it decides for each FDE, a Describer decides the same way (the
// same sequence and describe).
func (a *abi) functions(keep []int, table func(int) *cfi.Table, emit func(sframe.Function) error, sym func(uint64) string, o Options, res *Result) error {
	var seq sequence
	for _, k := range keep {
		t := table(k)
		if t == nil {
			continue
		}
		f := t.FDE
		if overlaps, prev := seq.next(f.Start, f.End()); overlaps {
			d := overlapDiag(f, prev)
			d.Symbol = sym(f.Start)
			res.Skipped++
			res.Diags = append(res.Diags, *d)
			continue
		}
		fn, fns, d := a.describe(t, o)
		if fns != nil {
			// A PLT known only from its CFI (no section headers).
			for _, fn := range fns {
				if err := emit(fn); err != nil {
					return err
				}
			}
			res.PLTFuncs += len(fns)
			continue
		}
		if d != nil {
			d.Symbol = sym(f.Start)
			if o.SignalOutermost && o.Version >= sframe.Version3 && f.CIE.Signal && d.Reason != FunctionSize && d.Reason != Outermost && f.Size > 0 {
				d.Detail += "; written as a signal FDE whose one FRE says RA undefined (outermost frame)"
				if err := emit(sframe.Function{Start: f.Start, Size: uint32(f.Size), PCType: sframe.PCInc, Signal: true,
					Rows: []sframe.Row{{Start: 0, RAUndefined: true}}}); err != nil {
					return err
				}
			}
			res.Diags = append(res.Diags, *d)
			res.Skipped++
			continue
		}
		if err := emit(fn); err != nil {
			return err
		}
		res.Converted++
	}
	return nil
}

// splitOutermost rewrites every PCInc function with RA-undefined rows as
// the runs of its other rows, each a function of its own that ends where
// the next RA-undefined row starts. A function that is outermost
// throughout disappears.
func splitOutermost(funcs []sframe.Function) []sframe.Function {
	out := funcs[:0:0]
	for _, fn := range funcs {
		if fn.PCType != sframe.PCInc || !hasOutermost(fn.Rows) {
			out = append(out, fn)
			continue
		}
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
				out = append(out, part)
			}
			i = j
		}
	}
	return out
}

func hasOutermost(rows []sframe.Row) bool {
	for _, r := range rows {
		if r.RAUndefined {
			return true
		}
	}
	return false
}

// ignored says whether Translate passes over an FDE for its range alone:
// an empty one, or one at address 0 (a function the linker discarded).
// It counts them (Result.Empty) and reports nothing.
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
		Detail: fmt.Sprintf("FDE at offset %d overlaps the function before it (ends at %#x)", f.Offset, prev), Skipped: true}
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
	if a.arm64 {
		fn.PauthKeyB = f.CIE.BKey
	}
	if f.CIE.RAColumn != a.ra {
		return fn, skip(f.Start, ReturnColumn, "CIE at offset %d names register %d as the return address", f.CIE.Offset, f.CIE.RAColumn)
	}
	var rows []sframe.Row
	if a.reuse {
		rows = a.rows[:0]
		defer func() { a.rows = rows[:0] }()
	} else {
		rows = make([]sframe.Row, 0, len(t.Rows))
	}
	for i := range t.Rows {
		cr := &t.Rows[i]
		if cr.Loc >= f.End() {
			break
		}
		argsSet := cr.ArgsSize != 0 && (i == 0 || t.Rows[i-1].ArgsSize != cr.ArgsSize)
		r, flexWhy, d := a.row(cr, argsSet)
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
		if n := len(rows); n > 0 && sameRow(&rows[n-1], &r) && !a.touches(cr.Touched) {
			continue
		}
		rows = append(rows, r)
	}
	// GNU as ends every function with the row being built at the last
	// location advance, even when nothing SFrame tracks changed there
	// (gen-sframe.c links in its scratchpad FRE unconditionally). Do the
	// same, so that objects come out as as --gsframe makes them.
	if la := t.LastAdvance; la > f.Start && la < f.End() && len(rows) > 0 {
		if last := rows[len(rows)-1]; uint64(last.Start) < la-f.Start {
			last.Start = uint32(la - f.Start)
			rows = append(rows, last)
		}
	}
	if len(rows) > math.MaxUint16 {
		return fn, skip(f.Start, TooManyRows, "%d rows (at most %d)", len(rows), math.MaxUint16)
	}
	fn.Rows = rows
	return fn, nil
}

// touches says whether an interval set a rule GNU as turns into a new
// row: the CFA, FP or RA (RA restores only where RA is tracked per row),
// restore_state, or the RA signing state.
func (a *abi) touches(t cfi.Touch) bool {
	bit := func(r uint64) uint64 { return 1 << r }
	ra := t.Set&bit(a.ra) != 0 || (!a.amd64 && t.Restored&bit(a.ra) != 0)
	return t.CFA || t.RAState || t.RestoreState || ra || (t.Set|t.Restored)&bit(a.fp) != 0
}

func sameRow(a, b *sframe.Row) bool {
	if a.RAUndefined || b.RAUndefined {
		return a.RAUndefined == b.RAUndefined && a.MangledRA == b.MangledRA
	}
	return a.CFA == b.CFA && a.RA == b.RA && a.FP == b.FP && a.MangledRA == b.MangledRA
}
