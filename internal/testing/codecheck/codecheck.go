// Package codecheck judges the code analysis of issue 46
// (internal/codeflow) against CFI: it analyses an ELF file that has CFI
// as if it had none, and compares every row the analysis gives, at every
// instruction it covers, with the CFI row in effect there. A wrong row is
// worse than none, so the count that matters is Result.Wrong; the rest
// measures how much of the code CFI describes the analysis described,
// and why it left out what it left out.
package codecheck

import (
	"debug/elf"
	"github.com/cfi2sframe/cfi2sframe/internal/isa"
	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
	"sort"
	"strconv"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Options are the parts of the analysis Check runs.
type Options struct {
	// Build makes the Code of a file: codeentry.Load with no debug
	// directories and nothing Described. Check sets Code.Described to
	// describe nothing whatever Build gives, so that the CFI's code is
	// analysed too.
	Build func(f *elfread.File) (*codeflow.Code, error)
	// Analyze is the walk: codeflow.Analyze.
	Analyze func(c *codeflow.Code, emit func(codeflow.Func), skip func(codeflow.Skip))
}

// Error is why a file could not be checked.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "codecheck: " + e.Msg
	}
	return "codecheck: " + e.Msg + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Wrong is a PC where the analysis's row disagrees with the CFI.
type Wrong struct {
	PC    uint64
	Func  string // the function symbol covering PC, if the file has one
	Field string // FieldCFA, FieldFP, FieldRA, FieldSigned, FieldRow
	Ours  string
	CFI   string
}

// Function is what became of one FDE's code (a function, or a part of
// one such as foo.cold).
type Function struct {
	Name       string
	Start, End uint64
	PCs        int    // instruction starts
	Described  int    // of PCs, in a Func
	Outcome    string // OutcomeDescribed, OutcomePartly, a codeflow.Reason, or OutcomeNoEntry
}

// The outcomes of a Function or a covered PC that are not a Reason.
const (
	OutcomeDescribed = "described"
	OutcomePartly    = "partly described"
	OutcomeNoEntry   = "no entry"  // neither a Func nor a Skip reached it
	Unreached        = "unreached" // a PC of a function a Func covers in part
)

// Result is the judgement of one file.
type Result struct {
	Machine elf.Machine
	Funcs   int // Funcs the analysis gave
	PCs     int // instruction starts in them
	Judged  int // of PCs, judged against a CFI row
	// Cross is how many of Judged had their CFA judged through the other
	// of SP and FP (Row.SP, Row.FPVal) than the CFI's CFA register.
	Cross     int
	Wrong     []Wrong
	NotJudged map[string]int // PCs of Funcs not judged, by why (NoFDE, ...)
	// Covered is the instruction starts inside FDEs; Described how many of
	// them a Func covers; Left the rest, by Reason (of a Skip covering
	// them), Unreached or OutcomeNoEntry.
	Covered, Described int
	Left               map[string]int
	Functions          []Function
	Skips              []codeflow.Skip
	// Undecoded is bytes of FDEs and Funcs whose instructions did not
	// decode (their PCs are neither judged nor counted).
	Undecoded int
	// Incomplete are the starts of the FDEs whose CFI is one row while
	// the code moves the stack pointer (CFIIncomplete): their PCs where
	// the CFA disagrees are not judged.
	Incomplete []uint64
}

// WrongPCs is how many PCs have at least one wrong field.
func (r *Result) WrongPCs() int {
	seen := map[uint64]bool{}
	for _, w := range r.Wrong {
		seen[w.PC] = true
	}
	return len(seen)
}

// ByOutcome counts the functions by outcome.
func (r *Result) ByOutcome() map[string]int {
	m := map[string]int{}
	for _, f := range r.Functions {
		m[f.Outcome]++
	}
	return m
}

// Check analyses elfBytes, a file with CFI, as if it had none and judges
// every analysed instruction against the CFI.
func Check(elfBytes []byte, opt Options) (*Result, error) {
	if opt.Build == nil || opt.Analyze == nil {
		return nil, &Error{Msg: "Options.Build and Options.Analyze are both needed"}
	}
	ef, err := elfread.NewFileBytes(elfBytes, "")
	if err != nil {
		return nil, &Error{Msg: "reading the ELF file", Err: err}
	}
	defer ef.Close()
	a, err := abiOf(ef.ELF.Machine)
	if err != nil {
		return nil, err
	}
	refs, err := reference(elfBytes, a)
	if err != nil {
		return nil, err
	}
	code, err := opt.Build(ef)
	if err != nil {
		return nil, &Error{Msg: "building the code", Err: err}
	}
	code.Described = func(lo, hi uint64) bool { return false }
	res := &Result{Machine: ef.ELF.Machine, NotJudged: map[string]int{}, Left: map[string]int{}}
	var funcs []codeflow.Func
	opt.Analyze(code, func(f codeflow.Func) { funcs = append(funcs, f) },
		func(s codeflow.Skip) { res.Skips = append(res.Skips, s) })
	name := ef.Symbolizer()
	for i := range funcs {
		res.judgeFunc(a, code, refs, &funcs[i])
	}
	for i := range res.Wrong {
		res.Wrong[i].Func = name(res.Wrong[i].PC)
	}
	res.cover(code, refs, funcs, name)
	return res, nil
}

// incomplete says v's CFA disagreement is the CFI's: its FDE is one row,
// the entry's, while the row knows the stack pointer has moved from the
// entry's place.
func incomplete(a abi, ref *refFunc, row *codeflow.Row, v verdict) bool {
	return len(ref.rows) == 1 && row.SP.Known && row.SP.Off != a.entrySP && v.has(FieldCFA)
}

// stale says v's CFA disagreement at pc is the CFI's: its row in effect
// (from cr.loc, the CFA from SP) agrees with ours there, and every change
// of the SP our rows know (Row.SP, whatever base they give the CFA from)
// between cr.loc and pc is made by an instruction that moves SP by that
// constant (push, pop, add or sub of an immediate, lea off SP; AArch64:
// add or sub of SP, a pre- or post-indexed store or load through SP),
// for which the CFI has no row: it keeps the offset SP had before
// (libLLVM-15's epilogues leave `add $8,%rsp` before a conditional tail
// call without a row, and some prologues a push until after the next
// instruction).
func stale(a abi, c *codeflow.Code, f *codeflow.Func, pcs []uint64, cr *refRow, pc uint64, v verdict) bool {
	if !v.has(FieldCFA) || cr.cfaExpr || cr.cfaReg != a.sp || cr.loc < f.Start {
		return false
	}
	// sp is the CFA's offset from SP our row at x knows.
	sp := func(x uint64) (int64, bool) {
		r := &f.Rows[sort.Search(len(f.Rows), func(i int) bool { return f.Rows[i].PC > x })-1]
		return -r.SP.Off, r.SP.Known
	}
	if off, ok := sp(cr.loc); !ok || off != cr.cfaOff {
		return false
	}
	if _, ok := sp(pc); !ok {
		return false
	}
	prev := uint64(0) // the instruction before each one, in pcs
	for _, x := range pcs {
		if x > pc {
			break
		}
		if x > cr.loc {
			now, ok1 := sp(x)
			was, ok2 := sp(prev)
			if !ok1 || !ok2 {
				return false
			}
			if d := now - was; d != 0 {
				if m, ok := spDelta(c, prev); !ok || m != d {
					return false
				}
			}
		}
		prev = x
	}
	return true
}

// contradicted says v's CFA disagreement at pc is the CFI's: its next
// row (from SP) gives another offset, though no instruction from pc to
// that row moves SP or branches away without falling through, and our
// row gives that next row's offset (x86-64; libLLVM-15 starts a block
// after a return with the offset of before an `add $8,%rsp` its paths in
// have run).
func contradicted(a abi, c *codeflow.Code, ref *refFunc, cr *refRow, row *codeflow.Row, pcs []uint64, pc uint64, v verdict) bool {
	if !v.has(FieldCFA) || c.Machine != elf.EM_X86_64 || cr.cfaExpr || cr.cfaReg != a.sp || !row.SP.Known {
		return false
	}
	var next *refRow
	for i := range ref.rows {
		if ref.rows[i].loc > pc {
			next = &ref.rows[i]
			break
		}
	}
	if next == nil || next.cfaExpr || next.cfaReg != a.sp || next.cfaOff == cr.cfaOff || -row.SP.Off != next.cfaOff {
		return false
	}
	for _, x := range pcs {
		if x < pc {
			continue
		}
		if x >= next.loc {
			return x == next.loc
		}
		in, err := isa.AMD64(text(c, x))
		if err != nil || !keepsSP(in) {
			return false
		}
	}
	return false
}

// keepsSP says in leaves RSP as it is and falls through (a conditional
// branch may also jump).
func keepsSP(in x86asm.Inst) bool {
	switch in.Op {
	case x86asm.PUSH, x86asm.POP, x86asm.CALL, x86asm.RET, x86asm.JMP, x86asm.LEAVE, x86asm.ENTER,
		x86asm.PUSHF, x86asm.POPF, x86asm.PUSHFQ, x86asm.POPFQ, x86asm.UD2, x86asm.HLT, x86asm.INT:
		return false
	}
	for _, arg := range in.Args {
		if r, ok := arg.(x86asm.Reg); ok && (r == x86asm.RSP || r == x86asm.ESP || r == x86asm.SP) {
			return false
		}
	}
	return true
}

// spDelta is how much the instruction at pc adds to the CFA's offset
// from SP (what it takes off SP), when it moves SP by a constant.
func spDelta(c *codeflow.Code, pc uint64) (int64, bool) {
	b := text(c, pc)
	if c.Machine == elf.EM_AARCH64 {
		return spDeltaARM64(b)
	}
	in, err := isa.AMD64(b)
	if err != nil {
		return 0, false
	}
	imm, isImm := in.Args[1].(x86asm.Imm)
	switch {
	case in.Op == x86asm.PUSH && in.Args[0] != nil:
		return 8, true
	case in.Op == x86asm.POP && in.Args[0] != nil:
		return -8, true
	case in.Op == x86asm.ADD && in.Args[0] == x86asm.RSP && isImm:
		return -int64(imm), true
	case in.Op == x86asm.SUB && in.Args[0] == x86asm.RSP && isImm:
		return int64(imm), true
	case in.Op == x86asm.LEA && in.Args[0] == x86asm.RSP:
		if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RSP && m.Index == 0 {
			return -m.Disp, true
		}
	}
	return 0, false
}

func spDeltaARM64(b []byte) (int64, bool) {
	in, err := isa.ARM64(b)
	if err != nil {
		return 0, false
	}
	sp := arm64asm.RegSP(arm64asm.SP)
	switch in.Op {
	case arm64asm.ADD, arm64asm.SUB:
		is, ok := in.Args[2].(arm64asm.ImmShift)
		if in.Args[0] != sp || in.Args[1] != sp || !ok {
			return 0, false
		}
		v, ok := isa.ARM64ImmShift(is)
		if in.Op == arm64asm.ADD {
			v = -v
		}
		return v, ok
	case arm64asm.STP, arm64asm.LDP, arm64asm.STR, arm64asm.LDR:
		for _, x := range in.Args {
			if m, ok := x.(arm64asm.MemImmediate); ok && m.Base == sp && (m.Mode == arm64asm.AddrPreIndex || m.Mode == arm64asm.AddrPostIndex) {
				off, ok := memOffset(m)
				return -off, ok
			}
		}
	}
	return 0, false
}

// memOffset is a pre- or post-indexed operand's immediate ("[sp, #-16]!",
// "[sp], #16").
func memOffset(m arm64asm.MemImmediate) (int64, bool) {
	s := m.String()
	i := strings.LastIndex(s, "#")
	if i < 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimRight(s[i+1:], "]!"), 0, 64)
	return v, err == nil
}

// judgeFunc judges every instruction start of f.
func (res *Result) judgeFunc(a abi, c *codeflow.Code, refs []refFunc, f *codeflow.Func) {
	res.Funcs++
	rowPCs := make([]uint64, len(f.Rows))
	for i, r := range f.Rows {
		rowPCs[i] = r.PC
		switch {
		case r.PC < f.Start || r.PC >= f.End:
			res.Wrong = append(res.Wrong, Wrong{PC: r.PC, Field: FieldRow, Ours: "a row outside its Func", CFI: "-"})
		case i > 0 && r.PC <= f.Rows[i-1].PC:
			res.Wrong = append(res.Wrong, Wrong{PC: r.PC, Field: FieldRow, Ours: "rows out of order", CFI: "-"})
		}
	}
	if len(f.Rows) == 0 || f.Rows[0].PC != f.Start {
		res.Wrong = append(res.Wrong, Wrong{PC: f.Start, Field: FieldRow, Ours: "no row at the Func's start", CFI: "-"})
		return
	}
	saved := slotsOf(f)
	pcs, undecoded, missed := starts(c, f.Start, f.End, rowPCs)
	res.Undecoded += undecoded
	for _, pc := range missed {
		res.Wrong = append(res.Wrong, Wrong{PC: pc, Field: FieldRow, Ours: "a row inside an instruction", CFI: "-"})
	}
	pad := neverRun(c, pcs)
	for _, pc := range pcs {
		res.PCs++
		if pad[pc] {
			res.NotJudged[PaddingNeverRun]++
			continue
		}
		i := sort.Search(len(f.Rows), func(i int) bool { return f.Rows[i].PC > pc }) - 1
		ref := refAt(refs, pc)
		if ref == nil {
			res.NotJudged[NoFDE]++
			continue
		}
		cr := ref.rowAt(pc)
		if cr == nil {
			res.NotJudged[NoFDE]++
			continue
		}
		v := judge(a, pc, &f.Rows[i], ref, cr, saved)
		if incomplete(a, ref, &f.Rows[i], v) || stale(a, c, f, pcs, cr, pc, v) || contradicted(a, c, ref, cr, &f.Rows[i], pcs, pc, v) {
			res.NotJudged[CFIIncomplete]++
			if n := len(res.Incomplete); n == 0 || res.Incomplete[n-1] != ref.start {
				res.Incomplete = append(res.Incomplete, ref.start)
			}
			continue
		}
		if v.notJudged != "" {
			res.NotJudged[v.notJudged]++
			continue
		}
		res.Judged++
		if v.cross {
			res.Cross++
		}
		res.Wrong = append(res.Wrong, v.wrong...)
	}
}
